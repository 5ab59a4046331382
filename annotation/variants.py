"""Robustness variants of a benchmark task, over plain data (no database, no HTTP).

The planning benchmark whose E1–E6 taxonomy the studio uses (seed 001, §3.1 and Appendix B.4)
measures three robustness settings beside plain success; the studio derives them from its own
approved tasks:

``extraneous``  (Tool-Extraneous, §3.1, B.4.1): ``n_e ∈ {2, 4, 6, 8, 10}`` distractor tools are
    added to the tool set: semantically close to the gold tools (near-duplicate names and
    descriptions, the same parameters) and functionally inert — called, a distractor answers that
    it does not apply. Any call of one is an E5 (tool use) error.
``broken``      (Tool-Broken, §3.1, B.4.2): the tool of gold step ``j`` returns an error instead of
    its observation, and an alternative tool with another name is offered that computes what the
    original computes. The outcome after the failure is Replace, Alter, Retry, Refusal or Other
    (Appendix C.4; ``evaluation.robustness.broken_outcome`` decides it by rule).
``unsolvable``  (Unsolvable, §3.1, B.4.3): the task cannot be done and the right answer is an
    explicit refusal. Strategies: ``tool_removal`` (a gold tool is removed and the question
    demands it), ``information_missing`` (a manifest layer the gold plan needs is removed),
    ``visual_inaccessible`` (the imagery is replaced by an unreadable file) and
    ``contradictory_constraints`` (a constraint written by the author).

Every function takes a task's content (the studio's shape: ``question``, ``trajectory``
``[{call, args}]``, ``answer_spec``, ``input_data``, ...) and returns a *variant spec*: the
variant's content and ``variant`` = ``{kind, params, tools}`` where ``tools`` describes the tool
set an agent is given (``removed``: names taken away; ``distractors``: added inert tools;
``broken``: the failing step and its alternative). The spec is deterministic in its inputs
(distractors are drawn from ``random.Random(seed)``).

``tools`` arguments map a dotted tool name to ``{"description": str, "params": [{name, type,
required}], "server": str}`` — what the registry or the catalogue says (``tool_catalogue`` in
the service layer builds it).
"""
from __future__ import annotations

import copy
import random
from collections.abc import Iterable
from typing import Any

from kernel.errors import InvalidInput
from kernel.inputs import base_name, walk_data_paths

__all__ = [
    "KINDS", "STRATEGIES", "EXTRANEOUS_LEVELS", "REFUSAL", "VariantError",
    "gold_tools", "make_distractors", "extraneous_variant", "broken_variant", "unsolvable_variant",
    "make_variant", "inert_observation", "broken_observation", "default_alternative_name",
    "unsolvable_block", "withheld_files",
]

KINDS = ("extraneous", "broken", "unsolvable")
STRATEGIES = ("tool_removal", "information_missing", "visual_inaccessible", "contradictory_constraints")
#: the distractor counts of the planning benchmark (seed 001, §3.1 "Tool-Extraneous Planning")
EXTRANEOUS_LEVELS = (2, 4, 6, 8, 10)
#: the gold answer of an unsolvable variant: an explicit refusal (seed 001, §3.1: f → REJECT)
REFUSAL = "REJECT"
#: a file name an unreadable image is stored under (``visual_inaccessible``)
UNREADABLE_SUFFIX = "_unreadable.png"

# Near-duplicate naming of a distractor: a qualifier before or after the tool's verb phrase, or the
# phrase reworded. Each keeps the server prefix, so a distractor sits beside the tool it mimics.
_SUFFIXES = ("v2", "fast", "lite", "legacy", "ext", "plus", "approx", "batch", "beta", "pro", "raw", "safe")
_PREFIXES = ("quick", "auto", "multi", "batch", "smart", "fast", "global", "local")
_SCOPE_NOTES = (
    "for tiled basemap imagery only",
    "for synthetic-aperture radar scenes only",
    "for building footprints from municipal cadastre files only",
    "for hyperspectral cubes only",
    "for pre-event archive imagery only",
    "for vector road networks from national registers only",
    "for grids in the EPSG:3035 projection only",
    "for 8-band multispectral products only",
)


