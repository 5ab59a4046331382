"""Small immutable value objects without ``dataclasses`` (pure, no Django).

``FrozenValue`` is the base of value classes on start-up paths: ``dataclasses`` imports
``inspect``, ``ast``, ``dis`` and ``tokenize`` (about 9 ms of ``manage.py evaluate_runs``' start-up,
issue 16). A subclass names its fields in ``__slots__``, in the order of its ``__init__``'s
positional parameters, and sets them with ``_set(name=value, ...)``. Instances are compared and
hashed by type and field values, have a ``Name(field=value, ...)`` repr, pickle and copy through
``__init__``, and refuse setting or deleting an attribute (``AttributeError``), as a frozen
dataclass does.
"""
from __future__ import annotations

__all__ = ["FrozenValue"]


class FrozenValue:
    """See the module docstring."""

    __slots__ = ()

    def _set(self, **fields) -> None:
        """Set the fields (from ``__init__`` only)."""
        for name, value in fields.items():
            object.__setattr__(self, name, value)

    def _values(self) -> tuple:
        return tuple(getattr(self, n) for n in self.__slots__)

    def __setattr__(self, name, value):
        raise AttributeError(f"{type(self).__name__} is immutable: cannot set {name!r}")

    def __delattr__(self, name):
        raise AttributeError(f"{type(self).__name__} is immutable: cannot delete {name!r}")

    def __eq__(self, other):
        return self._values() == other._values() if type(other) is type(self) else NotImplemented

    def __hash__(self):
        return hash(self._values())

    def __reduce__(self):  # pickle and copy through __init__ (__setattr__ refuses)
        return type(self), self._values()

    def __repr__(self):
        return f"{type(self).__name__}(" + ", ".join(f"{n}={getattr(self, n)!r}" for n in self.__slots__) + ")"
