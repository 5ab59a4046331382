"""Minimal quality control of a task's content, over plain data (no database, no HTTP).

Checks (each finding has a stable id, a severity, a message naming the problem and the fix, and a
location): the tool exists, required arguments are present, references point to earlier steps and
to keys those steps return, answer fields have a known ``eval_spec`` type and a source. Errors block
submission. Source of the type list: ``../shared/spec/dora-format.md`` §(a) (the evaluator's types).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

from replay.references import find_references, format_path
from replay.tools.registry import UnknownToolError, get_tool

EVAL_TYPES = (
    "scalar_count",
    "scalar_continuous",
    "ratio_pct",
    "exact_match",
    "scalar_dict",
    "set_f1",
    "ranking_kendall",
    "polygon_iou",
    "point_pixel",
    "point_haversine",
    "ignore",
)


@dataclass(frozen=True)
class Finding:
    check: str
    severity: str  # "error" or "warning"
    message: str
    location: str

    def as_dict(self) -> dict:
        return asdict(self)


def _references(value, path: str):
    """Yield (argument path, key, step index) for every ``<key> from trajectory[N].obs`` inside ``value``."""
    for where, key, index in find_references(value):
        rendered = format_path(where)
        sep = "" if not rendered or rendered.startswith("[") else "."
        yield f"{path}{sep}{rendered}", key, index


def check_task(content: dict) -> list[Finding]:
    """Run the fast checks on task content.

    ``content`` holds ``question`` (str), ``trajectory`` (list of ``{"call", "args"}``) and
    ``answer_spec`` (list of ``{"name", "eval_type", "source"}``). Returns the findings, errors first.
    """
    findings: list[Finding] = []
    if not str(content.get("question", "")).strip():
        findings.append(Finding("structure.question", "error", "The query is empty: write the question.", "question"))
    steps = content.get("trajectory") or []
    if not steps:
        findings.append(Finding("structure.trajectory", "error", "The trajectory has no step: add at least one tool call.", "trajectory"))
    result_keys: list[set[str] | None] = []
    for i, step in enumerate(steps):
        loc = f"trajectory[{i}]"
        name = str(step.get("call", "")).strip()
        try:
            spec = get_tool(name)
        except UnknownToolError:
            findings.append(Finding("tools.exists", "error", f"Step {i}: tool '{name}' does not exist in the catalogue; pick a tool from the list.", loc))
            result_keys.append(None)
            continue
        args = step.get("args") or {}
        for p in spec.params:
            if p.required and (p.name not in args or args[p.name] in (None, "")):
                findings.append(Finding("tools.required_argument", "error", f"Step {i} ({spec.name}): required argument '{p.name}' is missing; give a value or a reference.", f"{loc}.args.{p.name}"))
        known = {p.name for p in spec.params}
        for a in args:
            if a not in known:
                findings.append(Finding("tools.unknown_argument", "error", f"Step {i} ({spec.name}): argument '{a}' is not a parameter of this tool (parameters: {', '.join(sorted(known))}).", f"{loc}.args.{a}"))
        for path, key, idx in _references(args, f"{loc}.args"):
            findings.extend(_check_reference(i, idx, key, path, result_keys))
        result_keys.append(set(spec.result_keys))
    names = set()
    spec_fields = content.get("answer_spec") or []
    if not spec_fields:
        findings.append(Finding("eval_spec.empty", "error", "The answer has no field: declare at least one answer field.", "answer_spec"))
    for j, field in enumerate(spec_fields):
        loc = f"answer_spec[{j}]"
        fname = str(field.get("name", "")).strip()
        if not fname:
            findings.append(Finding("eval_spec.name", "error", f"Answer field {j} has no name.", loc))
        elif fname in names:
            findings.append(Finding("eval_spec.duplicate", "error", f"Answer field '{fname}' is declared twice.", loc))
        names.add(fname)
        etype = field.get("eval_type")
        if etype not in EVAL_TYPES:
            findings.append(Finding("eval_spec.unknown_type", "error", f"Answer field '{fname}': eval_spec type '{etype}' is unknown; use one of {', '.join(EVAL_TYPES)}.", loc))
        source = field.get("source")
        if source in (None, ""):
            findings.append(Finding("eval_spec.source", "error", f"Answer field '{fname}' has no source: bind it to a step output or give a value.", loc))
        else:
            for path, key, idx in _references(source, f"{loc}.source"):
                findings.extend(_check_reference(len(steps), idx, key, path, result_keys))
    if spec_fields and all(f.get("eval_type") == "ignore" for f in spec_fields):
        findings.append(Finding("eval_spec.all_ignored", "error", "Every answer field is 'ignore': nothing would be scored.", "answer_spec"))
    return sorted(findings, key=lambda f: f.severity != "error")


def _check_reference(at: int, idx: int, key: str, path: str, result_keys: list) -> list[Finding]:
    if idx >= at:
        return [Finding("references.order", "error", f"{path}: refers to step {idx}, which is not an earlier step (steps count from 0).", path)]
    keys = result_keys[idx] if idx < len(result_keys) else None
    if keys is not None and key not in keys:
        return [Finding("references.key", "error", f"{path}: step {idx} returns no key '{key}' (it returns {', '.join(sorted(keys))}).", path)]
    return []


def has_errors(findings: list[Finding]) -> bool:
    return any(f.severity == "error" for f in findings)