class VariantError(InvalidInput):
    """A variant cannot be made from this task with these parameters (the message says why; a
    ``ValueError``, answered 400 by the API)."""


def _steps(content: dict) -> list[dict]:
    steps = content.get("trajectory") if isinstance(content, dict) else None
    return [s for s in steps or [] if isinstance(s, dict)]


def _call(step: dict) -> str:
    call = step.get("call") or step.get("name") or ""
    return call.split("(")[0].strip() if isinstance(call, str) else ""


def gold_tools(content: dict) -> list[str]:
    """The distinct tool names of the gold trajectory, in first-use order (loop calls included)."""
    out: list[str] = []

    def add(name: str):
        if name and name not in out:
            out.append(name)

    for step in _steps(content):
        add(_call(step))
        args = step.get("args") if isinstance(step.get("args"), dict) else {}
        for inner in args.get("calls") or []:
            if isinstance(inner, dict):
                add(_call(inner))
    return out


def _split(name: str) -> tuple[str, str]:
    prefix, _, rest = name.partition(".")
    return (prefix, rest) if rest else ("", prefix)


def _candidate_names(name: str) -> list[str]:
    prefix, rest = _split(name)
    lead = f"{prefix}." if prefix else ""
    words = rest.split("_")
    out = [f"{lead}{rest}_{s}" for s in _SUFFIXES] + [f"{lead}{p}_{rest}" for p in _PREFIXES]
    if len(words) > 1:
        out.append(f"{lead}{'_'.join(reversed(words))}")
        out.append(f"{lead}{words[0]}_all_{'_'.join(words[1:])}")
    return out


def make_distractors(gold: Iterable[str], n: int, seed: int, tools: dict[str, dict]) -> list[dict]:
    """``n`` inert distractor tools that mimic the gold tools, drawn deterministically from ``seed``.

    Each is ``{name, description, params, server, mirrors}``: a near-duplicate name of a gold tool
    (never an existing tool's name, never twice), that tool's description narrowed to a scope the
    task's data does not have (so using it is a tool-use error by construction), and that tool's
    parameters. Gold tools are mimicked in turn (the first ``n`` of a seeded shuffle, repeated when
    ``n`` exceeds them). Raises ``VariantError`` for ``n < 1`` or a trajectory without tools.
    """
    gold = [g for g in gold if g]
    if n < 1:
        raise VariantError(f"the number of distractors must be at least 1, got {n}")
    if not gold:
        raise VariantError("the gold trajectory names no tool to mimic")
    rng = random.Random(seed)
    order = list(gold)
    rng.shuffle(order)
    taken = set(tools) | set(gold)
    out: list[dict] = []
    i = 0
    while len(out) < n:
        mirror = order[i % len(order)]
        i += 1
        names = [c for c in _candidate_names(mirror) if c not in taken]
        if not names:
            if i > 50 * n:
                raise VariantError(f"no free near-duplicate name is left for {mirror}")
            continue
        name = rng.choice(names)
        taken.add(name)
        info = tools.get(mirror, {})
        base = (info.get("description") or mirror).strip().rstrip(".")
        out.append({
            "name": name,
            "description": f"{base} — {rng.choice(_SCOPE_NOTES)}.",
            "params": copy.deepcopy(info.get("params") or []),
            "server": info.get("server", ""),
            "mirrors": mirror,
        })
    return out


def inert_observation(distractor: dict) -> dict:
    """What a distractor answers when called: that it does not apply, and nothing else."""
    return {
        "tool": distractor["name"],
        "status": "not_applicable",
        "explanation": (f"{distractor['name']} does not apply to this task's data "
                        f"({distractor.get('description', '').split('—')[-1].strip().rstrip('.')}); "
                        "no result was computed."),
    }


