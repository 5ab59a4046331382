"""The one mapping between a benchmark task (a sample and one of its tasks, plain data) and the
studio's task content, used by both importers and by every export.

Import (:func:`task_content`): the studio's content fields (``question``, ``task_category``,
``task_category_code``, ``disaster_type``, ``input_data``, ``classes``, ``tools``, ``trajectory``,
``answer_spec``) from a file's task. The rules, the same for ``import_tasks`` and
``import_release``:

* text fields are taken when they are strings (else ``""``: the file's value stays in the source
  and QC flags it), whole: a value longer than its column is refused by the importer naming the
  field and the limit (``annotation.services.tasks.content_problem``), never cut; ``input_data``, ``classes`` and ``tools`` as written;
* the trajectory is the *authored* one (the caller drops loop expansions, see
  ``kernel.engine.collapse_expanded``), each step ``{"call": <tool name>, "args": <as written>}``:
  a list or string ``args`` is kept, never turned into ``{}``;
* answer fields follow ``eval_spec`` (the fields the evaluator scores), in its order: ``name``,
  ``eval_type``, ``source`` and, when the file has a note for the field, ``answer_format``. The
  source is :func:`answer_source`: the reference ``<key> from trajectory[N].obs`` to the one step
  observation that holds the gold value when there is exactly one, else the literal value; a
  field whose gold is null or missing gets ``None`` (see :func:`propose_source`: proposed, never
  bound silently; :func:`accept_proposals` binds them when a person accepts one in the editor or
  asks for all with ``--accept-proposals``).

Export (:func:`file_task`): the file's own sample and task (kept at import: key order, extra keys,
odd values) with each field the studio changed since the import replaced by the studio's value,
so that an unchanged task is written back exactly as it came in.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

from kernel.steps import step_args
from kernel.taskfile import same_value

CONTENT_FIELDS = ("question", "task_category", "task_category_code", "disaster_type", "input_data", "classes",
                  "tools", "trajectory", "answer_spec")
SAMPLE_FIELDS = ("disaster_type", "input_data", "classes")
#: the longest sample id the studio can key (Task.sample_id; question ids add ``_task<i>``)
MAX_SAMPLE_ID = 200


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ("" if value is None or isinstance(value, (dict, list, bool)) else str(value))


def answer_source(value: Any, trajectory: list, accepts: Callable[[int, str], bool] | None = None) -> Any:
    """The answer-field source for a gold ``value``: ``<key> from trajectory[N].obs`` when exactly
    one top-level key of exactly one step's obs holds that value (numbers by value, ``tool`` keys
    ignored; a list obs is matched as a whole, key ``results``), else the literal value. ``None``
    is never bound (it is what a blank answer looks like).

    ``accepts(N, key)``: whether the reference checker takes ``<key>`` of step N (the key is one
    its tool returns); a recorded obs that holds keys its tool does not return (a file's obs need
    not be the tool's) is not bound through them, so that an import never refuses the reference it
    derived itself. None: every key is taken."""
    if value is None:
        return None
    hits = []
    for i, step in enumerate(trajectory or []):
        obs = step.get("obs") if isinstance(step, dict) else None
        if isinstance(obs, dict):
            hits += [(i, k) for k, v in obs.items() if k != "tool" and same_value(v, value)]
        elif isinstance(obs, list) and same_value(obs, value):
            hits.append((i, "results"))
    if accepts is not None:
        hits = [(i, k) for i, k in hits if accepts(i, k)]
    if len(hits) == 1:
        i, k = hits[0]
        return f"<{k}> from trajectory[{i}].obs"
    return value


def task_content(sample: dict, task: dict, authored: list,
                 accepts: Callable[[int, str], bool] | None = None) -> dict:
    """The studio content of ``task`` of ``sample`` (rules in the module docstring).

    ``authored``: the authored trajectory with obs (``[{call, args|inputs, obs}]``), calls already
    normalised to dotted tool names by the caller. ``accepts``: see :func:`answer_source`.
    """
    spec = task.get("eval_spec") if isinstance(task.get("eval_spec"), dict) else {}
    final = task.get("final_answer") if isinstance(task.get("final_answer"), dict) else {}
    fmt = task.get("answer_format") if isinstance(task.get("answer_format"), dict) else {}
    answer_spec = []
    for name, typ in spec.items():
        entry = {"name": name, "eval_type": typ if isinstance(typ, str) else "",
                 "source": answer_source(final.get(name), authored, accepts)}
        if name in fmt:
            entry["answer_format"] = fmt[name]
        answer_spec.append(entry)
    steps = []
    for st in authored:
        if isinstance(st, dict):
            steps.append({"call": st.get("call", ""), "args": step_args(st, {})})
        else:
            steps.append(st)
    classes = sample.get("classes")
    return {
        "question": _text(task.get("question")), "task_category": _text(task.get("task_category")),
        "task_category_code": _text(task.get("task_category_code")),
        "disaster_type": _text(sample.get("disaster_type")),
        "input_data": sample.get("input_data") if sample.get("input_data") is not None else {},
        "classes": classes if classes is not None else {},
        "tools": task.get("tools") if task.get("tools") is not None else [],
        "trajectory": steps, "answer_spec": answer_spec,
    }


def file_task(source: dict, content: dict, trajectory: Any, final_answer: Any, derived: dict) -> tuple[dict, dict]:
    """``(sample head with tasks=[], task)`` to write for a task imported from a file.

    ``source``: ``{"sample", "task", "content"}`` as stored at import (the file's sample without
    its tasks, the file's task, the content :func:`task_content` gave); ``content``: the
    revision's content now; ``trajectory``/``final_answer``: the pinned replay's; ``derived``: the
    task dict the studio would write from its own fields (``dora_task``), read for the fields
    that changed. Unchanged fields keep the file's value and place; changed ones take the studio's
    value in the same place (new keys go at the end).
    """
    head = dict(source.get("sample") or {})
    head["tasks"] = []
    tdict = dict(source.get("task") or {})
    before = source.get("content") or {}
    for f in CONTENT_FIELDS:
        if f in ("trajectory", "answer_spec") or f not in content or same_value(before.get(f), content.get(f)):
            continue
        if f in SAMPLE_FIELDS:
            head[f] = content[f]
        else:
            tdict[f] = derived.get(f, content[f])
    if not same_value(before.get("answer_spec"), content.get("answer_spec")):
        for key in ("eval_spec", "answer_format"):
            if key in derived:
                tdict[key] = derived[key]
    for key, cur in (("trajectory", trajectory), ("final_answer", final_answer)):
        if key in tdict:
            if not same_value(tdict[key], cur):
                tdict[key] = cur
        elif cur:
            tdict[key] = cur
    return head, tdict


# ------------------------------------------------------------------ proposals for blank answers

#: result-value types that fit each eval_spec type (dora-format.md §(d): what each operator compares)
_FITS = {
    "scalar_count": ("int", "float", "number"), "scalar_continuous": ("float", "int", "number"),
    "ratio_pct": ("float", "int", "number"), "scalar_numeric": ("float", "int", "number"),
    "exact_match": ("str", "int", "bool", "float"), "text_bleu": ("str",),
    "scalar_dict": ("dict",), "set_f1": ("list",), "ranking_kendall": ("list",),
    "polygon_iou": ("str",), "point_pixel": ("int", "float", "number"), "point_haversine": ("float", "number"),
}
_WORD = re.compile(r"[a-z0-9]+")


def _words(text: str) -> set[str]:
    out = set()
    for w in _WORD.findall(str(text).lower()):
        out.add(w)
        if len(w) > 3 and w.endswith("s"):
            out.add(w[:-1])
    return out


def _value_type(value: Any) -> str | None:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "str"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return "dict"
    return None


def propose_source(name: str, eval_type: str, trajectory: Iterable, result_types: dict[str, dict[str, str]]) -> dict | None:
    """A proposed source for an answer field whose gold is blank: the result key of a step whose
    type fits the field's ``eval_type`` and whose name fits the field's name best.

    Candidates: every result key of every step (the step's obs keys with their value types when it
    has an obs, else the tool's result keys and types from ``result_types``, the catalogue's
    ``returns``), ``tool`` left out, type in :data:`_FITS` for ``eval_type`` (a ``polygon_iou`` key
    must name a path). Score: words shared by the field name and the key (plural ``s`` dropped),
    then the later step. Returns ``{"source": "<key> from trajectory[N].obs", "step": N, "tool",
    "key", "type", "reason"}`` or None when nothing fits.
    """
    fits = _FITS.get(str(eval_type))
    if not fits:
        return None
    want = _words(name)
    best = None
    for i, step in enumerate(trajectory or []):
        if not isinstance(step, dict):
            continue
        tool = str(step.get("call") or "").split("(", 1)[0].strip()
        obs = step.get("obs")
        if isinstance(obs, dict) and obs:
            keys = {k: _value_type(v) for k, v in obs.items()}
        else:
            keys = dict((result_types or {}).get(tool) or {})
        for key, typ in keys.items():
            if key in ("tool", "_meta", "note") or typ not in fits:
                continue
            if eval_type == "polygon_iou" and not key.endswith(("_path", "geojson")):
                continue
            shared = len(want & _words(key))
            score = (shared, i)
            if best is None or score > best[0]:
                why = (f"{'shares ' + ', '.join(sorted(want & _words(key))) + ' with the field name; ' if shared else ''}"
                       f"{typ} fits {eval_type}")
                best = (score, {"source": f"<{key}> from trajectory[{i}].obs", "step": i, "tool": tool, "key": key,
                                "type": typ, "reason": why})
    return best[1] if best else None


def source_record(sample: dict, task: dict, content: dict, **where: Any) -> dict:
    """What an importer keeps of a file's task (``TaskRevision.source``, before storage tagging):
    ``{"format": 2, **where (file, sample_index, task_index, …), "sample": the sample with
    "tasks": [] in its place, "task": the task as written, "content": what :func:`task_content`
    derived}``."""
    head = {k: ([] if k == "tasks" else v) for k, v in sample.items()}
    return {"format": 2, **where, "sample": head, "task": task, "content": content}


def blank_fields(content: dict) -> list[dict]:
    """The answer fields of ``content`` whose source is blank (``None``: a null or missing gold)."""
    return [f for f in content.get("answer_spec") or [] if isinstance(f, dict) and f.get("source") is None]


def answer_proposals(content: dict, steps: list, result_types: dict[str, dict[str, str]]) -> list[dict]:
    """A proposed source for each blank answer field of ``content`` (:func:`propose_source` over
    ``steps``): ``[{field, eval_type, source, step, tool, key, type, reason}]``; a field nothing
    fits is listed with ``source: None`` only."""
    out = []
    for f in blank_fields(content):
        p = propose_source(f.get("name", ""), f.get("eval_type", ""), steps, result_types)
        out.append({"field": f.get("name"), "eval_type": f.get("eval_type"), **(p or {"source": None})})
    return out


#: why a blank answer field was left blank when nothing was proposed for it
NO_PROPOSAL = "no step result fits its name and type; bind it by hand"


def accept_proposals(answer_spec: list, proposals: list[dict], *, fields: Iterable[str] | None = None,
                     accepts: Callable[[int, str], bool] | None = None) -> tuple[list, list[dict]]:
    """Bind blank answer fields to their proposed sources: the one rule of the editor's
    one-by-one acceptance (``annotation.services.tasks.accept_answer_proposal``, ``fields`` = that
    one field) and of ``import_tasks``/``import_release --accept-proposals`` (every blank field).

    ``answer_spec``: ``[{name, eval_type, source, answer_format?}]``; ``proposals``: what
    :func:`answer_proposals` gave for it. A field is bound when its source is blank (``None``),
    it is in ``fields`` (None: every field) and its proposal names a source; ``accepts(N, key)``
    (``annotation.qc.references.reference_accepts``), when given, must also take the proposed ``<key>`` of
    step N, so that nothing is bound that the reference check would refuse. Nothing is guessed.

    Returns ``(new answer_spec, [one row per blank field considered: the proposal's keys plus
    "bound": bool and, when not bound, "why_not"])``; the input list is not changed.
    """
    wanted = None if fields is None else set(fields)
    by_field = {p.get("field"): p for p in proposals or [] if isinstance(p, dict)}
    spec, rows = [], []
    for f in answer_spec or []:
        name = f.get("name") if isinstance(f, dict) else None
        if name is None or f.get("source") is not None or (wanted is not None and name not in wanted):
            spec.append(f)
            continue
        p = by_field.get(name) or {"field": name, "eval_type": f.get("eval_type"), "source": None}
        why = None
        if not p.get("source"):
            why = NO_PROPOSAL
        elif accepts is not None and isinstance(p.get("step"), int) and not accepts(p["step"], str(p.get("key"))):
            why = f"the reference check does not take <{p.get('key')}> of step {p['step']}; bind it by hand"
        if why is None:
            spec.append(dict(f, source=p["source"]))
            rows.append({**p, "bound": True})
        else:
            spec.append(f)
            rows.append({**p, "bound": False, "why_not": why})
    return spec, rows


def answer_renames(old_spec: Any, new_spec: Any) -> dict[str, str]:
    """The answer fields renamed between two ``answer_spec`` lists: ``{old name: new name}``.

    The rule (the editor's ``answerRenames`` in ``frontend/static/studio/editor/state.js`` is the
    same): the field at position *i* is renamed when its name differs between the two lists, the
    old name is gone from the new list and the new name was not in the old one. A field removed or
    added shifts the positions after it, so their names reappear elsewhere and nothing is taken for a
    rename; two fields whose names are swapped are not renamed either. Entries that are not dicts
    and empty names are ignored. Used to keep comments pinned to an answer field on that field.
    """
    def names(spec: Any) -> list[str]:
        return [str(f.get("name") or "") if isinstance(f, dict) else "" for f in (spec if isinstance(spec, list) else [])]
    old, new = names(old_spec), names(new_spec)
    return {a: b for a, b in zip(old, new) if a and b and a != b and a not in new and b not in old}
