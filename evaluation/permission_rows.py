"""Permission rows the judge, scoring-queue, adjudication and agreement features need.

To be merged into :data:`studio.permissions.PERMISSIONS`; until then
:func:`ensure_rows` (used by this area's tests) appends the missing ones at run time.

| action | who | what it allows |
| --- | --- | --- |
| ``judge.run`` | maintainer | start judge jobs (page button, ``manage.py judge``) |
| ``judge.configure`` | maintainer | create, edit, pause and resume judge configurations |
| ``queue.manage`` | maintainer, reviewer | put runs into the scoring queue, add silent gold checks, see scorer accuracy |
| ``queue.claim`` | scorer, reviewer, maintainer | claim an item of the scoring queue and submit it |
| ``verdict.adjudicate`` | reviewer, maintainer | record the final verdict of a disagreement |
| ``verdict.view_all`` | reviewer, maintainer | see every verdict of a record before giving one's own |
| ``agreement.view`` | reviewer, maintainer | the agreement dashboard |
"""
from __future__ import annotations

from studio.permissions import Rule

RULES: tuple[Rule, ...] = (
    Rule("maintainer", "judge.run", "any"),
    Rule("maintainer", "judge.configure", "any"),
    Rule("maintainer", "queue.manage", "any"),
    Rule("reviewer", "queue.manage", "any"),
    Rule("scorer", "queue.claim", "any"),
    Rule("reviewer", "queue.claim", "any"),
    Rule("maintainer", "queue.claim", "any"),
    Rule("reviewer", "verdict.adjudicate", "any"),
    Rule("maintainer", "verdict.adjudicate", "any"),
    Rule("reviewer", "verdict.view_all", "any"),
    Rule("maintainer", "verdict.view_all", "any"),
    Rule("reviewer", "agreement.view", "any"),
    Rule("maintainer", "agreement.view", "any"),
)


def ensure_rows() -> None:
    """Append the rows of :data:`RULES` missing from the permission table (idempotent)."""
    from studio import permissions

    missing = tuple(r for r in RULES if r not in permissions.PERMISSIONS)
    if missing:
        permissions.PERMISSIONS = permissions.PERMISSIONS + missing
