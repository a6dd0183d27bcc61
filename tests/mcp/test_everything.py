"""MCP connections to a server nobody here wrote: ``@modelcontextprotocol/server-everything``
from npm (the MCP project's test server for clients), over stdio, streamable HTTP and SSE.

``.ci/run`` installs it (best effort, as acpx) into ``.npm-mcp/everything`` and then sets
``AGENTBUS_REQUIRE_MCP_EVERYTHING``, so that a server that cannot be found fails these
tests instead of skipping them; elsewhere they skip saying how to install it. It has no
tool returning audio (tests/mcp/test_connection.py covers audio with the SDK's server).

Over stdio the server runs behind tests/fakes/stdio_tee.py, which logs what it is sent:
a cancelled call must reach it as ``notifications/cancelled``.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio

from actors.mcp import McpConnection, McpTool, ServerParams
from tests.fakes.mcp_everything import INSTALL, REQUIRED, find_everything
from tests.mcp.test_connection import BOUND_S, read, running, tools_of, until

ROOT = Path(__file__).resolve().parents[2]
TEE = str(ROOT / "tests" / "fakes" / "stdio_tee.py")


@pytest.fixture(scope="module")
def everything() -> Path:
    found = find_everything()
    if found is None:
        if os.environ.get(REQUIRED):
            pytest.fail(f"{REQUIRED} is set (.ci/run installed it) but server-everything or node is not found")
        pytest.skip(f"@modelcontextprotocol/server-everything is not installed (or node is missing): {INSTALL}")
    return found


def teed(everything: Path, log: Path) -> ServerParams:
    return ServerParams(
        name="everything",
        command=sys.executable,
        args=(TEE, str(log), "--", str(everything), "stdio"),
        env={"PATH": os.environ["PATH"]},
        timeout_s=BOUND_S,
    )


def sent(log: Path) -> list[dict[str, object]]:
    """The JSON-RPC messages the server was sent."""
    return [json.loads(line) for line in read(log).splitlines() if line.strip()]


def call_ids(log: Path, method: str) -> list[object]:
    return [m.get("id") for m in sent(log) if m.get("method") == method]


async def check_discovery_and_content(conn: McpConnection) -> dict[str, McpTool]:
    """What every transport must give: the tools, and each content type the server has as
    Gemini CLI's parts and display."""
    tools = await tools_of(conn)
    assert {"echo", "get-tiny-image", "get-resource-reference", "get-resource-links", "get-sum"} <= set(tools)
    decl = tools["get-sum"].declaration("gemini-2.5-flash")
    assert decl["name"] == "mcp_everything_get-sum"
    assert decl["parametersJsonSchema"]["required"] == ["a", "b"]

    echo = await tools["echo"].execute({"message": "hi"}, None)
    assert list(echo.llm_content) == [{"text": "<untrusted_context>\nEcho: hi\n</untrusted_context>"}]

    image = await tools["get-tiny-image"].execute({}, None)
    parts = list(image.llm_content)
    assert parts[1] == {"text": "[Tool 'get-tiny-image' provided the following image data with mime-type: image/png]"}
    assert parts[2]["inlineData"]["mimeType"] == "image/png" and parts[2]["inlineData"]["data"].startswith("iVBORw0KGgo")
    assert image.return_display == "Here's the image you requested:\n[Image: image/png]\nThe image above is the MCP logo."

    text = await tools["get-resource-reference"].execute({"resourceType": "Text", "resourceId": 2}, None)
    resource = list(text.llm_content)[1]["text"]
    assert resource.startswith("<untrusted_context>\nResource 2: This is a plaintext resource created at ")

    blob = await tools["get-resource-reference"].execute({"resourceType": "Blob", "resourceId": 3}, None)
    parts = list(blob.llm_content)
    assert parts[1] == {
        "text": "[Tool 'get-resource-reference' provided the following embedded resource with mime-type: text/plain]"
    }
    assert parts[2]["inlineData"]["mimeType"] == "text/plain"
    assert "[Embedded Resource: text/plain]" in str(blob.return_display)

    links = await tools["get-resource-links"].execute({"count": 2}, None)
    assert list(links.llm_content)[1:] == [
        {"text": "Resource Link: Blob Resource 1 at demo://resource/dynamic/blob/1"},
        {"text": "Resource Link: Text Resource 2 at demo://resource/dynamic/text/2"},
    ]
    assert str(links.return_display).endswith("[Link to Text Resource 2: demo://resource/dynamic/text/2]")

    # Arguments the server's own schema refuses: its isError result, a tool error.
    failed = await tools["echo"].execute({}, None)
    assert failed.error_type == "mcp_tool_error"
    assert failed.return_display == "Error: MCP tool 'echo' reported an error."
    assert "Input validation error" in str(failed.error_message)
    assert '"isError":true' in str(failed.error_message)
    return tools


