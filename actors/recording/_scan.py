"""Reading parts of a recording without loading it: its first meta line, its end, its
lines forward or backward a block at a time, and a cursor that reads forward by
sequence number.

These are the light readers: listing sessions reads a recording's first lines and its
last stamp; a process that takes a session over reads the file's end (``read_tail``);
the daemon's catch-up reads forward from where it stopped (``RecordingCursor``). Each
reads lines through ``_lines`` (``line_seq``, ``line_type``, ``is_meta_line``), so none
parses a line it does not need.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, BinaryIO

import attrs

from bus import CodecError, Envelope

from ._lines import (
    REFS_VERSION,
    VERSIONS,
    RecordingError,
    check_version,
    is_meta_line,
    json_object,
    line_seq,
    line_type,
)
from ._read import decode_line
from ._refs import INTERNED_TYPES, ContentRefs

SCAN_BLOCK = 1 << 16
"""Bytes read at a time by the block readers."""


# -- lines, a block at a time ------------------------------------------------------------------
def lines_forward(fh: BinaryIO, block: int = SCAN_BLOCK) -> Iterator[bytes]:
    """The file's lines from where ``fh`` stands, without their newlines, read a block
    at a time (a last line without a newline comes too)."""
    pending: list[bytes] = []
    while chunk := fh.read(block):
        parts = chunk.split(b"\n")
        for part in parts[:-1]:
            pending.append(part)
            yield b"".join(pending)
            pending = []
        pending.append(parts[-1])
    if rest := b"".join(pending):
        yield rest


def lines_backward(fh: BinaryIO, size: int, *, block: int = SCAN_BLOCK, limit: int | None = None) -> Iterator[bytes]:
    """The first ``size`` bytes' lines from the last back to the first, read a block at
    a time: first what follows the last newline (``b""`` when the file ends with one),
    then each line without its newline. With ``limit``, only the last ``limit`` bytes are
    read, and only the lines that follow a newline within them (a line the window cuts is
    left out). Moves ``fh``."""
    floor = 0 if limit is None else max(0, size - limit)
    pos = size
    pending: list[bytes] = []
    """The line being put together, its later chunks first."""
    while pos > floor:
        step = min(block, pos - floor)
        pos -= step
        fh.seek(pos)
        parts = fh.read(step).split(b"\n")
        for part in reversed(parts[1:]):
            pending.append(part)
            yield b"".join(reversed(pending))
            pending = []
        pending.append(parts[0])
    if floor == 0:
        yield b"".join(reversed(pending))


def stamp_of(data: Mapping[str, Any]) -> str | None:
    """The wall time a parsed line carries: an envelope's ``wall``, a meta line's
    ``started`` (when its process started)."""
    stamp = data.get("started") if data.get("kind") == "meta" else data.get("wall")
    return stamp if isinstance(stamp, str) else None


def last_stamp(fh: BinaryIO, size: int) -> str | None:
    """The wall time of the file's last stamped line (``Recording.last_wall`` without
    loading the recording), read backwards from its end."""
    for line in lines_backward(fh, size):
        data = json_object(line) if line.strip() else None
        stamp = stamp_of(data) if data is not None else None
        if stamp is not None:
            return stamp
    return None


# -- the first line and the last ---------------------------------------------------------------
def read_meta(path: Path | str, *, limit: int = 1 << 20) -> Mapping[str, Any]:
    """The first meta line of a recording, read alone (for what a session was started
    with: its workspace, model, mode). Raises ``RecordingError`` when there is no
    recording or it does not start with one (a recording is never empty: its first
    process writes the meta line before anything else)."""
    p = Path(path)
    try:
        with p.open("rb") as fh:
            first = fh.readline(limit)
    except FileNotFoundError:
        raise RecordingError(p, None, "no such recording") from None
    except OSError as exc:
        raise RecordingError(p, None, f"cannot read: {exc.strerror or exc}") from None
    if not first.strip():
        raise RecordingError(p, None, "the recording is empty")
    data = json_object(first)
    if data is None or data.get("kind") != "meta":
        raise RecordingError(p, 1, "the recording does not start with its meta line")
    check_version(p, 1, data.get("v"))
    return data


@attrs.frozen
class Tail:
    """What an existing recording ends with, as the next process finds it."""

    last_seq: int = 0
    """The last complete envelope's sequence number (0: none)."""
    needs_newline: bool = False
    """The file does not end with a newline (the last write was cut short)."""
    torn: bool = False
    """The last line is not a complete JSON object (it is reported and ignored)."""


def read_tail(path: Path, *, block: int = SCAN_BLOCK) -> Tail:
    """Inspect the end of an existing recording without reading all of it."""
    try:
        fh = path.open("rb")
    except FileNotFoundError:
        return Tail()
    with fh:
        size = os.fstat(fh.fileno()).st_size
        if size == 0:
            return Tail()
        lines = lines_backward(fh, size, block=block)
        last = next(lines)
        needs_newline = last != b""
        seqs = (seq for seq in map(_seq_of, itertools.chain((last,), lines)) if seq is not None)
        last_seq = next(seqs, 0)
    return Tail(last_seq=last_seq, needs_newline=needs_newline, torn=needs_newline and json_object(last) is None)


