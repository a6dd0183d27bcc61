"""MCP benchmarks: one tool call through a session's scheduler against a direct SDK call
to the same stdio server, and 50 concurrent calls in one wave against the slowest.

Both sides of a ratio run in the same process, alternating, against one server process
each (the SDK's ``MCPServer`` over stdio, tests/bench/_mcp_server.py)."""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio

from actors.host import runtime
from actors.host.mcp import supervise_with_mcp
from actors.host.mcp_config import McpServerConfig
from actors.scheduler import PolicyEngine
from actors.tools import ToolEnv, executor_kind
from bus import Bus
from bus.messages import BatchSettled, CompletedCall, ScheduleBatch, ToolCallRequest

SERVER = str(Path(__file__).with_name("_mcp_server.py"))
CALLS = 200
"""Calls per side in the overhead benchmark."""


def _cfg(workspace: Path) -> runtime.SessionConfig:
    env = ToolEnv(workspace=workspace, project_temp_dir=workspace / ".tmp", session_id="bench")
    policy, _ = PolicyEngine.build(
        approval_mode="yolo", interactive=False, settings={}, user_policy_dir=None, workspace_policy_dir=None
    )
    server = McpServerConfig(name="bench", command=sys.executable, args=(SERVER,), trust=True)
    return runtime.SessionConfig(
        session_id="bench",
        model="gemini-2.5-flash",
        approval_mode="yolo",
        env=env,
        tools={},
        executor_of=executor_kind,
        policy=policy,
        request_config=lambda m: {},
        route_model=lambda m: m,
        classifier_choice=lambda c: c,
        classifier_request=None,
        mcp_servers={"bench": server},
        mcp_report=lambda line: None,
    )


class _Session:
    """A session with the bench server's tools; ``batch`` runs one batch of calls
    (``ScheduleBatch`` on the bus to ``BatchSettled``) and returns its results."""

    def __init__(self, bus: Bus, scheduler: str) -> None:
        self.turn = bus.connect("turn", capacity=10_000)
        self.scheduler = scheduler
        self.batches = 0

    async def batch(self, calls: list[tuple[str, dict[str, Any]]]) -> list[CompletedCall]:
        self.batches += 1
        batch_id = f"b{self.batches}"
        await self.turn.send(
            ScheduleBatch(
                session_id="bench",
                batch_id=batch_id,
                reply_to="turn",
                approval_mode="yolo",
                calls=tuple(
                    ToolCallRequest(call_id=f"{batch_id}.{i}", name=n, args=a) for i, (n, a) in enumerate(calls)
                ),
            ),
            to=self.scheduler,
        )
        while True:
            message = (await self.turn.receive()).message
            if isinstance(message, BatchSettled) and message.batch_id == batch_id:
                failed = [c.error_message for c in message.calls if c.status != "success"]
                assert not failed, failed  # a row of failed calls would measure nothing
                return list(message.calls)


@asynccontextmanager
async def _session(workspace: Path) -> AsyncIterator[_Session]:
    bus = Bus()
    async with trio.open_nursery() as nursery:
        addrs = await nursery.start(supervise_with_mcp, bus, _cfg(workspace))
        yield _Session(bus, addrs.scheduler)
        nursery.cancel_scope.cancel()


@asynccontextmanager
async def _direct() -> AsyncIterator[Any]:
    """The SDK alone: ``ClientSession`` over ``stdio_client`` to the same server."""
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command=sys.executable, args=[SERVER], env={"PATH": os.environ["PATH"]})
    with open(os.devnull, "w") as errlog:  # noqa: ASYNC230 (/dev/null does not block)
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            yield session


