"""The SDK's stdio reader is handed whole lines (actors/mcp/_stdio_lines.py): its split
of ``buffer + chunk`` per chunk made a line of n bytes cost n²/64 KiB."""

from __future__ import annotations

import sys

import pytest
import trio

from actors.mcp import McpConnection, ServerParams, discover
from actors.mcp._stdio_lines import _LineChunks, install


def _pipe(chunks: list[bytes]) -> object:
    """A byte stream giving ``chunks`` one by one, then its end (the SDK's memory
    stream, as a process's stdout gives bytes)."""
    import mcp.client.stdio

    send, receive = mcp.client.stdio.anyio.create_memory_object_stream[bytes](len(chunks))  # type: ignore[attr-defined]
    for chunk in chunks:
        send.send_nowait(chunk)
    send.close()
    return receive


async def test_chunks_end_at_a_newline_however_the_pipe_cuts_the_lines() -> None:
    long_line = b'{"result": "' + b"x" * 10_000 + b'"}\n'
    stream = long_line + b"short\n" + "é\n".encode() + b"partial"
    pieces = [stream[i : i + 7] for i in range(0, len(stream), 7)]  # é cut in two too
    install()
    lines = _LineChunks(_pipe(pieces))
    got = [chunk async for chunk in lines]
    await lines.aclose()
    assert "".join(got) == stream.decode()
    assert all(chunk.endswith("\n") for chunk in got[:-1])
    assert got[-1] == "partial"
    assert len(got) <= 4  # the long line is one chunk, not 1,430


async def test_the_sdks_stdio_reader_reads_through_it() -> None:
    import mcp.client.stdio

    install()
    reader: object = mcp.client.stdio.TextReceiveStream  # type: ignore[attr-defined]
    assert reader is _LineChunks


async def test_a_line_past_the_limit_is_dropped_for_a_line_that_is_not_json(monkeypatch: pytest.MonkeyPatch) -> None:
    import actors.mcp._stdio_lines as lines_module

    monkeypatch.setattr(lines_module, "MAX_LINE_CHARS", 100)
    install()
    lines = _LineChunks(_pipe([b"ok\n", b"x" * 60, b"x" * 60, b"x" * 60, b"xx\nnext\n"]))
    got = [chunk async for chunk in lines]
    await lines.aclose()
    assert got == ["ok\n", "a line longer than 100 characters (dropped)\n", "next\n"]


async def test_a_server_flooding_its_stdout_without_newlines_costs_its_timeout_and_bounded_memory() -> None:
    """A stdio "server" writing without a newline: reported once, its connection given
    up at its timeout, the session's memory bounded (the SDK's own reader would hold
    all of it)."""
    import actors.mcp._stdio_lines as lines_module

    lines_module.MAX_LINE_CHARS, saved = 2**20, lines_module.MAX_LINE_CHARS
    flood = "import sys\nwhile True: sys.stdout.write('x' * 65536); sys.stdout.flush()\n"
    params = ServerParams(name="flood", command=sys.executable, args=("-c", flood), timeout_s=3)
    reports: list[str] = []
    try:
        conn = McpConnection(params, report=reports.append)
        async with trio.open_nursery() as nursery:
            await nursery.start(conn.run)
            with trio.fail_after(20):  # only against hangs
                [found] = await discover([conn])
            nursery.cancel_scope.cancel()
    finally:
        lines_module.MAX_LINE_CHARS = saved
    assert found.error is not None and found.error.startswith("MCP server 'flood' did not answer within 3s"), found.error
    assert reports == ["MCP server 'flood' sent a message that is not JSON-RPC (ignored)"]
