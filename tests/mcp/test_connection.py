"""MCP connections against a real server: the SDK's ``MCPServer`` (tests/fakes/mcp_server.py)
run as a subprocess over stdio, as users run their servers."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import psutil
import pytest
import trio

from actors.mcp import McpConnection, McpTool, ServerParams, discover
from actors.tools import ExecutorActor, ToolEnv
from bus import Bus
from bus.messages import CancelTool, RunTool, ToolFinished

SERVER = str(Path(__file__).resolve().parents[1] / "fakes" / "mcp_server.py")
BOUND_S = 20.0
"""Only against hangs: every step here takes well under a second."""


def params(name: str = "fake", *extra: str, timeout_s: float = BOUND_S) -> ServerParams:
    return ServerParams(
        name=name,
        command=sys.executable,
        args=(SERVER, *extra),
        env={"PATH": os.environ["PATH"]},
        timeout_s=timeout_s,
    )


@asynccontextmanager
async def running(*servers: ServerParams, report: Callable[[str], None] = lambda line: None) -> AsyncIterator[list[McpConnection]]:
    conns = [McpConnection(p, report=report) for p in servers]
    async with trio.open_nursery() as nursery:
        for conn in conns:
            await nursery.start(conn.run)
        yield conns
        nursery.cancel_scope.cancel()


async def tools_of(conn: McpConnection) -> dict[str, McpTool]:
    [found] = await discover([conn])
    assert found.error is None
    return {str(d["name"]): McpTool(name=f"mcp_{conn.name}_{d['name']}", connection=conn, definition=d) for d in found.tools}


async def until(check: Callable[[], bool]) -> None:
    """Wait for a condition another process brings about (polled, there being no event
    to wait on across processes; bounded)."""
    with trio.fail_after(BOUND_S):
        while True:
            if check():
                return
            await trio.sleep(0.01)


def read(path: Path) -> str:
    return path.read_text() if path.exists() else ""


async def test_discovery_lists_the_servers_tools_with_gemini_names_and_cleaned_schemas() -> None:
    async with running(params()) as [conn]:
        tools = await tools_of(conn)
    assert list(tools) == ["echo", "picture", "both", "fail", "wait", "pid", "crash"]
    echo = tools["echo"]
    assert echo.kind == "other"
    assert echo.display_name == "echo (fake MCP Server)"
    decl = echo.declaration("gemini-2.5-flash")
    assert decl["name"] == "mcp_fake_echo"
    assert decl["description"] == "Echo the text back."
    assert decl["parametersJsonSchema"]["required"] == ["text"]


async def test_a_hung_and_a_missing_server_are_one_line_each_and_the_others_are_used() -> None:
    hung = params("hung", "--hang", timeout_s=0.5)
    missing = ServerParams(name="missing", command="/nonexistent/mcp-server", timeout_s=BOUND_S)
    conns = [McpConnection(p, report=lambda line: None) for p in (params(), hung, missing)]
    async with trio.open_nursery() as nursery:
        for conn in conns:
            await nursery.start(conn.run)
        with trio.fail_after(BOUND_S):
            good, slow, absent = await discover(conns)
        nursery.cancel_scope.cancel()
    assert good.error is None and len(good.tools) == 7
    assert slow.error is not None and slow.error.startswith("MCP server 'hung' did not answer within 0.5s")
    assert absent.error == "MCP server 'missing' could not be started: command not found: /nonexistent/mcp-server"


async def test_include_and_exclude_tools_filter_what_is_discovered() -> None:
    server = ServerParams(
        name="fake",
        command=sys.executable,
        args=(SERVER,),
        include_tools=("echo", "fail(reason)", "pid"),
        exclude_tools=("pid",),
    )
    async with running(server) as [conn]:
        tools = await tools_of(conn)
    assert list(tools) == ["echo", "fail"]


async def test_each_content_type_becomes_geminis_parts_and_display() -> None:
    async with running(params()) as [conn]:
        tools = await tools_of(conn)
        echo = await tools["echo"].execute({"text": "hi"}, None)
        picture = await tools["picture"].execute({}, None)
        both = await tools["both"].execute({}, None)
    assert echo.error_type is None
    assert list(echo.llm_content) == [{"text": "<untrusted_context>\necho: hi\n</untrusted_context>"}]
    assert echo.return_display == "echo: hi"
    assert list(picture.llm_content) == [
        {"text": "[Tool 'picture' provided the following image data with mime-type: image/png]"},
        {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}},
    ]
    assert picture.return_display == "[Image: image/png]"
    assert list(both.llm_content) == [
        {"text": "<untrusted_context>\nfirst\n</untrusted_context>"},
        {"text": "[Tool 'both' provided the following audio data with mime-type: audio/wav]"},
        {"inlineData": {"mimeType": "audio/wav", "data": "UklGRg=="}},
        {"text": "<untrusted_context>\nthe notes\n</untrusted_context>"},
        {"text": "Resource Link: big.bin at file:///big.bin"},
    ]
    assert both.return_display == "first\n[Audio: audio/wav]\nthe notes\n[Link to big.bin: file:///big.bin]"


async def test_an_is_error_result_is_a_tool_error_quoting_the_call() -> None:
    async with running(params()) as [conn]:
        tools = await tools_of(conn)
        failed = await tools["fail"].execute({"reason": "bad input"}, None)
    assert failed.error_type == "mcp_tool_error"
    assert failed.return_display == "Error: MCP tool 'fail' reported an error."
    assert isinstance(failed.error_message, str)
    assert failed.error_message.startswith(
        'MCP tool \'fail\' reported tool error for function call: {"name":"fail","args":{"reason":"bad input"}} '
        'with response: [{"functionResponse":{"name":"fail","response":{"content":'
    )
    assert '"isError":true' in failed.error_message


async def test_a_cancelled_call_ends_at_once_and_the_server_sees_the_cancellation(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    async with running(params()) as [conn]:
        tools = await tools_of(conn)
        with trio.CancelScope() as scope:
            async with trio.open_nursery() as nursery:

                async def call() -> None:
                    await tools["wait"].execute({"marker": str(marker)}, None)

                nursery.start_soon(call)
                await until(lambda: read(marker) == "started")
                scope.cancel()
        assert scope.cancelled_caught
        await until(lambda: read(marker) == "cancelled")
        # The connection is still good for the next call.
        echo = await tools["echo"].execute({"text": "still here"}, None)
    assert echo.return_display == "echo: still here"


async def test_a_server_that_exits_is_reported_once_its_call_fails_and_the_next_call_reconnects() -> None:
    lines: list[str] = []
    async with running(params(), report=lines.append) as [conn]:
        tools = await tools_of(conn)
        first_pid = (await tools["pid"].execute({}, None)).return_display
        crashed = await tools["crash"].execute({}, None)
        await until(lambda: not conn.connected)
        again = await tools["pid"].execute({}, None)
    assert crashed.error_type == "mcp_tool_error"
    assert "MCP server 'fake' disconnected during the call" in str(crashed.error_message)
    assert lines == [
        f"MCP server 'fake' disconnected ({sys.executable} {SERVER}); its next call reconnects."
    ]
    assert again.error_type is None and again.return_display != first_pid


async def test_the_servers_process_dies_with_the_connection() -> None:
    async with running(params()) as [conn]:
        tools = await tools_of(conn)
        pid = int(str((await tools["pid"].execute({}, None)).return_display))
        assert psutil.pid_exists(pid)
    assert not _alive(pid)


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False




@asynccontextmanager
async def http_server(mode: str = "--http", path: str = "/mcp") -> AsyncIterator[str]:
    """The fake server over streamable HTTP (or SSE: ``--sse``) on 127.0.0.1; its URL
    once it listens."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = await trio.lowlevel.open_process(
        [sys.executable, SERVER, mode, str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        # Its web server says so on stderr once it listens.
        assert process.stderr is not None
        log = b""
        with trio.fail_after(BOUND_S):
            while b"Uvicorn running on" not in log:
                data = await process.stderr.receive_some(4096)
                assert data, f"the server exited: {log.decode(errors='replace')}"
                log += data

        async def drain() -> None:  # its request log, so that the pipe never fills
            assert process.stderr is not None
            while await process.stderr.receive_some(4096):
                pass

        async with trio.open_nursery() as nursery:
            nursery.start_soon(drain)
            yield f"http://127.0.0.1:{port}{path}"
            nursery.cancel_scope.cancel(reason="the test is done with the server")
    finally:
        process.kill()
        await process.wait()


async def test_cancel_tool_on_the_servers_executor_ends_the_call_cancelled_and_the_server_sees_it(tmp_path: Path) -> None:
    """The path a session takes: ``RunTool`` to the server's executor, then ``CancelTool``."""
    marker = tmp_path / "marker"
    bus = Bus()
    async with running(params()) as [conn]:
        tools = await tools_of(conn)
        async with trio.open_nursery() as nursery:
            env = ToolEnv(workspace=tmp_path, project_temp_dir=tmp_path)
            await nursery.start(ExecutorActor(bus, address="exec.mcp.fake:s", tools={"mcp_fake_wait": tools["wait"]}, env=env).run)
            client = bus.connect("client")
            await client.send(
                RunTool(session_id="s", call_id="c1", reply_to="client", name="mcp_fake_wait", args={"marker": str(marker)}),
                to="exec.mcp.fake:s",
            )
            await until(lambda: read(marker) == "started")
            await client.send(CancelTool(session_id="s", call_id="c1", reason="user"), to="exec.mcp.fake:s")
            with trio.fail_after(BOUND_S):
                finished = (await client.receive()).message
            await until(lambda: read(marker) == "cancelled")
            bus.disconnect("exec.mcp.fake:s")
    assert isinstance(finished, ToolFinished)
    assert finished.result.cancelled


async def test_a_line_that_is_not_json_rpc_is_reported_once_and_the_server_is_still_used() -> None:
    lines: list[str] = []
    async with running(params("noisy", "--garbage"), report=lines.append) as [conn]:
        tools = await tools_of(conn)
        echo = await tools["echo"].execute({"text": "fine"}, None)
    assert echo.return_display == "echo: fine"
    assert lines == ["MCP server 'noisy' sent a message that is not JSON-RPC (ignored)"]


@pytest.mark.filterwarnings("ignore:Async generator 'httpcore2\\.:ResourceWarning")
async def test_over_sse_and_a_url_without_type_falling_back_to_sse() -> None:
    async with http_server("--sse", "/sse") as url:
        sse = ServerParams(name="sse", url=url, transport="sse", timeout_s=BOUND_S)
        # Gemini's ``url`` without ``type``: streamable HTTP first, SSE when that fails.
        either = ServerParams(name="either", url=url, transport="http", sse_fallback=True, timeout_s=BOUND_S)
        async with running(sse, either) as conns:
            results = []
            for conn in conns:
                tools = await tools_of(conn)
                results.append((await tools["echo"].execute({"text": conn.name}, None)).return_display)
    assert results == ["echo: sse", "echo: either"]


class _AsksForAuth(BaseHTTPRequestHandler):
    def _deny(self) -> None:
        self.send_response(401)
        self.send_header("WWW-Authenticate", "Bearer")
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_POST = _deny

    def log_message(self, format: str, *args: object) -> None:
        pass


async def test_a_server_that_asks_for_oauth_is_one_clear_line_over_http_and_sse() -> None:
    server = HTTPServer(("127.0.0.1", 0), _AsksForAuth)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/mcp"
        conns = [
            McpConnection(ServerParams(name=t, url=url, transport=t, timeout_s=BOUND_S), report=lambda line: None)
            for t in ("http", "sse")
        ]
        async with trio.open_nursery() as nursery:
            for conn in conns:
                await nursery.start(conn.run)
            found = await discover(conns)
            nursery.cancel_scope.cancel()
    finally:
        server.shutdown()
        server.server_close()
    assert [d.error for d in found] == [
        f"MCP server '{t}' could not be started: it requires authentication (OAuth), which agentbus does not support yet"
        for t in ("http", "sse")
    ]
