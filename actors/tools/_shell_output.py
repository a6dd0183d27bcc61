"""What a shell command printed, and what the model and the user are told of it.

The shell tool's output half (``run_shell_command``, :mod:`._shell`): the collector that
reads the merged stdout and stderr like Gemini CLI's ``child_process`` path (UTF-8 with
replacement, a NUL in the first 512 bytes marks it binary, only the last 16 M characters
kept, terminal escapes stripped), a background call's log read back the same way, and
Gemini's texts for a finished, timed-out, failed or cancelled command (``llmContent``
inside ``<untrusted_context>`` tags, ``returnDisplay``). Pure apart from the output sink
the collector streams to and :func:`read_log_output` (blocking: call it from a worker
thread).
"""

from __future__ import annotations

import codecs
import os
from collections import deque
from collections.abc import Callable
from pathlib import Path

import attrs

from actors.common import js_to_fixed, js_trim, strip_ansi, utf16_len, utf16_tail
from bus.messages import ToolResult

from ._base import OutputSink
from ._untrusted import wrap_untrusted

MAX_CHILD_PROCESS_BUFFER_SIZE = 16 * 1024 * 1024
"""Characters (UTF-16 units) of output kept; older output is dropped."""
MAX_SNIFF_SIZE = 4096
BINARY_SAMPLE_SIZE = 512
USER_CANCEL_MESSAGE = "Command was cancelled by user before it could complete."
USER_CANCEL_DISPLAY = "Command cancelled by user."
TRUNCATION_WARNING = (
    "\n[GEMINI_CLI_WARNING: Output truncated. The buffer is limited to "
    f"{MAX_CHILD_PROCESS_BUFFER_SIZE // (1024 * 1024)}MB.]"
)


# ======================================================================================
# What a run produced, and Gemini's texts for it


@attrs.frozen(kw_only=True)
class ShellOutcome:
    """Gemini's ``ShellExecutionResult``, reduced to what the texts use."""

    output: str = ""
    """Merged output, ANSI stripped and trimmed."""
    exit_code: int | None = None
    """``None`` when the process was killed by a signal or never exited on its own."""
    signal: int | None = None
    error: str | None = None
    """Spawn error (Node's wording: ``spawn /usr/bin/bash ENOENT``)."""
    pid: int | None = None
    timed_out: bool = False
    """Killed by the inactivity timeout."""
    background_pids: tuple[str, ...] = ()


def llm_pieces(
    outcome: ShellOutcome, command: str, command_to_execute: str, timeout_s: float
) -> list[str]:
    """The unwrapped ``llmContent`` as pieces (the output alone is one big piece)."""
    if outcome.timed_out:
        pieces = [timeout_message(timeout_s)]
        if js_trim(outcome.output):
            pieces += [" Below is the output before it was cancelled:\n", outcome.output]
        else:
            pieces.append(" There was no output before it was cancelled.")
        return pieces
    pieces = ["Output: ", outcome.output or "(empty)"]
    if outcome.error is not None:
        error = (
            outcome.error.replace(command_to_execute, command)
            if command_to_execute
            else (outcome.error)
        )
        pieces.append(f"\nError: {error}")
    if outcome.exit_code is not None and outcome.exit_code != 0:
        pieces.append(f"\nExit Code: {outcome.exit_code}")
    if outcome.signal:
        pieces.append(f"\nSignal: {outcome.signal}")
    if outcome.background_pids:
        pieces.append(f"\nBackground PIDs: {', '.join(outcome.background_pids)}")
    if outcome.pid:
        pieces.append(f"\nProcess Group PGID: {outcome.pid}")
    return pieces


def timeout_message(timeout_s: float) -> str:
    minutes = js_to_fixed(timeout_s * 1000 / 60000, 1)
    return (
        f"Command was automatically cancelled because it exceeded the timeout of {minutes} "
        "minutes without output."
    )


def return_display(outcome: ShellOutcome, timeout_s: float) -> str:
    if outcome.timed_out:
        message = timeout_message(timeout_s)
        if js_trim(outcome.output):
            return f"{message}\n\nOutput before cancellation:\n{outcome.output}"
        return message
    if js_trim(outcome.output):
        return outcome.output
    if outcome.signal:
        return f"Command terminated by signal: {outcome.signal}"
    if outcome.error is not None:
        return f"Command failed: {outcome.error}"
    if outcome.exit_code is not None and outcome.exit_code != 0:
        return f"Command exited with code: {outcome.exit_code}"
    return ""


