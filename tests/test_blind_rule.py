"""Blind scoring is one rule (``evaluation.blind``), asked by every page, template, API endpoint,
CSV and plot: a person blind on a record (a verdict of theirs not yet final, a queue slot they hold,
or no ``verdict.view_all``) is shown no verdict of it, no judge outcome (robustness outcomes the
judge decided included) and not the agent that produced it. A person who was shown them never
becomes one of its raters; an adjudicated verdict is the reference, never a rater.

The walk enumerates the URL conf (every page and ``/api/...`` route, the CSV, parquet and plot
endpoints), fills each route's parameters with the ids of the records, run, items, verdicts,
adjudication and judge job made here, GETs it as the blind person, and looks for markers that only
the hidden things carry (unique reasoning texts, the judge's name, the agent's name beside a blind
record). Setup shortcuts: the judge's verdicts are written directly (no judge is called), as is the
robustness outcome the judge decided (``evaluation.robustness.settle_by_judge``, what
``manage.py judge_robustness`` stores).
"""
from __future__ import annotations

import re

import pytest
from conftest import SCORING_EXAMPLES, needs_shared
from django.urls import URLPattern, URLResolver, get_resolver

from evaluation import blind
from evaluation.agreement import agreement_report
from evaluation.blind import NotBlind
from evaluation.models import JudgeConfig, JudgeJob, RunRecord, ScoringItem, Verdict, VerdictsSeen
from evaluation.robustness import record_robustness, settle_by_judge
from evaluation.selectors.runs import record_detail_qs
from evaluation.selectors.verdicts import agreement_rows
from evaluation.services.adjudication import adjudicate
from evaluation.services.queue import QueueError, claim_item, claim_next, enqueue_records, submit_item
from evaluation.services.verdicts import submit_human_verdict

AGENT = "agent-SECRET-model"
CODES = ("E1", "E2", "E3", "E4", "E5", "E6")
#: a variant task's record the rule could not decide: an unsolvable variant, a refusal beside a value
UNS = {"kind": "unsolvable", "params": {"strategy": "visual_inaccessible"}}


def flags(*on: str) -> dict:
    return {c: c in on for c in CODES}


@pytest.fixture
def world(db, make_user, maintainer):
    """agent-SECRET-model's run (12 records); r0 with ana's final verdict and the judge's; r1 a
    robustness record the judge settled (Pass); r2 adjudicated by rita; sam (a scorer) holds a slot
    of r0 and has no verdict anywhere; rex (a reviewer) holds a slot of r0 too."""
    from evaluation.services.runs import import_run_dir

    run = import_run_dir(maintainer, needs_shared(SCORING_EXAMPLES / "runs" / "agent_a"), AGENT, tasks_dir=needs_shared(SCORING_EXAMPLES / "tasks"))
    r0, r1, r2 = list(run.records.order_by("id")[:3])
    enqueue_records(maintainer, [r0, r1, r2], 3)
    ana, bo, rita = make_user("ana", "scorer"), make_user("bo", "scorer"), make_user("rita", "reviewer")
    submit_item(ana, claim_item(ana, ScoringItem.objects.get(record=r0, slot=1)), errors=flags("E4"), grade=0.6,
                reasoning="ANA-R0-REASONING")
    judge = dict(source=Verdict.Source.JUDGE, judge_name="judge-SECRET@holistic_v1", prompt_version="holistic_v1",
                 status="ok")
    Verdict.objects.create(record=r0, reasoning="JUDGE-R0-REASONING", is_correct=True, grade=1.0, errors=flags(), **judge)
    jv = Verdict.objects.create(record=r1, reasoning="JUDGE-R1-REASONING", is_correct=True, grade=1.0, errors=flags(),
                                setting="unsolvable", **judge)
    rob = record_robustness(UNS, [], {"answer": "REJECT", "n": 4}, {})
    RunRecord.objects.filter(pk=r1.pk).update(robustness=settle_by_judge(rob, outcome=None, is_correct=True, verdict_id=jv.pk),
                                              has_robustness=True)
    submit_human_verdict(ana, r2, errors=flags(), grade=1.0, reasoning="ANA-R2-REASONING")
    submit_human_verdict(bo, r2, errors=flags("E2"), grade=0.2, reasoning="BO-R2-REASONING")
    adjudicate(rita, r2, errors=flags("E2"), grade=0.4, rationale="RITA-R2-RATIONALE")
    sam, rex = make_user("sam", "scorer"), make_user("rex", "reviewer")
    claim_item(sam, ScoringItem.objects.get(record=r0, slot=2))
    claim_item(rex, ScoringItem.objects.get(record=r0, slot=3))
    cfg = JudgeConfig.objects.create(name="local", base_url="http://127.0.0.1:9/v1", model="judge-m")
    job = JudgeJob.objects.create(config=cfg, record_ids=[r0.pk], total=1)
    for r in (r0, r1, r2):
        r.refresh_from_db()
    return {"run": run, "r0": r0, "r1": r1, "r2": r2, "sam": sam, "rex": rex, "rita": rita, "ana": ana, "bo": bo,
            "judge_verdict": jv, "job": job}


