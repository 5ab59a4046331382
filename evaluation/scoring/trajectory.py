"""Trajectory metrics of the official DORA evaluator and a per-step match table.

Both trajectories are flattened first (:func:`flatten_trajectory`). With G the gold tool names
and P the predicted ones: ``t_any`` = set recall, ``t_ord`` = LCS/|G|, ``t_em`` = common
prefix/|G|, ``eff`` = |G|/max(|P|, |G|) (all 1 if both are empty and 0 if only G is), and
``par_acc`` = positional argument accuracy (:func:`parameter_accuracy`).
"""
from __future__ import annotations

import json
import math
import posixpath
import re
from functools import lru_cache
from typing import Any

from .config import ScoringConfig
from .normalize import _tool_name, normalize_string, normalize_tool_name

METRICS = ("t_any", "t_ord", "t_em", "par_acc", "eff")
LOOP_WRAPPERS = ("tool.loop", "tool.reduce")
_DEFAULT = ScoringConfig()

# "<key> from trajectory[N].obs": whitespace required around "from"; case-sensitive; like the
# evaluator's re.match(...$), a single trailing newline is tolerated.
_TRAJ_REF = re.compile(r"^<\w+>\s+from\s+trajectory\[\d+\]\.obs$")
_EXT = re.compile(r"\.\w{1,6}$")
_HASH_SEGMENT = re.compile(r"_[0-9a-f]{6,10}(?=_|$)")
_PATH_PREFIXES = ("/", "D:", "C:", "./", "../", "~")


@lru_cache(maxsize=4096)
def _kept_name(call: str) -> str | None:
    """The normalised tool name of a non-empty ``call`` text, None for a loop wrapper (dropped by
    flattening); cached per text, as :func:`_tool_name` is."""
    name = _tool_name(call)
    return None if name in LOOP_WRAPPERS else name


def _steps(traj: Any) -> tuple[list[int], list[dict], list[str]]:
    """The steps kept by flattening as three parallel lists: raw indices (positions in ``traj``),
    the steps, and their normalised tool names (:func:`normalize_tool_name` of ``call``; empty
    names kept). The names are worked out here once per step so that the tool sequences, par_acc
    and path matching do not normalise them again."""
    raw: list[int] = []
    kept: list[dict] = []
    names: list[str] = []
    if not isinstance(traj, list):
        return raw, kept, names  # the evaluator iterates whatever it gets; a dict or string yields no dict steps
    for raw_index, step in enumerate(traj):
        if not isinstance(step, dict):
            continue
        call = step.get("call", "")
        if not call:  # a falsy call is dropped (its name, "", is no loop wrapper either)
            continue
        name = _kept_name(call if type(call) is str else str(call))
        if name is None:  # a loop wrapper
            continue
        raw.append(raw_index)
        kept.append(step)
        names.append(name)
    return raw, kept, names


def _kept_steps(traj: Any) -> tuple[list[dict], list[str]]:
    """:func:`_steps` without the raw indices (the metrics without a step table need none): the
    steps kept by flattening and their normalised tool names, with the same rules."""
    kept: list[dict] = []
    names: list[str] = []
    if not isinstance(traj, list):
        return kept, names
    for step in traj:
        if not isinstance(step, dict):
            continue
        call = step.get("call", "")
        if not call:
            continue
        name = _kept_name(call if type(call) is str else str(call))
        if name is not None:
            kept.append(step)
            names.append(name)
    return kept, names



def flatten_trajectory(traj: Any) -> list[dict]:
    """Drop non-dict entries, ``tool.loop``/``tool.reduce`` wrappers and steps with a falsy ``call``.

    A step whose call normalises to an empty name (e.g. ``"(x)"``) is kept here, so it counts in
    par_acc's denominator, but it is absent from the tool-name sequence: an evaluator quirk.
    """
    return _steps(traj)[1]


