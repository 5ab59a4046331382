"""The benchmark's five dimensions, in one table.

Source: ``TASKS`` in dora/benchmark.py (the task-file stems) and the paper's dimension names
(../shared/spec/dora-format.md §(a)); the codes ``T1``…``T5`` are what the benchmark's own task
files put in ``task_category_code``.
"""
from __future__ import annotations

import re

from .values import FrozenValue


class Dimension(FrozenValue):
    """One dimension: ``key`` (``t1``, the studio's and the benchmark CLI's short key), ``code``
    (``T1``, the task files' ``task_category_code``), ``stem`` (the task file's name without
    ``.json``), ``category`` (the default ``task_category``) and ``label`` (shown to people)."""

    # a FrozenValue, not a frozen dataclass: start-up (kernel.values)
    __slots__ = ("key", "code", "stem", "category", "label")

    def __init__(self, key: str, code: str, stem: str, category: str, label: str):
        self._set(key=key, code=code, stem=stem, category=category, label=label)

    @property
    def file_name(self) -> str:
        return f"{self.stem}.json"


DIMENSIONS: tuple[Dimension, ...] = (
    Dimension("t1", "T1", "t1_perception_and_assessment", "perception_and_assessment", "T1 perception and assessment"),
    Dimension("t2", "T2", "t2_spatial_relation_analysis", "spatial_relation_analysis", "T2 spatial relation analysis"),
    Dimension("t3", "T3", "t3_operational_planning", "operational_planning", "T3 operational planning"),
    Dimension("t4", "T4", "t4_multi_temporal_reasoning", "multi_temporal_reasoning", "T4 multi-temporal reasoning"),
    Dimension("t5", "T5", "t5_multi_modal_report_synthesis", "multi_modal_report_synthesis", "T5 multi-modal report synthesis"),
)
BY_KEY: dict[str, Dimension] = {d.key: d for d in DIMENSIONS}
#: ``{"t1": "t1_perception_and_assessment.json", ...}``
TASK_FILES: dict[str, str] = {d.key: d.file_name for d in DIMENSIONS}
#: ``{"t1": "t1_perception_and_assessment", ...}`` (run folders are named by the stem)
TASK_STEMS: dict[str, str] = {d.key: d.stem for d in DIMENSIONS}
#: ``{"t1": ("perception_and_assessment", "T1"), ...}``: default task_category and code
CATEGORY_BY_DIM: dict[str, tuple[str, str]] = {d.key: (d.category, d.code) for d in DIMENSIONS}
#: ``[("t1", "T1 perception and assessment"), ...]`` for choices
CHOICES: list[tuple[str, str]] = [(d.key, d.label) for d in DIMENSIONS]

_CODE = re.compile(r"^\s*[tT]([1-5])(?:\s*$|[-._ ]\S*$)")


def dimension_of_code(code) -> str | None:
    """The dimension key a ``task_category_code`` belongs to: ``T1``, ``t1``, and its sub-codes
    ``T1-1``, ``T1.2``, ``T1_a`` → ``"t1"``; anything else (``T6``, ``T12``, ``""``, a list) → None.

    The benchmark requires the field but does not constrain its value (load_questions copies it
    through); sub-codes of a dimension are therefore legitimate.
    """
    if isinstance(code, bool) or not isinstance(code, (str, int)):
        return None
    m = _CODE.match(str(code))
    return f"t{m.group(1)}" if m else None


def dimension_of_file(name: str) -> str | None:
    """The dimension of a task file from its name: the benchmark's file name or stem, or any name
    starting ``t<N>_`` (``t1_mine.json``); None otherwise."""
    base = str(name).replace("\\", "/").rsplit("/", 1)[-1]
    for d in DIMENSIONS:
        if base in (d.file_name, d.stem) or base.lower().startswith(f"{d.key}_"):
            return d.key
    return None


#: how the ``seg.*`` perception tools answer (``kernel.tools.base.ToolContext.perception_mode``):
#: ``model`` the benchmark's networks (its stub observation without a checkpoint, as the
#: benchmark's own tools answer), ``gt`` the ground-truth masks ("oracle perception": an easier
#: task whose scores are never ranked with the benchmark's), ``classical`` the studio's
#: classical baselines
PERCEPTION_MODES = ("model", "gt", "classical")
#: the perception an agent is served with unless it says otherwise: the benchmark's protocol
#: (``manage.py mcp_serve``, experiments)
SERVING_PERCEPTION_MODE = "model"
