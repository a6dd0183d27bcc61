"""The SDK's stdio transport, read in whole lines: a stdio server's long answer costs
time linear in its length.

``mcp.client.stdio.stdio_client`` (mcp 2.3.0) splits what it reads with
``(buffer + chunk).split("\\n")`` for every chunk the pipe gives (at most 64 KiB), so a
line of n bytes costs n²/64 KiB: a 50 MB tool result took 20 s of the event loop's time
(10 MB 1.5 s), every other call and the session frozen meanwhile. Its reader takes the
text chunks from ``TextReceiveStream``, which is looked up in its module when a server
starts; ``_LineChunks`` stands in there and hands it text that ends at a newline
(whatever arrived after the last newline waits, in a list joined once), so the SDK's
buffer is always empty and each byte is copied a bounded number of times.
``install`` is called before every stdio connection (``actors.mcp._connection``)."""

from __future__ import annotations

from typing import Any

MAX_LINE_CHARS = 128 * 2**20
"""The longest line kept: the rest of a longer one (garbage, a binary stream) is
dropped up to its newline, and the SDK is handed a line that is not JSON in its place
(reported once as such), instead of the session's memory growing at the pipe's speed.
A request whose answer was dropped ends at its timeout."""

_TEXT_STREAM: Any = None
"""The SDK's ``TextReceiveStream`` (anyio's), taken from its module by ``install``."""


class _LineChunks:
    """The SDK's text stream, its chunks ending at a newline (but the last, at the
    end). Only iterated, as the SDK's reader does (``StopAsyncIteration`` at the end)."""

    def __init__(self, transport_stream: Any, encoding: str = "utf-8", errors: str = "strict") -> None:
        self._text = _TEXT_STREAM(transport_stream, encoding=encoding, errors=errors)
        self._pending: list[str] = []
        self._pending_chars = 0
        self._dropping = False
        """Past ``MAX_LINE_CHARS``: the rest of the line is dropped."""

    def __aiter__(self) -> _LineChunks:
        return self

    async def __anext__(self) -> str:
        while True:
            try:
                chunk: str = await self._text.__anext__()
            except StopAsyncIteration:
                if not self._pending:
                    raise
                rest = "".join(self._pending)
                self._pending.clear()
                return rest
            if self._dropping:
                newline = chunk.find("\n")
                if newline < 0:
                    continue
                self._dropping = False
                chunk = chunk[newline + 1 :]
                if not chunk:
                    continue
            cut = chunk.rfind("\n") + 1
            if not cut:
                self._pending.append(chunk)
                self._pending_chars += len(chunk)
                if self._pending_chars > MAX_LINE_CHARS:
                    self._pending.clear()
                    self._pending_chars = 0
                    self._dropping = True
                    return f"a line longer than {MAX_LINE_CHARS} characters (dropped)\n"
                continue
            lines = chunk[:cut]
            if self._pending:
                self._pending.append(lines)
                lines = "".join(self._pending)
                self._pending.clear()
            self._pending_chars = 0
            if cut < len(chunk):
                self._pending.append(chunk[cut:])
                self._pending_chars = len(chunk) - cut
            return lines

    async def aclose(self) -> None:
        await self._text.aclose()


def install() -> None:
    """Make the SDK's stdio reader take whole lines."""
    global _TEXT_STREAM
    import mcp.client.stdio

    if _TEXT_STREAM is None:
        _TEXT_STREAM = mcp.client.stdio.TextReceiveStream  # type: ignore[attr-defined]
    mcp.client.stdio.TextReceiveStream = _LineChunks  # type: ignore[attr-defined,misc,assignment]
