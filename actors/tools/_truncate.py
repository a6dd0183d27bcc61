"""Gemini CLI's large tool-output truncation (``tool-executor.ts``, ``fileUtils.ts``).

When a shell call's ``llmContent`` is longer than the threshold, the model gets only its
head (20 %) and tail (80 %) with a marker in between, and the whole text is saved under
``<project temp dir>/tool-outputs/session-<session id>/<tool>_<call id>.txt``::

    Output too large. Showing first 8,000 and last 32,000 characters. For full output see: FILE
    <head>

    ... [1,960,074 characters omitted] ...

    <tail>

Lengths are JavaScript string lengths, i.e. UTF-16 code units (an emoji counts 2), and
numbers are grouped like ``toLocaleString('en-US')``. A cut that would split a surrogate
pair keeps the unit count but shows U+FFFD instead of a lone surrogate, which no
encoder downstream could write.

Two entry points share those rules: ``actors.common.format_truncated_output`` (pure, the
whole text in hand, also used by the turn) and :class:`TruncatingWriter`, which receives
the text piece by piece, keeps at most about ``threshold`` characters in memory and
streams everything into the output file once the threshold is passed.
"""

from __future__ import annotations

import math
import re
from collections import deque
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

import attrs

from actors.common import (
    split_budget,
    truncation_text,
    utf16_head,
    utf16_len,
    utf16_tail,
)

__all__ = [
    "DEFAULT_TRUNCATE_TOOL_OUTPUT_THRESHOLD",
    "TOOL_OUTPUTS_DIR",
    "TruncatedOutput",
    "TruncatingWriter",
    "sanitize_filename_part",
    "tool_output_path",
    "truncate_tool_output",
    "truncation_threshold",
]

DEFAULT_TRUNCATE_TOOL_OUTPUT_THRESHOLD = 40_000
"""``config.ts``: default of the ``tools.truncateToolOutputThreshold`` setting (chars)."""
TOOL_OUTPUTS_DIR = "tool-outputs"

_UNSAFE_FILENAME_CHARS = re.compile(r"[^a-zA-Z0-9_-]")


# ---------------------------------------------------------------- settings and paths


def truncation_threshold(settings: Mapping[str, Any]) -> int:
    """The ``tools.truncateToolOutputThreshold`` setting, or Gemini's default.

    Gemini also caps it at four times the context window left (``4 * (tokenLimit -
    lastPromptTokenCount)``); tools do not know the token count, so that cap is the
    caller's business.
    """
    tools = settings.get("tools")
    value = tools.get("truncateToolOutputThreshold") if isinstance(tools, Mapping) else None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return DEFAULT_TRUNCATE_TOOL_OUTPUT_THRESHOLD
    if isinstance(value, float):
        # NaN and infinities never truncate in JS (``length > NaN`` is false).
        return int(value) if math.isfinite(value) else 0
    return value


def sanitize_filename_part(part: str) -> str:
    """``sanitizeFilenamePart``: anything but ``[a-zA-Z0-9_-]`` becomes ``_``."""
    return _UNSAFE_FILENAME_CHARS.sub("_", part)


def tool_output_path(project_temp_dir: Path, tool_name: str, call_id: str, session_id: str) -> Path:
    """Where ``saveTruncatedToolOutput`` puts a call's full output.

    Tool name and call id are sanitised and lower-cased; the tool name is not repeated
    when the id already starts with it (Gemini's ids are ``<tool>__<tool>_<ms>_<n>``).
    Without a session id the file sits directly in ``tool-outputs``.
    """
    safe_tool = sanitize_filename_part(tool_name).lower()
    safe_id = sanitize_filename_part(call_id).lower()
    name = f"{safe_id}.txt" if safe_id.startswith(safe_tool) else f"{safe_tool}_{safe_id}.txt"
    directory = project_temp_dir / TOOL_OUTPUTS_DIR
    if session_id:
        directory = directory / f"session-{sanitize_filename_part(session_id)}"
    return directory / name


@attrs.frozen(kw_only=True)
class TruncatedOutput:
    """What the model gets for a tool's text, and where the full text went."""

    content: str
    """The text itself, or Gemini's head/tail rendering of it."""
    output_file: str | None = None
    """The file holding the full text; ``None`` when nothing was truncated."""
    original_length: int = 0
    """Length of the full text in UTF-16 units."""


