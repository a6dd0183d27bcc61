"""``agentbus mcp``: the MCP servers of settings.json, as ``gemini mcp`` manages them.

    agentbus mcp add [options] NAME COMMAND|URL [ARGS...]   add or replace a server
    agentbus mcp remove [-s user|project] NAME              remove one
    agentbus mcp list                                       each server and its state

``add`` and ``remove`` edit one scope's settings file (``-s project``, the default:
``.gemini/settings.json`` here; ``-s user``: ``~/.gemini/settings.json``), replacing only
the ``mcpServers`` value: the file's other keys, their formatting and comments stay as
they were. A file that cannot be read is one error line and nothing is written. An
option ``add`` does not know is one of the server's arguments (``npx -y pkg``), as is
everything after ``--``. ``list`` shows the servers of the merged settings, each with
Gemini CLI's states: Connected (with the number of tools it offers), Disconnected,
Blocked (``mcp.allowed``/``mcp.excluded``). Like ``gemini mcp``, every line goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from actors.host import mcp_config
from actors.host import settings as _settings

EXIT_CODES = """Exit codes:
  0  done (also when remove finds no such server, as gemini mcp does)
  1  a settings file that cannot be read or written, or -s project in the home directory
  2  a malformed command line"""

SCOPES = ("user", "project")
TRANSPORTS = ("stdio", "sse", "http")

StatusCheck = Callable[[Sequence[mcp_config.McpServerConfig], Mapping[str, Any]], Mapping[str, str]]
"""Connects to the servers (with the merged settings) and answers each one's state by
name: ``Connected (N tools)`` or ``Disconnected``."""


class McpCommandError(Exception):
    """One line for stderr; nothing was written."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agentbus mcp",
        description="Manage the MCP servers of settings.json (Gemini CLI's gemini mcp).",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", metavar="add|remove|list", help="add, remove or list servers")
    sub.required = True
    add = sub.add_parser(
        "add",
        prog="agentbus mcp add",
        usage="agentbus mcp add [options] NAME COMMAND_OR_URL [ARGS...]",
        description="Add a server (or replace one of the same name) in one scope's settings.json. "
        "An option not listed here is an argument of the server, as is everything after --.",
    )
    add.add_argument("name", metavar="NAME", help="name of the server")
    add.add_argument("command_or_url", metavar="COMMAND_OR_URL", help="command (stdio) or URL (sse, http)")
    add.add_argument("args", nargs="*", metavar="ARGS", help="the command's arguments (stdio)")
    _scope_flag(add)
    add.add_argument(
        "-t", "--transport", "--type", choices=TRANSPORTS, default="stdio", help="transport type (default: stdio)"
    )
    add.add_argument(
        "-e", "--env", action="append", metavar="KEY=VALUE", help="an environment variable of the server (repeatable)"
    )
    add.add_argument(
        "-H",
        "--header",
        action="append",
        metavar="'NAME: VALUE'",
        help="an HTTP header for sse and http servers (repeatable)",
    )
    add.add_argument("--timeout", type=_milliseconds, metavar="MS", help="timeout of each request in milliseconds")
    add.add_argument(
        "--trust",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="trust the server (its tools run without asking)",
    )
    add.add_argument("--description", help="a description of the server")
    add.add_argument(
        "--include-tools", action="append", metavar="TOOLS", help="only these tools (comma-separated or repeated)"
    )
    add.add_argument(
        "--exclude-tools", action="append", metavar="TOOLS", help="never these tools (comma-separated or repeated)"
    )
    remove = sub.add_parser("remove", prog="agentbus mcp remove", description="Remove a server from one scope's settings.json.")
    remove.add_argument("name", metavar="NAME", help="name of the server")
    _scope_flag(remove)
    sub.add_parser(
        "list",
        prog="agentbus mcp list",
        description="List the servers of the merged settings, each with its state (it connects to each).",
    )
    return parser


def _scope_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "-s", "--scope", choices=SCOPES, default="project", help="the settings file: project (default) or user"
    )


def _milliseconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of milliseconds: {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"not a positive number of milliseconds: {text!r}")
    return int(value) if value.is_integer() else value


