"""Shared field types and helpers for message classes."""

from __future__ import annotations

import uuid
from typing import Any

import attrs

from bus._json import JsonValue, freeze

__all__ = ["JsonValue", "frozen_json", "json_tuple", "new_id"]


def new_id() -> str:
    """A fresh random identifier (UUID4 text)."""
    return str(uuid.uuid4())


def frozen_json(default: Any = None) -> Any:
    """An attrs field holding frozen JSON; plain dicts/lists given to it are frozen."""
    return attrs.field(default=default, converter=freeze)


def json_tuple() -> Any:
    """An attrs field holding a tuple of frozen JSON values (e.g. Gemini ``parts``)."""
    return attrs.field(default=(), converter=freeze)


