"""One line of a recording: its JSON text, its version, and what its two ends say.

Every other module of the package reads and writes lines through these. An envelope
line starts with its version and sequence number and ends with its message's type tag
(``bus.codec`` writes the keys in that order, the message's ``type`` last), so a
scanner learns both without parsing the line: ``line_seq`` and ``line_type``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from bus.codec import FORMAT_VERSION

REFS_VERSION = 2
"""The version of a line that carries ``defs``/``refs`` (every other line is written as
``bus.codec.FORMAT_VERSION``, 1): a reader that predates them refuses the line as newer
than it reads instead of decoding a request without its contents."""

VERSIONS = (FORMAT_VERSION, REFS_VERSION)
"""The line versions this build reads."""


class RecordingError(Exception):
    """A recording cannot be read: names the file and line."""

    def __init__(self, path: Path | str, line: int | None, message: str) -> None:
        self.path = str(path)
        self.line = line
        self.detail = message
        where = f"{path}:{line}" if line is not None else str(path)
        super().__init__(f"{where}: {message}")


_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)
"""``json.dumps`` with these arguments makes an encoder per call (every line): made once."""


def dumps(data: Any) -> str:
    """Plain JSON data as a line's compact text (no newline)."""
    return _ENCODER.encode(data)


def json_object(raw: bytes | str) -> dict[str, Any] | None:
    """A line parsed, when it is a JSON object (``None``: blank, torn or not an object)."""
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def check_version(p: Path, lineno: int, version: Any) -> None:
    """Raise ``RecordingError`` unless this build reads lines of ``version``."""
    if version in VERSIONS:
        return
    if isinstance(version, int) and version > REFS_VERSION:
        raise RecordingError(
            p, lineno, f"format version {version} is newer than this agentbus reads ({REFS_VERSION}); upgrade agentbus"
        )
    raise RecordingError(p, lineno, f"unsupported format version {version!r}")


_HEAD = re.compile(rb'\{"v":\d+,"seq":(\d+),')
_META_HEAD = re.compile(rb'\{"v":\d+,"kind":"meta"')
_TAG = re.compile(rb'"type":"([A-Za-z]+)"\}\}\s*$')
TAG_WINDOW = 64
"""How far from a line's end ``line_type`` looks: ``"type":"`` and the longest tag a
message type could have with room to spare (the longest today has 23 characters)."""


def line_seq(line: bytes) -> int | None:
    """The sequence number an envelope line starts with (``None``: not an envelope line,
    or not as the recorder writes one)."""
    head = _HEAD.match(line)
    return int(head.group(1)) if head is not None else None


def line_type(line: bytes) -> str | None:
    """The message type an envelope line ends with, read from its last bytes only
    (``None``: a meta or void line, a torn one, or not as the recorder writes it: parse
    it to know). A line as long as a model request's contents costs the same as a short
    one."""
    tag = _TAG.search(line, max(0, len(line) - TAG_WINDOW))
    return tag.group(1).decode("ascii") if tag is not None else None


def is_meta_line(line: bytes) -> bool:
    """The line is a meta line as the recorder writes one (its first keys)."""
    return _META_HEAD.match(line) is not None


def is_recording_line(data: Any) -> bool:
    """Parsed JSON that is one of a recording's lines (a meta, void or envelope line)."""
    return isinstance(data, dict) and ("kind" in data or "seq" in data)


__all__ = [
    "REFS_VERSION",
    "TAG_WINDOW",
    "VERSIONS",
    "RecordingError",
    "check_version",
    "dumps",
    "is_meta_line",
    "is_recording_line",
    "json_object",
    "line_seq",
    "line_type",
]
