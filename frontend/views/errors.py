"""The styled error pages: a 403 that says which role the page needs (``studio.permissions``)."""
from __future__ import annotations

from django.shortcuts import render

from studio.permissions import ROLES, roles_for, user_roles


def permission_denied(request, exception=None):
    """``handler403``: the action refused, the roles that have it, the user's own roles.

    ``exception`` is the ``PermissionDenied`` raised by ``studio.permissions.require`` (it carries
    ``action`` and ``roles``), or any other one (then only its message is shown).
    """
    action = getattr(exception, "action", None)
    roles = getattr(exception, "roles", None) or (roles_for(action) if action else [])
    mine = sorted(user_roles(request.user), key=ROLES.index) if request.user.is_authenticated else []
    return render(request, "frontend/403.html", {
        "action": action, "needed_roles": roles, "my_roles": mine, "message": str(exception or ""),
    }, status=403)