def tool_sequence(traj_or_flat: Any, flat: bool = False) -> list[str]:
    """Normalised tool names of the flattened trajectory (empty names dropped)."""
    steps = traj_or_flat if flat else flatten_trajectory(traj_or_flat)
    names = (normalize_tool_name(s.get("call", "")) for s in steps)
    return [n for n in names if n]


def tool_any_order(pred: list[str], gold: list[str]) -> float:
    if not gold:
        return 1.0 if not pred else 0.0
    gold_set = set(gold)
    return len(gold_set & set(pred)) / len(gold_set)


def lcs_length(a: list[str], b: list[str]) -> int:
    """Length of a longest common subsequence of two name lists.

    A common prefix and a common suffix belong to some longest common subsequence (if
    ``a[0] == b[0]``, LCS(a, b) = 1 + LCS(a[1:], b[1:])), so they are counted directly and the
    quadratic table is filled only for the differing middle parts: the same length, and usually
    no table at all (a prediction that follows the gold trajectory)."""
    if not a or not b:
        return 0
    if a == b:
        return len(a)
    n = min(len(a), len(b))
    head = 0
    while head < n and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < n - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    a, b = a[head:len(a) - tail], b[head:len(b) - tail]
    if not a or not b:
        return head + tail
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0]
        for j, y in enumerate(b, 1):
            cur.append(prev[j - 1] + 1 if x == y else max(prev[j], cur[j - 1]))
        prev = cur
    return head + tail + prev[-1]


def tool_in_order(pred: list[str], gold: list[str]) -> float:
    if not gold:
        return 1.0 if not pred else 0.0
    return lcs_length(gold, pred) / len(gold)


def tool_exact_match(pred: list[str], gold: list[str]) -> float:
    if not gold:
        return 1.0 if not pred else 0.0
    n = 0
    for g, p in zip(gold, pred):
        if g != p:
            break
        n += 1
    return n / len(gold)


def efficiency(pred: list[str], gold: list[str]) -> float:
    if not gold:
        return 1.0 if not pred else 0.0
    return len(gold) / max(len(pred), len(gold))


# ── argument matching ─────────────────────────────────────────────────────

def is_file_path(value: Any) -> bool:
    """At least 4 characters and either (a separator and a 1–6 character extension) or a path-like
    start (``/``, ``D:``, ``C:``, ``./``, ``../``, ``~``)."""
    if not isinstance(value, str) or len(value) < 4:
        return False
    if type(value) is str:
        return _is_path_text(value)
    return _path_like(value)


def _path_like(value: str) -> bool:
    has_sep = "/" in value or "\\" in value
    return (has_sep and bool(_EXT.search(value))) or value.startswith(_PATH_PREFIXES)


#: :func:`is_file_path` of a text, cached per text: a run repeats the same paths and argument
#: texts in thousands of steps. The answer depends on the text alone, so caching is safe.
_is_path_text = lru_cache(maxsize=1 << 16)(_path_like)


def _loads_or_none(text: Any) -> Any:
    try:
        return json.loads(text)
    except (ValueError, TypeError):
        return None


def _dict_paths(d: dict) -> tuple[tuple[str, Any], ...]:
    """``(str(value), key)`` of an obs dict's top-level values that are file paths, in order."""
    out = []
    for k, v in d.items():
        text = v if type(v) is str else str(v)
        if is_file_path(text):
            out.append((text, k))
    return tuple(out)


@lru_cache(maxsize=1 << 16)
def _text_paths(text: str) -> tuple[tuple[str, Any], ...]:
    """:func:`_dict_paths` of a JSON observation text (``()`` when it is not a JSON object).

    Cached per text: the same tool output (``{"mask_path": "..."}``) comes back in many records,
    and decoding it is most of the cost of an output map. The result depends on the text alone
    and is an immutable tuple, so sharing it between records is safe."""
    parsed = _loads_or_none(text)
    return _dict_paths(parsed) if isinstance(parsed, dict) else ()


