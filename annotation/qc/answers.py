"""Answer checks: the eval spec is complete and scorable (``eval_spec.*``: named, typed fields,
each with a source; point pairs; the file's final_answer names the same fields), and the query
asks what the answer gives (``alignment.*``, heuristic).

Alignment (:data:`ALIGNMENT_RULES`): cue phrases of the query, matched on the lower-cased text,
each demanding a field of some eval types: "how many"/"number of" → ``scalar_count`` or
``scalar_dict`` ("how many square metres …" is a measure, not a count); "how much", "what
area/length/distance/volume", "how far/large" → a numeric field; "what share/percentage/
proportion/fraction", "percent", "%" → ``ratio_pct``, ``scalar_dict`` or a percent-like
``scalar_continuous``; a question-word "where", "locate", "coordinates", "centroid" → a point
or polygon field; a question-word "which", "what type/class/name…" → ``set_f1``,
``exact_match``, ``ranking_kendall`` or ``scalar_dict``; "rank", "sort", "prioritise",
"top 3" → ``ranking_kendall`` (``set_f1`` for top-k); "route", "shortest path" → a length/
distance field plus a line or two points. Relative "where"/"which" ("areas where flooding
occurred") are not cues. The query splits into parts at "?", ";", ", and" and "and
how/what/which/where…"; each part holding a cue is one asked quantity, and fewer scored fields
(a ``_row``/``_col`` or ``_lat``/``_lon`` pair counts once) than asked quantities is
``alignment.quantity_missing``. A field of unknown type (already an error) matches any cue.
"""
from __future__ import annotations

import re
from collections import Counter

from kernel.references import find_all_references, format_path

from .plan import Analysis, Scope
from .references import check_reference
from .registry import declare

__all__ = ["EVAL_TYPES", "ANSWER_KINDS", "EVAL_SPEC_CHECKS", "ALIGNMENT_CHECKS", "check_eval_spec", "ALIGNMENT_RULES",
           "PERCENT_NAME", "check_alignment"]

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

#: the kinds of value an answer field of each eval type holds
ANSWER_KINDS = {
    "scalar_count": {"num"}, "scalar_continuous": {"num"}, "ratio_pct": {"num"},
    "scalar_dict": {"dict"}, "set_f1": {"list", "str"}, "ranking_kendall": {"list"},
    "polygon_iou": {"str", "dict"}, "point_pixel": {"num", "list", "dict"},
    "point_haversine": {"num", "list", "dict"},
}

#: the eval-spec checks: id → (severity, meaning)
EVAL_SPEC_CHECKS: dict[str, tuple[str, str]] = declare("answers", {
    "eval_spec.empty": ("error", "the answer has no field"),
    "eval_spec.name": ("error", "an answer field has no name"),
    "eval_spec.duplicate": ("error", "an answer field is declared twice"),
    "eval_spec.unknown_type": ("error", "an eval_spec type the evaluator does not know"),
    "eval_spec.source": ("error", "an answer field has no source"),
    "eval_spec.all_ignored": ("error", "every answer field is 'ignore'"),
    "eval_spec.point_pair": ("error", "a _row/_col or _lat/_lon field has no partner of the same type"),
    "eval_spec.field_mismatch": ("error", "final_answer and eval_spec do not name the same fields"),
    "eval_spec.polygon_grid": ("error", "a polygon gold has no dora_grid"),
})

#: the question–answer alignment checks (heuristic): id → (severity, meaning)
ALIGNMENT_CHECKS: dict[str, tuple[str, str]] = declare("answers", {
    "alignment.count": ("warning", "the query asks 'how many' but no field is a count"),
    "alignment.measure": ("warning", "the query asks for an area/length/amount but no field is numeric"),
    "alignment.ratio": ("warning", "the query asks for a share/percentage but no field is a ratio"),
    "alignment.location": ("warning", "the query asks 'where' but no field is a point or polygon"),
    "alignment.choice": ("warning", "the query asks 'which' but no field is a set or exact match"),
    "alignment.ranking": ("warning", "the query asks for a ranking but no field is a ranking"),
    "alignment.route": ("warning", "the query asks for a route but the answer lacks a length or endpoints"),
    "alignment.quantity_missing": ("warning", "the query asks for more quantities than the answer has fields"),
})


