"""Shared field types and helpers for message classes."""

from __future__ import annotations

import threading
import uuid
from typing import Any, TypeVar

import attrs

from bus.json_values import JsonValue, freeze, well_formed

__all__ = ["JsonValue", "frozen_json", "json_tuple", "new_id", "shared_repr", "text_field"]

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




def shared_repr(cls: _C) -> _C:
    """Give an attrs class made with ``repr=False`` the one shared ``__repr__``, whose
    text is the one attrs would generate (``Name(field=value!r, ...)``, ``...`` for an
    object met again inside itself). attrs compiles a ``__repr__`` of its own for each
    class, some 40% of the cost of creating a message class, and every process pays for
    the hundred message classes at start-up; a repr is only read in tests and logs."""
    setattr(cls, "__repr__", _attrs_repr)  # noqa: B010 - mypy refuses assigning a method
    return cls


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
