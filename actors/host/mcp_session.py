"""A session's MCP servers as its front ends use them: their state, the prompts they offer
as slash commands and the resources ``@<server>:<uri>`` reads, as Gemini CLI 0.61.0 does.

- **Prompts as commands** (Gemini's ``McpPromptLoader``): a prompt's command is its name
  with whitespace runs as ``-``; a prompt name two servers share is registered as
  ``<server>_<name>`` for the later server (servers by name, as their tools); a command
  that a built-in command (``BUILTIN_COMMANDS``) or another prompt's command already has
  becomes ``<server>.<command>`` (Gemini's ``SlashCommandResolver``). ``/<command>
  args`` takes ``--name=value`` / ``--name="value"`` and positional arguments (one
  missing required argument takes all the positional text); ``/<command> help`` lists
  the arguments. The prompt's first message must be text: the model gets that text as
  ``JSON.stringify`` writes it (Gemini sends it so). Unlike Gemini, a ``--name=`` the
  prompt does not take and a prompt without messages are clear errors.
- **Resources** (Gemini's ``readMcpResources``): ``@<server>:<uri>`` names a resource
  the server listed at session start; it is read with ``resources/read`` and given to the
  model as ``\\nContent from @<uri>:\\n`` and its text (binary contents as one line with
  their MIME type and size). A read that fails stops the prompt with one line, as in
  Gemini; so (unlike Gemini, which reads it as a file path) does a reference to a server
  of the session that did not list the uri, or, in a session with MCP servers, to a
  server it does not have (``name:scheme://...``), and a resource over
  ``MAX_RESOURCE_BYTES``.

The session keeps one ``SessionMcp`` (``SessionAddresses.mcp``); it lives as long as the
session's connections (``mcp.supervise_with_mcp``).
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import trio

from actors.common import js_json
from bus.messages import McpServerState

if TYPE_CHECKING:
    from actors.mcp import Discovered, McpConnection
    from bus.messages import McpServerSummary

BUILTIN_COMMANDS = frozenset(
    {
        # Gemini CLI 0.61.0's built-in commands (BuiltinCommandLoader)
        *"about agents auth bug bug-memory chat clear commands compress copy corgi".split(),
        *"directory docs editor export-session extensions footer help hooks ide init".split(),
        *"mcp memory model oncall permissions plan policies privacy profile quit".split(),
        *"restore resume rewind settings setup-github shortcuts skills stats tasks".split(),
        *"terminal-setup theme tools upgrade vim voice".split(),
        # agentbus' own (chat and ACP)
        *"exit new mode sessions shell shell! tool tool!".split(),
    }
)
"""Command names an MCP prompt does not take: it gets ``<server>.<name>`` instead."""

MAX_RESOURCE_BYTES = 20 * 1024 * 1024
"""The most of a resource's contents an ``@`` reference gives the model (the 20 MB
Gemini CLI's file reads allow)."""

_RESOURCE_SHAPED = re.compile(r"^([^:/\\\s]+):([A-Za-z][A-Za-z0-9+.\-]*)://")


class McpInputError(Exception):
    """A prompt command or an ``@`` reference that cannot be carried out: one line for
    the user; nothing was sent to the model."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@attrs.frozen(kw_only=True)
class PromptCommand:
    """An MCP prompt as a slash command."""

    command: str
    server: str
    name: str
    """The prompt's name on the server."""
    description: str
    arguments: tuple[Mapping[str, Any], ...]
    connection: McpConnection = attrs.field(eq=False, repr=False)


@attrs.frozen(kw_only=True)
class CommandResult:
    """What a prompt command gave: a prompt to send, or a message to show."""

    prompt: str | None = None
    """The user's prompt for the model (the prompt's first message, JSON-quoted)."""
    message: str = ""
    """Shown to the user instead (``/<command> help``)."""


# --------------------------------------------------------------------------------------
# Pure rules


