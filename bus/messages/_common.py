"""Shared field types and helpers for message classes."""

from __future__ import annotations

import uuid
from typing import Any

import attrs

from bus.json_values import JsonValue, freeze, well_formed

__all__ = ["JsonValue", "frozen_json", "json_tuple", "new_id", "text_field"]


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