def _seq_of(line: bytes) -> int | None:
    data = json_object(line) if line.strip() else None
    seq = data.get("seq") if data is not None else None
    return seq if isinstance(seq, int) else None


# -- forward by sequence number ------------------------------------------------------------------
def everything(type_name: str) -> bool:
    """A ``RecordingCursor`` filter that wants every message."""
    return True


_REFS_HEAD = b'{"v":%d,' % REFS_VERSION


class RecordingCursor:
    """Reads one recording forward from a sequence number on, for a subscriber that
    catches up with a session or resyncs (the daemon's). Each subscriber keeps one and
    never reads a byte twice.

    The recorder writes every message before the bus hands it to anyone else, so when a
    subscriber receives message ``s`` live, every message before ``s`` is already in the
    file. Only messages ``INTERNED`` names carry contents by reference: a cursor whose
    filter wants one of them reads every line that defines or refers to contents, from
    the file's start, to resolve them; any other cursor decodes only what it delivers."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.pos = 0
        """Byte offset of the first line not read yet."""
        self.refs = ContentRefs()
        """The contents defined so far (kept only by a cursor that delivers the
        messages that refer to them)."""

    def read(
        self,
        first: int,
        before: int | None,
        wanted: Callable[[str], bool] = everything,
        held: Callable[[], int | None] | None = None,
    ) -> tuple[list[Envelope], int]:
        """Envelopes with ``first <= seq < before`` (``None``: as far as the file goes)
        whose type ``wanted`` accepts, and the next sequence number to expect after them.
        ``held``: the message the bus holds for the recorder now (``Bus.held``: written,
        not yet synced), asked once the file is read; the read stops before it.

        Runs in a worker thread: blocking file I/O and decoding only.
        """
        try:
            with self.path.open("rb") as fh:
                fh.seek(self.pos)
                data = fh.read()
        except FileNotFoundError:
            return [], first
        stop = held() if held is not None else None
        known = before
        """What the caller knows is all in the file (it has message ``before`` live)."""
        if stop is not None and (before is None or stop < before):
            # The held message and what came before it may have been written after the
            # file was read: the read stops there, but counts only what it read.
            before, known = stop, None
        out: list[Envelope] = []
        expected = first
        expand = any(wanted(name) for name in INTERNED_TYPES)
        start = 0
        while True:
            end = data.find(b"\n", start)
            if end < 0:
                break  # a line still being written (or torn): not ours yet
            line = data[start:end]
            seq, tag, last = _classify(line)
            if seq is None and expand and is_meta_line(line):
                self.refs.reset()  # a new process's part: its numbering starts again
            if seq is not None:
                if before is not None and seq >= before:
                    break
                deliver = last is None and seq >= first and wanted(tag or "")
                if deliver:
                    env = self._decode(line)
                    if env is not None and (tag is not None or wanted(type(env.message).__name__)):
                        out.append(env)
                elif expand and line.startswith(_REFS_HEAD):
                    self._decode(line, keep_only=True)
                expected = max(expected, (last if last is not None else seq) + 1)
            start = end + 1
            self.pos += len(line) + 1
        if known is not None:
            expected = max(expected, known)
        return out, expected

    def _decode(self, line: bytes, *, keep_only: bool = False) -> Envelope | None:
        """The line's envelope (its references resolved; ``keep_only``: only take in
        the contents it defines and refers to); ``None`` for a line this build cannot
        read: skipped, not fatal."""
        try:
            data = json_object(line)
            if data is None or data.get("v") not in VERSIONS:
                return None
            if keep_only:
                self.refs.expand(data)
                return None
            return decode_line(data, self.refs, where=f"{self.path}")
        except (ValueError, CodecError):
            return None


def _classify(line: bytes) -> tuple[int | None, str | None, int | None]:
    """(seq, message type, last seq of a void line) of one line; seq None: not a
    numbered line (meta, blank, unreadable)."""
    seq = line_seq(line)
    if seq is not None:
        return seq, line_type(line), None
    if not line.strip():
        return None, None, None
    data = json_object(line)
    if data is None:
        return None, None, None
    if data.get("kind") == "void" and isinstance(data.get("first"), int) and isinstance(data.get("last"), int):
        return int(data["first"]), "", int(data["last"])
    if isinstance(data.get("seq"), int) and data.get("kind") is None:
        msg = data.get("msg")
        tag = msg.get("type") if isinstance(msg, dict) else None
        return int(data["seq"]), tag if isinstance(tag, str) else None, None
    return None, None, None


__all__ = [
    "SCAN_BLOCK",
    "RecordingCursor",
    "Tail",
    "everything",
    "last_stamp",
    "lines_backward",
    "lines_forward",
    "read_meta",
    "read_tail",
    "stamp_of",
]
