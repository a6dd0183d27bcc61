"""Contents by reference: the writer's table and the reader's.

A history is carried whole by every ``StartTurn`` and every model request, so the
fields ``INTERNED`` names are written once per distinct content and then referred to by
number (the package docstring describes the line). ``ContentTable`` is the writer's
side (one per process: the recorder's), ``ContentRefs`` the reader's (one per process's
part of a file: the loader's, the cursor's).
"""

from __future__ import annotations

import hashlib
import itertools
import operator
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from bus.json_values import freeze, thaw
from bus.messages import (
    CheckLoop,
    GenerateRequest,
    HistoryCompressed,
    OpenSession,
    StartTurn,
)

from ._lines import dumps

if TYPE_CHECKING:
    from bus.messages import Message  # the union: imported when first used (bus.messages)

INTERNED: Mapping[type[Message], tuple[tuple[str, bool], ...]] = {
    StartTurn: (("history", True),),
    GenerateRequest: (("contents", True), ("config", False)),
    OpenSession: (("history", True),),
    HistoryCompressed: (("history", True),),
    CheckLoop: (("history", True),),
}
"""The fields written by reference (see "Contents by reference"): field name, and
whether each element of the tuple is one content (else the whole value is one). Each
of these messages repeats what earlier lines hold; all are the actors' own traffic,
not client events (``actors/frontends/daemon/_catchup.INTERNAL``)."""
INTERNED_TYPES = frozenset(cls.__name__ for cls in INTERNED)



def _shared_prefix(differs: Iterator[bool], *lengths: int) -> int:
    """Where the first ``True`` of ``differs`` is (the shorter length when none is): at C
    speed, no Python code runs per item."""
    return next(itertools.compress(itertools.count(), differs), min(lengths))


def _runs(numbers: list[int]) -> list[int | list[int]]:
    """``numbers`` with each run of consecutive ones of 3 or more as ``[first, last]``:
    a history is mostly the contents in the order they were first written, so the
    references of a long one stay a few bytes."""
    out: list[int | list[int]] = []
    i = 0
    while i < len(numbers):
        j = i
        while j + 1 < len(numbers) and numbers[j + 1] == numbers[j] + 1:
            j += 1
        if j - i >= 2:
            out.append([numbers[i], numbers[j]])
        else:
            out.extend(numbers[i : j + 1])
        i = j + 1
    return out


class ContentTable:
    """The writer's side of "Contents by reference": which contents this process has
    written, each under a number (1, 2, ... in the order first written).

    A content is known by a digest of its JSON text, so equal contents built apart
    share one number (not by ``==``: it holds ``1 == 1.0 == True``), and first, for
    speed, by identity with the contents of the last message of the same type, field
    and role (the session passes the same frozen objects from turn to turn, and the turn
    sends its requests' contents again as the same objects, a few new at the end). That
    identity is compared at C speed, and only the contents after the shared part are
    dumped: a long session's request costs what it adds. Only those last messages'
    contents are held here, and a digest for each distinct content: memory stays what a
    few histories take."""

    def __init__(self) -> None:
        self._by_digest: dict[bytes, int] = {}
        self._last: dict[tuple[str, str], list[int]] = {}
        """The numbers last written for each (message type, field): what ``same``
        counts against (the reader's rule)."""
        self._like: dict[tuple[str, str, str], tuple[tuple[Any, ...], list[int]]] = {}
        """The contents last written for each (message type, field, role), and their
        numbers: what a new message's contents are compared with by identity (a
        model request of the loop detector comes between two of the main loop's)."""
        self._last_whole: dict[tuple[str, str], tuple[Any, int]] = {}

    def refer(
        self, type_name: str, field: str, values: tuple[Any, ...], defs: dict[str, Any], role: str = ""
    ) -> Any:
        """The ``refs`` entry of a list of contents (new ones added to ``defs``): the
        runs of their numbers, after as many as the list shares with the same field
        of the last message of its type (``{"same": k, "then": runs}``). A
        conversation mostly grows at its end, so a long one costs a few bytes a
        message."""
        key = (type_name, field)
        like_values, like = self._like.get((type_name, field, role), ((), []))
        shared = _shared_prefix(map(operator.is_not, values, like_values), len(values), len(like_values))
        numbers = like[:shared]
        numbers.extend([self.intern(v, defs) for v in values[shared:]])
        self._like[(type_name, field, role)] = (values, numbers)
        prev = self._last.get(key, [])
        self._last[key] = numbers
        # The last message of the type was of this role too (the common case): what is
        # shared by identity is shared by number, and only the rest is compared.
        known = shared if prev is like else 0
        same = known + _shared_prefix(
            map(operator.ne, numbers[known:], prev[known:]),
            len(numbers) - known,
            len(prev) - known,
        )
        if not same:
            return _runs(numbers)
        return {"same": same, "then": _runs(numbers[same:])}

    def refer_whole(self, type_name: str, field: str, value: Any, defs: dict[str, Any]) -> int:
        """The ``refs`` entry of a field that is one content (a request's config)."""
        key = (type_name, field)
        last = self._last_whole.get(key)
        if last is not None and last[0] is value:
            return last[1]
        known = _WHOLES.get(id(value))
        if known is None or known[0] is not value:
            # The first of this object in the process: its digest and plain form, kept for
            # the other recordings of the process (its sessions share one request config).
            if len(_WHOLES) >= _WHOLES_MAX:
                _WHOLES.clear()
            known = _WHOLES[id(value)] = (value, _digest(dumps(value)), thaw(value))
        number = self._number(known[1], defs, known[2])
        self._last_whole[key] = (value, number)
        return number

    def __len__(self) -> int:
        return len(self._by_digest)

    def intern(self, value: Any, defs: dict[str, Any]) -> int:
        """The number of ``value``; a new one is added to ``defs`` (plain JSON)."""
        # Frozen JSON dumps as it is (``frozendict`` is a ``dict``): only a new content is thawed.
        return self._number(_digest(dumps(value)), defs, value, thawed=False)

    def _number(self, digest: bytes, defs: dict[str, Any], value: Any, *, thawed: bool = True) -> int:
        number = self._by_digest.get(digest)
        if number is None:
            number = self._by_digest[digest] = len(self._by_digest) + 1
            defs[str(number)] = value if thawed else thaw(value)
        return number