# --------------------------------------------------------------------------------------------
# The walk
# --------------------------------------------------------------------------------------------

_PARAM = re.compile(r"<(?:(\w+):)?(\w+)>|\(\?P<(\w+)>[^)]*\)")


def _routes(patterns=None, prefix: str = "") -> list[str]:
    """Every route of the URL conf as a path template (``records/<int:pk>/``, regex groups as
    ``<name>``), less the admin site and the static files."""
    out = []
    for p in get_resolver().url_patterns if patterns is None else patterns:
        text = str(p.pattern).lstrip("^").rstrip("$").replace("\\", "")
        if isinstance(p, URLResolver):
            if text.startswith("admin"):
                continue
            out += _routes(p.url_patterns, prefix + text)
        elif isinstance(p, URLPattern):
            out.append(prefix + text)
    return sorted(set(out))


def _fill(route: str, ints: list[int], strs: list[str]) -> list[str]:
    """The route with each parameter replaced by every candidate value (ints for int and
    unnamed converters, strs for str and regex groups), at most two parameters varied."""
    names = _PARAM.findall(route)
    if not names:
        return ["/" + route]
    paths = [route]
    for conv, name, _group in names:
        values = [str(i) for i in ints] if conv == "int" or name in ("pk", "job", "layer_id") else strs
        if conv == "slug":
            values = ["no-such-event"]
        nxt = []
        for p in paths:
            m = _PARAM.search(p)
            nxt += [p[:m.start()] + v + p[m.end():] for v in values]
        paths = nxt[:400]
    return ["/" + p for p in paths]


def _walk(client, world) -> dict[str, str]:
    """GET every route with the world's ids as the logged-in person: ``{path: text}`` of the text
    answers (HTML, JSON, CSV); binary ones (PNG, parquet) are fetched too (a 500 fails) but not read."""
    ids = {world["r0"].pk, world["r1"].pk, world["r2"].pk, world["run"].pk, world["job"].pk, world["judge_verdict"].pk,
           *ScoringItem.objects.filter(record__in=[world["r0"], world["r1"]]).values_list("pk", flat=True)}
    strs = ["correctness", "flags", "grade", "leaderboard", "dimensions", "e_codes", "1.0.0"]
    skip = ("accounts/logout/",)
    seen = {}
    routes = _routes()
    assert any(r.startswith("api/records/") for r in routes) and "leaderboard.csv" in routes  # the conf was read
    for route in routes:
        if route in skip or route.startswith("tiles/"):
            continue  # (map tiles carry no record)
        for path in _fill(route, sorted(ids), strs):
            r = client.get(path)
            assert r.status_code < 500, (path, r.status_code)
            if r.status_code != 200:
                continue
            kind = r.get("Content-Type", "")
            if any(t in kind for t in ("html", "json", "csv", "text")):
                body = b"".join(r.streaming_content) if getattr(r, "streaming", False) else r.content
                seen[path] = body.decode("utf-8", "replace")
    return seen