class TruncatingWriter:
    """Streams one tool result's text; spills it to ``path`` once past ``threshold``.

    Memory stays bounded whatever the text's size: until the threshold is passed the
    pieces are kept (at most ``threshold`` units plus the piece that crosses it); after
    that only the head (20 % of the threshold) and the last pieces covering the tail
    (80 %) are kept, and every piece goes to the file as it arrives. A threshold of zero
    or less disables truncation (everything is kept, nothing is written).

    Use it as a context manager, or call :meth:`discard` when giving up (cancellation):
    the partial file is removed.
    """

    def __init__(self, path: Path, threshold: int) -> None:
        self._path = path
        self._threshold = threshold
        self._head_units, self._tail_units = split_budget(threshold) if threshold > 0 else (0, 0)
        self._pieces: list[str] = []
        """All pieces, until the text passes the threshold."""
        self._head = ""
        self._tail: deque[tuple[str, int]] = deque()
        self._tail_total = 0
        self._total = 0
        self._file: IO[str] | None = None
        self._done = False

    @property
    def length(self) -> int:
        """Units written so far."""
        return self._total

    @property
    def spilled(self) -> bool:
        """Whether the text passed the threshold (and the file exists)."""
        return self._file is not None

    def write(self, text: str) -> None:
        if self._done:
            raise RuntimeError("TruncatingWriter already finished")
        if not text:
            return
        units = utf16_len(text)
        self._total += units
        if self._file is None:
            self._pieces.append(text)
            if self._threshold > 0 and self._total > self._threshold:
                self._spill()
            return
        self._file.write(text)
        self._push_tail(text, units)

    def _spill(self) -> None:
        self._path.parent.mkdir(parents=True, exist_ok=True)
        # Like fs.writeFile: UTF-8, no newline translation.
        self._file = open(self._path, "w", encoding="utf-8", errors="replace", newline="")
        head_parts: list[str] = []
        head_units = 0
        for piece in self._pieces:
            self._file.write(piece)
            if head_units < self._head_units:
                part = utf16_head(piece, self._head_units - head_units)
                head_parts.append(part)
                head_units += utf16_len(part)
            self._push_tail(piece, utf16_len(piece))
        self._head = "".join(head_parts)
        self._pieces = []

    def _push_tail(self, text: str, units: int) -> None:
        self._tail.append((text, units))
        self._tail_total += units
        # Keep only the pieces that can still reach into the last ``tail_units``.
        while self._tail and self._tail_total - self._tail[0][1] >= self._tail_units:
            _, dropped = self._tail.popleft()
            self._tail_total -= dropped

    def finish(self) -> TruncatedOutput:
        """Close the file and return what the model gets."""
        if self._done:
            raise RuntimeError("TruncatingWriter already finished")
        self._done = True
        if self._file is None:
            content = "".join(self._pieces)
            self._pieces = []
            return TruncatedOutput(content=content, original_length=self._total)
        self._file.close()
        tail_text = utf16_tail("".join(piece for piece, _ in self._tail), self._tail_units)
        self._tail.clear()
        output_file = str(self._path)
        content = truncation_text(
            output_file,
            self._head_units,
            self._tail_units,
            self._total - self._head_units - self._tail_units,
            self._head,
            tail_text,
        )
        return TruncatedOutput(
            content=content, output_file=output_file, original_length=self._total
        )

    def discard(self) -> None:
        """Give up: close and remove the partial file, if any."""
        if self._done:
            return
        self._done = True
        self._pieces = []
        self._tail.clear()
        if self._file is not None:
            self._file.close()
            self._path.unlink(missing_ok=True)

    def __enter__(self) -> TruncatingWriter:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is not None:
            self.discard()


def truncate_tool_output(
    content: str,
    *,
    tool_name: str,
    call_id: str,
    project_temp_dir: Path,
    session_id: str,
    threshold: int,
) -> TruncatedOutput:
    """The whole of Gemini's ``truncateOutputIfNeeded`` for one string result."""
    path = tool_output_path(project_temp_dir, tool_name, call_id, session_id)
    with TruncatingWriter(path, threshold) as writer:
        writer.write(content)
        return writer.finish()
