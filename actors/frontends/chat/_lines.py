"""Where the chat's typed lines come from.

On a terminal (stdin and stdout both ttys, GNU readline available), lines are read
with readline in a worker thread: line editing, history (up arrow) and Tab completion
(``_complete``). Readline keeps the terminal's ``ISIG``, so Ctrl-C still reaches the
chat as SIGINT, and it clears the line being typed. The chat draws its own ``> ``
marker, so readline is given an empty prompt; after output that interrupts the user's
typing, the chat draws the marker again followed by what was typed so far
(``pending_text``).

Otherwise (piped input, or stdout piped) lines are split from stdin's bytes exactly as
before: no editing, no echo of our own.

A read in the worker thread cannot be interrupted: when the chat exits, the thread is
abandoned (it is a daemon thread) and the terminal's settings are restored from the
copy taken when the input was opened.
"""

from __future__ import annotations

import contextlib
import os
import select
import sys
from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol

import trio

from bus.json_values import well_formed

Completer = Callable[[str, int, int], list[str]]
"""``(line, begidx, endidx) -> candidates`` (see ``_complete.complete``)."""


class SingleKey(str):
    """A key that answered at once, without Enter (not echoed: the chat says what it
    meant)."""


class LineSource(Protocol):
    keys: frozenset[str]
    """Keys that answer at once, without Enter, when typed first on a line (an approval
    waits); set by the chat. Only a terminal honours them; a pipe reads lines."""

    async def read_line(self) -> str | None:
        """The next line without its newline (a ``SingleKey`` for one of ``keys``);
        None at the end of input."""
        ...

    def pending_text(self) -> str:
        """What the user has typed of the current line so far (for a redraw)."""
        ...


class StreamLines:
    """Lines split from a byte stream (a pipe)."""

    def __init__(self, stream: trio.abc.ReceiveStream) -> None:
        self.stream = stream
        self.keys: frozenset[str] = frozenset()
        self._buf = bytearray()
        self._eof = False

    async def read_line(self) -> str | None:
        # Linear in a long line (a pasted file): search only what arrived since last time.
        searched = 0
        while (nl := self._buf.find(b"\n", searched)) < 0:
            searched = len(self._buf)
            if self._eof:
                return None
            data = await self.stream.receive_some(1 << 16)
            if not data:
                self._eof = True
                rest = bytes(self._buf)
                self._buf.clear()
                if rest.strip():
                    return rest.decode("utf-8", "replace").rstrip("\r")
                return None
            self._buf += data
        raw = bytes(self._buf[:nl])
        del self._buf[: nl + 1]
        return raw.decode("utf-8", "replace").rstrip("\r")

    def pending_text(self) -> str:
        return ""


class ReadlineLines:
    """Lines read with GNU readline in a worker thread (see the module doc)."""

    def __init__(self, completer: Completer) -> None:
        import readline

        self._readline: Any = readline
        self._completer = completer
        self.keys: frozenset[str] = frozenset()
        self._reading = False
        """readline reads a line (else its buffer holds the last one)."""
        self._matches: list[str] = []
        if "libedit" in (readline.__doc__ or ""):
            readline.parse_and_bind("bind ^I rl_complete")
        else:
            readline.parse_and_bind("tab: complete")
        readline.set_completer_delims(" \t\n")
        readline.set_completer(self._complete)

    def _complete(self, text: str, state: int) -> str | None:
        # Called by readline in the reading thread: first with state 0, then 1, 2...
        if state == 0:
            rl = self._readline
            try:
                self._matches = self._completer(rl.get_line_buffer(), rl.get_begidx(), rl.get_endidx())
            except Exception:  # a completion must never break the line being typed
                self._matches = []
        return self._matches[state] if state < len(self._matches) else None

    async def read_line(self) -> str | None:
        return await trio.to_thread.run_sync(self._read, abandon_on_cancel=True)

    def pending_text(self) -> str:
        text: str = self._readline.get_line_buffer() if self._reading else ""
        return text

    def _read(self) -> str | None:
        """In the worker thread: wait for the first key of a line outside readline (the
        terminal without echo or line editing, so a key is seen as typed). If an approval
        waits (``keys``) and the key is an answer, that is the line; otherwise readline
        reads the line, starting with what was typed."""
        first = _first_key(sys.stdin.fileno(), lambda: self.keys)
        if isinstance(first, SingleKey):
            return first
        rl = self._readline

        def prefill() -> None:
            rl.insert_text(first)
            rl.redisplay()

        if first:
            rl.set_pre_input_hook(prefill)
        self._reading = True
        try:
            return _read_one()
        finally:
            self._reading = False
            if first:
                rl.set_pre_input_hook(None)


def _first_key(fd: int, keys: Callable[[], frozenset[str]]) -> str:
    """Wait until a key is typed. With no ``keys`` wanted, leave it unread (readline
    reads it) and return ``""``. Else read it: one of ``keys`` (any case) is returned as
    a ``SingleKey``, printable text as itself (the line starts with it); anything else
    (arrows, Enter, control keys) is ignored while an answer is wanted.

    Meanwhile the terminal is without echo and line buffering (``ISIG`` kept: Ctrl-C is
    still SIGINT); its mode is restored before readline starts (readline echoes only
    what it finds the terminal echoing)."""
    import termios

    original = termios.tcgetattr(fd)
    mode = termios.tcgetattr(fd)
    mode[3] &= ~(termios.ICANON | termios.ECHO)
    mode[6][termios.VMIN], mode[6][termios.VTIME] = 1, 0
    termios.tcsetattr(fd, termios.TCSANOW, mode)
    try:
        while True:
            select.select([fd], [], [])
            wanted = keys()
            if not wanted:
                return ""
            raw = os.read(fd, 1)  # one key: what follows it (type-ahead, a paste) waits
            if raw == b"\x1b":  # an arrow or function key: its sequence is dropped
                while select.select([fd], [], [], 0)[0] and os.read(fd, 16):
                    pass
                continue
            if raw and raw[0] >= 0xC0:  # the rest of a UTF-8 character
                raw += os.read(fd, 1 if raw[0] < 0xE0 else 2 if raw[0] < 0xF0 else 3)
            typed = well_formed(raw.decode("utf-8", "replace"))
            if typed.lower() in wanted:
                return SingleKey(typed.lower())
            if typed.isprintable():
                return typed
    finally:
        termios.tcsetattr(fd, termios.TCSANOW, original)


def _read_one() -> str | None:
    try:
        # Bytes typed that are not UTF-8 come as lone surrogates (surrogateescape):
        # made encodable here, as a pipe's are (U+FFFD), before they become a message.
        return well_formed(input(""))
    except EOFError:
        return None


def readline_usable() -> bool:
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        return False
    try:
        import readline  # noqa: F401
    except ImportError:
        return False
    return True


@contextlib.asynccontextmanager
async def open_lines(completer: Completer, *, use_readline: bool) -> AsyncIterator[LineSource]:
    """The chat's line source (readline on a terminal, else stdin's bytes)."""
    if use_readline:
        import termios

        fd = sys.stdin.fileno()
        saved = termios.tcgetattr(fd)
        try:
            yield ReadlineLines(completer)
        finally:
            # A read abandoned mid-line leaves readline's terminal mode behind.
            with contextlib.suppress(termios.error):
                termios.tcsetattr(fd, termios.TCSADRAIN, saved)
        return
    stream = trio.lowlevel.FdStream(os.dup(sys.stdin.fileno()))
    async with stream:
        yield StreamLines(stream)


__all__ = ["LineSource", "ReadlineLines", "SingleKey", "StreamLines", "open_lines", "readline_usable"]
