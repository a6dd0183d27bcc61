"""MCP calls, cancels and server deaths under explored schedules: every call gets exactly
one result, the session goes on (the next call reconnects), and no server outlives the
session.

hypothesis generates the steps and drives trio's scheduler (``st.random_module()``) on
a ``MockClock``, as the explorer of whole sessions does (test_explored_sessions.py). The
server is the SDK's ``MCPServer`` on in-memory streams (``McpConnection(streams=...)``):
a process cannot live on the virtual clock. A server's death is its task cancelled and
its streams closed, as a process that exits closes its pipes. That a real server's
process dies with its session, also after deaths and reconnections, is the last test's,
with the stdio server of tests/fakes/mcp_server.py."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import psutil
import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from actors.mcp import McpConnection, McpTool, ServerParams, discover
from actors.tools import ExecutorActor, ToolEnv
from bus import Bus
from bus.messages import CancelTool, RunTool, ToolFinished
from tests.mcp.test_connection import until

EXECUTOR = "exec.mcp.mem:s"


@attrs.frozen
class Call:
    delay_ms: int


@attrs.frozen
class Cancel:
    call: int
    """Index among the calls made so far (modulo their number)."""


@attrs.frozen
class Kill:
    pass


@attrs.frozen
class Wait:
    ms: int


steps = st.lists(
    st.one_of(
        st.builds(Call, st.integers(0, 50)),
        st.builds(Cancel, st.integers(0, 30)),
        st.just(Kill()),
        st.builds(Wait, st.integers(0, 30)),
    ),
    min_size=1,
    max_size=25,
)


class _Servers:
    """In-memory servers of one session: each connection gets a new one."""

    def __init__(self) -> None:
        self.live: list[trio.CancelScope] = []
        self.started = 0

    def kill(self) -> None:
        for scope in self.live:
            scope.cancel()

    @asynccontextmanager
    async def streams(self) -> AsyncIterator[Any]:
        from mcp.server.mcpserver import MCPServer
        from mcp.shared.memory import create_client_server_memory_streams

        server = MCPServer("mem")

        @server.tool(description="Answers after some milliseconds.", structured_output=False)
        async def work(ms: int) -> str:
            await trio.sleep(ms / 1000)
            return f"worked {ms} ms"

        lowlevel = server._lowlevel_server
        async with create_client_server_memory_streams() as (client, (read, write)):
            scope = trio.CancelScope()
            self.live.append(scope)
            self.started += 1
            async with trio.open_nursery() as nursery:

                async def serve() -> None:
                    try:
                        with scope:
                            await lowlevel.run(read, write, lowlevel.create_initialization_options())
                    finally:
                        # What a process's exit does to its pipes.
                        await write.aclose()
                        await read.aclose()
                        self.live.remove(scope)

                nursery.start_soon(serve)
                try:
                    yield client
                finally:
                    scope.cancel()


async def _session(plan: list[Any], workspace: Path) -> tuple[dict[str, list[ToolFinished]], list[str], _Servers]:
    servers = _Servers()
    bus = Bus()
    results: dict[str, list[ToolFinished]] = {}
    reports: list[str] = []
    conn = McpConnection(ServerParams(name="mem", timeout_s=30.0), report=reports.append, streams=servers.streams)
    async with trio.open_nursery() as session:
        await session.start(conn.run)
        [found] = await discover([conn])
        assert found.error is None, found.error
        [definition] = found.tools
        tool = McpTool(name="mcp_mem_work", connection=conn, definition=definition)
        env = ToolEnv(workspace=workspace, project_temp_dir=workspace / ".tmp", session_id="s")
        await session.start(ExecutorActor(bus, address=EXECUTOR, tools={tool.name: tool}, env=env).run)
        client = bus.connect("client", capacity=1000)

        calls: list[str] = []
        answered = trio.Event()

        async def collect() -> None:
            async for envelope in client:
                message = envelope.message
                assert isinstance(message, ToolFinished)
                results.setdefault(message.call_id, []).append(message)
                if set(results) == set(calls):
                    answered.set()

        session.start_soon(collect)

        async def run(call_id: str, ms: int) -> None:
            nonlocal answered
            calls.append(call_id)
            answered = trio.Event()
            await client.send(
                RunTool(session_id="s", call_id=call_id, reply_to="client", name=tool.name, args={"ms": ms}),
                to=EXECUTOR,
            )

        for step in plan:
            match step:
                case Call(delay_ms=ms):
                    await run(f"c{len(calls)}", ms)
                case Cancel(call=i) if calls:
                    await client.send(CancelTool(session_id="s", call_id=calls[i % len(calls)], reason="user"), to=EXECUTOR)
                case Kill():
                    servers.kill()
                case Wait(ms=ms):
                    await trio.sleep(ms / 1000)

        async def settled() -> None:
            with trio.fail_after(600):  # virtual seconds: every call ends, whatever happened
                if calls:
                    await answered.wait()
                await trio.sleep(1)  # a second answer would have come by now

        await settled()
        # The session goes on: the next call (after a death, a reconnection) succeeds.
        await run("last", 1)
        await settled()
        bus.disconnect(EXECUTOR)
        session.cancel_scope.cancel()
    return results, reports, servers


@pytest.mark.property
@settings(max_examples=max(settings().max_examples // 2, 20))
@given(plan=steps, seed=st.random_module())
def test_every_mcp_call_gets_one_result_and_no_server_outlives_the_session(
    plan: list[Any], seed: Any, tmp_path_factory: pytest.TempPathFactory
) -> None:
    workspace = tmp_path_factory.mktemp("ws")
    results, reports, servers = trio.run(
        _session, plan, workspace, clock=trio.testing.MockClock(autojump_threshold=0)
    )
    assert all(len(r) == 1 for r in results.values()), {k: len(v) for k, v in results.items() if len(v) != 1}
    [last] = results["last"]
    assert last.result.error_type is None and last.result.return_display == "worked 1 ms", last.result
    for [finished] in results.values():
        r = finished.result
        ok = r.cancelled or r.error_type is None
        # A call made while the server died (disconnected during the call) or while it
        # was being started again (could not be started) fails naming it.
        assert ok or "MCP server 'mem' " in str(r.error_message), r
    assert servers.live == []
    assert all(line.startswith("MCP server 'mem' disconnected") for line in reports), reports


SERVER = str(Path(__file__).resolve().parents[1] / "fakes" / "mcp_server.py")


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


async def test_no_server_process_outlives_its_session_after_deaths_and_reconnections(tmp_path: Path) -> None:
    """A real stdio server: killed mid-session, started again by the next call, and busy
    with a call when the session ends: no process of it is left."""
    params = ServerParams(name="fake", command=sys.executable, args=(SERVER,), env={"PATH": os.environ["PATH"]}, timeout_s=20)
    marker = tmp_path / "marker"
    pids: list[int] = []
    with trio.fail_after(60):  # only against hangs
        async with trio.open_nursery() as session:
            conn = McpConnection(params, report=lambda line: None)
            await session.start(conn.run)
            [found] = await discover([conn])
            tools = {str(d["name"]): McpTool(name=f"mcp_fake_{d['name']}", connection=conn, definition=d) for d in found.tools}
            pids.append(int(str((await tools["pid"].execute({}, None)).return_display)))
            await tools["crash"].execute({}, None)
            await until(lambda: not conn.connected)
            pids.append(int(str((await tools["pid"].execute({}, None)).return_display)))
            session.start_soon(tools["wait"].execute, {"marker": str(marker)}, None)
            await until(marker.exists)
            pids.append(int((tmp_path / "marker.pid").read_text()))
            session.cancel_scope.cancel()
    assert pids[0] != pids[1] == pids[2]
    assert not any(_alive(pid) for pid in pids)