def broken_observation(tool: str, error: str) -> dict:
    """What the broken tool answers at its step: the configured error, no result."""
    return {"tool": tool, "error": error}


def default_alternative_name(tool: str, tools: dict[str, dict]) -> str:
    """A distinct name for the alternative of ``tool`` (``ras.count_pixels`` → ``ras.count_pixels_alt``,
    then ``_alt2`` … while the name is taken)."""
    base = f"{tool}_alt"
    name, k = base, 2
    while name in tools:
        name, k = f"{base}{k}", k + 1
    return name


def _variant(content: dict, kind: str, params: dict, tool_set: dict) -> dict:
    return {"content": content, "variant": {"kind": kind, "params": params, "tools": tool_set}}


def extraneous_variant(content: dict, n: int, seed: int, tools: dict[str, dict]) -> dict:
    """The task with ``n`` distractors in its tool set; question, plan and gold unchanged.

    ``n`` must be one of ``EXTRANEOUS_LEVELS`` (the benchmark's levels). Raises ``VariantError``.
    """
    if n not in EXTRANEOUS_LEVELS:
        raise VariantError(f"n_e must be one of {', '.join(map(str, EXTRANEOUS_LEVELS))} (the benchmark's levels), got {n}")
    distractors = make_distractors(gold_tools(content), n, seed, tools)
    return _variant(copy.deepcopy(content), "extraneous", {"n": n, "seed": seed},
                    {"removed": [], "distractors": distractors, "broken": None})


def broken_variant(content: dict, step: int, tools: dict[str, dict], error: str = "",
                   alternative: str = "") -> dict:
    """The task whose gold step ``step`` (0-based, top level) fails with ``error``; ``alternative``
    (default ``default_alternative_name``) computes what the broken tool computes.

    The gold plan stays the benchmark's plan; the expected recovery is to call the alternative at
    that step (Replace). Raises ``VariantError`` for a step out of range, a loop step, or an
    alternative name that is already a tool.
    """
    steps = _steps(content)
    if not 0 <= step < len(steps):
        raise VariantError(f"step {step} is not a step of the gold trajectory (it has {len(steps)})")
    tool = _call(steps[step])
    if not tool:
        raise VariantError(f"step {step} has no tool name")
    if tool in ("tool.loop", "tool.reduce"):
        raise VariantError(f"step {step} is a {tool} wrapper: break one of the tools it calls instead")
    alternative = alternative.strip() or default_alternative_name(tool, tools)
    if alternative in tools or alternative == tool:
        raise VariantError(f"the alternative must have a name of its own; '{alternative}' is already a tool")
    error = error.strip() or f"{tool} failed: the tool server returned an internal error (HTTP 500)"
    info = tools.get(tool, {})
    spec = {"step": step, "tool": tool, "error": error, "alternative": alternative,
            "alternative_description": (info.get("description") or tool).strip(),
            "alternative_params": copy.deepcopy(info.get("params") or [])}
    return _variant(copy.deepcopy(content), "broken", {"step": step, "error": error, "alternative": alternative},
                    {"removed": [], "distractors": [], "broken": spec})


def _image_keys(input_data: dict) -> list[tuple[tuple[str, ...], str]]:
    """(key path, file) of every image entry of input_data (``image_path``, or a raster ``path``)."""
    out = []
    for key, entry in (input_data or {}).items():
        if isinstance(entry, str):
            if entry.lower().endswith((".png", ".tif", ".tiff", ".jpg", ".jpeg")):
                out.append(((key,), entry))
        elif isinstance(entry, dict):
            for sub in ("image_path", "path"):
                value = entry.get(sub)
                if isinstance(value, str) and value.lower().endswith((".png", ".tif", ".tiff", ".jpg", ".jpeg")):
                    out.append(((key, sub), value))
    return out


