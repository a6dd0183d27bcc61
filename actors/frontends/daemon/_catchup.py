"""Reading a session's recording from a sequence number on, for catch-up and resync.

A subscriber that starts at seq N, that fell behind (its bus subscription lagged) or
that sees a gap in the live stream reads the missing envelopes from the recording. The
recorder is each session's first observer and writes every message before the bus hands
it to anyone else, so when a subscriber receives message ``s`` live, every message
before ``s`` is already in the file (see ``actors/recorder.py``). A ``RecordingCursor``
reads forward only: each subscriber keeps one and never reads a byte twice.

By default clients get the session's *client events*; ``INTERNAL`` names the messages
left out unless a subscriber asks for everything (``Subscribe.full``). Only those carry
contents by reference (``actors.recorder.INTERNED``): a cursor that delivers them reads
every line that defines or refers to contents, from the file's start, to resolve them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

from actors.recorder import INTERNED_TYPES, REFS_VERSION, ContentRefs, decode_line
from bus import CodecError, Envelope
from bus.codec import FORMAT_VERSION

INTERNAL = frozenset(
    {
        "GenerateRequest",
        "ModelChunk",
        "ModelFinished",
        "GenerationCancelled",
        "CancelGeneration",
        "StartTurn",
        "OpenSession",
        "HistoryCompressed",
        "RunTool",
        "ToolFinished",
        "CancelTool",
        "CancelBatch",
        "BatchCancelAcknowledged",
        "CheckLoop",
        "LoopVerdict",
        "ResetLoopDetection",
        "ClearLoopDetection",
        "CancelLoopCheck",
        "DisableLoopDetection",
        "RunHooks",
        "HookRan",
        "HooksFinished",
        "CancelHooks",
    }
)
"""Message types that are the actors' own traffic rather than something a user sees
(the model's requests and raw chunks, tool runs, loop checks, hook runs)."""


def is_client_event(type_name: str) -> bool:
    return type_name not in INTERNAL


def everything(type_name: str) -> bool:
    return True


_HEAD = re.compile(rb'^\{"v":(\d+),"seq":(\d+),')
_META = re.compile(rb'^\{"v":\d+,"kind":"meta"')
_TAIL = re.compile(rb'"type":"([A-Za-z]+)"\}\}$')
"""An envelope line starts with its version and seq and ends with its message's tag
(``envelope_to_plain`` and ``to_plain`` write the keys in that order)."""


class RecordingCursor:
    """Reads one recording forward (see the module doc)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.pos = 0
        """Byte offset of the first line not read yet."""
        self.refs = ContentRefs()
        """The contents defined so far (kept only by a cursor that delivers the
        messages that refer to them)."""

    def read(
        self, first: int, before: int | None, wanted: Callable[[str], bool] = everything
    ) -> tuple[list[Envelope], int]:
        """Envelopes with ``first <= seq < before`` (``None``: as far as the file goes)
        whose type ``wanted`` accepts, and the next sequence number to expect after them.

        Runs in a worker thread: blocking file I/O and decoding only.
        """
        try:
            with self.path.open("rb") as fh:
                fh.seek(self.pos)
                data = fh.read()
        except FileNotFoundError:
            return [], first
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
            if seq is None and expand and _META.match(line):
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
        if before is not None:
            expected = max(expected, before)
        return out, expected

    def _decode(self, line: bytes, *, keep_only: bool = False) -> Envelope | None:
        """The line's envelope (its references resolved; ``keep_only``: only take in
        the contents it defines and refers to); ``None`` for a line this build cannot
        read: skipped, not fatal."""
        try:
            data = json.loads(line)
            if not isinstance(data, dict) or data.get("v") not in (FORMAT_VERSION, REFS_VERSION):
                return None
            if keep_only:
                self.refs.expand(data)
                return None
            return decode_line(data, self.refs, where=f"{self.path}")
        except (ValueError, CodecError):
            return None


_REFS_HEAD = b'{"v":%d,' % REFS_VERSION


def _classify(line: bytes) -> tuple[int | None, str | None, int | None]:
    """(seq, message type, last seq of a void line) of one line; seq None: not a
    numbered line (meta, blank, unreadable)."""
    head = _HEAD.match(line)
    if head is not None:
        tail = _TAIL.search(line)
        return int(head.group(2)), tail.group(1).decode() if tail else None, None
    if not line.strip():
        return None, None, None
    try:
        data = json.loads(line)
    except ValueError:
        return None, None, None
    if not isinstance(data, dict):
        return None, None, None
    if data.get("kind") == "void" and isinstance(data.get("first"), int) and isinstance(data.get("last"), int):
        return int(data["first"]), "", int(data["last"])
    if isinstance(data.get("seq"), int) and data.get("kind") is None:
        msg = data.get("msg")
        tag = msg.get("type") if isinstance(msg, dict) else None
        return int(data["seq"]), tag if isinstance(tag, str) else None, None
    return None, None, None
