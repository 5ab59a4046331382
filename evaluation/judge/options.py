"""The judge core's constants that commands name in their options, in a module that imports nothing,
so that ``manage.py judge --help`` and ``judge_report --help`` load no more than it (manage.py prints
``--help`` before Django starts; the package's other names resolve lazily, ``evaluation/judge/__init__.py``).
The modules that use them (``verdict``, ``runner``, ``report``) import them from here."""
from __future__ import annotations

#: The two readings of a judge's answer (``parse_verdict(..., reading=)``): ``studio`` (the
#: default: every dialect read by meaning, the verdict's invariants enforced) and ``apb`` (the
#: planning benchmark's own parse results, its defects included, so that a judge report can be set
#: beside the paper's tables).  Each entry of ``verdict.KNOWN_DIFFERENCES`` says what each does.
READINGS: tuple[str, ...] = ("studio", "apb")
DEFAULT_READING = "studio"

#: ``manage.py judge --stuck-after``'s default (``evaluation.services.judge.fail_stuck_judge_jobs``'s
#: too): no progress of a running job for this long means its worker is gone. Since the heartbeat
#: thread (``studio.background``) beats during a call too, the sweep's own limit is
#: ``STUDIO_JOB_STALE_AFTER_S``; this stays the command's historical default.
STUCK_AFTER_S = 900.0

#: the judge report's grouping keys beyond setting, split, regime and judge, unless told otherwise
DEFAULT_EXTRA_KEYS: tuple[str, ...] = ("tested_model", "protocol")
