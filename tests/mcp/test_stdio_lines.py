"""The SDK's stdio reader is handed whole lines (actors/mcp/_stdio_lines.py): its split
of ``buffer + chunk`` per chunk made a line of n bytes cost n²/64 KiB."""

from __future__ import annotations

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
