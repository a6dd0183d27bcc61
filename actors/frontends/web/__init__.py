"""``agentbus web``: follow and steer the daemon's sessions in a browser.

    agentbus web [--port N] [-m MODEL] [--approval-mode MODE]
                 [--fake-responses FILE [--fake-chunk-delay-ms MS]]

Serves a small page on 127.0.0.1 (never another address) and prints its URL, which
carries a random token as Jupyter's does: ``http://127.0.0.1:PORT/?token=…``. The page
lists this workspace's sessions (the directory ``agentbus web`` runs in; numbered as
``chat``'s ``/sessions``), follows one live — the streamed text, each tool call with its
status and output, approvals with what they approve, and a timeline of the turn's tool
calls by wave — and answers approvals, cancels the running turn, sends prompts and
starts new sessions. Each tab is one more client of the daemon (``_bridge``), which is
started when none runs, as for ``agentbus chat``.

Secure by default (``_server``): loopback only, every request needs the token (a
missing or wrong one gets 403 and a one-line reason, nothing else), a request from
another origin or naming another host is refused, the page allows only its own script
and connections and cannot be framed. The page is plain HTML and JavaScript
(``page.html``, package data): no build step.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TypeVar

import trio

from actors.frontends.daemon import default_paths
from actors.frontends.daemon.client import DaemonError, open_client
from actors.frontends.web._bridge import BridgeOptions, run_bridge
from actors.frontends.web._server import Serving, WebApp, new_token, serve
from actors.host.errors import DAEMON_EXIT_CODES
from actors.host.flags import APPROVAL_MODES

_E = TypeVar("_E", bound=BaseException)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="agentbus web",
        description="Follow and steer the daemon's sessions in a browser (a page on 127.0.0.1 with a token).",
    )
    p.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: a free one)")
    p.add_argument("-m", "--model", default="", help="model of sessions started from the page")
    p.add_argument("--approval-mode", choices=APPROVAL_MODES, default="", help="approval mode of new sessions")
    p.add_argument(
        "--fake-responses", default="", metavar="FILE", help="new sessions serve the model from a Gemini CLI fake-responses file"
    )
    p.add_argument("--fake-chunk-delay-ms", type=int, default=0, metavar="MS", help="with --fake-responses: wait between chunks")
    return p


def main(argv: Sequence[str]) -> int:
    args = build_parser().parse_args(list(argv))
    if not 0 <= args.port <= 65535:
        sys.stderr.write(f"agentbus web: --port {args.port} is not a port (0..65535)\n")
        return 2
    options = BridgeOptions(
        workspace=Path(os.getcwd()).resolve(),
        model=args.model,
        approval_mode=args.approval_mode,
        fake_responses=str(Path(args.fake_responses).resolve()) if args.fake_responses else "",
        fake_chunk_delay_ms=args.fake_chunk_delay_ms,
    )
    try:
        return trio.run(_run, options, args.port)
    except DaemonError as exc:
        sys.stderr.write(f"agentbus web: {exc.message}\n")
        return DAEMON_EXIT_CODES.get(exc.code, 1)
    except OSError as exc:
        sys.stderr.write(f"agentbus web: cannot listen on 127.0.0.1:{args.port}: {exc.strerror or exc}\n")
        return 1
    except KeyboardInterrupt:
        return 130


async def _run(options: BridgeOptions, port: int) -> int:
    paths = default_paths()
    app = WebApp(token=new_token(), bridge=options, where=paths)
    try:
        async with trio.open_nursery() as nursery:
            # The port first (taken: nothing else happens), then the daemon, started now
            # when none runs: a page that cannot reach it is said here.
            serving: Serving = await nursery.start(_serve, app, port)
            try:
                async with open_client(paths, client="web") as client:
                    pid = (await client.status()).pid
            except BaseException:
                serving.stop.set()
                raise
            print(f"agentbus web: the daemon (pid {pid}) in your browser; open this URL (it holds the token):", flush=True)
            print(f"    {serving.url}", flush=True)
            print("Ctrl-C stops the page (the sessions go on in the daemon).", flush=True)
    except* OSError as group:  # (the port is taken)
        raise _first(group) from None
    except* DaemonError as group:
        raise _first(group) from None
    return 0


def _first(group: BaseExceptionGroup[_E]) -> _E:
    leaf: BaseExceptionGroup[_E] | _E = group
    while isinstance(leaf, BaseExceptionGroup):
        leaf = leaf.exceptions[0]
    return leaf


async def _serve(app: WebApp, port: int, *, task_status: trio.TaskStatus[Serving] = trio.TASK_STATUS_IGNORED) -> None:
    await serve(app, port=port, task_status=task_status)


__all__ = ["BridgeOptions", "Serving", "WebApp", "build_parser", "main", "new_token", "run_bridge", "serve"]
