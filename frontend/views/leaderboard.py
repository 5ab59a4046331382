"""Leaderboard pages: the official Table 4 numbers, the paper's breakdowns, labelled extras,
plots (PNG) and the per-record exports (CSV, Parquet)."""
from __future__ import annotations

import hashlib
import json

from django.core.cache import cache
from django.http import Http404, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from evaluation import blind
from evaluation import leaderboard as lb
from evaluation.selectors_leaderboard import aggregated_runs, leaderboard_rows
from evaluation.selectors_robustness import leaderboard_robustness
from evaluation.services import refresh_run_aggregates
from evaluation.services_leaderboard import N_BOOT, SEED, current_bootstrap
from frontend.views.robustness import robustness_section

#: how long a rendered plot may be served; its key changes whenever the numbers it shows change
CACHE_SECONDS = 24 * 3600


def _tables() -> tuple[list[dict], dict]:
    """``(runs, tables)``: the leaderboard without its bootstrap, built from the runs' stored sums
    (made current first; see :func:`evaluation.services.refresh_run_aggregates`), never from the
    records."""
    runs, sums, state = aggregated_runs()
    if refresh_run_aggregates([r["run_id"] for r in runs], state):
        runs, sums, state = aggregated_runs()
    return runs, lb.build_from_aggregates(runs, sums)


def _build(n_boot: int = N_BOOT) -> dict:
    """The whole leaderboard: the tables from the stored sums, the bootstrap intervals from their
    background computation (``bootstrap_status``: done, queued or failed)."""
    runs, data = _tables()
    row = current_bootstrap(runs, n_boot, SEED)
    data["bootstrap_status"] = row.status if row is not None else "queued"
    data["bootstrap_error"] = row.error if row is not None else ""
    data["bootstrap"] = (row.result or []) if data["bootstrap_status"] == "done" else []
    data["robustness"] = leaderboard_robustness(runs)  # one query: records with a stored outcome
    return data


def pct(value, signed: bool = False) -> str:
    """0.5374 → ``53.74`` (``+``/``−`` sign with ``signed``); None → ``no data`` (never 0)."""
    if value is None:
        return "no data"
    text = f"{100 * value:+.2f}" if signed else f"{100 * value:.2f}"
    return text.replace("-", "−")


def _display(data: dict) -> dict:
    """Numbers of :func:`evaluation.leaderboard.build` as display strings (percent, 2 decimals)."""
    official = [{
        **r, "avg_pct": pct(r["avg"]), "dims_pct": [pct(r["dims"][d]) for d in lb.DIMENSIONS],
        "metrics_pct": [pct(r["metrics"][m]) for m in lb.METRICS],
    } for r in data["official"]]

    def breakdown(b: dict) -> dict:
        return {"groups": b["groups"], "rows": [{
            **row, "cells": [{**c, "acc_pct": pct(c["acc"]), "gap_pct": pct(c.get("gap"), signed=True),
                              "gold_pct": pct(c.get("gold"))} for c in row["cells"]],
        } for row in b["rows"]]}

    def ci(c) -> str:
        if c is None:
            return "no data"
        if c.get("too_small") or c.get("lo") is None:
            n = f"n = {c['n']}" if c.get("n") is not None else "a dimension"
            return f"{pct(c['mean'])} (n too small for an interval: {n} < {lb.BOOTSTRAP_MIN_N})" if c.get("n") is not None \
                else f"{pct(c['mean'])} (n too small in {n})"
        return f"{pct(c['mean'])} [{pct(c['lo'])}, {pct(c['hi'])}] (n = {c['n']})" if c.get("n") is not None \
            else f"{pct(c['mean'])} [{pct(c['lo'])}, {pct(c['hi'])}]"

    bootstrap = [{**b, "dims_ci": [ci(b["dims"][d]) for d in lb.DIMENSIONS], "macro_ci": ci(b["macro"])}
                 for b in data["bootstrap"]]
    extras = [{**e, "lcs_pct": pct(e["lcs_par_acc"]), "par_pct": pct(e["par_acc"]),
               "recall_pct": pct(e["multiset_recall"]), "extra_pct": pct(e["extraneous_rate"])}
              for e in data["traj_extras"]]
    gold_runs = [r["label"] for r in data["official"] if lb.is_gold(r)]
    protocols = [{**d, "ap_pct": pct(d["ap"]["avg"]), "if_pct": pct(d["if"]["avg"]),
                  "delta_pct": [pct(d["delta"][k], signed=True) for k in ("avg", *lb.METRICS)]}
                 for d in data.get("protocols", [])]
    scaffolds = [{**t, "avg_pct": pct(t["avg"]), "t_em_pct": pct(t["t_em"]), "par_acc_pct": pct(t["par_acc"]),
                  "latency": "no data" if t["latency_s"] is None else f"{t['latency_s']:.1f}"}
                 for t in data.get("scaffolds", [])]
    return {"official": official, "length": breakdown(data["length"]), "modality": breakdown(data["modality"]),
            "bootstrap": bootstrap, "traj_extras": extras, "gold_runs": gold_runs,
            "protocols": protocols, "scaffolds": scaffolds}