def check_eval_spec(a: Analysis, final_answer: dict | None = None):
    """``eval_spec.*``: every answer field named once, of a known type, with a source (checked as a
    reference); not all ignored; point halves paired; ``final_answer`` (the file's, and the replay's
    ``final_answer`` when given) names the same fields as the spec."""
    fields = a.answer_fields()
    if not fields:
        a.add("eval_spec.empty", "The answer has no field: declare at least one answer field with its eval_spec type.", "answer_spec")
    names: set[str] = set()
    types: dict[str, str] = {}
    answer_scope = Scope(at=len(a.steps))
    for j, fld in enumerate(fields):
        loc = f"answer_spec[{j}]"
        if not isinstance(fld, dict):
            a.add("eval_spec.name", f"Answer field {j} is not an object {{name, eval_type, source}}.", loc)
            continue
        fname = str(fld.get("name", "") or "").strip()
        if not fname:
            a.add("eval_spec.name", f"Answer field {j} has no name: name it as the agent should.", loc)
        elif fname in names:
            a.add("eval_spec.duplicate", f"Answer field '{fname}' is declared twice: rename or remove one.", loc)
        names.add(fname)
        etype = fld.get("eval_type")
        types[fname] = etype
        if etype not in EVAL_TYPES:
            a.add("eval_spec.unknown_type", f"Answer field '{fname}': eval_spec type '{etype}' is unknown (the evaluator would fall back to exact match); use one of {', '.join(EVAL_TYPES)}.", loc)
        source = fld.get("source")
        file_gold = isinstance(a.content.get("final_answer"), dict) and fname in a.content["final_answer"]
        if (source is None or source == "") and not file_gold:  # a null gold value is sanity.nan
            a.add("eval_spec.source", f"Answer field '{fname}' has no source: bind it to a step output (<key> from trajectory[N].obs) or give a value.", loc)
        else:
            wanted = ANSWER_KINDS.get(etype)
            for path, ref in find_all_references(source):
                where = f"{loc}.source" + (f".{format_path(path)}" if path else "")
                check_reference(a, ref, where, answer_scope, wanted if not path else None, fname, answer=True)
    if fields and all(isinstance(f, dict) and f.get("eval_type") == "ignore" for f in fields):
        a.add("eval_spec.all_ignored", "Every answer field is 'ignore': nothing would be scored; give at least one field a scored type.", "answer_spec")
    _check_pairs(a, types)
    for fa, where in ((a.content.get("final_answer"), "final_answer"), (final_answer, "replay.final_answer")):
        if isinstance(fa, dict) and fields:
            missing_type = [k for k in fa if k not in names]
            missing_value = [n for n in names if n and n not in fa]
            if missing_type:
                a.add("eval_spec.field_mismatch", f"{where} has field(s) {', '.join(sorted(missing_type))} with no eval_spec type: add a type (or 'ignore') for each.", where)
            if missing_value:
                a.add("eval_spec.field_mismatch", f"eval_spec declares {', '.join(sorted(missing_value))} but {where} has no such field: add the value or drop the type.", where)


def _check_pairs(a: Analysis, types: dict[str, str]):
    pairs = (("point_pixel", ("_row", "_col")),
             ("point_haversine", ("_lat", "_lon")), ("point_haversine", ("_latitude", "_longitude")))
    for name, etype in types.items():
        for ptype, (first, second) in pairs:
            for mine, other in ((first, second), (second, first)):
                if not name.endswith(mine):
                    continue
                if ptype == "point_haversine" and mine in ("_lat", "_lon") and name.endswith(("_latitude", "_longitude")):
                    continue
                if etype != ptype and types.get(name[: -len(mine)] + other) != ptype:
                    continue  # neither half is a point of this type: an ordinary field
                prefix = name[: -len(mine)]
                candidates = [prefix + other]
                if ptype == "point_haversine":
                    candidates += [prefix + o for o in ("_lat", "_latitude", "_lon", "_longitude") if o.startswith(other[:4])]
                partner = next((c for c in candidates if c in types), None)
                if partner is None:
                    a.add("eval_spec.point_pair", f"Answer field '{name}' ({etype}) has no partner '{prefix + other}': a point is scored as a {first}/{second} pair; add the partner field.", "answer_spec")
                elif types[partner] != ptype or etype != ptype:
                    a.add("eval_spec.point_pair", f"Answer fields '{name}' ({etype}) and '{partner}' ({types[partner]}) must both be {ptype} to be scored as one point.", "answer_spec")