def _parsed_paths(text: Any) -> tuple[tuple[str, Any], ...]:
    """:func:`_text_paths` without the cache (a ``str`` subclass, or a value ``json.loads`` refuses)."""
    parsed = _loads_or_none(text)
    return _dict_paths(parsed) if isinstance(parsed, dict) else ()


#: JSON value types whose ``str()`` is never a file path (:func:`is_file_path`): numbers, booleans
#: and None have no separator and no path-like start; a list's or dict's text starts with ``[`` or
#: ``{`` and ends with ``]`` or ``}``, so it has neither a path-like start nor an extension at its end
_NEVER_PATH_TEXT = frozenset((int, float, bool, type(None), list, dict))


def output_map(flat: list[dict]) -> dict[str, tuple[int, str]]:
    """``{path: (step index, key)}`` of paths in each step's obs (top-level values), and in args
    whose name starts with ``output``. A later step producing the same path wins."""
    produced: dict[str, tuple[int, str]] = {}
    for idx, step in enumerate(flat):
        obs = step.get("obs", [])
        for item in (obs if isinstance(obs, list) else (obs,)):
            if isinstance(item, dict):
                text = item.get("text", "")
                if not text:  # _dict_paths(item), written out: this runs for every obs of every step
                    for k, v in item.items():
                        if type(v) is str:
                            if len(v) >= 4 and _is_path_text(v):
                                produced[v] = (idx, k)
                        elif type(v) not in _NEVER_PATH_TEXT and is_file_path(text := str(v)):
                            produced[text] = (idx, k)
                    continue
                if type(text) is str:  # MCP content block {"type": "text", "text": "<json>"}
                    pairs = _text_paths(text)
                else:
                    pairs = _parsed_paths(text)
            elif isinstance(item, str):
                pairs = _text_paths(item) if type(item) is str else _parsed_paths(item)
            else:
                continue
            for path, k in pairs:
                produced[path] = (idx, k)
        args = step.get("args", {})
        if isinstance(args, dict):
            for k, v in args.items():
                if isinstance(k, str) and k.startswith("output") and is_file_path(str(v)):
                    produced[str(v)] = (idx, k)
    return produced


def _canonical_stem(basename: str) -> str:
    name, ext = posixpath.splitext(basename)
    previous = None
    while previous != name:
        previous = name
        name = _HASH_SEGMENT.sub("", name)
    return name + ext


class _Context:
    """Both flattened trajectories and their tool names (normalised, one per step, empty names
    kept; worked out from the steps when not given); their output maps are built on first use."""

    __slots__ = ("gold_flat", "pred_flat", "cfg", "gold_names", "pred_names", "_gold_out", "_pred_out")

    def __init__(self, gold_flat, pred_flat, cfg, gold_names=None, pred_names=None):
        self.gold_flat, self.pred_flat, self.cfg = gold_flat, pred_flat, cfg
        self.gold_names = gold_names if gold_names is not None else [
            normalize_tool_name(s.get("call", "")) for s in gold_flat]
        self.pred_names = pred_names if pred_names is not None else [
            normalize_tool_name(s.get("call", "")) for s in pred_flat]
        self._gold_out = self._pred_out = None

    @property
    def gold_out(self):
        if self._gold_out is None:
            self._gold_out = output_map(self.gold_flat)
        return self._gold_out

    @property
    def pred_out(self):
        if self._pred_out is None:
            self._pred_out = output_map(self.pred_flat)
        return self._pred_out


@lru_cache(maxsize=1 << 16)
def _file_names(path: str) -> tuple[str, str]:
    """(basename, basename without ``_<6–10 hex>`` hash segments) of a path text, ``\\`` read as
    ``/``; cached per text (the same paths come back in many steps), as it depends on it alone."""
    base = posixpath.basename(path.replace("\\", "/"))
    return base, _canonical_stem(base)


