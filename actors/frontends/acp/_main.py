"""``agentbus acp``: flags, a fast ``initialize``, then the server on stdio under trio.

Start-up is ordered for the client's first round trip: a thread starts importing the
runtime (trio, the actors, the tools) while the main thread reads the first frame from
stdin with plain ``os.read``; when it is ``initialize`` it is answered right there
(``_protocol`` needs only the standard library), then the main thread waits for the
imports and hands the rest of the input to ``AcpServer``. The thread imports and the
main thread only answers, so no module is imported by both at once.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import threading
from collections.abc import Sequence
from typing import Any

from actors.frontends.acp import _protocol, _rpc
from actors.host.flags import APPROVAL_MODES, add_session_flags, split_server_names

FIRST_FRAME_LIMIT = 1 << 20


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="agentbus acp",
        description="Serve the Agent Client Protocol (JSON-RPC 2.0, one JSON object per line) on stdin/stdout.",
        allow_abbrev=False,
    )
    p.add_argument("-m", "--model", help="model name, or 'auto' (default: settings, then auto)")
    p.add_argument("-y", "--yolo", action="store_true", help="start sessions in the yolo mode")
    p.add_argument(
        "--approval-mode",
        choices=APPROVAL_MODES,
        help="the mode sessions start in (the client can change it: session/set_mode)",
    )
    p.add_argument("--fake-responses", metavar="FILE", help="serve model responses from FILE (each session from its first line)")
    add_session_flags(p)
    p.add_argument("--acp", action="store_true", help="accepted for compatibility (gemini --acp)")
    p.add_argument(
        "--attach",
        action="store_true",
        help="run sessions in the agentbus daemon (started when absent) instead of in this process",
    )
    p.add_argument(
        "--connect",
        metavar="tcp://HOST:PORT",
        help="with --attach: a daemon listening on TCP (agentbus daemon --listen-tcp) instead of the local socket",
    )
    p.add_argument(
        "--token-file", metavar="FILE", help="with --connect: the daemon's token (default: the local daemon.token)"
    )
    p.add_argument("-d", "--debug", action="store_true", help="log every frame on stderr")
    return p


def _warm_imports() -> None:
    """Everything a session needs, loaded while the client waits for nothing."""
    import trio  # noqa: F401

    from actors.frontends.acp import _server  # noqa: F401
    from actors.frontends.headless import run_prepared  # noqa: F401
    from actors.gateway import GatewayActor  # noqa: F401
    from actors.host import (  # noqa: F401
        runtime,  # noqa: F401
        sessions,
        setup,
    )


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def answer_initialize(stdin: int, stdout: int) -> tuple[_protocol.ClientCapabilities | None, bytes]:
    """Read the first frame; answer it when it is ``initialize``. Returns the client's
    capabilities (None: not answered here) and the input not consumed."""
    buf = b""
    while b"\n" not in buf and len(buf) < FIRST_FRAME_LIMIT:
        data = os.read(stdin, 65536)
        if not data:
            return None, buf
        buf += data
    line, sep, rest = buf.partition(b"\n")
    frame = _rpc.parse_frame(line)
    if not sep or not isinstance(frame, _rpc.Request) or frame.method != "initialize":
        return None, buf
    try:
        result, caps = _protocol.initialize_result(frame.params)
    except _rpc.RpcError as exc:
        _write_all(stdout, _rpc.encode(_rpc.error_frame(frame.id, exc)))
        return None, rest
    _write_all(stdout, _rpc.encode(_rpc.result_frame(frame.id, result)))
    return caps, rest


def main(argv: Sequence[str]) -> int:
    try:
        ns = build_parser().parse_args(list(argv))
    except SystemExit as exc:
        return int(exc.code or 0)
    if ns.yolo and ns.approval_mode:
        sys.stderr.write("Cannot use both --yolo (-y) and --approval-mode together.\n")
        return 2
    daemon_at: Any = None
    if ns.connect or ns.token_file:
        from actors.frontends.daemon.client import DaemonError, tcp_address

        try:
            if not (ns.attach and ns.connect):
                raise DaemonError("invalid", "--connect goes with --attach, --token-file with --connect")
            daemon_at = tcp_address(ns.connect, ns.token_file)
        except DaemonError as exc:
            sys.stderr.write(f"agentbus acp: {exc.message}\n")
            return 2
    warm = threading.Thread(target=_warm_imports, name="acp-imports", daemon=True)
    warm.start()
    caps, leftover = answer_initialize(0, 1)
    warm.join()
    if not gc.isenabled():  # `agentbus` imports with the collector off (actors.frontends.main)
        gc.freeze()
        gc.enable()
    # Nothing may print on the protocol stream: stray prints go to stderr.
    sys.stdout = sys.stderr
    import trio

    from actors.frontends.acp._session import AcpOptions

    allowed: list[str] = []
    for item in ns.allowed_tools:
        allowed.extend(x.strip() for x in item.split(",") if x.strip())
    from pathlib import Path

    options = AcpOptions(
        model=ns.model,
        approval_mode=ns.approval_mode,
        yolo=ns.yolo,
        fake_responses=ns.fake_responses,
        fake_responses_non_strict=ns.fake_responses_non_strict,
        record_responses=ns.record_responses,
        data_dir=Path(ns.data_dir) if ns.data_dir else None,
        policy=tuple(ns.policy),
        allowed_tools=tuple(allowed),
        allowed_mcp_server_names=None if (names := split_server_names(ns.allowed_mcp_server_names)) is None else tuple(names),
        debug=ns.debug,
        attach=ns.attach,
        daemon_paths=daemon_at,
    )
    try:
        trio.run(serve_stdio, options, caps, leftover)
    except KeyboardInterrupt:
        return 130
    return 0


async def serve_stdio(options: Any, caps: _protocol.ClientCapabilities | None, leftover: bytes) -> None:
    import signal

    import trio

    from actors.frontends.acp._server import AcpServer

    stdin = trio.lowlevel.FdStream(os.dup(0))
    stdout = trio.lowlevel.FdStream(os.dup(1))
    server = AcpServer(stdin, stdout, options, client_caps=caps, leftover=leftover)
    async with trio.open_nursery() as nursery:

        async def watch_signals() -> None:
            with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                async for _sig in signals:
                    server.shutdown("agentbus acp stopped by a signal")
                    return

        nursery.start_soon(watch_signals)
        await server.run()
        nursery.cancel_scope.cancel(reason="agentbus acp finished: stop watching signals")
