"""``agentbus chat``: a terminal client on the daemon (started when none runs).

    agentbus chat [--resume ID|N|latest] [-m MODEL] [--approval-mode MODE]

Streams the answer as it comes, shows each tool call with its live status, asks
approvals inline (once / always / no), runs ``!command`` and ``/tool NAME {json}`` as
the user's own calls. Colour on a terminal (``NO_COLOR`` turns it off), plain text when
piped. See ``_app.HELP`` for the commands.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import trio

from ..daemon import default_paths
from ..daemon.client import DaemonError, open_client
from ._app import HELP, ChatApp, ChatOptions, use_colour
from ._render import Renderer

MODES = ("default", "auto_edit", "yolo", "plan")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="agentbus chat",
        description="A terminal chat on the agentbus daemon.",
        epilog=HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("-r", "--resume", metavar="ID", help="resume a session: its id, its number in /sessions, or latest")
    p.add_argument("-m", "--model", default="", help="model of a new session")
    p.add_argument("--approval-mode", choices=MODES, default="", help="approval mode of a new session")
    p.add_argument("-y", "--yolo", action="store_true", help="same as --approval-mode yolo")
    p.add_argument("--fake-responses", default="", help="serve the model from a Gemini CLI fake-responses file")
    p.add_argument("--fake-chunk-delay-ms", type=int, default=0, help=argparse.SUPPRESS)
    return p


def main(argv: Sequence[str]) -> int:
    args = _parser().parse_args(list(argv))
    opts = ChatOptions(
        workspace=Path(os.getcwd()).resolve(),
        resume=args.resume,
        model=args.model,
        approval_mode="yolo" if args.yolo else args.approval_mode,
        fake_responses=str(Path(args.fake_responses).resolve()) if args.fake_responses else "",
        fake_chunk_delay_ms=args.fake_chunk_delay_ms,
        colour=use_colour(sys.stdout),
        interactive=sys.stdin.isatty(),
    )
    try:
        return trio.run(_run, opts)
    except DaemonError as exc:
        sys.stderr.write(f"agentbus chat: {exc.message}\n")
        return 1
    except KeyboardInterrupt:
        return 130


async def _run(opts: ChatOptions) -> int:
    stdin = trio.lowlevel.FdStream(os.dup(sys.stdin.fileno()))
    async with stdin, open_client(default_paths(), client="chat") as client:
        return await ChatApp(client, sys.stdout, opts, stdin).run()


__all__ = ["ChatApp", "ChatOptions", "Renderer", "main"]