def command_name(prompt_name: str) -> str:
    """Gemini's command name of a prompt: trimmed, whitespace runs as ``-``."""
    return re.sub(r"\s+", "-", prompt_name.strip())


def prompt_commands(
    prompts: Iterable[tuple[str, Mapping[str, Any]]], reserved: Iterable[str] = BUILTIN_COMMANDS
) -> list[tuple[str, str, Mapping[str, Any]]]:
    """``(command, server, prompt)`` for ``(server, prompt)`` pairs in discovery order:
    Gemini's prompt registry (a name seen before becomes ``<server>_<name>``), then its
    command resolver against the ``reserved`` built-in names (the later command becomes
    ``<server>.<command>``, and an earlier prompt's command is prefixed too; a name
    still taken gets 1, 2...)."""
    registry: dict[str, tuple[str, Mapping[str, Any]]] = {}
    for server, prompt in prompts:
        name = str(prompt.get("name") or "")
        if not name:
            continue
        registry[f"{server}_{name}" if name in registry else name] = (server, prompt)
    by_server: dict[str, list[tuple[str, Mapping[str, Any]]]] = {}
    for registered, (server, prompt) in registry.items():
        by_server.setdefault(server, []).append((registered, prompt))
    builtin = set(reserved)
    final: dict[str, tuple[str, Mapping[str, Any]]] = {}
    first: set[str] = set(builtin)

    def renamed(name: str, server: str) -> str:
        base = candidate = f"{server}.{name}"
        suffix = 1
        while candidate in final or candidate in builtin:
            candidate = f"{base}{suffix}"
            suffix += 1
        return candidate

    for server, entries in by_server.items():
        for registered, prompt in sorted(entries, key=lambda e: e[0]):
            name = command_name(registered)
            if name not in first:
                first.add(name)
                final[name] = (server, prompt)
                continue
            new = renamed(name, server)
            owner = final.pop(name, None)
            if owner is not None:
                final[renamed(name, owner[0])] = owner
            final[new] = (server, prompt)
    return [(command, server, prompt) for command, (server, prompt) in final.items()]


_NAMED_ARG = re.compile(r'--([^=]+)=(?:"((?:\\.|[^"\\])*)"|([^ ]+))')
_POSITIONAL_ARG = re.compile(r'(?:"((?:\\.|[^"\\])*)"|([^ ]+))')
_ESCAPE = re.compile(r"\\(.)")


def parse_prompt_args(user_args: str, prompt_args: Sequence[Mapping[str, Any]] | None) -> dict[str, str]:
    """Gemini's ``McpPromptLoader.parseArgs``: ``--name=value`` / ``--name="value"``, the
    rest positional (quoted or space-separated) filling the required arguments not
    named, in order; one such argument takes all the positional text. Raises
    ``McpInputError`` for missing required arguments, and (unlike Gemini, which drops
    them) for named arguments the prompt does not take."""
    named: dict[str, str] = {}
    positional_parts: list[str] = []
    last = 0
    for match in _NAMED_ARG.finditer(user_args):
        value = match.group(2) if match.group(2) is not None else match.group(3)
        named[match.group(1)] = _ESCAPE.sub(r"\1", value)
        if match.start() > last:
            positional_parts.append(user_args[last : match.start()])
        last = match.end()
    if last < len(user_args):
        positional_parts.append(user_args[last:])
    positional_text = "".join(positional_parts).strip()
    positional = [
        _ESCAPE.sub(r"\1", m.group(1) if m.group(1) is not None else m.group(2))
        for m in _POSITIONAL_ARG.finditer(positional_text)
    ]
    known = [str(a.get("name")) for a in prompt_args or ()]
    unknown = [k for k in named if k not in known]
    if unknown:
        takes = ", ".join(f"--{k}" for k in known) if known else "no arguments"
        raise McpInputError(
            f"Unknown argument(s): {', '.join(f'--{_one_line(k)}' for k in unknown)} (the prompt takes {takes})"
        )
    if not prompt_args:
        return {}
    inputs: dict[str, str] = {name: named[name] for name in known if named.get(name)}
    unfilled = [str(a.get("name")) for a in prompt_args if a.get("required") and not inputs.get(str(a.get("name")))]
    if len(unfilled) == 1:
        inputs[unfilled[0]] = " ".join(positional)
        return inputs
    missing: list[str] = []
    for i, name in enumerate(unfilled):
        if i < len(positional):
            inputs[name] = positional[i]
        else:
            missing.append(name)
    if missing:
        raise McpInputError(f"Missing required argument(s): {', '.join(f'--{m}' for m in missing)}")
    return inputs


