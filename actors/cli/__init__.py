"""agentbus command line: headless runs and the other entry points."""

from __future__ import annotations

import sys
from collections.abc import Sequence

SUBCOMMANDS = ("daemon", "chat", "acp", "replay", "tool")


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in SUBCOMMANDS:
        sys.stderr.write(f"agentbus {args[0]}: not available in this version yet\n")
        return 2
    from ._args import build_parser, parse_headless
    from ._errors import FatalError, UsageError
    from ._headless import report_fatal, run_headless, workspace_settings

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
    try:
        return run_headless(parsed, settings)
    except KeyboardInterrupt:
        return 130


def console_main() -> None:
    sys.exit(main())
