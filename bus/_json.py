"""Immutable JSON values for message payloads.

Messages are frozen, but frozen is shallow: a ``dict`` inside a message would be shared
mutable state. Gemini payloads (contents, parts, function-call arguments, usage) keep
their REST wire shape, so they travel as *frozen JSON*: ``frozendict`` for objects and
``tuple`` for arrays. ``frozendict`` subclasses ``dict``, so ``json.dumps`` accepts a
frozen value as it is.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeAlias

from frozendict import frozendict

if TYPE_CHECKING:
    # Fields of this type take plain JSON and freeze it (an attrs converter), and are read
    # as frozendict/tuple trees; ``Any`` lets both sides type-check.
    JsonValue: TypeAlias = Any
    """A JSON value whose objects are ``frozendict`` and whose arrays are tuples."""
else:

    class JsonValue:
        """Runtime marker for frozen JSON fields; the codec hooks on it by identity."""

EMPTY: frozendict[str, Any] = frozendict()


def freeze(value: Any) -> Any:
    """Return ``value`` with every dict made a ``frozendict`` and every list a tuple."""
    cls = value.__class__
    if cls is str or cls is int or cls is float or cls is bool or value is None:
        return value  # the common leaves first: this runs for every streamed chunk
    if isinstance(value, frozendict):
        # Already frozen at this level; children of a frozendict built by freeze() are too.
        return value
    if isinstance(value, Mapping):
        return frozendict({k if k.__class__ is str else str(k): freeze(v) for k, v in value.items()})
    if isinstance(value, list | tuple):
        return tuple([freeze(v) for v in value])
    return value


def thaw(value: Any) -> Any:
    """Return a plain, mutable copy of a frozen JSON value (dicts and lists)."""
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [thaw(v) for v in value]
    return value


def dumps(value: Any, **kwargs: Any) -> str:
    """``json.dumps`` that accepts frozen values, with compact separators by default."""
    kwargs.setdefault("separators", (",", ":"))
    kwargs.setdefault("ensure_ascii", False)
    return json.dumps(value, **kwargs)
