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

_TEXT_STREAM: Any = None
"""The SDK's ``TextReceiveStream`` (anyio's), taken from its module by ``install``."""


class _LineChunks:
    """The SDK's text stream, its chunks ending at a newline (but the last, at the
    end). Only iterated, as the SDK's reader does (``StopAsyncIteration`` at the end)."""

    def __init__(self, transport_stream: Any, encoding: str = "utf-8", errors: str = "strict") -> None:
        self._text = _TEXT_STREAM(transport_stream, encoding=encoding, errors=errors)
        self._pending: list[str] = []

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
            cut = chunk.rfind("\n") + 1
            if not cut:
                self._pending.append(chunk)
                continue
            lines = chunk[:cut]
            if self._pending:
                self._pending.append(lines)
                lines = "".join(self._pending)
                self._pending.clear()
            if cut < len(chunk):
                self._pending.append(chunk[cut:])
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
