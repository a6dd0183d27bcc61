"""``agentbus chat``: a terminal client on the daemon (started when none runs).

    agentbus chat [--resume ID|N|latest] [-m MODEL] [--approval-mode MODE]
                  [--connect tcp://HOST:PORT [--token-file FILE]]

Streams the answer as it comes, shows each tool call with its live status, asks
approvals inline (once / always / no), runs ``!command`` and ``/tool NAME {json}`` as
the user's own calls (``!!command``, ``/tool! …``: and adds their result to the
conversation). Tab completes commands, tool names and paths on a terminal. Colour on a
terminal (``NO_COLOR`` turns it off), plain text when piped. See ``_app.HELP`` for the
commands, ``EXIT_CODES`` for how it ends: headless's codes for the same causes. What
it can check itself (the settings files; a new session's credentials, which are this
process's) it checks before it connects, so a refused chat starts no daemon.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import trio

from actors.frontends.chat._app import HELP, ChatApp, ChatOptions, tool_names, use_colour
from actors.frontends.chat._complete import complete
from actors.frontends.chat._lines import open_lines, readline_usable
from actors.frontends.chat._render import Renderer
from actors.frontends.daemon import DaemonPaths, default_paths
from actors.frontends.daemon.client import DaemonError, TcpAddress, open_client, tcp_address
from actors.gateway import auth_environment
from actors.host import settings as _settings
from actors.host.auth import check_auth
from actors.host.errors import DAEMON_EXIT_CODES, FatalError
from actors.host.flags import APPROVAL_MODES

EXIT_CODES = """Exit codes (those of a headless run for the same causes):
  0   /quit, or the end of piped input
  1   any other failure (the daemon cannot be reached, the connection closed)
  41  no usable credentials (Please set an Auth method…)
  42  --resume names no session of this workspace
  52  a settings file is broken
  130 Ctrl-C twice"""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="agentbus chat",
        description="A terminal chat on the agentbus daemon.",
        epilog=HELP
        + "\nSessions run in the daemon: their recordings go to its data directory (agentbus daemon"
        " --data-dir,\nelse $AGENTBUS_DATA_DIR ...), their policies come from settings and"
        " ~/.gemini/policies/.\n\n"
        + EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("-r", "--resume", metavar="ID", help="resume a session: its id, its number in /sessions, or latest")
    p.add_argument("-m", "--model", default="", help="model of a new session")
    p.add_argument("--approval-mode", choices=APPROVAL_MODES, default="", help="approval mode of a new session")
    p.add_argument("-y", "--yolo", action="store_true", help="same as --approval-mode yolo")
    p.add_argument(
        "--fake-responses", default="", metavar="FILE", help="serve the model from a Gemini CLI fake-responses file"
    )
    p.add_argument(
        "--fake-chunk-delay-ms",
        type=int,
        default=0,
        metavar="MS",
        help="with --fake-responses: wait this long between streamed chunks (to watch streaming)",
    )
    p.add_argument(
        "--connect",
        metavar="tcp://HOST:PORT",
        help="a daemon listening on TCP (agentbus daemon --listen-tcp) instead of this user's local socket",
    )
    p.add_argument(
        "--token-file", metavar="FILE", help="with --connect: the daemon's token (default: the local daemon.token)"
    )
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
        if not args.connect:  # (a daemon elsewhere reads its own files)
            _check_locally(opts)
        where = tcp_address(args.connect, args.token_file) if args.connect else default_paths()
        if args.token_file and not args.connect:
            raise DaemonError("invalid", "--token-file goes with --connect")
        return trio.run(_run, opts, where)
    except FatalError as exc:
        sys.stderr.write(f"agentbus chat: {exc.message}\n")
        return exc.exit_code
    except DaemonError as exc:
        sys.stderr.write(f"agentbus chat: {exc.message}\n")
        return DAEMON_EXIT_CODES.get(exc.code, 1)
    except KeyboardInterrupt:
        return 130


def _check_locally(opts: ChatOptions) -> None:
    """What the daemon would refuse, checked before one is started: the settings files
    (``FatalConfigError``) and a new session's credentials, which are this process's
    (``FatalAuthenticationError``). A resumed session may be running with credentials of
    its own: the daemon decides."""
    settings = _settings.load_settings(opts.workspace)
    if not opts.resume:
        check_auth(settings, auth_environment(os.environ), fake_model=bool(opts.fake_responses))


async def _run(opts: ChatOptions, where: DaemonPaths | TcpAddress) -> int:
    app: list[ChatApp] = []

    def completer(line: str, begidx: int, endidx: int) -> list[str]:
        commands = app[0].prompt_commands if app else ()
        return complete(line, begidx, endidx, tools=tool_names(), workspace=opts.workspace, commands=commands)

    async with (
        open_lines(completer, use_readline=readline_usable()) as lines,
        open_client(where, client="chat") as client,
    ):
        app.append(ChatApp(client, sys.stdout, opts, lines))
        return await app[0].run()


__all__ = ["ChatApp", "ChatOptions", "Renderer", "main"]