def _one_line(text: str) -> str:
    return text.encode("unicode_escape").decode("ascii") if any(c in text for c in "\r\n") else text


def prompt_help(name: str, arguments: Sequence[Mapping[str, Any]]) -> str:
    """Gemini's ``/<prompt> help``."""
    if not arguments:
        return f'Prompt "{name}" has no arguments.'
    quoted = ",".join('"foo"' for _ in arguments)
    flagged = ",".join(f'--{a.get("name")}="foo"' for a in arguments)
    out = f'Arguments for "{name}":\n\n'
    out += 'You can provide arguments by name (e.g., --argName="value") or by position.\n\n'
    out += f"e.g., {name} {quoted} is equivalent to {name} {flagged}\n\n"
    for arg in arguments:
        out += f"  --{arg.get('name')}\n"
        if arg.get("description"):
            out += f"    {arg.get('description')}\n"
        out += f"    (required: {'yes' if arg.get('required') else 'no'})\n\n"
    return out


def prompt_text(result: Mapping[str, Any]) -> str:
    """The user's prompt from a ``prompts/get`` result: its first message's text,
    JSON-quoted as Gemini sends it. Raises ``McpInputError`` when there is none."""
    messages = result.get("messages")
    if not isinstance(messages, list) or not messages:
        raise McpInputError("The prompt returned no messages.")
    content = messages[0].get("content") if isinstance(messages[0], Mapping) else None
    if not isinstance(content, Mapping) or content.get("type") != "text":
        raise McpInputError("Received an empty or invalid prompt response from the server.")
    return js_json(str(content.get("text", "")))


def resource_parts(result: Mapping[str, Any], *, limit: int = MAX_RESOURCE_BYTES) -> list[dict[str, Any]]:
    """Gemini's ``convertResourceContentsToParts``: each content's text, or one line for
    a blob (MIME type and decoded size). Raises ``McpInputError`` for text over
    ``limit`` bytes in all."""
    parts: list[dict[str, Any]] = []
    total = 0
    for content in result.get("contents") or ():
        if not isinstance(content, Mapping):
            continue
        inner = content.get("resource")
        candidate: Mapping[str, Any] = inner if isinstance(inner, Mapping) else content
        text = candidate.get("text")
        if text:
            total += len(str(text).encode("utf-8", "surrogatepass"))
            if total > limit:
                raise McpInputError(
                    f"its contents are over the {limit // (1024 * 1024)} MB an @ reference may attach"
                )
            parts.append({"text": str(text)})
        elif candidate.get("blob"):
            blob = str(candidate["blob"])
            try:
                size = len(base64.b64decode(blob + "=" * (-len(blob) % 4)))
            except (binascii.Error, ValueError):
                size = len(blob) * 3 // 4
            mime = candidate.get("mimeType") or "application/octet-stream"
            parts.append({"text": f"[Binary resource content {mime}, {size} bytes]"})
    return parts


# --------------------------------------------------------------------------------------
# The session's servers


