"""Reports kept by the hash of their inputs (:class:`~evaluation.models.StoredReport`).

The agreement report (``evaluation.agreement.agreement_report``) is a pure function of its rows
and options, and dear at scale: 1.6 s for 12,000 verdicts on this 2-CPU machine, against 0.19 s
to read the rows (``bench/lists.py``). :func:`stored_report` hashes the rows and options and
computes the report only for a key it has not kept, so a page, its plots and a second server
process share one computation, a restart included, and no kept report can be stale: any change
of a row is another key.
"""
from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from django.db import IntegrityError, transaction

from evaluation.agreement import agreement_report
from evaluation.judge.verdict import DEFAULT_READING
from evaluation.models import StoredReport
from evaluation.selectors.judge_report import reread_agreement_rows
from evaluation.selectors.verdicts import agreement_rows
from kernel.hashing import value_sha256

#: reports of one kind kept (the newest): the options a page offers (e.g. two tie rules × two readings)
KEEP_PER_KIND = 8
_INT_KEYS = "__int_keys__"


def _encode(value: Any) -> Any:
    """``value`` with every dict that has a non-text key written as ``{"__int_keys__": [[k, v], ...]}``."""
    if isinstance(value, dict):
        if all(isinstance(k, str) for k in value):
            return {k: _encode(v) for k, v in value.items()}
        return {_INT_KEYS: [[k, _encode(v)] for k, v in value.items()]}
    if isinstance(value, (list, tuple)):
        return [_encode(v) for v in value]
    return value


def _decode(obj: dict) -> dict:
    if len(obj) == 1 and _INT_KEYS in obj:
        return {k: v for k, v in obj[_INT_KEYS]}
    return obj


def dumps(value: Any) -> str:
    """JSON text of ``value`` that :func:`loads` reads back equal (tuples come back as lists)."""
    return json.dumps(_encode(value), separators=(",", ":"))


def loads(text: str) -> Any:
    """The value :func:`dumps` wrote."""
    return json.loads(text, object_hook=_decode)


def report_key(kind: str, options: dict, rows: list) -> str:
    """SHA-256 (hex) of ``kind``, ``options`` and ``rows`` as canonical JSON (sorted keys;
    :func:`kernel.hashing.value_sha256`)."""
    return value_sha256([kind, options], rows)


def stored_report(kind: str, options: dict, rows: list, compute: Callable[[], Any]) -> Any:
    """The report of ``rows`` under ``options``: the kept one with that key, else ``compute()``,
    kept (the :data:`KEEP_PER_KIND` newest of ``kind`` stay) and returned as it reads back
    (:func:`loads` of :func:`dumps`, so a first and a later request show the same thing). Two
    processes computing one key at once both keep going: the second insert is dropped."""
    key = report_key(kind, options, rows)
    text = StoredReport.objects.filter(key=key).values_list("value", flat=True).first()
    if text is not None:
        return loads(text)
    t0 = time.perf_counter()
    text = dumps(compute())
    try:
        with transaction.atomic():
            StoredReport.objects.create(kind=kind, key=key, value=text, seconds=time.perf_counter() - t0)
            old = list(StoredReport.objects.filter(kind=kind).order_by("-id").values_list("id", flat=True)[KEEP_PER_KIND:])
            if old:
                StoredReport.objects.filter(id__in=old).delete()
    except IntegrityError:
        pass  # another process kept the same key meanwhile: the same report
    return loads(text)


def agreement(tie_break: str = "exclude", reading: str | None = None) -> dict:
    """The agreement report of every decided verdict (``evaluation.agreement.agreement_report``
    over ``evaluation.selectors.verdicts.agreement_rows`` read under ``reading``, default the
    studio's), through :func:`stored_report`: the page, its plots and the API share it."""
    from_reading = reading or DEFAULT_READING
    rows = reread_agreement_rows(agreement_rows(), from_reading)
    return stored_report("agreement", {"tie_break": tie_break, "reading": from_reading}, rows,
                         lambda: agreement_report(rows, tie_break=tie_break, reading=from_reading))