def _same_source(gv: str, pv: str, ctx: _Context, reasons: bool) -> str | None:
    """The reason two path texts match by where they come from (both raw inputs, the same
    producing step, or producing steps at one index that call the same tool), else None."""
    g_src = ctx.gold_out.get(gv)
    p_src = ctx.pred_out.get(pv)
    if g_src is None and p_src is None:
        return "both are raw inputs (no step produced them)"
    if g_src is not None and p_src is not None and g_src[0] == p_src[0]:
        return f"both produced by step {g_src[0]}" if reasons else ""
    if g_src is not None and p_src is None:
        step = g_src[0]
        if step < len(ctx.pred_flat):
            name = ctx.gold_names[step]
            if name == ctx.pred_names[step]:
                return f"gold path produced by step {step}, where both trajectories call {name}" if reasons else ""
    if p_src is not None and g_src is None:
        step = p_src[0]
        if step < len(ctx.gold_flat):
            name = ctx.pred_names[step]
            if name == ctx.gold_names[step]:
                return f"predicted path produced by step {step}, where both trajectories call {name}" if reasons else ""
    return None


def match_path(gv: str, pv: str, ctx: _Context, reasons: bool = True) -> tuple[bool, str]:
    """File-path arguments match by role: same text, both raw inputs, produced by the same step
    index, produced at an index where both trajectories call the same tool, same basename, or same
    basename once ``_<6–10 hex>`` hash segments are removed; the reason names the first of these
    that holds.

    ``reasons=False`` (par_acc without a step table): the same ``ok`` with the reason ``""``. As
    every test that holds means a match, the file-name tests, which need no output map, are made
    before the tests of where the paths come from, whose output maps are then built only when
    the names differ."""
    if normalize_string(pv) == normalize_string(gv):
        return True, "same path"
    g_base, g_canon = _file_names(gv)
    p_base, p_canon = _file_names(pv)
    if not reasons:
        if (g_base and g_base == p_base) or (g_canon and g_canon == p_canon):
            return True, ""
        return _same_source(gv, pv, ctx, False) is not None, ""
    why = _same_source(gv, pv, ctx, True)
    if why is not None:
        return True, why
    if g_base and g_base == p_base:
        return True, f"same file name {g_base}"
    if g_canon and g_canon == p_canon:
        return True, f"same file name without hash suffixes ({g_canon})"
    g_src = ctx.gold_out.get(gv)
    p_src = ctx.pred_out.get(pv)
    if g_src is not None and p_src is not None:
        why = f"path produced by step {g_src[0]} in gold, by step {p_src[0]} in the prediction"
    elif g_src is not None:
        why = f"gold path produced by step {g_src[0]}, predicted path is a raw input"
    else:
        why = f"gold path is a raw input, predicted path produced by step {p_src[0]}"
    return False, why + "; file names differ"


def is_symbolic_reference(value: Any) -> bool:
    return isinstance(value, str) and bool(_TRAJ_REF.match(value))