class SessionMcp:
    """What a session's MCP servers offer, as discovered at its start, and their state."""

    def __init__(
        self,
        found: Sequence[Discovered],
        *,
        tools: Mapping[str, Any],
        descriptions: Mapping[str, str] | None = None,
        last_error: dict[str, str] | None = None,
        reserved: Iterable[str] = BUILTIN_COMMANDS,
    ) -> None:
        self._found = {d.connection.name: d for d in found}
        self._tools = tools
        self._descriptions = dict(descriptions or {})
        self.last_error: dict[str, str] = last_error if last_error is not None else {}
        """The last line reported about each server (a failure at start, a disconnect):
        shared with the reports of its connections."""
        self.last_error.update({d.connection.name: d.error for d in found if d.error})
        ordered = sorted(found, key=lambda d: (d.connection.name.lower(), d.connection.name))
        pairs = [(d.connection.name, p) for d in ordered if d.error is None for p in d.prompts]
        self.commands: dict[str, PromptCommand] = {}
        for command, server, prompt in prompt_commands(pairs, reserved):
            args = prompt.get("arguments")
            self.commands[command] = PromptCommand(
                command=command,
                server=server,
                name=str(prompt.get("name")),
                description=str(prompt.get("description") or f"Invoke prompt {prompt.get('name')}"),
                arguments=tuple(a for a in args if isinstance(a, Mapping)) if isinstance(args, list) else (),
                connection=self._found[server].connection,
            )
        self._resources: dict[tuple[str, str], Mapping[str, Any]] = {
            (d.connection.name, str(r["uri"])): r for d in found if d.error is None for r in d.resources
        }

    @property
    def server_names(self) -> list[str]:
        return list(self._found)

    def start_error(self, server: str) -> str | None:
        """Why ``server`` offers nothing (it failed at session start), or None."""
        return self._found[server].error

    # -- prompts ---------------------------------------------------------------------------

    def command_of(self, text: str) -> tuple[PromptCommand, str] | None:
        """The prompt command ``text`` (``/<command> args``) runs, and its arguments."""
        stripped = text.strip()
        if not stripped.startswith("/"):
            return None
        name, _, rest = stripped[1:].partition(" ")
        command = self.commands.get(name)
        return (command, rest.strip()) if command is not None else None

    async def run_command(self, command: PromptCommand, args: str) -> CommandResult:
        """``prompts/get`` with the parsed arguments; raises ``McpInputError``."""
        from actors.mcp import McpConnectError, get_prompt

        if args.split(maxsplit=1)[:1] == ["help"]:
            return CommandResult(message=prompt_help(command.name, command.arguments))
        inputs = parse_prompt_args(args, command.arguments)
        try:
            result = await get_prompt(command.connection, command.name, inputs)
        except McpConnectError as exc:
            raise McpInputError(f"Error invoking prompt '{command.name}' of MCP server '{command.server}': {exc.message}") from None
        return CommandResult(prompt=prompt_text(result))

    # -- resources -------------------------------------------------------------------------

    def resource(self, reference: str) -> tuple[str, Mapping[str, Any]] | None:
        """``<server>:<uri>`` as Gemini's resource registry finds it: (server, resource)."""
        server, colon, uri = reference.partition(":")
        if not colon or not server:
            return None
        found = self._resources.get((server, uri))
        return (server, found) if found is not None else None

    async def read(self, server: str, uri: str) -> list[dict[str, Any]]:
        from actors.mcp import McpConnectError, read_resource

        try:
            result = await read_resource(self._found[server].connection, uri)
            return resource_parts(result)
        except (McpConnectError, McpInputError) as exc:
            raise McpInputError(
                f"Exiting due to an error processing the @ command: Error reading resource {uri}: {exc.message}"
            ) from None

    # -- the state, for /mcp -----------------------------------------------------------------

    def _why(self, name: str, state: McpServerState) -> str:
        """What was last reported about a server that is not connected; a server that
        has just gone away may not have been reported yet (its stream still closing)."""
        line = self.last_error.get(name, "")
        if not line and state == "disconnected":
            where = self._found[name].connection.params.where()
            line = f"MCP server '{name}' disconnected ({where}); its next call reconnects."
        return line

    def summaries(self) -> tuple[McpServerSummary, ...]:
        # The daemon's protocol classes: imported by the daemon's ListMcpServers, not by
        # every session's start (issue #20).
        from bus.messages import (
            McpPromptSummary,
            McpResourceSummary,
            McpServerSummary,
            McpToolSummary,
        )

        out: list[McpServerSummary] = []
        for name, d in self._found.items():
            conn = d.connection
            state: McpServerState = "connected" if conn.connected else ("error" if d.error else "disconnected")
            tools = [t for t in self._tools.values() if getattr(t, "server", None) == name]
            out.append(
                McpServerSummary(
                    name=name,
                    state=state,
                    error="" if state == "connected" else self._why(name, state),
                    description=self._descriptions.get(name, ""),
                    tools=tuple(
                        McpToolSummary(name=t.name, description=t.description, schema=t.schema) for t in tools
                    ),
                    prompts=tuple(
                        McpPromptSummary(
                            name=c.name,
                            command=c.command,
                            description=c.description,
                            arguments=tuple(str(a.get("name")) for a in c.arguments),
                            required=tuple(str(a.get("name")) for a in c.arguments if a.get("required")),
                        )
                        for c in sorted(self.commands.values(), key=lambda c: c.command)
                        if c.server == name
                    ),
                    resources=tuple(
                        McpResourceSummary(
                            uri=str(r.get("uri")),
                            name=str(r.get("name") or ""),
                            mime_type=str(r.get("mimeType") or ""),
                            description=str(r.get("description") or ""),
                        )
                        for (server, _), r in sorted(self._resources.items())
                        if server == name
                    ),
                )
            )
        return tuple(out)