def _files_used(content: dict) -> set[str]:
    used: set[str] = set()

    def walk(value: Any):
        if isinstance(value, str):
            used.add(value.rsplit("/", 1)[-1])
        elif isinstance(value, dict):
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)

    for step in _steps(content):
        walk(step.get("args"))
    return used


def unsolvable_variant(content: dict, strategy: str, tools: dict[str, dict], *, step: int | None = None,
                       constraint: str = "") -> dict:
    """The task made unsolvable by ``strategy``; its gold answer is the refusal ``REFUSAL``.

    ``tool_removal``: the tool of gold step ``step`` (default: the last non-wrapper step) is removed
    from the tool set and the question demands it. ``information_missing``: the input_data layers
    the gold plan reads are removed (every entry whose file a step names). ``visual_inaccessible``:
    every image of input_data is replaced by an unreadable file (``<name>_unreadable.png``; the
    service stores the bytes). ``contradictory_constraints``: ``constraint`` (written by the author)
    is appended to the question. The variant's ``final_answer`` is ``{"answer": REFUSAL}`` and its
    answer_spec one ``exact_match`` field ``answer`` with that value. Raises ``VariantError``.
    """
    if strategy not in STRATEGIES:
        raise VariantError(f"strategy must be one of {', '.join(STRATEGIES)}, got {strategy!r}")
    out = copy.deepcopy(content)
    params: dict[str, Any] = {"strategy": strategy}
    removed: list[str] = []
    question = str(out.get("question") or "").rstrip()
    if strategy == "tool_removal":
        steps = _steps(out)
        candidates = [i for i, s in enumerate(steps) if _call(s) not in ("", "tool.loop", "tool.reduce")]
        if not candidates:
            raise VariantError("the gold trajectory has no tool step to remove")
        j = candidates[-1] if step is None else step
        if j not in candidates:
            raise VariantError(f"step {j} is not a tool step of the gold trajectory (tool steps: {candidates})")
        tool = _call(steps[j])
        removed = [tool]
        params["step"] = j
        out["question"] = f"{question} Use the tool {tool} to obtain this result; no other tool may replace it."
    elif strategy == "information_missing":
        used = _files_used(out)
        data = out.get("input_data") if isinstance(out.get("input_data"), dict) else {}
        gone = []
        for key, entry in list(data.items()):
            files = [entry] if isinstance(entry, str) else [v for v in (entry or {}).values() if isinstance(v, str)] \
                if isinstance(entry, dict) else []
            if any(f.rsplit("/", 1)[-1] in used for f in files):
                gone.append(key)
                del data[key]
        if not gone:
            raise VariantError("no input_data layer is read by the gold plan: nothing to remove")
        params["removed_layers"] = gone
    elif strategy == "visual_inaccessible":
        data = out.get("input_data") if isinstance(out.get("input_data"), dict) else {}
        images = _image_keys(data)
        if not images:
            raise VariantError("input_data has no image to make unreadable")
        replaced = {}
        for path, file in images:
            stem = file.rsplit("/", 1)[-1].rsplit(".", 1)[0]
            new = f"{stem}{UNREADABLE_SUFFIX}"
            target = data
            for k in path[:-1]:
                target = target[k]
            target[path[-1]] = new
            replaced[file] = new
        params["replaced"] = replaced
    else:  # contradictory_constraints
        constraint = constraint.strip()
        if not constraint:
            raise VariantError("a contradictory-constraints variant needs the constraint, written by the author")
        params["constraint"] = constraint
        out["question"] = f"{question} {constraint}"
    out["final_answer"] = {"answer": REFUSAL}
    out["answer_spec"] = [{"name": "answer", "eval_type": "exact_match", "source": REFUSAL, "answer_format": "str"}]
    return _variant(out, "unsolvable", params, {"removed": removed, "distractors": [], "broken": None})


