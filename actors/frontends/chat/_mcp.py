"""Chat's ``/mcp``: the session's MCP servers as Gemini CLI's ``/mcp`` shows them (its
``McpStatus`` view as text): each server with its state and what it offers, its error,
its tools, prompts and resources (ten at most, then how many are hidden). ``desc`` adds
descriptions, ``schema`` also each tool's parameters; ``list``/``ls``/``nodesc`` is the
plain list; any other word filters servers by name. And ``/<prompt> help`` from what the
daemon lists of a prompt (its arguments' names and which are required)."""

from __future__ import annotations

from collections.abc import Sequence

from actors.common import js_json
from actors.host.mcp_session import prompt_help
from bus.json_values import thaw
from bus.messages import McpPromptSummary, McpServerSummary

MAX_RESOURCES_SHOWN = 10
"""Gemini's ``MAX_MCP_RESOURCES_TO_SHOW``."""

NO_SERVERS = "No MCP servers configured."

_STATES = {
    "connected": ("🟢", "Ready"),
    "disconnected": ("🔴", "Disconnected (its next use reconnects)"),
    "error": ("🔴", "Error"),
}

_VARIANTS = {
    "list": (False, False),
    "ls": (False, False),
    "nodesc": (False, False),
    "nodescription": (False, False),
    "desc": (True, False),
    "description": (True, False),
    "schema": (True, True),
}


def parse_mcp_args(args: str) -> tuple[bool, bool, str]:
    """``/mcp ARGS``: (descriptions, schemas, server name filter)."""
    word, _, rest = args.strip().partition(" ")
    if word in _VARIANTS:
        return (*_VARIANTS[word], rest.strip())
    return False, False, args.strip()


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def render_servers(
    servers: Sequence[McpServerSummary], *, descriptions: bool = False, schema: bool = False, only: str = ""
) -> str:
    if only:
        servers = [s for s in servers if only.lower() in s.name.lower()]
    if not servers:
        return NO_SERVERS
    lines = ["Configured MCP servers:", ""]
    for server in servers:
        mark, state = _STATES[server.state]
        counts = [
            _plural(len(items), word)
            for items, word in ((server.tools, "tool"), (server.prompts, "prompt"), (server.resources, "resource"))
            if items
        ]
        offered = f" ({', '.join(counts)})" if counts and server.state == "connected" else ""
        if server.state == "disconnected" and server.tools:
            offered = f" ({_plural(len(server.tools), 'tool')} cached)"
        lines.append(f"{mark} {server.name} - {state}{offered}")
        if server.error:
            lines.append(f"  Error: {server.error}")
        if descriptions and server.description:
            lines.append(server.description.strip())
        if server.tools:
            lines.append("  Tools:")
            for tool in server.tools:
                lines.append(f"  - {tool.name}")
                if descriptions and tool.description:
                    lines.append(f"    {tool.description.strip()}")
                if schema and tool.schema:
                    lines.append("      Parameters:")
                    lines.extend(f"      {line}" for line in js_json(thaw(tool.schema), indent=2).splitlines())
        if server.prompts:
            lines.append("  Prompts:")
            for prompt in server.prompts:
                lines.append(f"  - {prompt.command}")
                if descriptions and prompt.description:
                    lines.append(f"    {prompt.description.strip()}")
        if server.resources:
            lines.append("  Resources:")
            for resource in server.resources[:MAX_RESOURCES_SHOWN]:
                label = resource.name or resource.uri or "resource"
                mime = f" [{resource.mime_type}]" if resource.mime_type else ""
                lines.append(f"  - {label} ({resource.uri}){mime}")
                if descriptions and resource.description:
                    lines.append(f"    {resource.description.strip()}")
            hidden = len(server.resources) - MAX_RESOURCES_SHOWN
            if hidden > 0:
                lines.append(f"  ... {_plural(hidden, 'resource')} hidden")
        lines.append("")
    return "\n".join(lines).rstrip("\n")


def find_prompt(servers: Sequence[McpServerSummary], command: str) -> McpPromptSummary | None:
    """The prompt whose command is ``command`` (without ``/``)."""
    return next((p for s in servers for p in s.prompts if p.command == command), None)


def help_of(prompt: McpPromptSummary) -> str:
    """``/<prompt> help``, as the session would answer it (without the arguments'
    descriptions, which the daemon does not list)."""
    args = [{"name": a, "required": a in prompt.required} for a in prompt.arguments]
    return prompt_help(prompt.name, args).rstrip("\n")
