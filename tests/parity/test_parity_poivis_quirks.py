"""The poi.*/vis.* section of the quirks list: every entry names a registered tool, the benchmark
file and function it follows at a commit, and a QC check that exists; docs/tool-parity.md has a
row for each; every poi/vis QC check id is named by a quirk or guards a former refusal."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from annotation import qc
from annotation.qc_tools import POI_AND_VIS_CHECKS
from replay.tools.quirks import _POI_AND_VIS, QUIRKS
from replay.tools.registry import all_tools

DOC = Path(__file__).resolve().parents[2] / "docs" / "tool-parity.md"
REFERENCE = re.compile(r"^dora/tools/(poi|vis)\.py:[A-Za-z_][A-Za-z0-9_]*@[0-9a-f]{40}$")


@pytest.mark.parametrize("quirk", _POI_AND_VIS, ids=lambda q: q.tool)
def test_quirk_entry_is_complete(quirk):
    assert quirk in QUIRKS
    assert quirk.tool in all_tools()
    assert REFERENCE.match(quirk.reference), quirk.reference
    assert quirk.behaviour and quirk.instead
    assert quirk.qc_check is None or quirk.qc_check in qc.CHECKS


def test_docs_table_has_a_row_per_quirk():
    text = DOC.read_text(encoding="utf-8")
    section = text.split("## poi.*, vis.*", 1)[1]
    rows = [ln for ln in section.splitlines() if ln.startswith("| `")]
    assert len(rows) == len(_POI_AND_VIS)
    for row, quirk in zip(rows, _POI_AND_VIS):
        assert row.startswith(f"| `{quirk.tool}` |") and quirk.reference.split("@")[0] in row


def test_poi_vis_checks_are_registered_with_a_severity():
    for check, (severity, meaning) in POI_AND_VIS_CHECKS.items():
        assert qc.CHECKS[check] == (severity, meaning) and severity in ("error", "warning")
        assert check.split(".")[0] in ("poi", "vis")


def test_report_wrap_follows_the_benchmark_rule():
    from replay.tools.vis import _wrap

    # greedy at 7 characters: "one two" (7) fits, "three" starts a line; a first word longer
    # than the width closes the (empty) current line first
    assert _wrap("one two three", 7) == ["one two", "three"]
    assert _wrap("abcdefghij k", 5) == ["", "abcdefghij", "k"]