@require_GET
def leaderboard_page(request):
    data = _build()
    return render(request, "frontend/leaderboard.html", {
        **data, **_display(data), "dimensions": [d.upper() for d in lb.DIMENSIONS],
        "metric_labels": [lb.METRIC_LABELS[m] for m in lb.METRICS], "plots": lb.PLOTS,
        "metric_help": [(lb.METRIC_LABELS[m], lb.METRIC_HELP[m]) for m in lb.METRICS], "min_n": lb.BOOTSTRAP_MIN_N,
        "n_boot": N_BOOT, "seed": SEED, "robustness": robustness_section(data["robustness"], pct),
    })


@require_GET
def leaderboard_csv(request):
    rows, hidden = blind.visible_rows(request.user, leaderboard_rows())  # blind scoring: no record beside its agent
    resp = HttpResponse(lb.to_csv_bytes(rows), content_type="text/csv; charset=utf-8")
    resp["Content-Disposition"] = 'attachment; filename="leaderboard_records.csv"'
    resp["X-Studio-Blind-Rows"] = str(hidden)
    return resp


@require_GET
def leaderboard_parquet(request):
    try:
        rows, hidden = blind.visible_rows(request.user, leaderboard_rows())  # blind scoring, as the CSV
        body = lb.to_parquet_bytes(rows)
    except ImportError:
        return HttpResponse("Parquet export needs pyarrow, which is not installed.", status=501,
                            content_type="text/plain; charset=utf-8")
    resp = HttpResponse(body, content_type="application/vnd.apache.parquet")
    resp["Content-Disposition"] = 'attachment; filename="leaderboard_records.parquet"'
    resp["X-Studio-Blind-Rows"] = str(hidden)
    return resp


@require_GET
def leaderboard_plot(request, name: str):
    if name not in lb.PLOTS:
        raise Http404(f"no plot {name!r}; plots: {', '.join(lb.PLOTS)}")
    _runs, data = _tables()
    shown = {"dimensions": "official", "length": "length", "modality": "modality", "protocols": "protocols",
             "scaffolds": "scaffolds"}[name]
    digest = hashlib.sha256(json.dumps(data[shown], sort_keys=True, default=str).encode()).hexdigest()[:32]
    key = f"studio:leaderboard-plot:{name}:{digest}"
    png = cache.get(key)
    if png is None:
        if name == "dimensions":
            png = lb.plot_dimensions(data["official"])
        elif name == "length":
            png = lb.plot_length(data["length"])
        elif name == "modality":
            png = lb.plot_modality(data["modality"])
        elif name == "protocols":
            png = lb.plot_protocols(data["protocols"])
        else:
            png = lb.plot_scaffolds(data["scaffolds"])
        cache.set(key, png, CACHE_SECONDS)
    resp = HttpResponse(png, content_type="image/png")
    resp["Cache-Control"] = "no-store"
    return resp
