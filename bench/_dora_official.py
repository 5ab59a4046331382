"""The official DORA evaluator as a side of ``bench/scoring.py``: where its checkout is, how it is
started, and whether its eval.json says what the studio's says.

The official code (github.com/Junjue-Wang/DORA, ``scripts/evaluate.py`` and the ``dora`` package it
imports, ``dora/evaluation.py`` @ 2b24be7033a8f66dea6f557bf9861e927ee5d113) is public code used only
as a measuring baseline. It is never copied into this project: the bench runs a checkout that lies
OUTSIDE the project's git, named by ``--official DIR`` or ``STUDIO_BENCH_DORA``
(``git clone https://github.com/Junjue-Wang/DORA DIR && git -C DIR checkout 2b24be7``).

No Django here and no import of the project (``bench/`` helper; ``run_all.py`` skips ``_*.py``).
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

#: files a DORA checkout must hold for ``scripts/evaluate.py --run`` (what it imports, nothing else)
REQUIRED = ("scripts/evaluate.py", "dora/__init__.py", "dora/paths.py", "dora/benchmark.py", "dora/evaluation.py")
#: the commit whose evaluator shared/scoring-examples/expected was produced with
COMMIT = "2b24be7033a8f66dea6f557bf9861e927ee5d113"
#: keys the studio's eval.json adds to the official document (evaluation/scoring/aggregate.official_document)
STUDIO_EXTRA_KEYS = ("mode",)
ENV = "STUDIO_BENCH_DORA"
#: where ``make bench-dora`` clones the checkout (beside the bench's scratch folder, which is emptied per run)
DEFAULT = Path(os.environ.get("STUDIO_BENCH_DIR", "/tmp/studio-bench") + "-dora")


def checkout(arg: str | None) -> Path | None:
    """The DORA checkout to measure: ``arg`` (``--official``), else ``$STUDIO_BENCH_DORA``, else
    ``DEFAULT`` (where ``make bench-dora`` clones it) when that holds a checkout, else None.

    Raises ``SystemExit`` with a message when a folder is named but lacks one of ``REQUIRED``."""
    name = arg if arg is not None else os.environ.get(ENV, "")
    if not name:
        return DEFAULT if all((DEFAULT / f).is_file() for f in REQUIRED) else None
    where = Path(name).expanduser().resolve()
    missing = [f for f in REQUIRED if not (where / f).is_file()]
    if missing:
        raise SystemExit(f"--official {where}: not a DORA checkout (missing {', '.join(missing)})")
    return where


def command(python: str, where: Path, run: Path, tasks: Path, output: Path) -> tuple[list, Path, dict]:
    """``python scripts/evaluate.py --run RUN --tasks-dir TASKS --output FILE`` in the checkout ``where``:
    (argv, cwd, environment). Its ``dora`` package is found through ``PYTHONPATH=where`` (the checkout
    is not installed); ``DORA_DATA`` is dropped so that only ``--tasks-dir`` names the gold files."""
    env = {k: v for k, v in os.environ.items() if k not in ("DORA_DATA", "DJANGO_SETTINGS_MODULE")}
    env["PYTHONPATH"] = str(where)
    argv = [python, str(where / "scripts" / "evaluate.py"), "--run", str(run), "--tasks-dir", str(tasks),
            "--output", str(output)]
    return argv, where, env


def help_command(python: str, where: Path) -> tuple[list, Path, dict]:
    """``python scripts/evaluate.py --help`` in the checkout (its start-up: imports and argument parsing)."""
    argv, cwd, env = command(python, where, Path("."), Path("."), Path("."))
    return [argv[0], argv[1], "--help"], cwd, env


def _same_number(a: Any, b: Any) -> bool:
    # a JSON number written 1.0 by one side and 1 by the other is not the same output
    return type(a) is type(b) and (a == b or (a != a and b != b))


def compare(official: Any, studio: Any, path: str = "") -> tuple[list[str], int]:
    """Every value the official eval.json holds, looked up at the same place in the studio's.

    ``official``, ``studio``: the parsed documents (``dora_score``, ``dimensions.<dim>.<metric>``,
    ``full.<dim>.tasks[i].field_scores.<field>``, …, ``summary_table``). At the top level the studio
    may add ``STUDIO_EXTRA_KEYS`` (``mode``); any other key one side has and the other lacks is a
    difference, and so is a number of another JSON type (1 against 1.0). Returns (differences as
    ``"<path>: official X, studio Y"`` lines, the number of numbers compared)."""
    diffs: list[str] = []
    numbers = 0
    here = path or "<document>"
    if isinstance(official, dict):
        if not isinstance(studio, dict):
            return [f"{here}: official an object, studio {type(studio).__name__}"], 0
        extra = set(studio) - set(official) - (set(STUDIO_EXTRA_KEYS) if not path else set())
        diffs += [f"{path + '.' if path else ''}{k}: only in the studio's" for k in sorted(extra, key=str)]
        for k, v in official.items():
            sub = f"{path}.{k}" if path else str(k)
            if k not in studio:
                diffs.append(f"{sub}: missing in the studio's (official {v!r})")
                continue
            d, n = compare(v, studio[k], sub)
            diffs += d
            numbers += n
        return diffs, numbers
    if isinstance(official, list):
        if not isinstance(studio, list):
            return [f"{here}: official a list, studio {type(studio).__name__}"], 0
        if len(official) != len(studio):
            diffs.append(f"{here}: official {len(official)} entries, studio {len(studio)}")
        for i, (a, b) in enumerate(zip(official, studio)):
            d, n = compare(a, b, f"{path}[{i}]")
            diffs += d
            numbers += n
        return diffs, numbers
    if isinstance(official, (int, float)) and not isinstance(official, bool):
        if not _same_number(official, studio):
            diffs.append(f"{here}: official {official!r}, studio {studio!r}")
        return diffs, 1
    if official != studio or type(official) is not type(studio):
        diffs.append(f"{here}: official {_shown(official)}, studio {_shown(studio)}")
    return diffs, 0


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def compare_files(official_json: Path, studio_json: Path) -> dict:
    """Compare two eval.json files: ``{"differences": [...], "numbers": int, "bytes_identical": bool}``.

    ``bytes_identical``: the studio's file with its extra keys removed serialises exactly like the
    official one (``json.dumps(ensure_ascii=False, indent=2)``, as ``scripts/evaluate.py`` writes it)."""
    official_text = official_json.read_text(encoding="utf-8")
    official = json.loads(official_text)
    studio = json.loads(studio_json.read_text(encoding="utf-8"))
    diffs, numbers = compare(official, studio)
    trimmed = {k: v for k, v in studio.items() if k not in STUDIO_EXTRA_KEYS} if isinstance(studio, dict) else studio
    same_text = json.dumps(trimmed, ensure_ascii=False, indent=2) == official_text
    return {"differences": diffs, "numbers": numbers, "bytes_identical": same_text}
