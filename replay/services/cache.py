"""The step cache on the ``StepCacheEntry`` table, keyed by ``kernel.engine.step_key``: an unchanged
step (same tool and version, same resolved arguments, same input-file contents, same GT mask /
checkpoints) is never recomputed. Entries and hit counters are buffered and written with the
replay's progress (``replay.services.progress``)."""
from __future__ import annotations

from django.db import router, transaction
from django.utils import timezone

from kernel.engine import CachedStep
from kernel.taskfile import from_storage, to_storage
from replay.models import StepCacheEntry
from replay.services.sql import existing_values, insert_rows_sql, newest_row, update_in_sql


class DbStepCache:
    """The step cache on the ``StepCacheEntry`` table (``kernel.engine.StepCache``).

    Lookups are one indexed SELECT each; new entries and hit counters are buffered and written by
    ``flush`` (``execute_replay`` flushes with its progress, at the latest every ``FLUSH_S``
    seconds, and in a ``finally`` — so a step that finished before a crash is not recomputed)."""

    def __init__(self):
        self.pending: dict[str, tuple[str, int, CachedStep]] = {}  # key -> (tool, version, entry)
        self.hit_keys: list[str] = []

    def get(self, key: str) -> CachedStep | None:
        if key in self.pending:
            return self.pending[key][2]
        row = newest_row(StepCacheEntry, ("obs", "artifacts"), where={"key": key})
        if row is None:
            return None
        self.hit_keys.append(key)
        return CachedStep(obs=from_storage(row[0]), artifacts=row[1] or [])

    def put(self, key: str, tool: str, version: int, entry: CachedStep) -> None:
        # ``entry.obs`` comes from ``call_tool``: plain JSON but for NaN/inf floats (the
        # benchmark's observations hold them), tagged by ``to_storage`` when flushed
        self.pending[key] = (tool, version, entry)

    @property
    def dirty(self) -> bool:
        """Something waits for ``flush``."""
        return bool(self.pending or self.hit_keys)

    def statements(self) -> list[tuple[str, list]]:
        """What ``flush`` writes, as statements not run (``(sql, params)``; ``_Progress`` may send
        them inside the run's UPDATE): the new entries (``INSERT … ON CONFLICT DO NOTHING``) and
        the hit counters of the entries read. The buffers are emptied."""
        out = []
        if self.pending:
            now = timezone.now()
            out += insert_rows_sql(StepCacheEntry, ["key", "tool", "tool_version", "obs", "artifacts", "hits",
                                                    "created_at"],
                                   ([key, tool, version, to_storage(e.obs), e.artifacts, 0, now]
                                    for key, (tool, version, e) in self.pending.items()),
                                   ignore_conflicts=True)
            self.pending.clear()
        if self.hit_keys:  # what ``filter(key__in=...).update(hits=F("hits") + 1, last_used_at=now)`` sends
            out.append(update_in_sql(StepCacheEntry, "key", sorted(set(self.hit_keys)),
                                     {"last_used_at": timezone.now()}, increments=("hits",)))
            self.hit_keys.clear()
        return out

    def flush(self) -> None:
        """Write the buffered entries and hit counters (``statements``)."""
        found = self.statements()
        if found:
            with transaction.get_connection(router.db_for_write(StepCacheEntry)).cursor() as cur:
                for sql, params in found:
                    cur.execute(sql, params)



class _WriteOnlyCache(DbStepCache):
    """``use_cache=False``: every tool runs; the results are still stored.

    A replay without the cache mostly recomputes steps whose entries exist already (the point is
    to re-run them), and an entry is never replaced (``ON CONFLICT DO NOTHING``): so
    ``statements`` (and so ``flush``) first asks which keys are stored (one indexed SELECT) and sends only the others,
    which spares encoding (and on PostgreSQL parsing as ``jsonb``) observations that would be
    dropped as conflicts. (On PostgreSQL, sending every entry with the last statement instead, to
    save that SELECT's round trip, was measured on 2026-12-03: no change of the bench's overhead
    beyond its noise, docs/benchmarks.md.)"""

    def get(self, key):
        return None

    def statements(self) -> list[tuple[str, list]]:
        if self.pending:
            for key in existing_values(StepCacheEntry, "key", self.pending):
                self.pending.pop(key, None)
        return super().statements()

