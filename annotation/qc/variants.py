"""QC checks of robustness variants (``annotation.variants``), over plain data.

A variant task's QC content carries ``variant`` = ``{kind, params, tools}`` (its ``TaskVariant``
row; ``annotation.services.qc.qc_for_task`` adds it). The checks make sure the variant still
tests what its kind promises after the author edits it:

* ``variant.broken_step`` (error): the broken step is not a step of the gold plan, or the tool at
  that step is not the broken tool any more;
* ``variant.alternative_name`` (error): the alternative of a broken tool is named like a tool that
  exists (it would compute that tool's result, not the broken one's);
* ``variant.distractor_in_plan`` (error): the gold plan calls a distractor (any call is an E5 error);
* ``variant.refusal_gold`` (error): an unsolvable variant's gold answer is not the refusal
  ``REJECT`` (its answer_spec, or the replayed final answer);
* ``variant.unsolvable_proceeds`` (error): an unsolvable variant made by removing a tool, a layer
  or the imagery whose gold plan no longer needs what was taken away
  (``annotation.variants.unsolvable_block`` finds no step that cannot proceed);
* ``variant.alternative_differs`` (error): the gold replay ran the broken step again with the
  alternative tool (``replay.services.runs``, the run's ``variant_check``) and its observation is not
  the original step's (or the alternative failed): an agent that replaces the broken tool would
  not reach the gold. The location is the step's observation, the message the first differing
  leaves;
* ``variant.unknown_kind`` (error): the kind is none of extraneous, broken, unsolvable.

The files an unsolvable variant withholds on purpose (``annotation.variants.withheld_files``) are
not reported as ``manifest.not_in_input_data`` (``annotation.qc.manifest``): that is the variant's point.
"""
from __future__ import annotations

from typing import Any

from annotation.variants import KINDS, REFUSAL, unsolvable_block

from .registry import declare

__all__ = ["CHECKS", "run"]

CHECKS: dict[str, tuple[str, str]] = declare("variants", {
    "variant.broken_step": ("error", "a broken variant's step is not in the gold plan or calls another tool"),
    "variant.alternative_name": ("error", "a broken tool's alternative is named like an existing tool"),
    "variant.distractor_in_plan": ("error", "the gold plan of an extraneous variant calls a distractor"),
    "variant.refusal_gold": ("error", "an unsolvable variant's gold answer is not the refusal"),
    "variant.unsolvable_proceeds": ("error", "an unsolvable variant's gold plan no longer needs what the variant took away"),
    "variant.alternative_differs": ("error", "the broken tool's alternative does not compute the original step's observation on replay"),
    "variant.unknown_kind": ("error", "a variant of an unknown kind"),
})


def _call(step: Any) -> str:
    if not isinstance(step, dict):
        return ""
    call = step.get("call") or step.get("name") or ""
    return call.split("(")[0].strip() if isinstance(call, str) else ""


def run(a: Any, replay: dict | None = None, known_tools: frozenset = frozenset()) -> None:
    """Variant findings on one QC analysis (``a.content["variant"]``; nothing for a plain task)."""
    variant = a.content.get("variant") if isinstance(a.content, dict) else None
    if not isinstance(variant, dict):
        return
    kind = variant.get("kind")
    tools = variant.get("tools") or {}
    steps = a.content.get("trajectory") or []
    if kind not in KINDS:
        a.add("variant.unknown_kind", f"The variant's kind '{kind}' is none of {', '.join(KINDS)}.", "variant.kind")
        return
    if kind == "broken":
        broken = tools.get("broken") or {}
        j = broken.get("step")
        if not isinstance(j, int) or not 0 <= j < len(steps) or _call(steps[j]) != broken.get("tool"):
            here = _call(steps[j]) if isinstance(j, int) and 0 <= j < len(steps) else "no step"
            a.add("variant.broken_step",
                  f"The broken tool is {broken.get('tool')} at step {j}, but the gold plan has {here} there: "
                  "restore the step or make the variant again from the base task.", f"trajectory[{j}]")
        check = (replay or {}).get("variant_check") if isinstance(replay, dict) else None
        if isinstance(check, dict) and check.get("kind") == "broken" and not check.get("same"):
            if check.get("error"):
                what = f"failed: {check['error']}"
            else:
                what = "gave another observation: " + "; ".join(
                    f"{c.get('path')}: {c.get('before')!r} (original) vs {c.get('after')!r} (alternative)"
                    for c in (check.get("changes") or [])[:3])
            a.add("variant.alternative_differs",
                  f"Replayed at step {check.get('step')} with the same arguments, the alternative "
                  f"{check.get('alternative')} {what}. An agent that replaces the broken tool would not reach "
                  "the gold: make the alternative compute what the broken tool computes.",
                  f"trajectory[{check.get('step')}].obs")
        if broken.get("alternative") in known_tools:
            a.add("variant.alternative_name",
                  f"The alternative '{broken.get('alternative')}' is the name of an existing tool, which computes "
                  "something else: give the alternative a name of its own.", "variant.tools.broken.alternative")
    elif kind == "extraneous":
        names = {d.get("name") for d in tools.get("distractors") or [] if isinstance(d, dict)}
        for i, step in enumerate(steps):
            if _call(step) in names:
                a.add("variant.distractor_in_plan",
                      f"Step {i} calls the distractor {_call(step)}: the gold plan must use the real tools only.",
                      f"trajectory[{i}]")
    else:
        strategy = (variant.get("params") or {}).get("strategy")
        if strategy in ("tool_removal", "information_missing", "visual_inaccessible") \
                and unsolvable_block(a.content, variant) is None:
            a.add("variant.unsolvable_proceeds",
                  f"The variant is unsolvable by {strategy.replace('_', ' ')}, but no step of the gold plan needs "
                  "what it took away, so an agent can answer it: restore the step that needs it or make the "
                  "variant again from the base task.", "trajectory")
        spec = [f for f in a.content.get("answer_spec") or [] if isinstance(f, dict)]
        if len(spec) != 1 or spec[0].get("source") != REFUSAL:
            a.add("variant.refusal_gold",
                  f"An unsolvable variant's gold answer is the refusal {REFUSAL}: keep one answer field whose "
                  f"source is the literal {REFUSAL}.", "answer_spec")
        answer = (replay or {}).get("final_answer") if isinstance(replay, dict) else None
        # any JSON value may come back from a replay: compare, never hash (a list value is unhashable)
        refused = all(v == REFUSAL for v in answer.values()) if isinstance(answer, dict) else answer == REFUSAL
        if answer not in (None, {}) and not refused:
            a.add("variant.refusal_gold", f"The replayed gold answer is {answer}, not the refusal {REFUSAL}.",
                  "final_answer")
