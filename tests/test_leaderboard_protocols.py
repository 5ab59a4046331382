"""The paper's other analyses — AP→IF deltas (Table 5) and per scaffold accuracy,
T-EM, ParAcc and latency per task (Table 6). Hand-made runs; values worked out in the comments."""
from __future__ import annotations

import json
import shutil

import pytest
from conftest import SCORING_EXAMPLES, needs_shared

from evaluation import leaderboard as lb


def _run(rid, agent, protocol="", scaffold="", avg=0.5, t_em=0.5, par_acc=0.5):
    metrics = {"t_any": 1.0, "t_ord": 0.8, "t_em": t_em, "par_acc": par_acc, "eff": 1.0}
    return {"run_id": rid, "agent": agent, "run_name": f"r{rid}", "mode": "dora", "dora_score": avg,
            "dimensions": {"t1": {"dim_score": avg, "n_tasks": 1, **metrics}}, "protocol": protocol, "scaffold": scaffold}


def test_protocol_deltas_are_if_minus_ap_of_the_newest_runs():
    runs = [_run(1, "m", "AP", avg=0.30), _run(2, "m", "AP", avg=0.50, t_em=0.4),  # run 2 is m's newest AP
            _run(3, "m", "IF", avg=0.70, t_em=0.9), _run(4, "solo", "AP")]  # solo has no IF run: left out
    out = lb.protocol_deltas(runs)
    assert [d["agent"] for d in out] == ["m"]
    d = out[0]
    assert (d["ap"]["run_id"], d["if"]["run_id"]) == (2, 3)
    assert d["delta"]["avg"] == pytest.approx(0.20) and d["delta"]["t_em"] == pytest.approx(0.5)  # 0.9 - 0.4
    assert d["delta"]["t_any"] == 0.0


def test_scaffold_table_means_and_latency_per_task():
    runs = [_run(1, "a", scaffold="ReAct", avg=0.4, par_acc=0.2), _run(2, "b", scaffold="ReAct", avg=0.6, par_acc=0.6),
            _run(3, "c", scaffold="ReWOO", avg=0.9), _run(4, "d")]  # no scaffold: left out
    rows = [{"run_id": rid, "dimension": "t1", "elapsed_s": e} for rid, e in ((1, 10.0), (2, 20.0), (2, None), (3, None))]
    by = {t["scaffold"]: t for t in lb.scaffold_table(runs, rows)}
    assert set(by) == {"ReAct", "ReWOO"}
    # ReAct: accuracy (0.4 + 0.6) / 2 = 0.5, ParAcc (0.2 + 0.6) / 2 = 0.4, latency (10 + 20) / 2 = 15 s (the
    # record without elapsed_time is left out); ReWOO: no timed record -> no data, not 0
    assert by["ReAct"]["avg"] == pytest.approx(0.5) and by["ReAct"]["par_acc"] == pytest.approx(0.4)
    assert by["ReAct"]["latency_s"] == pytest.approx(15.0) and by["ReAct"]["n_timed"] == 2
    assert by["ReWOO"]["latency_s"] is None and by["ReWOO"]["n_runs"] == 1
    assert lb.plot_scaffolds(lb.scaffold_table(runs, rows))[:4] == b"\x89PNG"
    assert lb.plot_protocols([])[:4] == b"\x89PNG"


@pytest.mark.django_db
def test_import_keeps_elapsed_time_and_the_page_shows_both_tables(tmp_path, maintainer, client):
    from evaluation.services.runs import import_run_dir

    src = needs_shared(SCORING_EXAMPLES / "runs" / "agent_a")
    for proto, secs in (("AP", 12.5), ("IF", 7.5)):
        d = tmp_path / f"gpt_{proto}"
        shutil.copytree(src, d)
        f = d / "t3_operational_planning" / "benchmark.jsonl"
        recs = [json.loads(x) for x in f.read_text().splitlines() if x.strip()]
        for r in recs:
            r["elapsed_time"] = secs
        recs[0]["elapsed_time"] = "n/a"  # not a number: no time, not 0
        f.write_text("\n".join(json.dumps(r) for r in recs) + "\n")
        run = import_run_dir(maintainer, d, "gpt", tasks_dir=needs_shared(SCORING_EXAMPLES / "tasks"), scaffold="ReAct")
        assert run.protocol == proto
        assert sorted(run.records.filter(dimension="t3").values_list("elapsed_s", flat=True), key=str) == [secs, secs, None]
    client.force_login(maintainer)
    html = client.get("/leaderboard/").content.decode()
    table = html[html.index('id="protocol-table"'):html.index("</table>", html.index('id="protocol-table"'))]
    assert "<td>gpt</td>" in table and "+0.00" in table  # the same answers under both protocols: no delta
    scaffold = html[html.index('id="scaffold-table"'):html.index("</table>", html.index('id="scaffold-table"'))]
    assert "ReAct" in scaffold and "10.0" in scaffold and "(n=4)" in scaffold  # (12.5·2 + 7.5·2) / 4 = 10 s
    for name in ("protocols", "scaffolds"):
        assert client.get(f"/leaderboard/plot/{name}.png").status_code == 200