def match_value(gv: Any, pv: Any, ctx: _Context, reasons: bool = True) -> tuple[bool, str]:
    """One gold argument value against the predicted one; returns (ok, reason).

    ``reasons=False`` (par_acc without a step table): ``ok`` is the same, and a reason that would
    have to be formatted (numbers, indices, step numbers) is ``""``: formatting it for every
    compared argument of a large run costs more than the comparison."""
    if isinstance(gv, str):
        if _TRAJ_REF.match(gv):  # is_symbolic_reference
            if pv is not None:
                return True, "symbolic reference: any non-null value matches"
            return False, "symbolic reference but the prediction is null"
        pv_text = pv if type(pv) is str else str(pv)
        if is_file_path(gv) or is_file_path(pv_text):
            return match_path(gv, pv_text, ctx, reasons)
        if normalize_string(pv) == normalize_string(gv):
            return True, "same text after normalisation"
        return False, "text differs after normalisation"
    # (a str is never a number nor a bool, so testing it first leaves the evaluator's order intact)
    if isinstance(gv, bool):
        return (True, "equal") if pv == gv else (False, "differs")
    if isinstance(gv, (int, float)):
        try:
            p, g = float(pv), float(gv)
        except (TypeError, ValueError, OverflowError):
            return False, "not a number"
        if math.isnan(p) and math.isnan(g):
            return True, "both NaN"
        tol = ctx.cfg.tau_a + ctx.cfg.tau_r * abs(g)
        if abs(p - g) <= tol:
            return True, f"number within {tol:g}" if reasons else ""
        return False, f"number off by {abs(p - g):g} (tolerance {tol:g})" if reasons else ""
    if isinstance(gv, list):
        if not isinstance(pv, list):
            return False, "prediction is not a list"
        if len(pv) != len(gv):
            return False, f"list lengths differ ({len(pv)} vs {len(gv)})" if reasons else ""
        for i, (g_el, p_el) in enumerate(zip(gv, pv)):
            ok, why = match_value(g_el, p_el, ctx, reasons)
            if not ok:
                return False, f"item {i}: {why}" if reasons else ""
        return True, "all items match" if gv else "both empty lists"
    if isinstance(gv, dict):
        if not isinstance(pv, dict):
            return False, "prediction is not an object"
        if set(gv) != set(pv):
            return False, "object keys differ"
        for k in gv:
            ok, why = match_value(gv[k], pv[k], ctx, reasons)
            if not ok:
                return False, f"key {k}: {why}" if reasons else ""
        return True, "all keys match" if gv else "both empty objects"
    if str(pv) == str(gv):
        return True, "equal as text"
    return False, "differs as text"


def _text_kind(text: str) -> int:
    """How :func:`match_value` treats a gold text: 0 a symbolic reference, 1 a file path, 2 plain."""
    if _TRAJ_REF.match(text):
        return 0
    return 1 if is_file_path(text) else 2


#: :func:`_text_kind` of a text, cached per text (it depends on the text alone): a run's gold
#: steps repeat the same argument texts
_gold_text_kind = lru_cache(maxsize=1 << 16)(_text_kind)


def _path_ok(gv: str, pv: str, ctx: _Context) -> bool:
    """``match_path(gv, pv, ctx, reasons=False)[0]`` without its tuple. Equal texts are the same
    path at once (their normalised texts are equal too)."""
    if (pv == gv and type(gv) is str) or normalize_string(pv) == normalize_string(gv):
        return True
    g_base, g_canon = _file_names(gv)
    p_base, p_canon = _file_names(pv)
    if (g_base and g_base == p_base) or (g_canon and g_canon == p_canon):
        return True
    return _same_source(gv, pv, ctx, False) is not None


def _match_ok(gv: Any, pv: Any, ctx: _Context) -> bool:
    """``match_value(gv, pv, ctx, reasons=False)[0]``: the same tests in the same order, with no
    reason and no tuple (par_acc without a step table compares every argument of a run)."""
    if isinstance(gv, str):
        kind = _gold_text_kind(gv) if type(gv) is str else _text_kind(gv)
        if kind == 0:
            return pv is not None
        pv_text = pv if type(pv) is str else str(pv)
        if kind == 1 or is_file_path(pv_text):
            return _path_ok(gv, pv_text, ctx)
        return (pv_text == gv and type(gv) is str) or normalize_string(pv) == normalize_string(gv)
    if isinstance(gv, bool):
        return True if pv == gv else False  # noqa: SIM210 - a bool, whatever == returns
    if isinstance(gv, (int, float)):
        try:
            p, g = float(pv), float(gv)
        except (TypeError, ValueError, OverflowError):
            return False
        if math.isnan(p) and math.isnan(g):
            return True
        return abs(p - g) <= ctx.cfg.tau_a + ctx.cfg.tau_r * abs(g)
    if isinstance(gv, list):
        if not isinstance(pv, list) or len(pv) != len(gv):
            return False
        for g_el, p_el in zip(gv, pv):
            if not _match_ok(g_el, p_el, ctx):
                return False
        return True
    if isinstance(gv, dict):
        if not isinstance(pv, dict) or set(gv) != set(pv):
            return False
        for k in gv:
            if not _match_ok(gv[k], pv[k], ctx):
                return False
        return True
    return str(pv) == str(gv)


