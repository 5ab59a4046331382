"""The benchmark's five dimensions, in one table.

Source: ``TASKS`` in dora/benchmark.py (the task-file stems) and the paper's dimension names
(../shared/spec/dora-format.md §(a)); the codes ``T1``…``T5`` are what the benchmark's own task
files put in ``task_category_code``.
"""
from __future__ import annotations

import re


class Dimension:
    """One dimension: ``key`` (``t1``, the studio's and the benchmark CLI's short key), ``code``
    (``T1``, the task files' ``task_category_code``), ``stem`` (the task file's name without
    ``.json``), ``category`` (the default ``task_category``) and ``label`` (shown to people)."""

    # a plain immutable class, not a frozen dataclass: ``dataclasses`` imports ``inspect``, about
    # 9 ms of the scoring command's start-up (issue 16), for five fields
    __slots__ = ("key", "code", "stem", "category", "label")

    def __init__(self, key: str, code: str, stem: str, category: str, label: str):
        for name, value in zip(self.__slots__, (key, code, stem, category, label)):
            object.__setattr__(self, name, value)

    def __setattr__(self, name, value):
        raise AttributeError(f"Dimension is immutable: cannot set {name!r}")

    def __delattr__(self, name):
        raise AttributeError(f"Dimension is immutable: cannot delete {name!r}")

    def _values(self) -> tuple:
        return tuple(getattr(self, n) for n in self.__slots__)

    def __eq__(self, other):
        return self._values() == other._values() if type(other) is Dimension else NotImplemented

    def __hash__(self):
        return hash(self._values())

    def __reduce__(self):  # pickle and copy through __init__ (__setattr__ refuses)
        return Dimension, self._values()

    def __repr__(self):
        return "Dimension(" + ", ".join(f"{n}={getattr(self, n)!r}" for n in self.__slots__) + ")"

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
