"""Command-line flags: Gemini CLI's headless flags, where they apply."""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence

import attrs

from actors.host.errors import UsageError
from actors.host.flags import APPROVAL_MODES as APPROVAL_MODES  # re-exported: agentbus tool uses it
from actors.host.flags import add_session_flags, split_server_names

OUTPUT_FORMATS = ("text", "json", "stream-json")


@attrs.define
class HeadlessArgs:
    prompt: str | None = None
    query: list[str] = attrs.field(factory=list)
    model: str | None = None
    output_format: str | None = None
    """None: the ``output.format`` setting, else ``text``."""
    yolo: bool = False
    approval_mode: str | None = None
    fake_responses: str | None = None
    fake_responses_non_strict: str | None = None
    record_responses: str | None = None
    skip_trust: bool = False
    policy: list[str] = attrs.field(factory=list)
    allowed_tools: list[str] = attrs.field(factory=list)
    allowed_mcp_server_names: list[str] | None = None
    """``--allowed-mcp-server-names``, split on commas; None: not given (``mcp.allowed``)."""
    resume: str | None = None
    session_id: str | None = None
    list_sessions: bool = False
    delete_session: str | None = None
    debug: bool = False
    raw_output: bool = False
    accept_raw_output_risk: bool = False
    data_dir: str | None = None


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(_yargs_wording(message))


def _yargs_wording(message: str) -> str:
    """argparse's complaints worded as Gemini CLI's (yargs) ones."""
    m = re.match(r"argument (\S+?)(?:/(\S+))?: expected one argument", message)
    if m:
        flag = (m.group(2) or m.group(1)).split("/")[0]
        return f"Not enough arguments following: {flag.lstrip('-')}"
    m = re.match(r"argument (?:\S+/)?--?(\S+): invalid choice: '(.*)' \(choose from (.*)\)", message)
    if m:
        choices = ", ".join(f'"{c.strip().strip(chr(39))}"' for c in m.group(3).split(","))
        return f'Invalid values:\n  Argument: {m.group(1)}, Given: "{m.group(2)}", Choices: {choices}'
    return message


def _unknown_message(unknown: list[str]) -> str:
    names: list[str] = []
    for arg in unknown:
        name = arg.lstrip("-").split("=")[0]
        if name.startswith("no-") and arg.startswith("--"):
            name = name[3:]
        names.append(name)
        camel = re.sub(r"-([a-z])", lambda m: m.group(1).upper(), name)
        if camel != name:
            names.append(camel)
    label = "Unknown argument" if len(names) == 1 else "Unknown arguments"
    return f"{label}: {', '.join(names)}"


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="agentbus",
        description=(
            "Gemini CLI's agent runtime on a bus of trio actors. Headless: agentbus -p PROMPT "
            "(Gemini CLI's flags, output and exit codes). Other commands, each with its own "
            "--help: agentbus chat | daemon | web | acp | tool NAME | agents | mcp | replay FILE | explore TARGET | cluster export SESSION."
        ),
        epilog=(
            "Exit codes: 0 success, 1 an error (API, bad flags), 41 authentication, 42 bad input, "
            "52 configuration, 53 turn limit, 54 a fatal tool error (disk full), 130 cancelled."
        ),
        allow_abbrev=False,
    )
    p.add_argument("query", nargs="*", help="prompt (positional; joined with spaces)")
    p.add_argument("-p", "--prompt", help="run headless with this prompt (stdin is prepended)")
    p.add_argument("-m", "--model", help="model name, or 'auto' to let the router choose (default: settings, then auto)")
    p.add_argument(
        "-o", "--output-format", choices=OUTPUT_FORMATS, help="text (default: the output.format setting, else text), json or stream-json"
    )
    p.add_argument("-y", "--yolo", action="store_true", help="approve every tool call (same as --approval-mode yolo)")
    p.add_argument(
        "--approval-mode",
        choices=APPROVAL_MODES,
        help="default: ask (headless: refuse) what policy does not allow; auto_edit: allow edits; "
        "yolo: allow all; plan: read-only tools",
    )
    p.add_argument(
        "--fake-responses",
        metavar="FILE",
        help="serve model responses from FILE, Gemini CLI's format, line by line in order (strict); "
        "with -m auto the router's classifier takes a line of its own",
    )
    add_session_flags(p)
    p.add_argument(
        "-r",
        "--resume",
        nargs="?",
        const="latest",
        metavar="latest|N|ID",
        help="resume a session of this project: the latest (no value), its number in "
        "--list-sessions, or its id",
    )
    p.add_argument("--session-id", metavar="ID", help="start a new session with this id (exit 42 if it is taken)")
    p.add_argument("--list-sessions", action="store_true", help="list this project's sessions, oldest first, and exit")
    p.add_argument("--delete-session", metavar="N|ID", help="delete a session (its number in --list-sessions or its id) and exit")
    p.add_argument("-d", "--debug", action="store_true", help="accepted for compatibility (no effect headless)")
    p.add_argument(
        "--raw-output", action="store_true", help="keep ANSI escape sequences in the model's text (default: stripped)"
    )
    p.add_argument("--accept-raw-output-risk", action="store_true", help="same as --raw-output (Gemini CLI's flag to silence its warning)")
    return p