def _par_acc(gold_flat: list[dict], g_names: list[str], pred_flat: list[dict], p_names: list[str],
             cfg: ScoringConfig) -> float:
    """:func:`parameter_accuracy` without a step table, from the flattened steps and their names:
    the same sum, in the same order (its value to the last bit)."""
    if not gold_flat:
        return 1.0 if not pred_flat else 0.0
    ctx = None
    matched = 0.0
    for i in range(min(len(gold_flat), len(pred_flat))):
        if g_names[i] != p_names[i]:
            continue
        g_args = gold_flat[i].get("args", {})
        if not isinstance(g_args, dict) or not g_args:
            matched += 1
            continue
        p_args = pred_flat[i].get("args", {})
        if not isinstance(p_args, dict):
            p_args = {}
        hits = 0
        for k, gv in g_args.items():
            if k in p_args:
                if ctx is None:
                    ctx = _Context(gold_flat, pred_flat, cfg, g_names, p_names)
                hits += _match_ok(gv, p_args[k], ctx)
        matched += hits / len(g_args)
    return matched / len(gold_flat)


def parameter_accuracy(pred_traj: Any, gold_traj: Any, cfg: ScoringConfig = _DEFAULT,
                       explain: bool = False, _pre: tuple | None = None) -> tuple[float, list[dict] | None]:
    """Positional argument accuracy and, with ``explain``, the per-step match table.

    For each flattened gold step i with a predicted step i of the same normalised name: the
    fraction of gold argument keys whose values match (a gold step without args counts 1); the
    sum is divided by |G| (flattened). Empty G: 1 if the prediction is empty too, else 0.

    Table rows: ``{gold_index, gold_raw_index, gold_call, pred_index, pred_raw_index, pred_call,
    name_ok, score, args: [{name, gold, pred, ok, why}]}``; indices are into the flattened lists
    (raw = position in the original trajectory).
    """
    if not explain:  # no table: the same value by _par_acc (tests/test_scoring_fast_paths.py)
        if _pre is not None:
            (_, gold_flat, g_names), (_, pred_flat, p_names) = _pre
        else:
            (gold_flat, g_names), (pred_flat, p_names) = _kept_steps(gold_traj), _kept_steps(pred_traj)
        return _par_acc(gold_flat, g_names, pred_flat, p_names, cfg), None
    (g_raw, gold_flat, g_names), (p_raw, pred_flat, p_names) = (
        _pre if _pre is not None else (_steps(gold_traj), _steps(pred_traj)))
    table: list[dict] | None = []
    if not gold_flat:
        return (1.0 if not pred_flat else 0.0), table
    ctx = _Context(gold_flat, pred_flat, cfg, g_names, p_names)
    n_pred = len(pred_flat)
    matched = 0.0
    for i, g_step in enumerate(gold_flat):
        g_name = g_names[i]
        g_args = g_step.get("args", {})
        if not isinstance(g_args, dict):
            g_args = {}
        row = None
        if explain:
            row = {"gold_index": i, "gold_raw_index": g_raw[i], "gold_call": g_name,
                   "pred_index": None, "pred_raw_index": None, "pred_call": None,
                   "name_ok": False, "score": 0.0, "args": []}
            table.append(row)
        if i >= n_pred:
            if row is not None:
                row["args"] = [{"name": k, "gold": v, "pred": None, "ok": False,
                                "why": "no predicted step at this position"} for k, v in g_args.items()]
            continue
        p_step = pred_flat[i]
        p_name = p_names[i]
        p_args = p_step.get("args", {})
        if not isinstance(p_args, dict):
            p_args = {}
        name_ok = g_name == p_name
        if row is not None:
            row.update(pred_index=i, pred_raw_index=p_raw[i], pred_call=p_name, name_ok=name_ok)
        if not name_ok:
            if row is not None:
                row["args"] = [{"name": k, "gold": v, "pred": p_args.get(k), "ok": False,
                                "why": f"not compared: predicted step {i} calls {p_name or '(none)'}"}
                               for k, v in g_args.items()]
            continue
        if not g_args:
            matched += 1
            if row is not None:
                row["score"] = 1.0
            continue
        hits = 0
        for k, gv in g_args.items():
            if k not in p_args:
                ok, why, pv = False, "argument missing in the prediction", None
            else:
                pv = p_args[k]
                ok, why = match_value(gv, pv, ctx, explain)
            hits += ok
            if row is not None:
                row["args"].append({"name": k, "gold": gv, "pred": pv, "ok": ok, "why": why})
        matched += hits / len(g_args)
        if row is not None:
            row["score"] = hits / len(g_args)
    return matched / len(gold_flat), table


