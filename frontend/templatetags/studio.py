"""Template filters of the studio's pages."""
import json

from django import template

register = template.Library()


@register.filter
def as_json(value, indent: int | None = None) -> str:
    """``value`` as JSON text (autoescaped by the template like any string)."""
    return json.dumps(value, indent=int(indent) if indent not in (None, "") else None, ensure_ascii=False, default=str)