def make_variant(content: dict, kind: str, tools: dict[str, dict], *, n: int = 4, seed: int = 0,
                 step: int | None = None, error: str = "", alternative: str = "",
                 strategy: str = "tool_removal", constraint: str = "") -> dict:
    """One variant spec of ``kind`` (see the functions above for the parameters each kind reads)."""
    if kind == "extraneous":
        return extraneous_variant(content, n, seed, tools)
    if kind == "broken":
        if step is None:
            raise VariantError("a broken variant needs the step whose tool fails (--step J)")
        return broken_variant(content, step, tools, error, alternative)
    if kind == "unsolvable":
        return unsolvable_variant(content, strategy, tools, step=step, constraint=constraint)
    raise VariantError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")


def withheld_files(content: dict, variant: dict) -> set[str]:
    """The file names (base names) an unsolvable variant withholds from its agent.

    ``information_missing``: every file a gold step names that the variant's ``input_data`` does
    not declare (the strategy removed the layers the plan reads); ``visual_inaccessible``: the
    replaced images (``params.replaced`` keys). Empty for other kinds and strategies."""
    if not isinstance(variant, dict) or variant.get("kind") != "unsolvable":
        return set()
    params = variant.get("params") or {}
    strategy = params.get("strategy")
    if strategy == "visual_inaccessible":
        return {str(f).rsplit("/", 1)[-1] for f in (params.get("replaced") or {})}
    if strategy != "information_missing":
        return set()
    data = content.get("input_data") if isinstance(content, dict) else None
    declared = {base_name(p) for _, p in walk_data_paths(data)}
    used = {base_name(p) for step in _steps(content) for _, p in walk_data_paths(step.get("args"))}
    return used - declared


def _step_names(step: dict) -> list[str]:
    """The tool names a step calls: its own, and for a loop the calls it nests."""
    names = [_call(step)]
    args = step.get("args") if isinstance(step.get("args"), dict) else {}
    names += [_call(inner) or str(inner.get("tool") or "") for inner in args.get("calls") or [] if isinstance(inner, dict)]
    return [n for n in names if n]


def unsolvable_block(content: dict, variant: dict) -> dict | None:
    """Where the gold plan of an unsolvable variant cannot proceed: ``{step, tool, reason}``.

    The rule of the studio's gold replay for unsolvable variants (issue 21; seed 001, §3.1
    "Unsolvable": the right answer is an explicit refusal): the base plan runs against the
    variant's tool set and data up to the first step that needs what the variant took away, and
    stops there; the gold answer is the refusal ``REFUSAL``. That step is

    * ``tool_removal``: the first step calling a removed tool (``tools.removed``; a loop's nested
      call counts);
    * ``information_missing`` / ``visual_inaccessible``: the first step whose arguments name a
      withheld file (:func:`withheld_files`).

    None when nothing blocks the plan: another kind, ``contradictory_constraints`` (the data is all
    there; the question contradicts itself), or a plan edited so that it no longer needs what was
    taken away (QC's ``variant.unsolvable_proceeds``)."""
    if not isinstance(variant, dict) or variant.get("kind") != "unsolvable":
        return None
    strategy = (variant.get("params") or {}).get("strategy")
    steps = _steps(content)
    if strategy == "tool_removal":
        removed = set((variant.get("tools") or {}).get("removed") or [])
        for i, step in enumerate(steps):
            hit = next((n for n in _step_names(step) if n in removed), None)
            if hit:
                return {"step": i, "tool": _call(step),
                        "reason": f"{hit} is removed from the variant's tool set"}
        return None
    gone = withheld_files(content, variant)
    if not gone:
        return None
    for i, step in enumerate(steps):
        hit = sorted({base_name(p) for _, p in walk_data_paths(step.get("args"))} & gone)
        if hit:
            what = "unreadable in" if strategy == "visual_inaccessible" else "missing from"
            return {"step": i, "tool": _call(step), "reason": f"{hit[0]} is {what} the variant's input_data"}
    return None