def metric_values(pred_traj: Any, gold_traj: Any, cfg: ScoringConfig = _DEFAULT) -> tuple[float, ...]:
    """The values of :func:`trajectory_metrics`, in :data:`METRICS` order (t_any, t_ord, t_em,
    par_acc, eff), unrounded, with no step table."""
    gold_flat, g_names = _kept_steps(gold_traj)
    pred_flat, p_names = _kept_steps(pred_traj)
    gold_seq = g_names if "" not in g_names else [n for n in g_names if n]
    pred_seq = p_names if "" not in p_names else [n for n in p_names if n]
    par_acc = _par_acc(gold_flat, g_names, pred_flat, p_names, cfg)
    if pred_seq == gold_seq:  # the same tools in the same order (or both none): each of the four is 1
        return 1.0, 1.0, 1.0, par_acc, 1.0
    return (tool_any_order(pred_seq, gold_seq), tool_in_order(pred_seq, gold_seq),
            tool_exact_match(pred_seq, gold_seq), par_acc, efficiency(pred_seq, gold_seq))


def trajectory_metrics(pred_traj: Any, gold_traj: Any, cfg: ScoringConfig = _DEFAULT,
                       explain: bool = False) -> tuple[dict[str, float], list[dict] | None]:
    """``({t_any, t_ord, t_em, par_acc, eff}, step table or None)``, unrounded."""
    if not explain:  # the same numbers without the table's bookkeeping (tests/test_scoring_fast_paths.py)
        return dict(zip(METRICS, metric_values(pred_traj, gold_traj, cfg))), None
    gold_steps, pred_steps = _steps(gold_traj), _steps(pred_traj)
    pred_seq = [n for n in pred_steps[2] if n]  # tool_sequence of the flattened steps
    gold_seq = [n for n in gold_steps[2] if n]
    par_acc, table = parameter_accuracy(pred_traj, gold_traj, cfg, explain, (gold_steps, pred_steps))
    return {
        "t_any": tool_any_order(pred_seq, gold_seq),
        "t_ord": tool_in_order(pred_seq, gold_seq),
        "t_em": tool_exact_match(pred_seq, gold_seq),
        "par_acc": par_acc,
        "eff": efficiency(pred_seq, gold_seq),
    }, table


# ── alignment by tool, for reading (not a metric) ───────────────────────────

