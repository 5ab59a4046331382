"""Reads of the human scoring queue: its queues and their counts, where a scorer stands, scorers' accuracy on
silent gold checks."""
from __future__ import annotations

from django.db.models import Count, Q
from django.utils import timezone

from evaluation.judge.verdict import E_CODES
from evaluation.models import ScoringItem, Verdict, VerdictsSeen


def queue_overview(by_agent: bool = True) -> list[dict]:
    """Scoring queues: one row per (release, agent, dimension) with item counts
    ``{release, agent, dimension, total, done, claimed, open, gold}`` (one query). ``by_agent``
    False (what a scorer is shown, ``evaluation.blind.sees_queue_agents``): one row per (release,
    dimension), ``agent`` None."""
    now = timezone.now()
    active = Q(verdict__isnull=True, scorer__isnull=False, lease_expires_at__gt=now)
    keys = ["record__run__release__version", *(["record__run__agent__name"] if by_agent else []), "record__dimension"]
    rows = (ScoringItem.objects.values(*keys)
            .annotate(total=Count("id"), done=Count("id", filter=Q(verdict__isnull=False)),
                      claimed=Count("id", filter=active), gold=Count("id", filter=Q(is_gold_check=True)))
            .order_by(*keys))
    return [{"release": r["record__run__release__version"], "agent": r.get("record__run__agent__name"),
             "dimension": r["record__dimension"], "total": r["total"], "done": r["done"], "claimed": r["claimed"],
             "open": r["total"] - r["done"] - r["claimed"], "gold": r["gold"]} for r in rows]


def records_scored_by(user) -> set[int]:
    """Ids of the records ``user`` gave a person verdict on or holds a queue slot of (one query):
    the records they may not adjudicate."""
    mine = Verdict.objects.filter(annotator=user, source=Verdict.Source.HUMAN, is_final=False).values_list("record_id", flat=True)
    slots = ScoringItem.objects.filter(scorer=user).values_list("record_id", flat=True)
    return set(mine.order_by().union(slots.order_by()))


def scorer_progress(user, queue) -> dict:
    """Where ``user`` stands in ``queue`` (a :class:`evaluation.services.queue.QueueFilter`):
    ``{done, revisable, left, position, of, slots, slots_done}`` — ``done`` items they submitted
    here (``revisable`` of them not final yet), ``left`` open records the queue would still hand
    them (``evaluation.services.queue.claim_next``'s exclusions: not the one they hold, nor a record
    they held a slot of, gave a verdict on or were shown the other verdicts of), ``position``/``of`` the "n of m" of the item in hand
    (``done + 1`` of ``done + held + left``), ``slots``/``slots_done`` the queue's totals.
    Three queries."""
    now = timezone.now()
    items = queue.apply(ScoringItem.objects.all())
    mine = items.filter(scorer=user)
    done = mine.filter(verdict__isnull=False).count()
    revisable = mine.filter(verdict__isnull=False, verdict__sealed_at__isnull=True).count()
    held = mine.filter(verdict__isnull=True).count()
    taken = ScoringItem.objects.filter(scorer=user).values("record_id")
    left = (items.filter(verdict__isnull=True).filter(Q(scorer__isnull=True) | Q(lease_expires_at__lte=now))
            .exclude(record_id__in=taken)
            .exclude(record_id__in=Verdict.objects.filter(annotator=user, source=Verdict.Source.HUMAN).values("record_id"))
            .exclude(record_id__in=VerdictsSeen.objects.filter(user=user).values("record_id"))
            .values("record_id").distinct().count())
    totals = items.aggregate(slots=Count("id"), slots_done=Count("id", filter=Q(verdict__isnull=False)))
    return {"done": done, "revisable": revisable, "left": left, "position": done + 1, "of": done + held + left,
            "held": held, **totals}


def my_queue_verdicts(user, queue, limit: int = 200) -> list[ScoringItem]:
    """The items ``user`` submitted in ``queue``, newest first, with record and verdict (one query)."""
    return list(queue.apply(ScoringItem.objects.filter(scorer=user, verdict__isnull=False))
                .select_related("record__run__agent", "verdict").order_by("-verdict__id")[:limit])


def scoring_item_qs():
    return ScoringItem.objects.select_related("record__run__agent", "record__task__head", "scorer")


def scorer_accuracy() -> list[dict]:
    """Each scorer's accuracy on silent gold checks: ``{scorer, n, correctness, grade_mae,
    flags_exact}`` (shares in [0, 1]; None without data), by scorer name (one query)."""
    items = (ScoringItem.objects.filter(is_gold_check=True, verdict__isnull=False)
             .select_related("verdict", "scorer").order_by("scorer__username", "id"))
    by: dict[str, list] = {}
    for it in items:
        by.setdefault(it.scorer.username if it.scorer else "?", []).append(it)
    out = []
    for name, its in by.items():
        corr, gd, fl = [], [], []
        for it in its:
            exp, v = it.expected or {}, it.verdict
            corr.append(1.0 if exp.get("is_correct") == v.is_correct else 0.0)
            if exp.get("grade") is not None and v.grade is not None:
                gd.append(abs(exp["grade"] - v.grade))
            ef = {c for c in E_CODES if (exp.get("errors") or {}).get(c)}
            vf = {c for c in E_CODES if (v.errors or {}).get(c)}
            fl.append(1.0 if ef == vf else 0.0)
        out.append({"scorer": name, "n": len(its), "correctness": sum(corr) / len(corr),
                    "grade_mae": sum(gd) / len(gd) if gd else None, "flags_exact": sum(fl) / len(fl)})
    return out
