"""Writing lines: an envelope (its contents by reference, secrets removed), a process's
meta line, a void line, each as the text the recorder appends, and the append-only file
it appends to.
"""

from __future__ import annotations

import datetime
import errno
import os
import re
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

import attrs

from bus import Envelope
from bus.codec import FORMAT_VERSION, envelope_to_plain, to_plain

from ._lines import REFS_VERSION, dumps
from ._refs import INTERNED, ContentTable
from ._scrub import Scrubber

_last_wall: tuple[int, str] = (-1, "")


def wall_clock_iso() -> str:
    """UTC now, ISO 8601 with milliseconds (formatted once per millisecond: it is
    stamped on every line)."""
    global _last_wall
    ms = int(time.time() * 1000)
    if ms != _last_wall[0]:
        stamp = datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC).isoformat(timespec="milliseconds")
        _last_wall = (ms, stamp.replace("+00:00", "Z"))
    return _last_wall[1]



_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def line_bytes(text: str) -> bytes:
    """A line as UTF-8; a lone surrogate (a file name or workspace path that is not
    UTF-8, held with ``surrogateescape``) can only stand inside a JSON string, so it is
    written as its ``\\uXXXX`` escape, which reads back as the same string."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text).encode("utf-8")



def encode_line(env: Envelope, wall: str, scrubber: Scrubber, table: ContentTable | None = None) -> str:
    """One envelope as the recording's line (without the newline), secrets removed.

    With a ``table``, the fields ``INTERNED`` names are written by reference: contents
    the table has not seen go in the line's ``defs``, the fields in its ``refs``."""
    fields = INTERNED.get(type(env.message)) if table is not None else None
    if not fields:
        data = envelope_to_plain(env, wall=wall)
    else:
        assert table is not None
        defs: dict[str, Any] = {}
        refs: dict[str, Any] = {}
        carried = False
        for name, each in fields:
            value = getattr(env.message, name)
            carried = carried or bool(value)
            if each:
                role = str(getattr(env.message, "role", ""))
                refs[name] = table.refer(type(env.message).__name__, name, value, defs, role)
            else:
                refs[name] = table.refer_whole(type(env.message).__name__, name, value, defs)
        # The message without what ``refs`` stands for, which is never unstructured (a
        # history can be long); a message whose fields are all empty (the loop
        # detector's checks of each chunk) is taken as it is.
        emptied: dict[str, Any] = {name: () for name, _ in fields}
        msg = to_plain(attrs.evolve(env.message, **emptied) if carried else env.message)
        for name, _ in fields:
            msg.pop(name, None)
        data = {"v": REFS_VERSION, "seq": env.seq}
        if defs:
            data["defs"] = defs
        data.update(session_id=env.session_id, sender=env.sender, to=env.recipient, wall=wall, refs=refs, msg=msg)
    text = dumps(data)
    if scrubber.needs(text):
        text = dumps(scrubber.scrub(data))
    return text



def meta_line(
    session_id: str,
    started: str,
    meta: Mapping[str, Any],
    *,
    first_seq: int,
    resumed: bool,
    torn_tail: bool,
    scrubber: Scrubber,
) -> str:
    """The meta line that opens a process's part of the file (without the newline):
    the session, when the process started, what the session was started with
    (``meta``: workspace, model, mode, pid...), the first sequence number it will write,
    whether it resumes the session, and whether it found the file ending in a torn line
    (the reader then skips that line: see "Reading")."""
    data: dict[str, Any] = {
        "v": FORMAT_VERSION,
        "kind": "meta",
        "session_id": session_id,
        "started": started,
        **meta,
        "first_seq": first_seq,
        "resumed": resumed,
    }
    if torn_tail:
        data["torn_tail"] = True
    return dumps(scrubber.scrub(data))


def void_line(first: int, last: int) -> str:
    """The line accounting for sequence numbers ``first..last`` that reached no one."""
    return dumps({"v": FORMAT_VERSION, "kind": "void", "first": first, "last": last})


class Sink(Protocol):
    """Where lines go: an append-only file (tests substitute failing ones)."""

    def write(self, data: bytes) -> None: ...
    def fsync(self) -> None: ...
    def close(self) -> None: ...


class FileSink:
    """An ``O_APPEND`` file written with ``os.write`` (no userspace buffer), mode 0600."""

    def __init__(self, path: Path) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            n = os.write(self.fd, view)
            if n == 0:  # pragma: no cover - a regular file never does this
                raise OSError(errno.EIO, "short write")
            view = view[n:]

    def fsync(self) -> None:
        os.fsync(self.fd)

    def close(self) -> None:
        os.close(self.fd)



__all__ = ["FileSink", "Sink", "encode_line", "line_bytes", "meta_line", "void_line", "wall_clock_iso"]