def reorder_add_args(parser: argparse.ArgumentParser, argv: Sequence[str]) -> list[str]:
    """``add``'s options first, then ``--`` and the positionals in order: an option ``add``
    does not know, and everything after ``--``, is a positional (an argument of the
    server), as yargs' ``unknown-options-as-args`` reads it."""
    add = _subparser(parser, "add")
    known = add._option_string_actions
    options: list[str] = []
    positionals: list[str] = []
    i = 0
    while i < len(argv):
        token = argv[i]
        if token == "--":
            positionals.extend(argv[i + 1 :])
            break
        flag = token.split("=", 1)[0] if token.startswith("--") else token
        action = known.get(flag)
        if action is None or token == "-":
            positionals.append(token)
            i += 1
            continue
        options.append(token)
        if action.nargs != 0 and "=" not in token and i + 1 < len(argv):
            options.append(argv[i + 1])
            i += 1
        i += 1
    return [*options, "--", *positionals]


def _subparser(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action.choices[name]  # type: ignore[no-any-return]
    raise KeyError(name)


# --- editing one settings file --------------------------------------------------------------


def scope_path(scope: str, workspace: Path) -> Path:
    user = _settings.gemini_home() / ".gemini" / "settings.json"
    return user if scope == "user" else workspace / ".gemini" / "settings.json"


def _in_home(workspace: Path) -> bool:
    user = _settings.gemini_home() / ".gemini" / "settings.json"
    return (workspace / ".gemini" / "settings.json").resolve() == user.resolve()


def read_servers(path: Path) -> tuple[str | None, dict[str, Any], dict[str, Any]]:
    """The file's text (None: no file), its settings, and its ``mcpServers`` object."""
    try:
        text: str | None = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        text = None
    except (OSError, UnicodeDecodeError) as exc:
        raise McpCommandError(f"Error in {path}: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        data = _settings.load_settings_file(path) if text is not None else {}
    except _settings.SettingsFileError as exc:
        raise McpCommandError(f"{exc}; nothing was written") from None
    servers = data.get("mcpServers", {})
    if not isinstance(servers, dict):
        raise McpCommandError(f"Error in {path}: 'mcpServers' is not an object; nothing was written")
    return text, data, dict(servers)


def write_servers(path: Path, text: str | None, data: Mapping[str, Any], servers: Mapping[str, Any]) -> None:
    """Replace the file's ``mcpServers`` value (or add it), leaving the rest of its text
    as it is; checked by reading the result back before it replaces the file."""
    new_text = with_top_level_value(text, "mcpServers", servers)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        try:
            tmp.write_text(new_text, encoding="utf-8")
            if path.exists():
                os.chmod(tmp, path.stat().st_mode & 0o7777)
            same = _settings.load_settings_file(tmp) == {**data, "mcpServers": dict(servers)}
        except _settings.SettingsFileError:
            same = False
        if not same:
            raise McpCommandError(f"Error in {path}: could not edit the file safely; nothing was written")
        os.replace(tmp, path)
    except OSError as exc:
        raise McpCommandError(f"Error writing {path}: {exc.strerror or exc}") from None
    finally:
        tmp.unlink(missing_ok=True)


def _tokens(text: str) -> list[tuple[str, int, int]]:
    """JSON with comments as tokens: ``{}[]:,``, ``str`` and ``lit`` with their spans."""
    out: list[tuple[str, int, int]] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in " \t\r\n\ufeff":
            i += 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            i = n if j < 0 else j + 2
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(("str", i, j + 1))
            i = j + 1
        elif c in "{}[]:,":
            out.append((c, i, i + 1))
            i += 1
        else:
            j = i + 1
            while j < n and text[j] not in ' \t\r\n{}[]:,"' and not text.startswith(("//", "/*"), j):
                j += 1
            out.append(("lit", i, j))
            i = j
    return out


def _line_indent(text: str, at: int) -> str:
    start = text.rfind("\n", 0, at) + 1
    line = text[start:at]
    return line[: len(line) - len(line.lstrip(" \t"))]


def with_top_level_value(text: str | None, key: str, value: Any) -> str:
    """``text`` (a settings file, comments allowed) with its top-level ``key`` set to
    ``value``; only that value's text changes (or one member is added)."""
    rendered = json.dumps(value, indent=2, ensure_ascii=False)
    if text is None or not text.strip():
        return "{\n  " + json.dumps(key) + ": " + rendered.replace("\n", "\n  ") + "\n}\n"
    toks = _tokens(text)
    depth = 0
    span: tuple[int, int] | None = None
    last_end: int | None = None  # the end of the top-level object's last member
    close: int | None = None
    k = 0
    while k < len(toks):
        kind, start, end = toks[k]
        if kind in "{[":
            depth += 1
        elif kind in "}]":
            depth -= 1
            if depth == 0:
                close = start
                break
        elif depth == 1 and kind == "str" and k + 2 < len(toks) and toks[k + 1][0] == ":":
            m = k + 2
            inner = 0
            v_start, v_end = toks[m][1], toks[m][2]
            while m < len(toks):
                t = toks[m][0]
                if inner == 0 and t in ",}" and m > k + 2:
                    break
                if t in "{[":
                    inner += 1
                elif t in "}]":
                    inner -= 1
                v_end = toks[m][2]
                m += 1
                if inner == 0:
                    break
            if json.loads(text[start:end]) == key:
                span = (v_start, v_end)
            last_end = v_end
            k = m
            continue
        k += 1
    indent = ""
    if span is not None:
        indent = _line_indent(text, span[0])
        return text[: span[0]] + rendered.replace("\n", "\n" + indent) + text[span[1] :]
    if close is None:
        raise McpCommandError("the settings file has no closing brace")
    member_indent = "  "
    first_key = next((s for kind, s, _ in toks[1:2] if kind == "str"), None)
    if first_key is not None:
        member_indent = _line_indent(text, first_key) or member_indent
    member = json.dumps(key) + ": " + rendered.replace("\n", "\n" + member_indent)
    if last_end is None:
        return text[:close] + "\n" + member_indent + member + "\n" + text[close:]
    return text[:last_end] + ",\n" + member_indent + member + text[last_end:]


# --- the commands -------------------------------------------------------------------------------


def _split_env(items: Sequence[str] | None) -> dict[str, str] | None:
    if items is None:
        return None
    env: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if key and sep and value:
            env[key] = value
    return env


def _split_headers(items: Sequence[str] | None) -> dict[str, str] | None:
    if items is None:
        return None
    headers: dict[str, str] = {}
    for item in items:
        key, _, value = item.partition(":")
        if key.strip() and value.strip():
            headers[key.strip()] = value.strip()
    return headers


def _split_tools(items: Sequence[str] | None) -> list[str] | None:
    if items is None:
        return None
    return [t.strip() for item in items for t in item.split(",") if t.strip()]


def server_entry(ns: argparse.Namespace) -> dict[str, Any]:
    """The settings entry ``gemini mcp add`` writes (keys it would leave out are left out)."""
    common = {
        "timeout": ns.timeout,
        "trust": ns.trust,
        "description": ns.description,
        "includeTools": _split_tools(ns.include_tools),
        "excludeTools": _split_tools(ns.exclude_tools),
    }
    if ns.transport in ("sse", "http"):
        entry = {"url": ns.command_or_url, "type": ns.transport, "headers": _split_headers(ns.header), **common}
    else:
        entry = {"command": ns.command_or_url, "args": list(ns.args), "env": _split_env(ns.env), **common}
    return {k: v for k, v in entry.items() if v is not None}


def add(ns: argparse.Namespace, workspace: Path, out: Callable[[str], None]) -> int:
    if ns.scope == "project" and _in_home(workspace):
        raise McpCommandError("Error: Please use --scope user to edit settings in the home directory.")
    path = scope_path(ns.scope, workspace)
    text, data, servers = read_servers(path)
    existed = ns.name in servers
    if existed:
        out(f'MCP server "{ns.name}" is already configured within {ns.scope} settings.')
    servers[ns.name] = server_entry(ns)
    write_servers(path, text, data, servers)
    if existed:
        out(f'MCP server "{ns.name}" updated in {ns.scope} settings.')
    else:
        out(f'MCP server "{ns.name}" added to {ns.scope} settings. ({ns.transport})')
    return 0


def remove(ns: argparse.Namespace, workspace: Path, out: Callable[[str], None]) -> int:
    if ns.scope == "project" and _in_home(workspace):
        out(f'Server "{ns.name}" not found in {ns.scope} settings.')  # Gemini reads no project file there
        return 0
    path = scope_path(ns.scope, workspace)
    text, data, servers = read_servers(path)
    if ns.name not in servers:
        out(f'Server "{ns.name}" not found in {ns.scope} settings.')
        return 0
    del servers[ns.name]
    write_servers(path, text, data, servers)
    out(f'Server "{ns.name}" removed from {ns.scope} settings.')
    return 0


def server_info(name: str, raw: Any) -> str:
    """``name: <url> (http)``, ``name: <command> <args> (stdio)``, as ``gemini mcp list``."""
    info = f"{name}: "
    if not isinstance(raw, Mapping):
        return info
    if isinstance(raw.get("httpUrl"), str) and raw["httpUrl"]:
        return info + f"{raw['httpUrl']} (http)"
    if isinstance(raw.get("url"), str) and raw["url"]:
        kind = raw.get("type") or "http"
        return info + f"{raw['url']} ({kind})"
    if isinstance(raw.get("command"), str) and raw["command"]:
        args = raw.get("args")
        joined = " ".join(str(a) for a in args) if isinstance(args, list) else ""
        return info + f"{raw['command']} {joined} (stdio)"
    return info


SYMBOLS = {"Connected": "✓", "Disconnected": "✗", "Blocked": "⛔"}


def list_servers(
    workspace: Path,
    out: Callable[[str], None],
    err: Callable[[str], None],
    *,
    check: StatusCheck | None,
) -> int:
    try:
        merged = _settings.load_settings(workspace)
    except Exception as exc:  # FatalConfigError: every broken file, named
        raise McpCommandError(str(getattr(exc, "message", exc))) from None
    raw = merged.get("mcpServers")
    raw_servers: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    if not raw_servers:
        out("No MCP servers configured.")
        return 0
    configs, problems = mcp_config.configured_servers({"mcpServers": raw_servers})
    for line in problems:
        err(line)
    allowed, excluded = mcp_config.server_filter(merged, scopes=mcp_config.settings_scopes(workspace))
    blocked = {name for name in raw_servers if mcp_config.blocked_by_settings(name, allowed, excluded)}
    reachable = [c for name, c in configs.items() if name not in blocked]
    states = check(reachable, merged) if check is not None and reachable else {}
    out("Configured MCP servers:\n")
    for name, entry in raw_servers.items():
        if name in blocked:
            state = "Blocked"
        elif name not in configs:
            state = "Disconnected"
        else:
            state = states.get(name, "")
        symbol = SYMBOLS.get(state.split(" ")[0], " ")
        line = f"{symbol} {server_info(name, mcp_config.resolve_settings_tree(entry))}"
        out(f"{line} - {state}" if state else line.lstrip())
    return 0


def connect_all(configs: Sequence[mcp_config.McpServerConfig], settings: Mapping[str, Any]) -> dict[str, str]:
    """Gemini's ``mcp list`` check, every server at once: connect (bounded by the
    server's ``timeout``, else 5 s), then list its tools."""
    import trio

    states: dict[str, str] = {}

    async def probe(config: mcp_config.McpServerConfig) -> None:
        states[config.name] = await connection_state(config, settings)

    async def run() -> None:
        async with trio.open_nursery() as nursery:
            for config in configs:
                nursery.start_soon(probe, config)

    trio.run(run)
    return states


async def connection_state(config: mcp_config.McpServerConfig, settings: Mapping[str, Any]) -> str:
    import attrs
    import trio

    from actors.host.mcp import server_params
    from actors.mcp import McpConnectError, McpConnection, is_enabled

    timeout_ms = config.timeout_ms if config.timeout_ms is not None else mcp_config.MCP_LIST_DEFAULT_TIMEOUT_MS
    params = attrs.evolve(server_params(config, settings), timeout_s=timeout_ms / 1000)
    connection = McpConnection(params, report=lambda _line: None)
    async with trio.open_nursery() as nursery:
        await nursery.start(connection.run)
        try:
            tools = await connection.list_tools()
        except McpConnectError:
            state = "Disconnected"
        else:
            count = sum(1 for t in tools if is_enabled(str(t.get("name", "")), params))
            state = f"Connected ({count} tool{'' if count == 1 else 's'})"
        nursery.cancel_scope.cancel()
    return state


def main(argv: Sequence[str], *, check: StatusCheck | None = connect_all) -> int:
    parser = build_parser()
    args = list(argv)
    if args and args[0] == "add":
        args = ["add", *reorder_add_args(parser, args[1:])]
    ns = parser.parse_args(args)
    workspace = Path(os.getcwd()).resolve()

    def out(line: str) -> None:  # Gemini CLI's mcp commands print everything on stderr
        sys.stderr.write(line + "\n")

    def err(line: str) -> None:
        sys.stderr.write(line + "\n")

    try:
        if ns.command == "add":
            return add(ns, workspace, out)
        if ns.command == "remove":
            return remove(ns, workspace, out)
        return list_servers(workspace, out, err, check=check)
    except McpCommandError as exc:
        err(str(exc))
        return 1