def background_message(pid: int | None) -> str:
    shown = "undefined" if pid is None else str(pid)
    return f"Command moved to background (PID: {shown}). Output hidden. Press Ctrl+B to view."


def user_cancelled_result(streamed: str) -> ToolResult:
    """Gemini's result for a call the user cancelled, from the text it had streamed.

    :class:`ShellTool` re-raises ``trio.Cancelled`` instead; an executor that wants
    Gemini's partial response can build it from what the output sink received.
    """
    output = js_trim(strip_ansi(streamed))
    if js_trim(output):
        llm = f"{USER_CANCEL_MESSAGE} Below is the output before it was cancelled:\n{output}"
        display = f"{USER_CANCEL_DISPLAY}\n\nOutput before cancellation:\n{output}"
    else:
        llm = f"{USER_CANCEL_MESSAGE} There was no output before it was cancelled."
        display = USER_CANCEL_DISPLAY
    return ToolResult(llm_content=wrap_untrusted(llm), return_display=display, cancelled=True)


def read_log_output(path: Path) -> str:
    """A background log so far, as Gemini's ``output`` (last 16 MiB, stripped, trimmed)."""
    try:
        with open(path, "rb") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(max(0, size - MAX_CHILD_PROCESS_BUFFER_SIZE))
            raw = f.read()
    except OSError:
        return ""
    return js_trim(strip_ansi(codecs.decode(raw, "utf-8-sig", errors="replace")))


# ======================================================================================
# Output collection


def _utf16_drop_front(text: str, units: int) -> str:
    """``text.substring(units)`` (a split pair's half becomes U+FFFD)."""
    return utf16_tail(text, utf16_len(text) - units)


class OutputCollector:
    """Collects the output like Gemini's ``child_process`` path.

    UTF-8 with a leading BOM dropped and invalid bytes replaced (as WHATWG's decoder
    does); a NUL byte in the first 512 bytes marks the output binary and stops
    collection; only the last 16 M characters are kept.
    """

    def __init__(self, sink: OutputSink | None, on_activity: Callable[[], None]) -> None:
        self._sink = sink
        self._on_activity = on_activity
        self._decoder = codecs.getincrementaldecoder("utf-8-sig")(errors="replace")
        self._chunks: deque[tuple[str, int]] = deque()
        self._units = 0
        self._truncated = False
        self._sample = bytearray()
        self._sniffed = 0
        self.binary = False

    async def feed(self, data: bytes | bytearray) -> None:
        self._on_activity()
        if not self.binary and self._sniffed < MAX_SNIFF_SIZE:
            if len(self._sample) < BINARY_SAMPLE_SIZE:
                self._sample += data[: BINARY_SAMPLE_SIZE - len(self._sample)]
            self._sniffed += len(data)
            if 0 in self._sample:
                self.binary = True
        if self.binary:
            return
        text = self._decoder.decode(data, False)
        if text:
            self._append(text)
            if self._sink is not None:
                await self._sink(text)

    def _append(self, text: str) -> None:
        units = utf16_len(text)
        self._chunks.append((text, units))
        self._units += units
        excess = self._units - MAX_CHILD_PROCESS_BUFFER_SIZE
        while excess > 0:
            self._truncated = True
            first, first_units = self._chunks[0]
            if first_units <= excess:
                self._chunks.popleft()
                self._units -= first_units
                excess -= first_units
            else:
                kept = _utf16_drop_front(first, excess)
                self._chunks[0] = (kept, first_units - excess)
                self._units -= excess
                excess = 0

    async def finish(self) -> str:
        """Flush the decoder; the final output (ANSI stripped, trimmed)."""
        rest = self._decoder.decode(b"", True)
        if rest:
            # Gemini appends the decoder's remainder past the cap, as here.
            units = utf16_len(rest)
            self._chunks.append((rest, units))
            self._units += units
            if self._sink is not None and not self.binary:
                await self._sink(rest)
        joined = "".join(text for text, _ in self._chunks)
        self._chunks.clear()
        if self._truncated:
            joined += TRUNCATION_WARNING
        return js_trim(strip_ansi(joined))
