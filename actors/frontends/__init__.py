"""agentbus command line: headless runs and the other entry points."""

from __future__ import annotations

import gc
import sys
from collections.abc import Sequence

SUBCOMMANDS = ("daemon", "chat", "acp", "replay", "explore", "tool", "agents", "mcp", "web", "cluster")


def main(argv: Sequence[str] | None = None) -> int:
    global _collecting_after_imports
    args = list(sys.argv[1:] if argv is None else argv)
    if argv is None and gc.isenabled():
        # A process of its own. Start-up creates some hundred thousand objects that live
        # as long as it (modules, functions, the message classes and their generated
        # methods): the collector's passes over them while importing free nothing and
        # cost about a fifth of a `-p hi` run's CPU. It is off until the command's
        # modules are imported (``_loaded``), and what they made is then frozen out of
        # its later passes.
        gc.disable()
        _collecting_after_imports = True
    if argv is None:
        closed_streams_to_devnull()
        reuse_compiled_methods()
        answer_pthread_lookup()
    try:
        status = _dispatch(args, own_process=argv is None)
    except BaseException as exc:
        from actors.host.errors import exit_status

        prog = f"agentbus {args[0]}" if args and args[0] in SUBCOMMANDS else "agentbus"
        failed = exit_status(exc, prog, sys.stderr)
        if failed is None:
            raise
        return failed
    finally:
        _loaded()
    if argv is None and not (args and args[0] in SUBCOMMANDS):
        # A headless run of its own is done: the process goes without taking itself
        # apart (``actors.frontends._exit``).
        exit_without_teardown(status)
    return status


def _dispatch(args: list[str], *, own_process: bool = False) -> int:
    if args and args[0] == "replay":
        from actors.frontends.replay import main as replay_main

        _loaded()
        return replay_main(args[1:])
    if args and args[0] == "explore":
        from actors.frontends.explore import main as explore_main

        _loaded()
        return explore_main(args[1:])
    if args and args[0] == "daemon":
        from actors.frontends.daemon import main as daemon_main

        _loaded()
        return daemon_main(args[1:])
    if args and args[0] == "cluster":
        from actors.frontends.cluster import main as cluster_main

        _loaded()
        return cluster_main(args[1:])
    if args and args[0] == "chat":
        from actors.frontends.chat import main as chat_main

        _loaded()
        return chat_main(args[1:])
    if args and args[0] == "web":
        from actors.frontends.web import main as web_main

        _loaded()
        return web_main(args[1:])
    if args and args[0] == "acp":
        from actors.frontends.acp import main as acp_main

        # Its imports go on in a thread while it answers initialize; it turns the
        # collector on when they are in.
        return acp_main(args[1:])
    if args and args[0] == "agents":
        from actors.frontends.agents import main as agents_main

        _loaded()
        return agents_main(args[1:])
    if args and args[0] == "mcp":
        from actors.frontends.mcp import main as mcp_main

        _loaded()
        return mcp_main(args[1:])
    if args and args[0] == "tool":
        from actors.frontends.tool import main as tool_main

        _loaded()
        return tool_main(args[1:])
    if args and args[0] in SUBCOMMANDS:
        sys.stderr.write(f"agentbus {args[0]}: not available in this version yet\n")
        return 2
    from actors.frontends.headless import report_fatal, run_headless
    from actors.host.args import build_parser, parse_headless
    from actors.host.errors import FatalError, UsageError
    from actors.host.settings import workspace_settings

    _loaded()
    if own_process:
        reuse_parsed_policies()
        reuse_declared_tools()
    try:
        settings = workspace_settings()  # like Gemini CLI: before the flags are read
    except FatalError as exc:
        return report_fatal(exc, "text", session_id="")
    try:
        parsed = parse_headless(args)
    except UsageError as exc:
        sys.stderr.write(f"{exc.message}\n\n")
        build_parser().print_help(sys.stderr)
        return exc.exit_code
    if parsed.list_sessions or parsed.delete_session is not None:
        from actors.host.sessions import session_command

        return session_command(parsed)
    return run_headless(parsed, settings)


def closed_streams_to_devnull() -> None:
    """A standard stream its caller closed (``>&-``, a service manager): Python leaves
    it ``None`` and the first write would fail with a traceback. As for Gemini CLI (it
    runs, exit 0), what would go there goes nowhere: ``/dev/null`` takes the descriptor,
    for this process and the commands it starts."""
    for fd, name in ((0, "stdin"), (1, "stdout"), (2, "stderr")):
        if getattr(sys, name) is not None:
            continue
        import os

        null = os.open(os.devnull, os.O_RDWR)
        if null != fd:
            os.dup2(null, fd)
            os.close(null)
        setattr(sys, name, open(fd, "r" if fd == 0 else "w", encoding="utf-8", errors="surrogateescape", closefd=False))


def reuse_compiled_methods() -> bool:
    """A process of its own: attrs' generated methods come compiled by earlier runs, from
    a cache on disk (``actors.frontends._compiled_methods``), from now on."""
    from actors.frontends._compiled_methods import reuse_compiled_methods as reuse

    return reuse()


def answer_pthread_lookup() -> bool:
    """A process of its own: importing trio finds libpthread without running
    ``ldconfig`` (``actors.frontends._pthread_lookup``)."""
    from actors.frontends._pthread_lookup import answer_pthread_lookup as answer

    return answer()


def exit_without_teardown(status: int) -> None:
    """A finished run of its own leaves with ``os._exit`` after what an ordinary exit
    shows, when nothing else is due (``actors.frontends._exit``)."""
    from actors.frontends._exit import exit_without_teardown as leave

    leave(status)


def reuse_parsed_policies() -> bool:
    """A process of its own: policy files parsed by earlier runs come from a cache beside
    the compiled methods' (``actors.scheduler._policy_cache``)."""
    from actors.scheduler import reuse_parsed_policies as reuse

    path = _beside_compiled_methods("policies")
    if path is None:
        return False
    reuse(path)
    return True


def reuse_declared_tools() -> bool:
    """A process of its own: the built-in tools are declared from a cache beside the
    compiled methods' and their modules imported when first used
    (``actors.tools._declared``)."""
    from actors.tools import reuse_declared_tools as reuse

    path = _beside_compiled_methods("tools")
    if path is None:
        return False
    reuse(path)
    return True


def _beside_compiled_methods(stem: str) -> str | None:
    """The cache file ``stem`` in the compiled methods' directory, named after the
    interpreter's bytecode as they are; None when they have no place."""
    import os
    from importlib.util import MAGIC_NUMBER

    from actors.frontends._compiled_methods import cache_path

    methods = cache_path()
    if methods is None:
        return None
    return os.path.join(os.path.dirname(methods), f"{stem}-{MAGIC_NUMBER.hex()}.marshal")


_collecting_after_imports = False


def _loaded() -> None:
    """The command's modules are imported: the collector runs again (see ``main``)."""
    global _collecting_after_imports
    if _collecting_after_imports:
        _collecting_after_imports = False
        gc.freeze()
        gc.enable()


def console_main() -> None:
    sys.exit(main())