def _leaks(pages: dict[str, str], markers: list[str], blind_records: list[RunRecord]) -> list[str]:
    out = [f"{path}: {m}" for path, text in pages.items() for m in markers if m in text]
    for path, text in pages.items():
        if AGENT not in text:
            continue
        for r in blind_records:
            if f"/records/{r.pk}/" in text or r.question_id in text:
                out.append(f"{path}: the agent beside blind record {r.question_id}")
    return out


@pytest.mark.django_db
def test_a_blind_scorer_finds_no_verdict_outcome_or_agent_on_any_page_or_endpoint(world, client):
    client.force_login(world["sam"])  # a scorer: blind on every record (no verdict of his is final)
    pages = _walk(client, world)
    assert f"/records/{world['r0'].pk}/" in pages and f"/api/records/{world['r1'].pk}/" in pages
    assert f"/runs/{world['run'].pk}/" in pages and "/scoring/" in pages and "/leaderboard.csv" in pages
    markers = ["ANA-R0-REASONING", "JUDGE-R0-REASONING", "JUDGE-R1-REASONING", "ANA-R2-REASONING", "BO-R2-REASONING",
               "RITA-R2-RATIONALE", "judge-SECRET", "by the judge", f"verdict {world['judge_verdict'].pk}"]
    assert _leaks(pages, markers, list(world["run"].records.all())) == []
    # what was hidden is said: the record page, the API, the run page
    r1 = pages[f"/records/{world['r1'].pk}/"]
    assert 'id="robustness-hidden"' in r1 and 'id="agent-hidden"' in r1
    api = client.get(f"/api/records/{world['r0'].pk}/").json()
    assert api["verdicts"] == [] and api["verdicts_hidden"] == 2 and api["run"] is None and api["agent"] is None
    run = client.get(f"/api/runs/{world['run'].pk}/").json()
    assert run["records"] == [] and run["records_blind"] == 12
    # he was shown nothing, so nothing was noted: the queue still hands him what it would
    assert not VerdictsSeen.objects.filter(user=world["sam"]).exists()


@pytest.mark.django_db
def test_a_reviewer_holding_a_slot_is_blind_on_that_record_only(world, client):
    rex, r0 = world["rex"], world["r0"]
    client.force_login(rex)
    pages = _walk(client, world)
    assert _leaks(pages, ["ANA-R0-REASONING", "JUDGE-R0-REASONING"], [r0]) == []
    # the records he is not blind on are shown whole (view_all): the judge's robustness outcome too
    assert "JUDGE-R1-REASONING" in pages[f"/records/{world['r1'].pk}/"]
    assert f"by the judge, verdict {world['judge_verdict'].pk}" in pages[f"/records/{world['r1'].pk}/"]
    assert AGENT in pages[f"/records/{world['r1'].pk}/"]
    assert not VerdictsSeen.objects.filter(user=rex, record=r0).exists()


# --------------------------------------------------------------------------------------------
# The rule's parts
# --------------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_rule_by_case(world):
    """Hand-worked from the rule: sam (scorer, slot of r0) blind on all; rex (reviewer, slot of r0)
    blind on r0 only; ana (final verdict of r0, final verdict of r2) sees r0 and r2, blind on r1;
    rita (reviewer, adjudicated r2, nothing held) sees all."""
    recs = [world["r0"], world["r1"], world["r2"]]
    ids = [r.pk for r in recs]
    for name, expected in (("sam", set(ids)), ("rex", {ids[0]}), ("ana", {ids[1]}), ("rita", set())):
        user = world[name]
        assert blind.blind_record_ids(user, ids) == expected, name
        fresh = [record_detail_qs().get(pk=pk) for pk in ids]
        assert {r.pk for r in fresh if not blind.sees_verdicts(user, r)} == expected, name
        assert {r.pk for r in fresh if blind.agent_name(user, r) is None} == expected, name
    r1 = record_detail_qs().get(pk=ids[1])
    masked = blind.robustness_for(world["sam"], r1)
    assert masked["hidden"] and "outcome" not in masked and "judge_verdict" not in masked and masked["kind"] == "unsolvable"
    assert blind.robustness_for(world["rita"], r1)["outcome"] == "Pass"