def _digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


_WHOLES: dict[int, tuple[Any, bytes, Any]] = {}
"""Whole values written by reference (request configs) in this process, by identity,
each with its digest and plain form: every session of a daemon sends the same frozen
config (``actors.host.setup``), and each recording defined it with a dump, a digest and
a thaw of its own (0.1 ms a session). The object is kept, so its id stays its own; the
plain form is only ever dumped (``Scrubber.scrub`` copies)."""
_WHOLES_MAX = 64


class ContentRefs:
    """The reader's side: the contents defined so far in one process's part of a
    recording (frozen once; every message that refers to one shares the object)."""

    def __init__(self) -> None:
        self._contents: dict[int, Any] = {}
        self._last: dict[tuple[str, str], tuple[Any, ...]] = {}

    def reset(self) -> None:
        """A new process's part starts (its meta line): numbering starts again."""
        self._contents.clear()
        self._last.clear()

    def expand(self, data: dict[str, Any]) -> dict[str, Any]:
        """Take in the line's ``defs`` and resolve its ``refs``: the fields they stand
        for, by name (empty for a line without); raises ``ValueError`` naming what is
        wrong."""
        defs = data.get("defs")
        if defs is not None:
            if not isinstance(defs, dict):
                raise ValueError("'defs' must be an object")
            for key, value in defs.items():
                if not key.isdigit():
                    raise ValueError(f"'defs' key {key!r} is not a number")
                self._contents[int(key)] = freeze(value)
        refs = data.get("refs")
        if refs is None:
            return {}
        msg = data.get("msg")
        if not isinstance(refs, dict) or not isinstance(msg, dict):
            raise ValueError("'refs' and 'msg' must be objects")
        type_name = str(msg.get("type"))
        fields: dict[str, Any] = {}
        for name, ref in refs.items():
            if isinstance(ref, list):
                fields[name] = self._last[(type_name, name)] = tuple(self._contents_of(ref))
            elif isinstance(ref, dict):
                same, then = ref.get("same"), ref.get("then")
                prev = self._last.get((type_name, name), ())
                if not isinstance(same, int) or not 0 <= same <= len(prev) or not isinstance(then, list):
                    raise ValueError(f"{name!r}: 'same' must count contents of the last {type_name}, 'then' be a list")
                fields[name] = self._last[(type_name, name)] = prev[:same] + tuple(self._contents_of(then))
            else:
                fields[name] = self._content(ref)
        return fields

    def _contents_of(self, refs: list[Any]) -> list[Any]:
        out: list[Any] = []
        for ref in refs:
            if isinstance(ref, list):
                if len(ref) != 2 or not all(isinstance(r, int) and not isinstance(r, bool) for r in ref):
                    raise ValueError(f"a run of references must be [first, last], got {ref!r}")
                first, last = ref
                if not 0 < first <= last or last - first >= len(self._contents):
                    raise ValueError(f"the run of references {ref!r} is not within the contents defined")
                out.extend(self._content(r) for r in range(first, last + 1))
            else:
                out.append(self._content(ref))
        return out

    def _content(self, ref: Any) -> Any:
        if not isinstance(ref, int) or isinstance(ref, bool):
            raise ValueError(f"a reference must be a number, got {ref!r}")
        try:
            return self._contents[ref]
        except KeyError:
            raise ValueError(f"content {ref} is defined by no earlier line of this process") from None




__all__ = ["INTERNED", "INTERNED_TYPES", "ContentRefs", "ContentTable"]