async def cancel_a_long_call(tool: McpTool, started: object) -> None:
    """Start a long call, wait for ``started()`` (the server has it), cancel: the call
    must end at once (bounded against hangs only)."""
    with trio.CancelScope() as scope:
        async with trio.open_nursery() as nursery:

            async def call() -> None:
                await tool.execute({"duration": 600, "steps": 600}, None)

            nursery.start_soon(call)
            await until(started)  # type: ignore[arg-type]
            scope.cancel()
    assert scope.cancelled_caught


async def test_over_stdio_discovery_each_content_type_and_an_error_result(everything: Path, tmp_path: Path) -> None:
    async with running(teed(everything, tmp_path / "sent")) as [conn]:
        await check_discovery_and_content(conn)
    assert [m["params"]["clientInfo"]["name"] for m in sent(tmp_path / "sent") if m.get("method") == "initialize"] == [  # type: ignore[index]
        "gemini-cli-mcp-client"
    ]


async def test_over_stdio_a_cancelled_call_is_told_to_the_server_and_the_connection_goes_on(
    everything: Path, tmp_path: Path
) -> None:
    log = tmp_path / "sent"
    async with running(teed(everything, log)) as [conn]:
        tools = await tools_of(conn)
        await cancel_a_long_call(tools["trigger-long-running-operation"], lambda: call_ids(log, "tools/call"))
        [call_id] = call_ids(log, "tools/call")
        await until(lambda: any(
            m.get("method") == "notifications/cancelled" and m["params"]["requestId"] == call_id  # type: ignore[index]
            for m in sent(log)
        ))
        echo = await tools["echo"].execute({"message": "still here"}, None)
    assert echo.return_display == "Echo: still here"


async def test_over_stdio_a_server_killed_mid_call_fails_the_call_once_and_the_next_call_reconnects(
    everything: Path, tmp_path: Path
) -> None:
    log = tmp_path / "sent"
    lines: list[str] = []
    async with running(teed(everything, log), report=lines.append) as [conn]:
        tools = await tools_of(conn)
        first = int(read(Path(f"{log}.pid")))
        async with trio.open_nursery() as nursery:
            results = []

            async def call() -> None:
                results.append(await tools["trigger-long-running-operation"].execute({"duration": 600, "steps": 600}, None))

            nursery.start_soon(call)
            await until(lambda: bool(call_ids(log, "tools/call")))
            os.kill(first, signal.SIGKILL)
        [killed] = results
        await until(lambda: not conn.connected)
        again = await tools["echo"].execute({"message": "back"}, None)
        second = int(read(Path(f"{log}.pid")))
    assert killed.error_type == "mcp_tool_error"
    assert "MCP server 'everything' disconnected during the call" in str(killed.error_message)
    assert len(lines) == 1 and lines[0].startswith("MCP server 'everything' disconnected (")
    assert again.return_display == "Echo: back" and second != first


@asynccontextmanager
async def served(everything: Path, mode: str) -> AsyncIterator[tuple[int, list[str]]]:
    """server-everything's HTTP mode (``streamableHttp`` or ``sse``) on a free port; its
    port once it listens, and its log (a line per message it receives) as it grows."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {"PATH": os.environ["PATH"], "PORT": str(port)}
    process = await trio.lowlevel.open_process(
        [str(everything), mode], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    log: list[str] = []
    listening = trio.Event()

    async def follow() -> None:
        assert process.stdout is not None
        pending = b""
        while data := await process.stdout.receive_some(4096):
            pending += data
            *done, pending = pending.split(b"\n")
            log.extend(line.decode(errors="replace") for line in done)
            if any(f"port {port}" in line for line in log):
                listening.set()

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(follow)
            with trio.fail_after(BOUND_S):
                await listening.wait()
            yield port, log
            nursery.cancel_scope.cancel(reason="the test is done with the server")
    finally:
        process.kill()
        await process.wait()


HTTP_MODES = {
    # mode: (path, transport, the log line of each message the server receives)
    "streamableHttp": ("/mcp", "http", "Received MCP POST request"),
    "sse": ("/sse", "sse", "Client Message from"),
}


@pytest.mark.filterwarnings("ignore:Async generator 'httpcore2\\.:ResourceWarning")
@pytest.mark.parametrize("mode", list(HTTP_MODES))
async def test_over_http_discovery_each_content_type_an_error_result_and_a_cancel(everything: Path, mode: str) -> None:
    path, transport, received = HTTP_MODES[mode]
    async with served(everything, mode) as (port, log):
        server = ServerParams(
            name="everything", url=f"http://127.0.0.1:{port}{path}", transport=transport, timeout_s=BOUND_S  # type: ignore[arg-type]
        )
        async with running(server) as [conn]:
            tools = await check_discovery_and_content(conn)
            def seen() -> int:
                return sum(received in line for line in log)

            # The call's own message reaches the server, then the cancel is one more. (A
            # line of an earlier call still in the pipe can only make these waits shorter.)
            before = seen()
            await cancel_a_long_call(tools["trigger-long-running-operation"], lambda: seen() > before)
            await until(lambda: seen() >= before + 2)
            echo = await tools["echo"].execute({"message": "still here"}, None)
    assert echo.return_display == "Echo: still here"