@pytest.mark.django_db
def test_judge_settled_robustness_record_page_counts_as_seen_and_the_claim_is_refused(world, client):
    """Item: a robustness record the judge settled. The blind scorer is shown no outcome and may
    claim it; a reviewer who was shown the judge's outcome (record page or run page) is refused the
    claim with the reason, and the queue passes the record by."""
    r1 = world["r1"]
    client.force_login(world["bo"])  # a scorer without a verdict of r1
    page = client.get(f"/records/{r1.pk}/").content.decode()
    assert "by the judge" not in page and "Pass" not in page.split('id="robustness"')[1].split("</section>")[0]
    assert claim_item(world["bo"], ScoringItem.objects.get(record=r1, slot=1)).scorer_id == world["bo"].pk

    from studio.accounts import upsert_user

    vic = upsert_user("vic", "pw-test-123", ["reviewer"])
    client.force_login(vic)
    run_page = client.get(f"/runs/{world['run'].pk}/").content.decode()
    assert "(judge)" in run_page  # the robustness table showed him the judge's outcome of r1
    assert VerdictsSeen.objects.get(user=vic, record=r1).via == "run page"
    with pytest.raises(QueueError, match="you cannot score it blind"):
        claim_item(vic, ScoringItem.objects.get(record=r1, slot=2))
    r = client.post("/api/scoring/claim/", {"item": ScoringItem.objects.get(record=r1, slot=2).pk},
                    content_type="application/json")
    assert r.status_code == 409 and "saw the other verdicts" in r.json()["detail"]
    item = claim_next(vic)
    assert item is None or item.record_id != r1.pk
    # the verdict endpoint refuses him too
    r = client.post(f"/api/records/{r1.pk}/verdicts/", {"errors": flags(), "grade": 1.0}, content_type="application/json")
    assert r.status_code == 409 and r.json()["blind"] is False


@pytest.mark.django_db
def test_peek_then_score_is_refused_and_the_peeker_is_no_rater(world, client):
    """Item: a reviewer reads every verdict through the API, then posts a final verdict: 409 with
    the reason; agreement's raters of the record stay ana and the judge."""
    r0 = world["r0"]
    from studio.accounts import upsert_user
    pia = upsert_user("pia", "pw-test-123", ["reviewer"])
    client.force_login(pia)
    got = client.get(f"/api/records/{r0.pk}/").json()
    assert {v["reasoning"] for v in got["verdicts"]} == {"ANA-R0-REASONING", "JUDGE-R0-REASONING"}
    r = client.post(f"/api/records/{r0.pk}/verdicts/", {"errors": flags(), "grade": 1.0, "final": True},
                    content_type="application/json")
    assert r.status_code == 409, r.content
    body = r.json()
    assert body["code"] == "conflict" and body["blind"] is False and "you cannot score it blind" in body["detail"]
    assert "record API" in body["detail"]
    with pytest.raises(NotBlind):
        submit_human_verdict(pia, r0, errors=flags(), grade=1.0)
    assert not Verdict.objects.filter(record=r0, annotator=pia).exists()
    raters = {r["annotator"] for r in agreement_rows() if r["run_id"] == f"{r0.pk}:holistic"}
    assert raters == {"ana", "judge-SECRET"}
    # the record page's form says so as well
    page = client.get(f"/records/{r0.pk}/").content.decode()
    assert "you cannot score it blind" in page