_UNIT_AFTER_HOW_MANY = r"(?:square|sq\.?|cubic|hectares?|ha\b|km|kilomet|met(?:er|re)s?\b|m²|m2\b|m3\b|tons?|tonnes?|litres?|liters?|acres?|miles?|feet|degrees?)"
ALIGNMENT_RULES: dict[str, dict] = {
    "count": {"cue": r"\bhow many\b(?!\s+" + _UNIT_AFTER_HOW_MANY + r")|\bnumber of\b|\bcount (?:of|the)\b",
              "types": {"scalar_count", "scalar_dict"}, "what": "a count (scalar_count or scalar_dict)"},
    "measure": {"cue": r"\bhow many\s+" + _UNIT_AFTER_HOW_MANY + r"|\bhow much\b|\bhow (?:far|long|large|big|deep|high)\b|\bwhat (?:is the |was the )?(?:total |combined |overall |mean |average |maximum |minimum )?(?:area|length|distance|volume|extent|size|perimeter|depth|elevation|height|temperature)\b",
                "types": {"scalar_continuous", "scalar_count", "scalar_dict", "ratio_pct"}, "what": "a numeric field (scalar_continuous)"},
    "ratio": {"cue": r"\bwhat (?:share|percentage|proportion|fraction|percent|ratio)\b|\bpercentage\b|\bproportion\b|\bshare of\b|\bfraction of\b|\bpercent\b|%",
              "types": {"ratio_pct", "scalar_dict"}, "what": "a ratio (ratio_pct)"},
    "location": {"cue": r"(?:^|[.?!;:]\s*|,\s*|\band\s+)where\b|\bwhere (?:is|are|was|were|should|would|could|do|does|did|can|will|might|must)\b|\blocate\b|\blocation of\b|\bcoordinates?\b|\bcentroid\b",
                 "types": {"point_pixel", "point_haversine", "polygon_iou", "scalar_dict"}, "what": "a point (point_pixel/point_haversine) or polygon (polygon_iou)"},
    "choice": {"cue": r"(?:^|[.?!;:]\s*|,\s*|\band\s+)which\b|\bwhat (?:type|types|kind|kinds|class|classes|category|categories|name|names|phase|level|grade|severity)\b",
               "types": {"set_f1", "exact_match", "ranking_kendall", "scalar_dict"}, "what": "a set (set_f1) or exact match"},
    "ranking": {"cue": r"\brank(?:s|ed|ing)?\b|\border(?:ed)? (?:them|the|from|by)\b|\bsort(?:ed)?\b|\bprioriti[sz]e\b|\btop[- ]?\d+\b|\btop (?:two|three|four|five|ten)\b",
                "types": {"ranking_kendall"}, "what": "a ranking (ranking_kendall)"},
    "route": {"cue": r"\broutes?\b|\bshortest path\b|\bpath from\b|\bdriv(?:e|ing) from\b|\bnavigat\w*",
              "types": set(), "what": "a route: a length field plus a line or two points"},
}
#: a query splits into asked quantities at "?", ";", ", and" and "and how/what/which/where/…"
_CLAUSE_SPLIT = re.compile(r"\?|;|,\s*and\b|\band\s+(?=how\b|what\b|which\b|where\b|rank\b|list\b|give\b|report\b|name\b|estimate\b|compute\b|find\b|identify\b)")
PERCENT_NAME = re.compile(r"percentage|_pct|_ratio|_share|(?:pct|ratio|share)$")
_LENGTH_NAME = re.compile(r"length|distance|dist_|_km$|_m$|meters|metres")
_POINT_SUFFIX = re.compile(r"_(?:row|col|lat|lon|latitude|longitude)$")


