"""``{% notification_bell %}``: the bell with the unread count, on every page (base template)."""
from __future__ import annotations

from django import template

from notifications.selectors import unread_count

register = template.Library()


@register.inclusion_tag("notifications/bell.html", takes_context=True)
def notification_bell(context):
    """The signed-in person's unread count (one ``COUNT`` query)."""
    return {"unread": unread_count(context["request"].user)}
