"""The daemon process: its socket, its gateway, its sessions, its connections.

``serve`` takes the lock (a second daemon refuses), binds the Unix socket (mode 0600 in
a 0700 directory; peers of another uid are refused as well) and, when asked
(``DaemonConfig.tcp``), a TCP listener whose clients must present the token
(``_tcp``), starts the process-wide model gateway, and accepts clients, one
``ConnectionActor`` each. It stops on
``StopDaemon``, SIGTERM or SIGINT (with ``handle_signals``), in this order: every
session is closed, which cancels its running turn (acknowledged:
``TurnCancelAcknowledged``, a ``cancelled`` end, the tools' process groups killed) and
flushes its recording (``SessionClosed`` is an fsync point) while clients still see it
happen; connections get ``DaemonStopping`` and are closed; the gateway stops; the socket is removed and the lock released. Sessions stay
in the registry, so the next daemon resumes them. The whole stop is bounded (about
1.5 s) so that the process exits within 2 s.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket as stdsocket
import struct
from pathlib import Path
from typing import Any

import attrs
import trio

from actors.frontends.daemon._backends import (
    FakeFactory,
    LiveFactory,
    SessionBackends,
    fake_backend,
)
from actors.frontends.daemon._cluster import ClusterConfig
from actors.frontends.daemon._connection import ConnectionActor, Limits
from actors.frontends.daemon._core import DaemonCore
from actors.frontends.daemon._tcp import (
    TcpConfigError,
    TcpListen,
    all_loopback,
    new_token,
    token_file,
)
from actors.frontends.daemon.paths import (
    DaemonPaths,
    default_paths,
    hold_lock,
    prepare_runtime_dir,
)
from actors.gateway import GATEWAY_ADDRESS, GatewayActor
from actors.recording import default_data_dir
from bus import Bus
from bus.messages import ConnectionSummary

log = logging.getLogger("agentbus.daemon")

CONNECTIONS_GRACE_S = 0.3


@attrs.frozen(kw_only=True)
class DaemonConfig:
    paths: DaemonPaths = attrs.field(factory=default_paths)
    data_dir: Path = attrs.field(factory=default_data_dir)
    limits: Limits = attrs.field(factory=Limits)
    live_backend: LiveFactory | None = None
    """Builds the google-genai backend of a session's credentials (its client's auth
    environment and auth type); None: sessions without fake responses are refused."""
    fake_backend: FakeFactory = fake_backend
    handle_signals: bool = False
    """SIGTERM/SIGINT stop the daemon (the command line; tests stop it by message)."""
    tcp: TcpListen | None = None
    """Listen on TCP as well (token required); None: the Unix socket only."""
    cluster: ClusterConfig | None = None
    """Join a cluster as a node (``_cluster``); None: a daemon alone."""


@attrs.define(eq=False)
class Daemon:
    """What ``serve`` hands back once it accepts connections (tests, status)."""

    config: DaemonConfig
    core: DaemonCore
    connections: dict[str, ConnectionActor] = attrs.field(factory=dict)
    tcp_addresses: list[tuple[str, int]] = attrs.field(factory=list)
    """Where the TCP listener listens (host, port), when there is one."""
    tcp_token: str = ""
    accepted: int = 0
    """Connections accepted so far, on any listener (they are named ``client:<n>``)."""

    def stop(self, reason: str = "stopped") -> None:
        self.core.request_stop(reason)

    def info(self) -> tuple[int, str, list[ConnectionSummary]]:
        return os.getpid(), str(self.config.paths.socket), [c.summary() for c in self.connections.values()]


async def serve(config: DaemonConfig, *, task_status: trio.TaskStatus[Daemon] = trio.TASK_STATUS_IGNORED) -> None:
    """Run the daemon until it is asked to stop (see the module doc). Raises
    ``DaemonRunningError`` when another daemon holds the lock, ``DaemonPathError`` when
    the directory is not private, ``TcpConfigError`` when the TCP listener is refused
    (not loopback and not allowed) or cannot bind."""
    prepare_runtime_dir(config.paths)
    tcp = config.tcp
    async with contextlib.AsyncExitStack() as stack:
        stack.enter_context(hold_lock(config.paths))
        sock = stack.enter_context(_listening_socket(config.paths.socket))
        tcp_listeners: list[trio.SocketListener] = []
        token = ""
        if tcp is not None:
            tcp_listeners = await _open_tcp_listeners(tcp)
            for listener in tcp_listeners:
                stack.callback(listener.socket.close)
            token = tcp.token or new_token()
        # Without TCP: removes the token file a daemon that died left behind.
        stack.enter_context(token_file(config.paths.token, token or None))
        node = None
        if config.cluster is not None:  # its mirrors outlive the sessions: their last lines
            from actors.frontends.daemon._cluster import open_node

            node = await stack.enter_async_context(open_node(config.cluster))
        bus = Bus()
        backends = SessionBackends(config.live_backend, config.fake_backend)
        async with trio.open_nursery() as root:
            await root.start(GatewayActor(bus, backends).run)
            try:
                async with trio.open_nursery() as session_nursery:
                    core = DaemonCore(bus, data_dir=config.data_dir, backends=backends, nursery=session_nursery, node=node)
                    daemon = Daemon(config, core, tcp_token=token)
                    async with trio.open_nursery() as conn_nursery:
                        conn_nursery.start_soon(_accept, daemon, trio.SocketListener(sock), conn_nursery)
                        for listener in tcp_listeners:
                            host, port = listener.socket.getsockname()[:2]
                            daemon.tcp_addresses.append((host, port))
                            conn_nursery.start_soon(_accept, daemon, listener, conn_nursery, token)
                        if config.handle_signals:
                            conn_nursery.start_soon(_watch_signals, core)
                        if node is not None:
                            await _join_cluster(daemon, node, conn_nursery)
                        for host, port in daemon.tcp_addresses:
                            shown = f"[{host}]" if ":" in host else host
                            log.info(
                                "listening on tcp://%s:%d (clients need the token in %s)", shown, port, config.paths.token
                            )
                        log.info("agentbus daemon %d listening on %s", os.getpid(), config.paths.socket)
                        task_status.started(daemon)
                        await core.stop_requested.wait()
                        log.info("stopping: %s", core.stop_reason)
                        # Sessions first, while clients are still connected: they see
                        # their turns end cancelled and the sessions close.
                        await core.shutdown()
                        for conn in list(daemon.connections.values()):
                            conn.stop(core.stop_reason or "the daemon is stopping")
                        with trio.move_on_after(CONNECTIONS_GRACE_S):
                            for conn in list(daemon.connections.values()):
                                await conn.done.wait()
                        conn_nursery.cancel_scope.cancel(reason="daemon stopping")
            finally:
                bus.disconnect(GATEWAY_ADDRESS)  # the gateway's inbox closes: it finishes


@contextlib.contextmanager
def _listening_socket(path: Path) -> Any:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()  # a stale socket of a daemon that died (we hold the lock)
    raw = stdsocket.socket(stdsocket.AF_UNIX, stdsocket.SOCK_STREAM)
    try:
        old = os.umask(0o177)  # no window in which the socket is open to others
        try:
            raw.bind(os.fspath(path))
        finally:
            os.umask(old)
        os.chmod(path, 0o600)
        raw.listen(128)
        raw.setblocking(False)
        sock = trio.socket.from_stdlib_socket(raw)
    except BaseException:
        raw.close()
        raise
    try:
        yield sock
    finally:
        sock.close()
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


async def _open_tcp_listeners(tcp: TcpListen) -> list[trio.SocketListener]:
    """Bind the TCP listener(s) of ``tcp`` (a name may give IPv4 and IPv6); raises
    ``TcpConfigError`` for a host that is not loopback (unless allowed) or a bind error."""
    where = f"{tcp.host}:{tcp.port}"
    try:
        infos = await trio.socket.getaddrinfo(tcp.host or None, tcp.port, type=stdsocket.SOCK_STREAM, flags=stdsocket.AI_PASSIVE)
    except OSError as exc:
        raise TcpConfigError(f"cannot listen on {where}: {exc}") from None
    local = bool(tcp.host) and all_loopback(str(info[4][0]) for info in infos)
    if not local and not tcp.allow_remote:
        raise TcpConfigError(
            f"{where} is not a loopback address: clients on the network could reach the daemon, "
            "and the protocol is not encrypted. Use 127.0.0.1 (and an SSH tunnel), or add --allow-remote"
        )
    try:
        return await trio.open_tcp_listeners(tcp.port, host=tcp.host or None)
    except OSError as exc:
        raise TcpConfigError(f"cannot listen on {where}: {exc.strerror or exc}") from None


MAX_TCP_BEFORE_HELLO = 32
"""TCP connections at most that have not presented the token yet. They are a pool of
their own: the connections that did present it never count against it, and a new
connection takes the place of the oldest one still waiting (which has had the longest
to say hello), so silent connections cannot lock clients with the token out."""


async def _accept(daemon: Daemon, listener: trio.SocketListener, nursery: trio.Nursery, token: str = "") -> None:
    """Accept clients of one listener; ``token``: its clients must present it (TCP)."""
    limits = attrs.evolve(daemon.config.limits, token=token) if token else daemon.config.limits
    while True:
        try:
            stream = await listener.accept()
        except OSError as exc:  # EMFILE and friends: wait for a connection to close
            log.warning("accept failed: %s", exc)
            await trio.sleep(0.1)
            continue
        if token:
            peer = _peer_name(stream)
            waiting = [c for c in daemon.connections.values() if c.waits_for_hello]
            if len(waiting) >= MAX_TCP_BEFORE_HELLO:
                # Connections that have not shown the token yet are bounded (nobody uses
                # up the daemon's file descriptors without it), and the newest is let in.
                oldest = waiting[0]  # ``connections`` keeps the order of acceptance
                log.warning(
                    "%s: dropped (no hello yet) for a new tcp connection from %s: %d wait for their hello",
                    oldest.address,
                    peer,
                    len(waiting),
                )
                oldest.drop_before_hello("dropped without a Hello: newer connections wait for theirs")
        else:
            uid = peer_uid(stream)
            if uid is not None and uid != os.getuid():
                log.warning("refused a connection from uid %d", uid)
                stream.socket.close()
                continue
            peer = ""
        daemon.accepted += 1
        conn = ConnectionActor(
            daemon.core,
            stream,
            address=f"client:{daemon.accepted}",
            limits=limits,
            daemon_info=daemon.info,
        )
        # On a cluster, a client gets a message once the stream has it (as a client of
        # another node does): what it saw survives this node, wherever it reconnects.
        conn.in_stream_first = daemon.core.node is not None
        if peer:
            log.info("%s: tcp connection from %s", conn.address, peer)
        daemon.connections[conn.address] = conn
        nursery.start_soon(_run_connection, daemon, conn, peer)


async def _join_cluster(daemon: Daemon, node: Any, conn_nursery: trio.Nursery) -> None:
    """Serve the tunnels other nodes open to this one (each a connection, as a client
    on the socket is) and take over the sessions of nodes that died."""
    from actors.frontends.daemon._tunnel import serve_tunnels

    limits = attrs.evolve(daemon.config.limits, token="")

    async def run_tunnel(stream: Any, peer: str) -> None:
        daemon.accepted += 1
        conn = ConnectionActor(daemon.core, stream, address=f"node:{daemon.accepted}", limits=limits, daemon_info=daemon.info)
        conn.routes = None  # the node at the other end routed the requests: they are this node's
        conn.in_stream_first = True
        daemon.connections[conn.address] = conn
        log.info("%s: a tunnel from node %s", conn.address, peer)
        await _run_connection(daemon, conn)

    await conn_nursery.start(serve_tunnels, node.link, node.config.user, node.config.node_id, run_tunnel)
    conn_nursery.start_soon(node.adopt_orphans, daemon.core.adopt)


async def _run_connection(daemon: Daemon, conn: ConnectionActor, peer: str = "") -> None:
    try:
        await conn.run()
    except Exception:
        # One connection's failure is its own: the daemon and other clients carry on.
        log.exception("%s failed", conn.address)
    finally:
        daemon.connections.pop(conn.address, None)
        if peer and conn.rules.hello is None:
            log.warning("%s: tcp connection from %s closed without a valid hello (token)", conn.address, peer)


def _peer_name(stream: trio.SocketStream) -> str:
    try:
        host, port = stream.socket.getpeername()[:2]
    except OSError:
        return "?"
    return f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"


async def _watch_signals(core: DaemonCore) -> None:
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for sig in signals:
            core.request_stop(f"signal {signal.Signals(sig).name}")


def peer_uid(stream: trio.SocketStream) -> int | None:
    """The uid of the process at the other end of a Unix socket (Linux), if known."""
    opt = getattr(stdsocket, "SO_PEERCRED", None)
    if opt is None:
        return None
    try:
        raw = stream.socket.getsockopt(stdsocket.SOL_SOCKET, opt, struct.calcsize("3i"))
    except OSError:
        return None
    _pid, uid, _gid = struct.unpack("3i", raw)
    return int(uid)
