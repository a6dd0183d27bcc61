"""Shared field types and helpers for message classes."""

from __future__ import annotations

import operator
import threading
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

import attrs

from bus.json_values import JsonValue, freeze, well_formed

__all__ = ["JsonValue", "frozen_json", "json_tuple", "new_id", "shared_methods", "text_field"]

_C = TypeVar("_C", bound=type)


def new_id() -> str:
    """A fresh random identifier (UUID4 text)."""
    return str(uuid.uuid4())


def frozen_json(default: Any = None) -> Any:
    """An attrs field holding frozen JSON; plain dicts/lists given to it are frozen."""
    return attrs.field(default=default, converter=freeze)


def json_tuple() -> Any:
    """An attrs field holding a tuple of frozen JSON values (e.g. Gemini ``parts``)."""
    return attrs.field(default=(), converter=freeze)


def text_field(default: Any = attrs.NOTHING) -> Any:
    """An attrs field holding text that comes from outside (what a user typed, what a
    tool printed): a lone surrogate in it becomes U+FFFD (``well_formed``), as in the
    frozen JSON fields, so the message always encodes."""
    return attrs.field(default=default, converter=_well_formed_text)


def _well_formed_text(value: Any) -> Any:
    return well_formed(value) if value.__class__ is str else value




def shared_methods(cls: _C) -> _C:
    """Give an attrs class made with ``repr=False, eq=False`` the shared ``__repr__``,
    ``__eq__`` and ``__hash__``, which do what attrs would generate: the repr's text is
    attrs' (``Name(field=value!r, ...)``, ``...`` for an object met again inside
    itself); equal means the same class and equal fields; the hash is of the class and
    the fields. attrs compiles these three for each class, some 60% of the cost of
    creating a message class, and every process pays for the hundred message classes
    at start-up."""
    fields = cls.__attrs_attrs__  # type: ignore[attr-defined]
    compared = [f.name for f in fields if f.eq]
    hashed = [f.name for f in fields if (f.eq if f.hash is None else f.hash)]
    _COMPARED[cls] = operator.attrgetter(*compared) if compared else _no_fields
    _HASHED[cls] = operator.attrgetter(*hashed) if hashed else _no_fields
    # setattr: mypy refuses assigning to a method
    setattr(cls, "__repr__", _attrs_repr)  # noqa: B010
    setattr(cls, "__eq__", _attrs_eq)  # noqa: B010
    setattr(cls, "__hash__", _attrs_hash)  # noqa: B010
    return cls


_COMPARED: dict[type, Callable[[Any], Any]] = {}
_HASHED: dict[type, Callable[[Any], Any]] = {}


def _no_fields(_value: Any) -> tuple[()]:
    return ()


def _attrs_eq(self: Any, other: Any) -> Any:
    if other.__class__ is not self.__class__:
        return NotImplemented
    values = _COMPARED[self.__class__]
    return values(self) == values(other)


def _attrs_hash(self: Any) -> int:
    return hash((self.__class__, _HASHED[self.__class__](self)))


_repr_context = threading.local()


def _attrs_repr(self: Any) -> str:
    try:
        being_shown: set[int] = _repr_context.being_shown
    except AttributeError:
        being_shown = _repr_context.being_shown = set()
    if id(self) in being_shown:
        return "..."
    being_shown.add(id(self))
    try:
        shown = []
        for field in self.__class__.__attrs_attrs__:
            how = field.repr
            if how is False:
                continue
            value = getattr(self, field.name, attrs.NOTHING)
            shown.append(f"{field.name}={value!r}" if how is True else f"{field.name}={how(value)}")
        return f"{self.__class__.__qualname__.rsplit('>.', 1)[-1]}({', '.join(shown)})"
    finally:
        being_shown.discard(id(self))