def _field_list(fields: list[dict]) -> str:
    return ", ".join(f"{f.get('name')}:{f.get('eval_type')}" for f in fields)


def check_alignment(a: Analysis):
    """``alignment.*``: the query's cues (:data:`ALIGNMENT_RULES`) against the scored fields' types,
    and the number of asked quantities against the fields (see the module docstring). Nothing for an
    unsolvable variant, whose gold is the refusal."""
    variant = a.content.get("variant")
    if isinstance(variant, dict) and variant.get("kind") == "unsolvable":
        return  # its gold answer is the refusal whatever the question asks (annotation.qc.variants checks that)
    question = str(a.content.get("question", "") or "").lower()
    fields = [f for f in a.answer_fields() if isinstance(f, dict)]
    scored = [f for f in fields if f.get("eval_type") != "ignore"]
    if not question.strip() or not scored:
        return  # structure / eval-spec errors already say it
    types = Counter(f.get("eval_type") for f in scored)
    names = [str(f.get("name", "")).lower() for f in scored]
    wildcard = any(t not in EVAL_TYPES for t in types)  # eval_spec.unknown_type says it already
    clauses = [c for c in _CLAUSE_SPLIT.split(question) if c and c.strip()]
    asks = 0
    for clause in clauses:
        if any(re.search(rule["cue"], clause) for k, rule in ALIGNMENT_RULES.items() if k != "route"):
            asks += 1
    for ask, rule in ALIGNMENT_RULES.items():
        hits = re.findall(rule["cue"], question)
        if not hits or wildcard:
            continue
        ok_types = set(rule["types"])
        if ask == "ratio":
            ok = bool(ok_types & set(types)) or any(f.get("eval_type") == "scalar_continuous" and PERCENT_NAME.search(str(f.get("name", "")).lower()) for f in scored)
        elif ask == "ranking":
            ok = bool(ok_types & set(types)) or (re.search(r"\btop\b", question) is not None and "set_f1" in types)
        elif ask == "route":
            has_len = any(f.get("eval_type") in ("scalar_continuous", "scalar_count", "scalar_dict") and _LENGTH_NAME.search(str(f.get("name", "")).lower()) for f in scored)
            points = {re.sub(_POINT_SUFFIX, "", n) for n, f in zip(names, scored) if f.get("eval_type") in ("point_pixel", "point_haversine")}
            has_line = len(points) >= 2 or any(f.get("eval_type") in ("polygon_iou", "scalar_dict") for f in scored) or any(re.search(r"route|path|line", n) and f.get("eval_type") not in ("scalar_continuous", "scalar_count") for n, f in zip(names, scored))
            missing = [w for w, has in (("a length/distance field", has_len), ("a line or a start/end point pair", has_line)) if not has]
            if missing:
                a.add("alignment.route", f"The query asks for a route but the answer lacks {' and '.join(missing)}; a route is scored as start point + end point + total length.", "answer_spec")
            continue
        else:
            ok = bool(ok_types & set(types))
        if not ok:
            cue = hits[0] if isinstance(hits[0], str) else next((h for h in hits[0] if h), "")
            a.add(f"alignment.{ask}", f"The query asks a {ask} question ({cue.strip()!r}) but no answer field is {rule['what']} (fields: {_field_list(scored)}); check the eval_spec types.", "answer_spec")
    units = set()
    for n, f in zip(names, scored):
        units.add(re.sub(_POINT_SUFFIX, "", n) if f.get("eval_type") in ("point_pixel", "point_haversine") else n)
    if asks > len(units):
        a.add("alignment.quantity_missing", f"The query asks for {asks} quantities but the answer has {len(units)} scored field(s); add a field for each quantity asked (or reword the query).", "answer_spec")