async def _overhead(workspace: Path) -> tuple[float, float]:
    """Median seconds of one call: through the session, and direct (alternating)."""
    ours: list[float] = []
    theirs: list[float] = []
    async with _session(workspace) as session, _direct() as direct:
        for _ in range(20):  # warm both
            await session.batch([("mcp_bench_echo", {"text": "hi"})])
            await direct.call_tool("echo", {"text": "hi"})
        for _ in range(CALLS):
            started = time.perf_counter()
            await session.batch([("mcp_bench_echo", {"text": "hi"})])
            ours.append(time.perf_counter() - started)
            started = time.perf_counter()
            await direct.call_tool("echo", {"text": "hi"})
            theirs.append(time.perf_counter() - started)
    return statistics.median(ours), statistics.median(theirs)


def bench_mcp_call_overhead() -> None:
    from tests.bench._table import record

    with tempfile.TemporaryDirectory() as tmp:
        ours, direct = trio.run(_overhead, Path(tmp))
    record(
        f"mcp: one stdio tool call through the scheduler (median of {CALLS})",
        ours * 1000,
        "ms",
        baseline=direct * 1000,
        target="target <= 1.2x; baseline: the SDK's ClientSession.call_tool, same server, same run",
    )


WAVE = 50


async def _wave(workspace: Path) -> tuple[float, float]:
    """Wall of one batch of 50 calls sleeping 0.5 to 1.0 s (one wave: MCP tools run in
    parallel), and the slowest call's delay."""
    delays = [0.5 + 0.5 * i / (WAVE - 1) for i in range(WAVE)]
    async with _session(workspace) as session:
        await session.batch([("mcp_bench_echo", {"text": "warm"})])
        started = time.perf_counter()
        await session.batch([("mcp_bench_sleep", {"seconds": d}) for d in delays])
        wall = time.perf_counter() - started
    return wall, max(delays)


def bench_mcp_wave() -> None:
    from tests.bench._table import record

    with tempfile.TemporaryDirectory() as tmp:
        walls = [trio.run(_wave, Path(tmp)) for _ in range(3)]
    record(
        f"mcp: {WAVE} concurrent calls in one wave, 0.5-1.0 s each (median of 3)",
        statistics.median(w for w, _ in walls),
        "s",
        baseline=walls[0][1],
        target="target: close to the slowest call (baseline: its delay)",
    )


async def _connect(command: str, args: tuple[str, ...]) -> tuple[float, float, int]:
    """One stdio connection as a session opens it (``McpConnection``: spawn,
    ``initialize``, ``tools/list``): its seconds, the server's RSS in MiB (its process
    tree's) and its tool count."""
    import psutil

    from actors.mcp import McpConnection, ServerParams, discover

    params = ServerParams(name="cost", command=command, args=args, env={"PATH": os.environ["PATH"]}, timeout_s=60)
    conn = McpConnection(params, report=lambda line: None)
    async with trio.open_nursery() as nursery:
        await nursery.start(conn.run)
        started = time.perf_counter()
        [found] = await discover([conn])
        elapsed = time.perf_counter() - started
        assert found.error is None, found.error
        tree = [p for p in psutil.Process().children(recursive=True)]
        rss = sum(p.memory_info().rss for p in tree) / 2**20
        nursery.cancel_scope.cancel()
    return elapsed, rss, len(found.tools)


def bench_mcp_connection() -> None:
    """What sharing a connection between a daemon's sessions would save (docs/performance.md)."""
    from tests.bench._table import record
    from tests.fakes.mcp_everything import find_everything

    servers = [("the SDK's MCPServer (Python)", sys.executable, (SERVER,))]
    everything = find_everything()
    if everything is not None:
        servers.append(("server-everything (node)", str(everything), ("stdio",)))
    for label, command, args in servers:
        runs = [trio.run(_connect, command, args) for _ in range(5)]
        tools = runs[0][2]
        record(
            f"mcp: stdio connection of {label}: start, initialize, {tools} tools (median of 5)",
            statistics.median(r[0] for r in runs),
            "s",
        )
        record("mcp: RSS of that server's processes", statistics.median(r[1] for r in runs), "MiB")


BENCHMARKS = (bench_mcp_call_overhead, bench_mcp_wave, bench_mcp_connection)

if __name__ == "__main__":
    for bench in BENCHMARKS:
        bench()