async def read_references(mcp: SessionMcp | None, references: Sequence[str]) -> dict[str, list[dict[str, Any]]]:
    """The parts of each ``@`` reference (without ``@``) that names an MCP resource,
    read concurrently. Raises ``McpInputError`` for the first that fails, for a server
    of the session that did not list the uri, and for a resource-shaped reference
    (``name:scheme://...``) to a server the session does not have (a session without
    MCP servers reads every reference as a path, as Gemini CLI)."""
    if mcp is None:
        return {}
    targets: dict[str, tuple[str, str]] = {}
    servers = mcp.server_names
    for ref in references:
        found = mcp.resource(ref)
        if found is not None:
            targets[ref] = (found[0], str(found[1]["uri"]))
            continue
        server, colon, uri = ref.partition(":")
        if colon and server in servers and (failed := mcp.start_error(server)):
            raise McpInputError(f"@{ref}: MCP server '{server}' is not available: {failed}")
        if colon and server in servers:
            raise McpInputError(f"@{ref}: MCP server '{server}' has no resource '{uri}' (/mcp lists its resources)")
        if _RESOURCE_SHAPED.match(ref):
            raise McpInputError(
                f"@{ref}: this session has no MCP server '{server}' (its MCP servers: {', '.join(servers)})"
            )
    if not targets:
        return {}
    results: dict[str, list[dict[str, Any]]] = {}
    errors: dict[str, str] = {}

    async def one(ref: str, server: str, uri: str) -> None:
        try:
            results[ref] = await mcp.read(server, uri)
        except McpInputError as exc:
            errors[ref] = exc.message

    async with trio.open_nursery() as nursery:
        for ref, (server, uri) in targets.items():
            nursery.start_soon(one, ref, server, uri)
    for ref in targets:
        if ref in errors:
            raise McpInputError(errors[ref])
    return results


async def run_prompt_command(mcp: SessionMcp | None, text: str) -> CommandResult | None:
    """``text`` run as an MCP prompt command when it is one (None: it is not)."""
    if mcp is None:
        return None
    found = mcp.command_of(text)
    if found is None:
        return None
    return await mcp.run_command(*found)
