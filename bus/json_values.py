"""Immutable JSON values for message payloads.

Messages are frozen, but frozen is shallow: a ``dict`` inside a message would be shared
mutable state. Gemini payloads (contents, parts, function-call arguments, usage) keep
their REST wire shape, so they travel as *frozen JSON*: ``frozendict`` for objects and
``tuple`` for arrays. ``frozendict`` subclasses ``dict``, so ``json.dumps`` accepts a
frozen value as it is.

Freezing is also where outside data is made fit to travel (DESIGN: validation at the
edges): every text becomes well-formed Unicode (``well_formed``), so a lone surrogate
from a JSON escape or an undecodable file name can never stop the recorder or a
socket from encoding the message; values JSON text cannot carry (NaN, infinities,
integers beyond Python's 4300-digit conversion limit) and nesting deeper than
``MAX_DEPTH`` are refused with ``JsonValueError``, so no recursive walker downstream
(the codec, schema checks, hooks) can overflow the stack.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
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

MAX_DEPTH = 128
"""Objects and arrays nested deeper than this are refused. Google's API parses
function arguments as protobuf ``Struct`` values (100 levels at most), so no real
payload comes near; every recursive walker of a value stays far from Python's stack
limit."""
_SURROGATE = re.compile("[\ud800-\udfff]")
_LONG_INT_BITS = 14_000
"""Below this many bits an int surely has fewer than 4301 digits."""
_TOO_LONG_INT = 10**4300
"""The least magnitude with 4301 digits: Python's default limit for converting an int
to text, hence to JSON."""


class JsonValueError(ValueError):
    """A value no message can carry: nested deeper than ``MAX_DEPTH``, an integer too
    long for JSON text, or a NaN or infinity."""


def well_formed(text: str) -> str:
    """``text`` with every lone surrogate replaced by U+FFFD, so it encodes as UTF-8.

    Surrogates that stand for bytes that were not UTF-8 (Python's ``surrogateescape``:
    file names, command-line arguments) become what Node shows for those bytes (one
    U+FFFD per invalid sequence); any other lone surrogate (a JSON ``\\ud800`` escape)
    becomes one U+FFFD, as JavaScript's ``toWellFormed`` does. Cheap for the common
    case: ASCII or surrogate-free text is returned as it is."""
    if text.isascii() or _SURROGATE.search(text) is None:
        return text
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    except UnicodeEncodeError:
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
"""How a lone surrogate gets into JSON text that is strict UTF-8: a ``\\uD800``-``\\uDFFF``
escape. Pairs (how ``ensure_ascii`` encoders write emoji) decode to one character, so
a reader that finds one of these escapes in a frame checks the decoded value with
``unicode_clean``; the common frame has none and costs one search."""


def unicode_clean(value: Any) -> bool:
    """Whether the JSON value ``value`` (a text, or containers of them) is well-formed
    Unicode: no lone surrogate anywhere, so it encodes as UTF-8."""
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except (UnicodeEncodeError, ValueError, RecursionError):
        return False
    return True


class FrozenTuple(tuple):  # type: ignore[type-arg]
    """A tuple whose items are frozen JSON values, which ``freeze`` returns as it is (as
    it does a ``frozendict``): a long array carried again and again, such as a model
    request's contents, then costs nothing to put in a message.

    Like ``frozendict``, the constructor trusts its items to be frozen; ``join`` freezes
    the items it adds, so a tuple that grows costs only what is new."""

    __slots__ = ()

    def join(self, items: Iterable[Any]) -> FrozenTuple:
        """This tuple followed by ``items``, each frozen."""
        return FrozenTuple(self + tuple([_freeze(item, 1) for item in items]))


def freeze(value: Any) -> Any:
    """Return ``value`` with every dict made a ``frozendict``, every list a tuple and
    every text well-formed; raises ``JsonValueError`` for what JSON cannot carry."""
    return _freeze(value, 0)


def _freeze(value: Any, depth: int) -> Any:
    cls = value.__class__
    if cls is FrozenTuple:
        return value
    # The common leaves first: this runs for every streamed chunk.
    if cls is str:
        return value if value.isascii() else well_formed(value)
    if cls is int:
        if value.bit_length() > _LONG_INT_BITS and abs(value) >= _TOO_LONG_INT:
            raise JsonValueError("an integer of more than 4300 digits is not a JSON number")
        return value
    if cls is float:
        if not math.isfinite(value):
            raise JsonValueError(f"{value!r} is not a JSON number")
        return value
    if cls is bool or value is None:
        return value
    if cls is list or cls is tuple:
        if depth >= MAX_DEPTH:
            raise JsonValueError(f"JSON nested deeper than {MAX_DEPTH} levels")
        return tuple([_freeze(v, depth + 1) for v in value])
    if cls is not dict:
        if isinstance(value, frozendict):
            # Already frozen at this level; children of a frozendict built by freeze() are too.
            return value
        if isinstance(value, list | tuple):
            return _freeze(list(value), depth)
        for plain in (str, int, float):  # subclasses (an IntEnum...) as the JSON they write
            if isinstance(value, plain):
                return _freeze(plain(value), depth)
        if not isinstance(value, Mapping):
            return value
    if depth >= MAX_DEPTH:
        raise JsonValueError(f"JSON nested deeper than {MAX_DEPTH} levels")
    return frozendict(
        {
            (k if k.isascii() else well_formed(k)) if k.__class__ is str else str(k): _freeze(v, depth + 1)
            for k, v in value.items()
        }
    )


_LEAVES = frozenset((str, int, float, bool, type(None)))
"""The classes of JSON's scalars, which ``thaw`` returns as they are."""


def thaw(value: Any) -> Any:
    """Return a plain, mutable copy of a frozen JSON value (dicts and lists)."""
    # Exact classes first, and leaves without a call: every streamed chunk is thawed
    # (by the turn, and by the codec for the recording and each client); the ABC checks
    # are for anything else that is a mapping or a sequence.
    cls = value.__class__
    if cls is frozendict or cls is dict:
        return {k: v if v.__class__ in _LEAVES else thaw(v) for k, v in value.items()}
    if cls is tuple or cls is FrozenTuple or cls is list:
        return [v if v.__class__ in _LEAVES else thaw(v) for v in value]
    if cls in _LEAVES:
        return value
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
