"""What every transport must do, where tests/mcp/test_connection.py covers stdio only:
over streamable HTTP and SSE (the SDK's ``MCPServer``, tests/fakes/mcp_server.py, on
127.0.0.1) each content type, an error result, a cancel the server sees, a server that
crashes mid-session, a server that never answers ``initialize``; and how a stdio
server is stopped at the session's end."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path

import attrs
import pytest
import trio

from actors.mcp import ServerParams, discover
from tests.mcp.test_connection import BOUND_S, SERVER, params, read, running, tools_of, until

NAMES_SERVER = str(Path(__file__).resolve().parents[1] / "fakes" / "mcp_names_server.py")

# The SDK's HTTP transports leave httpcore2's response iterators to the garbage collector
# when a connection closes (as pyproject's filter says of httpx2's).
pytestmark = pytest.mark.filterwarnings("ignore:Async generator 'httpcore2\\.:ResourceWarning")

TRANSPORTS = {"http": ("--http", "/mcp"), "sse": ("--sse", "/sse")}


def free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@asynccontextmanager
async def web_server(transport: str, port: int) -> AsyncIterator[trio.Process]:
    """The fake server over ``transport`` on ``port``, once it listens."""
    mode, _ = TRANSPORTS[transport]
    process = await trio.lowlevel.open_process(
        [sys.executable, SERVER, mode, str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        assert process.stderr is not None
        log = b""
        with trio.fail_after(BOUND_S):
            while b"Uvicorn running on" not in log:
                data = await process.stderr.receive_some(4096)
                assert data, f"the server exited: {log.decode(errors='replace')}"
                log += data

        async def drain() -> None:
            assert process.stderr is not None
            while await process.stderr.receive_some(4096):
                pass

        async with trio.open_nursery() as nursery:
            nursery.start_soon(drain)
            yield process
            nursery.cancel_scope.cancel(reason="the test is done with the server")
    finally:
        process.kill()
        await process.wait()


def over(transport: str, port: int, *, timeout_s: float = BOUND_S) -> ServerParams:
    _, path = TRANSPORTS[transport]
    return ServerParams(
        name="web", url=f"http://127.0.0.1:{port}{path}", transport=transport, timeout_s=timeout_s  # type: ignore[arg-type]
    )


@pytest.mark.parametrize("transport", list(TRANSPORTS))
async def test_each_content_type_an_error_result_and_a_cancel_the_server_sees(transport: str, tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    port = free_port()
    async with web_server(transport, port), running(over(transport, port)) as [conn]:
        tools = await tools_of(conn)
        assert list(tools) == ["echo", "picture", "both", "fail", "wait", "pid", "crash"]
        picture = await tools["picture"].execute({}, None)
        both = await tools["both"].execute({}, None)
        failed = await tools["fail"].execute({"reason": "bad input"}, None)
        with trio.CancelScope() as scope:
            async with trio.open_nursery() as nursery:

                async def call() -> None:
                    await tools["wait"].execute({"marker": str(marker)}, None)

                nursery.start_soon(call)
                await until(lambda: read(marker) == "started")
                scope.cancel()
        assert scope.cancelled_caught
        await until(lambda: read(marker) == "cancelled")
        echo = await tools["echo"].execute({"text": "still here"}, None)
    assert list(picture.llm_content)[1] == {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}}
    assert both.return_display == "first\n[Audio: audio/wav]\nthe notes\n[Link to big.bin: file:///big.bin]"
    assert failed.error_type == "mcp_tool_error"
    assert failed.return_display == "Error: MCP tool 'fail' reported an error."
    assert '"isError":true' in str(failed.error_message)
    assert echo.return_display == "echo: still here"


@pytest.mark.parametrize("transport", list(TRANSPORTS))
async def test_a_server_that_crashes_mid_session_fails_its_call_once_and_the_next_call_reconnects(transport: str) -> None:
    """The crashing call fails naming the server; the loss is reported once; a call while
    the server is down fails saying it cannot be reached; once it is back, the next call
    reconnects."""
    port = free_port()
    lines: list[str] = []
    async with running(over(transport, port), report=lines.append) as [conn]:
        async with web_server(transport, port) as first:
            tools = await tools_of(conn)
            before = (await tools["pid"].execute({}, None)).return_display
            crashed = await tools["crash"].execute({}, None)
            with trio.fail_after(BOUND_S):
                await first.wait()
        await until(lambda: not conn.connected)
        down = await tools["pid"].execute({}, None)
        async with web_server(transport, port):
            after = await tools["pid"].execute({}, None)
            reported = list(lines)  # (its end here is a second disconnection)
    assert crashed.error_type == "mcp_tool_error"
    assert "MCP server 'web' disconnected during the call" in str(crashed.error_message)
    assert down.error_type == "mcp_tool_error"
    assert "MCP server 'web' could not be started: " in str(down.error_message)
    assert after.error_type is None and after.return_display != before
    assert reported == [f"MCP server 'web' disconnected ({over(transport, port).url}); its next call reconnects."]


async def _never_answers(stream: trio.SocketStream) -> None:
    """Accept the connection, read what comes, answer nothing."""
    async for _ in stream:
        pass


@pytest.mark.parametrize("transport", list(TRANSPORTS))
async def test_a_server_that_never_answers_initialize_costs_its_timeout_and_no_more(transport: str) -> None:
    async with trio.open_nursery() as nursery:
        [listener] = await nursery.start(partial(trio.serve_tcp, _never_answers, 0, host="127.0.0.1"))
        port = listener.socket.getsockname()[1]
        server = over(transport, port, timeout_s=0.5)
        async with running(server) as [conn]:
            with trio.fail_after(BOUND_S):
                [found] = await discover([conn])
        nursery.cancel_scope.cancel()
    assert found.error == f"MCP server 'web' did not answer within 0.5s ({server.url})"


async def test_a_stdio_server_is_sent_sigterm_when_the_session_ends_not_after_a_grace(tmp_path: Path) -> None:
    """As Gemini CLI stops it: a server that stays after its stdin closes (many Node
    servers do) must not hold the session's end (the SDK waited 2 s for it)."""
    marker = tmp_path / "marker"
    server = ServerParams(name="names", command=sys.executable, args=(NAMES_SERVER, "--linger", str(marker)),
                          env=params().env, timeout_s=BOUND_S)
    async with running(server) as [conn]:
        await tools_of(conn)
    await until(lambda: read(marker) != "")
    assert read(marker) == "terminated"


async def test_a_json_rpc_error_instead_of_a_result_is_a_tool_error_worded_as_gemini_cli_words_it() -> None:
    """``MCP error <code>: <message>``, as the TypeScript SDK's McpError reads in Gemini
    CLI (it was the bare message)."""
    server = ServerParams(name="names", command=sys.executable, args=(NAMES_SERVER,), env=params().env, timeout_s=BOUND_S)
    async with running(server) as [conn]:
        tools = await tools_of(conn)
        refused = await tools["refuse"].execute({}, None)
    assert refused.error_type == "mcp_tool_error"
    assert '"error":{"message":"MCP error -32602: refused: no way","isError":true}' in str(refused.error_message)


async def test_a_call_past_the_servers_timeout_fails_worded_as_gemini_cli_words_it(tmp_path: Path) -> None:
    async with running(params()) as [conn]:
        tools = await tools_of(conn)
        conn.params = attrs.evolve(conn.params, timeout_s=0.2)  # connected; now the calls' bound
        late = await tools["wait"].execute({"marker": str(tmp_path / "marker")}, None)
    assert late.error_type == "mcp_tool_error"
    assert '"error":{"message":"MCP error -32001: Request timed out","isError":true}' in str(late.error_message)
