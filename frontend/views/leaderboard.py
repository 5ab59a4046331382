"""Leaderboard pages: the official Table 4 numbers with the runs' accounting (tokens, cost,
seconds of experiment runs), the paper's breakdowns, labelled extras, plots (PNG; the score
against cost as SVG) and the per-record exports (CSV, Parquet)."""
from __future__ import annotations

import hashlib
import json
from urllib.parse import urlencode

from django.core.cache import cache
from django.http import Http404, HttpResponse, StreamingHttpResponse
from django.shortcuts import render
from django.utils.text import slugify
from django.views.decorators.http import require_GET

from evaluation import blind
from evaluation import leaderboard as lb
from evaluation.selectors.leaderboard import compare_runs, iter_leaderboard_rows, leaderboard_records, leaderboard_rows
from evaluation.selectors.robustness import leaderboard_robustness
from evaluation.services.leaderboard import N_BOOT, SEED, current_bootstrap, leaderboard_of_set
from frontend.views.robustness import robustness_section

#: how long a rendered plot may be served; its key changes whenever the numbers it shows change
CACHE_SECONDS = 24 * 3600


def _tables(asked: str | None = None) -> tuple[list[dict], dict]:
    """The leaderboard of one gold set without its bootstrap (``evaluation.services.leaderboard.leaderboard_of_set``)."""
    return leaderboard_of_set(asked)


def _asked(request) -> str | None:
    """The gold set asked for by ``?set=<key>`` (None: the default)."""
    value = request.GET.get("set")
    return None if value is None else str(value)[:80]  # a digest (64 hex), or studio:<digest>


def _build(n_boot: int = N_BOOT, asked: str | None = None, viewer=None) -> dict:
    """The leaderboard of one gold set: the tables from the stored sums, the bootstrap intervals
    of its runs from their background computation (``bootstrap_status``: done, queued or failed)."""
    runs, data = _tables(asked)
    row = current_bootstrap(runs, n_boot, SEED)
    shown = {r["run_id"] for r in data["official"]}
    data["bootstrap_status"] = row.status if row is not None else "queued"
    data["bootstrap_error"] = row.error if row is not None else ""
    data["bootstrap"] = ([b for b in row.result or [] if b.get("run_id") in shown]
                         if data["bootstrap_status"] == "done" else [])
    # one query: records with a stored outcome, of the set's runs
    data["robustness"] = leaderboard_robustness([r for r in runs if r["run_id"] in shown], viewer=viewer)
    return data


def pct(value, signed: bool = False) -> str:
    """0.5374 → ``53.74`` (``+``/``−`` sign with ``signed``); None → ``no data`` (never 0)."""
    if value is None:
        return "no data"
    text = f"{100 * value:+.2f}" if signed else f"{100 * value:.2f}"
    return text.replace("-", "−")


def accounting_text(run: dict) -> dict:
    """A run's accounting (:data:`evaluation.leaderboard.ACCOUNTING`) as display strings:
    ``prompt_tokens_text`` and ``completion_tokens_text`` (integers, thin-space thousands: 1 200),
    ``cost_text`` (6 decimals), ``seconds_text`` (1 decimal); "" where the run has none (an
    imported run: blank, never 0)."""
    def tokens(v):
        return "" if v is None else f"{int(v):,}".replace(",", "\u202f")

    return {"prompt_tokens_text": tokens(run.get("prompt_tokens")),
            "completion_tokens_text": tokens(run.get("completion_tokens")),
            "cost_text": "" if run.get("cost") is None else f"{run['cost']:.6f}",
            "seconds_text": "" if run.get("seconds") is None else f"{run['seconds']:.1f}"}


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
    for r in official:
        r.update(accounting_text(r))
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
    """The leaderboard of one gold set (``?set=<key>``, default: the newest published release with
    runs): runs scored on other sets are never ranked with them."""
    data = _build(asked=_asked(request), viewer=request.user)
    return render(request, "frontend/leaderboard.html", {
        **data, **_display(data), "dimensions": [d.upper() for d in lb.DIMENSIONS],
        "metric_labels": [lb.METRIC_LABELS[m] for m in lb.METRICS], "plots": lb.PLOTS,
        "metric_help": [(lb.METRIC_LABELS[m], lb.METRIC_HELP[m]) for m in lb.METRICS], "min_n": lb.BOOTSTRAP_MIN_N,
        "cost_plot": lb.cost_points(data["official"]),
        "n_boot": N_BOOT, "seed": SEED, "robustness": robustness_section(data["robustness"], pct),
        "set_qs": "?" + urlencode({"set": data["gold_set"]["key"]}) if data["gold_set"] else "",
    })


def _set_of(request) -> tuple[dict | None, str]:
    """The asked (or default) gold set, None when there is none, and a file name naming it."""
    _runs, data = _tables(_asked(request))
    shown = data["gold_set"]
    if shown is None:
        return None, "leaderboard_records"
    return shown, "leaderboard_records_" + (slugify(shown["label"]) or "unnamed")[:80]


def _rows_of_set(request) -> tuple[list[dict], str]:
    """The per-record rows of the asked (or default) gold set and a file name naming it."""
    shown, name = _set_of(request)
    return ([] if shown is None else leaderboard_rows(gold_set=shown["key"])), name