@pytest.mark.django_db
def test_re_adjudication_keeps_the_first_adjudicator_out_of_the_raters(world, maintainer):
    """Item: rita adjudicated r2 (E2, 0.4); mia adjudicates it again (no flag, 1.0). Rita's verdict
    stays an adjudicated one (is_final), never her person verdict; agreement's raters of r2 are ana
    and bo (their final verdicts), the reference is mia's newest final verdict only."""
    r2, rita = world["r2"], world["rita"]
    first = Verdict.objects.get(record=r2, annotator=rita)
    adjudicate(maintainer, r2, errors=flags(), grade=1.0, rationale="second look")
    first.refresh_from_db()
    assert first.is_final and not blind.is_rater(first)
    assert blind.own_verdict(rita, record_detail_qs().get(pk=r2.pk)) is None
    rows = [r for r in agreement_rows() if r["run_id"] == f"{r2.pk}:holistic"]
    assert sorted(r["annotator"] for r in rows if not r.get("final")) == ["ana", "bo"]
    assert [(r["annotator"], r["grade"]) for r in rows if r.get("final")] == [("mia (final)", 1.0)]
    report = agreement_report(agreement_rows())
    assert not any(x["rater"].startswith("rita") for x in report["vs_reference"])
    # and rita can adjudicate it again herself (she is no scorer of it)
    adj = adjudicate(rita, r2, errors=flags("E2"), grade=0.4, rationale="back to E2")
    assert adj.final_verdict.is_final


@pytest.mark.django_db
def test_a_scorer_queue_names_no_agent_and_counts_what_it_will_hand_out(world, client):
    """Hand-worked: the queue has slots of r0, r1, r2 (3 each). Sam holds r0's slot 2; r2 is
    adjudicated but its slots are open; he was shown r1's verdicts (noted): the queue will hand him
    r2 only, so the item page says 1 more record waits — and the next claims agree."""
    sam = world["sam"]
    client.force_login(sam)
    home = client.get("/scoring/").content.decode()
    assert AGENT not in home and "<th>Agent</th>" not in home
    item = ScoringItem.objects.get(scorer=sam, verdict__isnull=True)
    VerdictsSeen.objects.create(user=sam, record=world["r1"], via="record page")
    page = client.get(f"/scoring/items/{item.pk}/").content.decode()
    assert AGENT not in page
    assert "1 more record waits for you" in page
    # an agent filter from a scorer is ignored (the queue by agent would name the agent)
    assert client.get(f"/scoring/next/?agent={AGENT}").content.decode().count(AGENT) == 0
    submit_item(sam, item, errors=flags(), grade=1.0, seal=False)
    nxt = claim_next(sam)
    assert nxt is not None and nxt.record_id == world["r2"].pk
    done = client.get("/scoring/done/").content.decode()
    assert AGENT not in done and "hidden until final" in done  # his r0 verdict is still revisable
    # a queue manager sees the agent column
    client.force_login(world["rita"])
    assert "<th>Agent</th>" in client.get("/scoring/").content.decode()


@pytest.mark.django_db
def test_the_leaderboard_robustness_tables_leave_out_the_records_a_viewer_scores_blind(world, client, maintainer):
    """The unsolvable pass rate per agent and strategy over r1 alone is the judge's Pass on r1:
    sam (blind on it) is shown the tables without it and told so; a maintainer sees it."""
    client.force_login(world["sam"])
    html = client.get("/leaderboard/").content.decode()
    assert 'id="robustness-blind"' in html and "1 variant record you score blind is left out" in html
    section = html[html.index('<section id="robustness">'):html.index("</section>", html.index('<section id="robustness">'))]
    assert AGENT not in section
    client.force_login(maintainer)
    html = client.get("/leaderboard/").content.decode()
    section = html[html.index('<section id="robustness">'):html.index("</section>", html.index('<section id="robustness">'))]
    assert 'id="robustness-blind"' not in html and AGENT in section