def _check_session_flags(ns: argparse.Namespace) -> None:
    """Gemini CLI's coercions and checks of ``--session-id`` and ``--resume``."""
    if ns.session_id is not None:
        sid = ns.session_id.strip()
        if not sid:
            raise UsageError("The --session-id option cannot be empty.")
        if not re.match(r"^[a-zA-Z0-9_-]+$", sid):
            raise UsageError(
                f'Invalid session ID "{sid}": Only alphanumeric characters, dashes, and underscores are allowed.'
            )
        ns.session_id = sid
    if ns.resume is not None:
        ns.resume = ns.resume.strip() or "latest"
    if ns.resume is not None and ns.session_id is not None:
        raise UsageError(
            "The flags --resume, --session-id, and --session-file are mutually exclusive. "
            "Please provide only one."
        )


def parse_headless(argv: Sequence[str]) -> HeadlessArgs:
    ns, rest = build_parser().parse_known_args(list(argv))
    unknown = [a for a in rest if a.startswith("-") and a != "-"]
    if unknown:
        raise UsageError(_unknown_message(unknown))
    ns.query = [*ns.query, *rest]
    _check_session_flags(ns)
    if ns.prompt is not None and ns.query:
        raise UsageError("Cannot use both a positional prompt and the --prompt (-p) flag together")
    if ns.yolo and ns.approval_mode:
        raise UsageError(
            "Cannot use both --yolo (-y) and --approval-mode together. "
            "Use --approval-mode=yolo instead."
        )
    allowed: list[str] = []
    for item in ns.allowed_tools:
        allowed.extend(x.strip() for x in item.split(",") if x.strip())
    return HeadlessArgs(
        prompt=ns.prompt,
        query=list(ns.query),
        model=ns.model,
        output_format=ns.output_format,
        yolo=ns.yolo,
        approval_mode=ns.approval_mode,
        fake_responses=ns.fake_responses,
        fake_responses_non_strict=ns.fake_responses_non_strict,
        record_responses=ns.record_responses,
        skip_trust=ns.skip_trust,
        policy=list(ns.policy),
        allowed_tools=allowed,
        allowed_mcp_server_names=split_server_names(ns.allowed_mcp_server_names),
        resume=ns.resume,
        session_id=ns.session_id,
        list_sessions=ns.list_sessions,
        delete_session=ns.delete_session,
        debug=ns.debug,
        raw_output=ns.raw_output,
        accept_raw_output_risk=ns.accept_raw_output_risk,
        data_dir=ns.data_dir,
    )