@require_GET
def leaderboard_csv(request):
    """The per-record rows of one gold set (``?set=``; default as the page), each naming its set
    (column ``gold_set``), streamed in pieces (``evaluation.leaderboard.iter_csv_chunks``: the
    download starts at once, whatever the number of records); blind scoring: no record beside its
    agent for a person who must score it blind (``evaluation.blind.blind_filter``; header
    ``X-Studio-Blind-Rows`` counts them)."""
    shown, name = _set_of(request)
    hidden = blind.blind_filter(request.user)
    rows, n_hidden = iter(()), 0
    if shown is not None:
        rows = iter_leaderboard_rows(gold_set=shown["key"], exclude=hidden)
        n_hidden = leaderboard_records(gold_set=shown["key"]).filter(hidden).count()
    resp = StreamingHttpResponse(lb.iter_csv_chunks(rows), content_type="text/csv; charset=utf-8")
    resp["Content-Disposition"] = f'attachment; filename="{name}.csv"'
    resp["X-Studio-Blind-Rows"] = str(n_hidden)
    return resp


@require_GET
def leaderboard_parquet(request):
    rows, name = _rows_of_set(request)
    try:
        rows, hidden = blind.visible_rows(request.user, rows)  # blind scoring, as the CSV
        body = lb.to_parquet_bytes(rows)
    except ImportError:
        return HttpResponse("Parquet export needs pyarrow, which is not installed.", status=501,
                            content_type="text/plain; charset=utf-8")
    resp = HttpResponse(body, content_type="application/vnd.apache.parquet")
    resp["Content-Disposition"] = f'attachment; filename="{name}.parquet"'
    resp["X-Studio-Blind-Rows"] = str(hidden)
    return resp


@require_GET
def leaderboard_plot(request, name: str):
    if name not in lb.PLOTS:
        raise Http404(f"no plot {name!r}; plots: {', '.join(lb.PLOTS)}")
    _runs, data = _tables(_asked(request))
    label = data["gold_set"]["label"] if data["gold_set"] else ""
    shown = {"dimensions": "official", "length": "length", "modality": "modality", "protocols": "protocols",
             "scaffolds": "scaffolds"}[name]
    digest = hashlib.sha256(json.dumps([label, data[shown]], sort_keys=True, default=str).encode()).hexdigest()[:32]
    key = f"studio:leaderboard-plot:{name}:{digest}"
    png = cache.get(key)
    if png is None:
        if name == "dimensions":
            png = lb.plot_dimensions(data["official"], label)
        elif name == "length":
            png = lb.plot_length(data["length"], label)
        elif name == "modality":
            png = lb.plot_modality(data["modality"], label)
        elif name == "protocols":
            png = lb.plot_protocols(data["protocols"], label)
        else:
            png = lb.plot_scaffolds(data["scaffolds"], label)
        cache.set(key, png, CACHE_SECONDS)
    resp = HttpResponse(png, content_type="image/png")
    resp["Cache-Control"] = "no-store"
    return resp


@require_GET
def leaderboard_svg(request, name: str):
    """The SVG plots (:data:`evaluation.leaderboard.SVG_PLOTS`): ``cost``, the DORA score against
    the cost (tokens when a run has no price) of every run of the gold set that has accounting
    (:func:`evaluation.leaderboard.plot_cost`); cached like the PNG plots under a key of what it
    shows."""
    if name not in lb.SVG_PLOTS:
        raise Http404(f"no plot {name!r}; SVG plots: {', '.join(lb.SVG_PLOTS)}")
    _runs, data = _tables(_asked(request))
    label = data["gold_set"]["label"] if data["gold_set"] else ""
    shown = lb.cost_points(data["official"])
    digest = hashlib.sha256(json.dumps([label, shown], sort_keys=True, default=str).encode()).hexdigest()[:32]
    key = f"studio:leaderboard-svg:{name}:{digest}"
    svg = cache.get(key)
    if svg is None:
        svg = lb.plot_cost(data["official"], label)
        cache.set(key, svg, CACHE_SECONDS)
    resp = HttpResponse(svg, content_type="image/svg+xml; charset=utf-8")
    resp["Cache-Control"] = "no-store"
    resp["Content-Security-Policy"] = "default-src 'none'; style-src 'unsafe-inline'"
    return resp


def _pair(request) -> tuple[int, int] | None:
    """Run ids ``?a=`` and ``?b=`` (None when either is missing or not a number)."""
    try:
        return int(request.GET["a"]), int(request.GET["b"])
    except (KeyError, TypeError, ValueError):
        return None


@require_GET
def compare_page(request):
    """Two runs of one gold set side by side (``?a=<run id>&b=<run id>``): per dimension and
    overall the paired difference B - A with its paired bootstrap interval and the paired sign-flip
    permutation test (:mod:`evaluation.paired`, which cites both), a plot, and every task's win,
    loss or tie. Runs on different sets, modes or thresholds are refused (400, the reason shown)."""
    pair = _pair(request)
    data = compare_runs(*pair) if pair else {"error": "choose two runs (?a=<run id>&b=<run id>)"}
    status = 400 if "error" in data else 200
    if status == 200:
        for row in data["dims"] + [data["overall"]]:
            row["diff_pct"], row["a_pct"], row["b_pct"] = pct(row["diff"], signed=True), pct(row["mean_a"]), pct(row["mean_b"])
            row["ci_pct"] = f"[{pct(row['ci_lo'], signed=True)}, {pct(row['ci_hi'], signed=True)}]"
        for t in data["tasks"]:
            t["diff_pct"] = pct(t["diff"], signed=True)
    return render(request, "frontend/leaderboard_compare.html",
                  {"c": data, "pair_qs": urlencode({"a": pair[0], "b": pair[1]}) if pair else ""}, status=status)


@require_GET
def compare_plot(request):
    """The comparison's plot (PNG): :func:`evaluation.leaderboard.plot_paired`."""
    pair = _pair(request)
    data = compare_runs(*pair) if pair else {"error": "choose two runs"}
    if "error" in data:
        raise Http404(data["error"])
    resp = HttpResponse(lb.plot_paired(data, data["gold_set"]), content_type="image/png")
    resp["Cache-Control"] = "no-store"
    return resp
