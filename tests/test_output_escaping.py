"""User text in generated files: matplotlib labels and leaderboard CSV cells
(docs/security.md). The hostile names are those found in the attack: ``x$\\undefinedcmd{$y`` (an agent or
model name) broke every leaderboard and agreement plot; ``=HYPERLINK(...)`` went into the CSV as a
formula."""
from __future__ import annotations

import csv
import io

import pytest

from evaluation import leaderboard as lb

MATH = r"x$\undefinedcmd{$y"
FORMULA = '=HYPERLINK("http://evil.example/","click")'


def _row(label: str) -> dict:
    return {"label": label, "agent": label, "dims": {"t1": 0.5, "t2": None, "t3": 1.0, "t4": 0.0, "t5": 0.25},
            "avg": 0.4375}


def test_raw_mathtext_label_does_break_a_figure():
    """The reproduction (matplotlib's behaviour): the raw name as a label fails at render time. If
    this ever passes, matplotlib stopped parsing mathtext and plot_text is moot, not wrong."""
    fig = lb._figure()
    ax = fig.add_subplot()
    ax.bar([0], [1], label=MATH)
    ax.legend()
    with pytest.raises(ValueError):
        lb.figure_png(fig)


@pytest.mark.parametrize("name", [MATH, "$$", "cost $5 and $6", "\\$", "plain"])
def test_every_leaderboard_plot_renders_with_hostile_names(name):
    png = lb.plot_dimensions([_row(name), _row("gold")])
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    groups = ["1-3", name]
    cells = [{"group": g, "acc": 0.5, "n": 2} for g in groups]
    breakdown = {"groups": groups, "rows": [{"run_id": 1, "label": name, "agent": name, "mode": "m", "cells": cells}]}
    assert lb.plot_length(breakdown)[:4] == b"\x89PNG"
    assert lb.plot_modality(breakdown)[:4] == b"\x89PNG"


def test_plot_text_escapes_each_dollar():
    # matplotlib's documented literal dollar: \$ (two escapes for the two dollars of the name)
    assert lb.plot_text(MATH) == r"x\$\undefinedcmd{\$y"


@pytest.mark.django_db
def test_agreement_plot_renders_with_a_hostile_rater_name(client, make_user, monkeypatch):
    from frontend.views import scoring as views_scoring

    rows = [{"rater": MATH, "n": 3, "correctness": {"agreement": 1.0, "kappa": 0.5},
             "flags": {c: {"f1": 0.5} for c in views_scoring.E_CODES},
             "grade": {"mae": 0.1, "within_0_2": 1.0}}]
    monkeypatch.setattr(views_scoring, "_report", lambda request: ({"vs_reference": rows}, None))
    client.force_login(make_user("rita", "reviewer"))
    for name in ("correctness", "flags", "grade"):
        r = client.get(f"/agreement/plots/{name}.png")
        assert r.status_code == 200 and r.content[:4] == b"\x89PNG", name


def test_csv_cells_that_start_a_formula_are_escaped():
    """OWASP CSV injection: = + - @ (and tab, CR) at the start of a text cell get an apostrophe;
    numbers (a negative value) stay numbers."""
    rows = [{"record_id": 1, "run_id": 1, "agent": FORMULA, "run_name": "+1", "mode": "-x", "dimension": "t1",
             "question_id": "@SUM(A1)", "task_score": -0.5, "modality": "\tcmd"},
            {"record_id": 2, "run_id": 1, "agent": "gold", "run_name": "a=b", "mode": "m", "dimension": "t2",
             "question_id": "q2", "task_score": 1.0}]
    out = list(csv.DictReader(io.StringIO(lb.to_csv_bytes(rows).decode("utf-8"))))
    assert out[0]["agent"] == "'" + FORMULA
    assert (out[0]["run_name"], out[0]["mode"], out[0]["question_id"], out[0]["modality"]) == (
        "'+1", "'-x", "'@SUM(A1)", "'\tcmd")
    assert out[0]["task_score"] == "-0.5"  # a number: not touched
    assert (out[1]["agent"], out[1]["run_name"]) == ("gold", "a=b")  # '=' inside a cell is harmless
