"""``agentbus daemon``: one per user, sessions shared by any number of clients.

    agentbus daemon            run in the foreground (logs on stderr)
    agentbus daemon --detach   start in the background, return when it accepts clients
    agentbus daemon status     what runs (exit 1: no daemon)
    agentbus daemon stop       stop it (turns cancelled, recordings flushed)

    agentbus daemon --listen-tcp [HOST:]PORT [--token-file FILE] [--allow-remote]
                               listen on TCP as well (see below)

The socket, lock and log live in ``default_paths()`` (``$AGENTBUS_RUNTIME_DIR``, else
``$XDG_RUNTIME_DIR/agentbus``, else ``~/.local/state/agentbus``); recordings and the
session registry in the data directory (``actors.recording.default_data_dir()``). The
protocol is in ``bus/messages/client.py``; ``actors.frontends.daemon.client`` is the client
library.

No TCP unless asked, and then only with a token: ``--listen-tcp`` opens a TCP listener
(``HOST`` defaults to 127.0.0.1; a host that is not loopback needs ``--allow-remote``)
whose clients must send the token in their hello; the token is new for each start, or
read from ``--token-file`` (a file only its owner can read), and written to
``daemon.token`` beside the socket (mode 0600). Clients: ``agentbus chat --connect
tcp://HOST:PORT [--token-file FILE]``, ``agentbus acp --connect tcp://HOST:PORT ...``.
See ``_tcp``.

    agentbus daemon --cluster URL [--cluster-user NAME ...]
                               join a cluster on NATS JetStream as a node: each session
                               it runs is held by a lease and its recording mirrored
                               into the cluster's stream (``_cluster``, docs/cluster.md)

    agentbus daemon --workers N
                               an embedded nats-server and N node processes on this
                               machine behind the usual socket (``_workers``)
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import logging
import os
import signal
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import attrs
import trio

from actors.frontends.cluster import (
    ClusterArgsError,
    add_cluster_arguments,
    credentials,
    credentials_from,
)
from actors.frontends.daemon._catchup import is_client_event
from actors.frontends.daemon._cluster import ClusterConfig, ClusterStartError
from actors.frontends.daemon._connection import ConnectionActor, Limits
from actors.frontends.daemon._core import DaemonCore, RequestError
from actors.frontends.daemon._protocol import MAX_FRAME
from actors.frontends.daemon._server import Daemon, DaemonConfig, serve
from actors.frontends.daemon._tcp import (
    DEFAULT_HOST,
    TcpConfigError,
    TcpListen,
    parse_host_port,
    read_token_file,
)
from actors.frontends.daemon.paths import (
    DaemonPathError,
    DaemonPaths,
    DaemonRunningError,
    default_paths,
    lock_is_held,
    read_pid,
)
from actors.gateway import Backend

STOP_WAIT_S = 5.0


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="agentbus daemon",
        description="Run or control the agentbus daemon (one per user; agentbus chat and "
        "agentbus acp --attach start it when none runs).",
    )
    p.add_argument(
        "action",
        nargs="?",
        choices=("start", "status", "stop"),
        default="start",
        help="start (default: in the foreground, logging on stderr), status (exit 1: none runs), "
        "stop (turns cancelled, recordings flushed)",
    )
    p.add_argument("--detach", action="store_true", help="start in the background and return once it accepts clients")
    p.add_argument(
        "--data-dir",
        metavar="DIR",
        help="where its sessions' recordings go (default: $AGENTBUS_DATA_DIR, else "
        "$XDG_DATA_HOME/agentbus, else ~/.local/share/agentbus)",
    )
    p.add_argument(
        "--stall-timeout",
        type=float,
        default=Limits().stall_timeout_s,
        metavar="SECONDS",
        help=f"drop a client that stops reading for this long with its send buffer full (default {Limits().stall_timeout_s:g})",
    )
    p.add_argument(
        "--listen-tcp",
        metavar="[HOST:]PORT",
        help=f"listen on TCP as well (host {DEFAULT_HOST} unless given); clients must present the token",
    )
    p.add_argument(
        "--token-file",
        metavar="FILE",
        help="with --listen-tcp: the token clients must present (default: a new one); "
        "it is copied to daemon.token beside the socket",
    )
    p.add_argument(
        "--allow-remote",
        action="store_true",
        help="with --listen-tcp: allow a host that is not loopback (the protocol is not encrypted)",
    )
    add_cluster_arguments(p)
    p.add_argument(
        "--cluster-replicas",
        type=int,
        default=1,
        metavar="N",
        help="with --cluster: replicas of the user's stream and lease bucket when this node creates them "
        "(default 1; 3 on a cluster of three servers keeps them through the loss of one)",
    )
    p.add_argument(
        "--cluster-serve",
        action="append",
        default=None,
        metavar="DIR",
        help="with --cluster: run the sessions of workspaces under DIR (repeatable; default: every workspace). "
        "Sessions of other workspaces are placed on nodes that serve them",
    )
    p.add_argument(
        "--cluster-node-id",
        metavar="NAME",
        help="with --cluster: this node's name in the cluster (default: HOST:PID:random, new at each start); "
        "two nodes running at once must not share one",
    )
    p.add_argument(
        "--cluster-lease-ttl",
        type=float,
        default=None,
        metavar="SECONDS",
        help="with --cluster: how long after a node's last renewal its sessions may be taken over "
        "(default 10; every node of a cluster must use the same, the first sets it)",
    )
    p.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help="use this machine's cores: an embedded nats-server and N daemon processes as a cluster, "
        "behind the usual socket (needs agentbus[cluster]; not with --cluster)",
    )
    return p


def _cluster_settings(args: argparse.Namespace) -> None:
    """The cluster options of the user's settings.json (``agentbus.cluster``,
    ``agentbus.workers``) for those the command line left out. A settings file that does
    not parse is left to the sessions to report, as without a cluster."""
    from actors.frontends.cluster import apply_settings
    from actors.host.settings import SettingsFileError, gemini_home, load_settings_file

    path = gemini_home() / ".gemini" / "settings.json"
    try:
        settings = load_settings_file(path)
    except SettingsFileError:
        return
    apply_settings(args, settings, str(path))


def main(argv: Sequence[str]) -> int:
    args = _parser().parse_args(list(argv))
    paths = default_paths()
    if args.action == "status":
        return _status(paths)
    if args.action == "stop":
        return _stop(paths)
    try:
        _cluster_settings(args)
    except ClusterArgsError as exc:
        sys.stderr.write(f"agentbus daemon: {exc}\n")
        return 2
    workers = args.workers or 0
    if args.workers is not None:
        from actors.frontends.daemon._workers import MAX_WORKERS, WorkersStartError, check_installed

        if args.cluster:
            sys.stderr.write("agentbus daemon: --workers runs its own cluster on this machine; it does not go with --cluster\n")
            return 2
        if not 1 <= args.workers <= MAX_WORKERS:
            sys.stderr.write(f"agentbus daemon: --workers is 1 to {MAX_WORKERS}\n")
            return 2
        try:
            check_installed()
        except WorkersStartError as exc:
            sys.stderr.write(f"agentbus daemon: {exc}\n")
            return 1
    limits = Limits(stall_timeout_s=args.stall_timeout)
    try:
        tcp = _tcp_listen(args)
    except TcpConfigError as exc:
        sys.stderr.write(f"agentbus daemon: {exc}\n")
        return 2
    try:
        fields = credentials_from(args, os.environ)
    except ClusterArgsError as exc:
        sys.stderr.write(f"agentbus daemon: {exc}\n")
        return 2
    cluster = None
    if fields is None and (
        args.cluster_replicas != 1 or args.cluster_serve or args.cluster_node_id or args.cluster_lease_ttl is not None
    ):
        sys.stderr.write(
            "agentbus daemon: --cluster-replicas, --cluster-serve, --cluster-node-id and --cluster-lease-ttl go with --cluster\n"
        )
        return 2
    if fields is not None:
        if not 1 <= args.cluster_replicas <= 5:
            sys.stderr.write("agentbus daemon: --cluster-replicas is 1 to 5 (JetStream's limit)\n")
            return 2
        ttl = args.cluster_lease_ttl
        if ttl is not None and not 1.0 <= ttl <= 3600.0:
            sys.stderr.write("agentbus daemon: --cluster-lease-ttl is 1 to 3600 seconds\n")
            return 2
        if args.cluster_node_id is not None and not args.cluster_node_id.strip():
            sys.stderr.write("agentbus daemon: --cluster-node-id must name the node\n")
            return 2
        timing = {} if ttl is None else {"lease_ttl_s": ttl, "renew_every_s": ttl / 3}
        try:
            cluster = ClusterConfig(
                url=args.cluster,
                credentials=credentials(fields),
                replicas=args.cluster_replicas,
                serves=None if not args.cluster_serve else tuple(str(Path(d).expanduser().resolve()) for d in args.cluster_serve),
                **({"node_id": args.cluster_node_id.strip()} if args.cluster_node_id else {}),
                **timing,
            )
        except ImportError as exc:
            sys.stderr.write(f"agentbus daemon: --cluster needs nats-py: pip install 'agentbus[cluster]' ({exc})\n")
            return 1
    data_dir = Path(args.data_dir).resolve() if args.data_dir else None
    if args.detach:
        return _detach(paths, limits, tcp, data_dir=data_dir, cluster=cluster, workers=workers)
    from actors.frontends.daemon._workers import inherited_ready_fd

    return run_foreground(
        paths, limits, inherited_ready_fd(), tcp=tcp, data_dir=data_dir, cluster=cluster, workers=workers
    )


def _tcp_listen(args: argparse.Namespace) -> TcpListen | None:
    if args.listen_tcp is None:
        if args.token_file or args.allow_remote:
            raise TcpConfigError("--token-file and --allow-remote go with --listen-tcp")
        return None
    host, port = parse_host_port(args.listen_tcp, default_host=DEFAULT_HOST)
    token = read_token_file(Path(args.token_file), private=True) if args.token_file else ""
    return TcpListen(host=host, port=port, token=token, allow_remote=args.allow_remote)


def _live_backend(auth_env: Mapping[str, str], auth_type: str | None) -> Backend:
    from actors.gateway import live_backend

    return live_backend(auth_env, auth_type=auth_type)


COLLECTOR_THRESHOLDS = (20_000, 20, 20)
"""``gc.set_threshold`` of the daemon's process. With Python's default (700 objects) the
collector ran about 230 times in the 100-session benchmark (``make bench``: 300 turns,
3,000 chunks), a fifth of the daemon's CPU and pauses of up to 0.1-0.2 s on that
loaded machine; with these, 7 times and 0.07-0.15 s in all, the same RSS."""


def tune_collector() -> None:
    """The daemon process's collector: ``COLLECTOR_THRESHOLDS`` (the objects a busy
    daemon allocates are short-lived, passed from actor to actor and dropped)."""
    gc.set_threshold(*COLLECTOR_THRESHOLDS)


def run_foreground(
    paths: DaemonPaths,
    limits: Limits,
    ready_fd: int | None = None,
    *,
    tcp: TcpListen | None = None,
    data_dir: Path | None = None,
    cluster: ClusterConfig | None = None,
    workers: int = 0,
) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s agentbus daemon: %(message)s", stream=sys.stderr)
    tune_collector()
    # One line per HTTP request is noise; a failed model request is logged by the daemon.
    logging.getLogger("httpx2").setLevel(logging.WARNING)
    config = DaemonConfig(paths=paths, limits=limits, live_backend=_live_backend, handle_signals=True, tcp=tcp, cluster=cluster)
    if data_dir is not None:
        config = attrs.evolve(config, data_dir=data_dir)

    async def run() -> None:
        async with trio.open_nursery() as nursery:
            if workers:
                from actors.frontends.daemon._workers import serve_with_workers

                await nursery.start(serve_with_workers, config, workers)
            else:
                await nursery.start(serve, config)
            if ready_fd is not None:
                os.write(ready_fd, b"ready\n")
                os.close(ready_fd)

    from actors.frontends.daemon._workers import WorkersStartError

    try:
        trio.run(run)
    except (DaemonRunningError, DaemonPathError, TcpConfigError, ClusterStartError, WorkersStartError, BaseExceptionGroup) as exc:
        refused = _first(exc, (DaemonRunningError, DaemonPathError, TcpConfigError, ClusterStartError, WorkersStartError))
        if refused is None:
            raise
        if isinstance(refused, DaemonRunningError):
            sys.stderr.write(f"agentbus daemon: {refused}; not starting another one\n")
            if ready_fd is not None:
                os.write(ready_fd, f"running {refused.pid or ''}\n".encode())
        else:
            sys.stderr.write(f"agentbus daemon: {refused}\n")
        return 1
    except KeyboardInterrupt:
        return 0
    return 0


def _first(exc: BaseException, kinds: tuple[type[BaseException], ...]) -> BaseException | None:
    """``exc`` itself or the first of ``kinds`` inside (nested) exception groups."""
    if isinstance(exc, kinds):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = _first(inner, kinds)
            if found is not None:
                return found
    return None


def _detach(
    paths: DaemonPaths,
    limits: Limits,
    tcp: TcpListen | None = None,
    *,
    data_dir: Path | None = None,
    cluster: ClusterConfig | None = None,
    workers: int = 0,
) -> int:
    """Fork a daemon into its own session; report once it is ready (or why not)."""
    from actors.frontends.daemon.paths import prepare_runtime_dir

    try:
        prepare_runtime_dir(paths)
    except DaemonPathError as exc:
        sys.stderr.write(f"agentbus daemon: {exc}\n")
        return 1
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the daemon
        os.close(read_end)
        os.setsid()
        os.chdir("/")  # hold no client's directory; requests carry absolute paths
        devnull = os.open(os.devnull, os.O_RDWR)
        log_fd = os.open(paths.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.dup2(devnull, 0)
        os.dup2(devnull, 1)
        os.dup2(log_fd, 2)
        os.close(devnull)
        os.close(log_fd)
        code = 1
        try:
            code = run_foreground(
                paths, limits, ready_fd=write_end, tcp=tcp, data_dir=data_dir, cluster=cluster, workers=workers
            )
        finally:
            os._exit(code)
    os.close(write_end)
    answer = b""
    while chunk := os.read(read_end, 64):
        answer += chunk
    os.close(read_end)
    if answer.startswith(b"ready"):
        return 0
    if answer.startswith(b"running"):
        words = answer.split()
        who = words[1].decode() if len(words) > 1 else "?"
        asked = [name for name, given in (("--listen-tcp", tcp is not None), ("--cluster", cluster is not None), ("--data-dir", data_dir is not None), ("--workers", workers > 0)) if given]
        if asked:
            # The running daemon keeps the options it was started with.
            sys.stderr.write(
                f"agentbus daemon: already running (pid {who}) on {paths.socket}; {', '.join(asked)} not applied"
                " (agentbus daemon stop, then start it with them)\n"
            )
            return 1
        sys.stderr.write(f"agentbus daemon: already running (pid {who}) on {paths.socket}\n")
        return 0
    with contextlib.suppress(OSError):
        tail = paths.log.read_text(errors="replace").splitlines()[-5:]
        sys.stderr.write("\n".join(tail) + "\n")
    sys.stderr.write(f"agentbus daemon: did not start (log: {paths.log})\n")
    return 1


def _status(paths: DaemonPaths) -> int:
    from actors.frontends.daemon.client import DaemonError, open_client

    async def ask() -> int:
        try:
            async with open_client(paths, client="agentbus daemon status", start=False) as client:
                info = await client.status()
        except DaemonError as exc:
            sys.stdout.write(f"agentbus daemon: not running ({exc.message})\n")
            return 1
        print(f"agentbus daemon: running, pid {info.pid}, socket {info.socket}, since {info.started}")
        print(f"sessions: {len(info.sessions)}")
        for s in info.sessions:
            flags = " busy" if s.busy else ""
            flags += f" {len(s.pending_approvals)} approval(s) waiting" if s.pending_approvals else ""
            print(f"  {s.session_id}  {s.state:8} {s.approval_mode:9} {s.clients} client(s){flags}  {s.workspace}  {s.title}")
        print(f"connections: {len(info.connections)}")
        for c in info.connections:
            print(f"  {c.address}  {c.client or '-'}  sessions={len(c.sessions)} queued={c.queued_frames} lagged={c.lagged}")
        from actors.frontends.daemon._workers import print_workers

        await print_workers(paths, info.pid)
        return 0

    return trio.run(ask)


def _stop(paths: DaemonPaths) -> int:
    from actors.frontends.daemon.client import DaemonError, open_client

    async def ask() -> bool:
        try:
            async with open_client(paths, client="agentbus daemon stop", start=False) as client:
                await client.stop_daemon()
        except DaemonError:
            return False
        return True

    asked = trio.run(ask)
    if not asked:
        pid = read_pid(paths)
        if not lock_is_held(paths) or pid is None:
            sys.stdout.write("agentbus daemon: not running\n")
            return 0
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    from actors.frontends.daemon._workers import STOP_WAIT_S as WORKERS_STOP_S
    from actors.frontends.daemon._workers import front_busy

    # A front with workers lets go of its lock, then stops its workers and nats-server.
    deadline = time.monotonic() + STOP_WAIT_S + (WORKERS_STOP_S if front_busy(paths) else 0)
    while lock_is_held(paths) or front_busy(paths):
        if time.monotonic() > deadline:
            sys.stderr.write("agentbus daemon: still running after the stop request\n")
            return 1
        time.sleep(0.02)
    sys.stdout.write("agentbus daemon: stopped\n")
    return 0


__all__ = [
    "MAX_FRAME",
    "is_client_event",
    "ClusterConfig",
    "ClusterStartError",
    "ConnectionActor",
    "Daemon",
    "DaemonConfig",
    "DaemonCore",
    "DaemonPathError",
    "DaemonPaths",
    "DaemonRunningError",
    "Limits",
    "RequestError",
    "TcpConfigError",
    "TcpListen",
    "default_paths",
    "main",
    "run_foreground",
    "serve",
    "tune_collector",
]