def lcs_pairs(a: list[str], b: list[str]) -> list[tuple[int, int]]:
    """Index pairs ``(i, j)`` of one longest common subsequence of two name lists (the LCS whose
    length :func:`lcs_length` gives and ``t_ord`` divides by |G|); empty names never match. Ties
    resolve towards skipping in ``a`` first, so a repeated tool pairs with its earliest
    occurrence in ``b``. The one LCS alignment of the studio (the leaderboard's LCS ParAcc too)."""
    n, m = len(a), len(b)
    # suffix table: L[i][j] = LCS length of a[i:], b[j:]
    L = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n - 1, -1, -1):
        for j in range(m - 1, -1, -1):
            L[i][j] = L[i + 1][j + 1] + 1 if a[i] and a[i] == b[j] else max(L[i + 1][j], L[i][j + 1])
    out, i, j = [], 0, 0
    while i < n and j < m:
        if a[i] and a[i] == b[j]:
            out.append((i, j))
            i, j = i + 1, j + 1
        elif L[i + 1][j] >= L[i][j + 1]:
            i += 1
        else:
            j += 1
    return out


def align_by_tool(pred_traj: Any, gold_traj: Any, cfg: ScoringConfig = _DEFAULT) -> list[dict]:
    """Gold and predicted steps aligned by tool name along their LCS (the alignment behind T-ORD),
    for people reading a trajectory. ParAcc itself stays positional (:func:`parameter_accuracy`),
    as in the evaluator; this table only shows where the agent inserted or skipped a step.

    Rows in trajectory order: ``{kind, gold_index, gold_raw_index, gold, pred_index,
    pred_raw_index, pred, call, args}``; ``kind`` is ``"match"`` (same tool; ``args`` =
    ``[{name, gold, pred, ok, why}]`` per gold argument, judged by :func:`match_value`, plus
    ``ok=None`` rows for extra predicted arguments), ``"skipped"`` (a gold step the prediction
    lacks) or ``"inserted"`` (a predicted step the gold lacks). Indices are into the flattened
    lists; raw indices into the stored trajectories.
    """
    (g_raw, gold_flat, g_names), (p_raw, pred_flat, p_names) = _steps(gold_traj), _steps(pred_traj)
    ctx = _Context(gold_flat, pred_flat, cfg, g_names, p_names)
    rows: list[dict] = []

    def gold_row(i: int) -> dict:
        return {"kind": "skipped", "gold_index": i, "gold_raw_index": g_raw[i], "gold": gold_flat[i],
                "pred_index": None, "pred_raw_index": None, "pred": None, "call": g_names[i], "args": []}

    def pred_row(j: int) -> dict:
        return {"kind": "inserted", "gold_index": None, "gold_raw_index": None, "gold": None, "pred_index": j,
                "pred_raw_index": p_raw[j], "pred": pred_flat[j], "call": p_names[j], "args": []}

    gi = pj = 0
    for i, j in lcs_pairs(g_names, p_names) + [(len(gold_flat), len(pred_flat))]:
        while gi < i:
            rows.append(gold_row(gi))
            gi += 1
        while pj < j:
            rows.append(pred_row(pj))
            pj += 1
        if i == len(gold_flat) and j == len(pred_flat):
            break
        g_args = gold_flat[i].get("args", {})
        p_args = pred_flat[j].get("args", {})
        g_args = g_args if isinstance(g_args, dict) else {}
        p_args = p_args if isinstance(p_args, dict) else {}
        args = []
        for k, gv in g_args.items():
            if k not in p_args:
                args.append({"name": k, "gold": gv, "pred": None, "ok": False, "why": "argument missing in the prediction"})
                continue
            ok, why = match_value(gv, p_args[k], ctx)
            args.append({"name": k, "gold": gv, "pred": p_args[k], "ok": ok, "why": why})
        for k, pv in p_args.items():
            if k not in g_args:
                args.append({"name": k, "gold": None, "pred": pv, "ok": None, "why": "extra argument (not in gold)"})
        rows.append({"kind": "match", "gold_index": i, "gold_raw_index": g_raw[i], "gold": gold_flat[i],
                     "pred_index": j, "pred_raw_index": p_raw[j], "pred": pred_flat[j], "call": g_names[i],
                     "args": args})
        gi, pj = i + 1, j + 1
    return rows
