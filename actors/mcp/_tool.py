"""An MCP server's tool as a ``Tool`` of the session's registry (Gemini CLI's
``DiscoveredMCPTool``): declared under its registered name with the cleaned input schema,
kind ``other`` (Gemini's ``Kind.Other``: the scheduler runs it in parallel with its
neighbours unless ``wait_for_previous`` says otherwise), described by its arguments as
JSON; its ``execute`` is one ``tools/call`` on its server's connection."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from actors.common import js_json
from bus.messages import ToolResult

from ._connection import McpConnection
from ._params import clean_schema
from ._results import tool_result


class McpTool:
    """One tool of one server (stateless between calls; the connection is the server's)."""

    kind: str = "other"
    truncates_text_result = True
    """A result of one text part past ``tools.truncateToolOutputThreshold`` is cut, the
    whole saved to a file, by the executor (Gemini's scheduler does it for MCP tools)."""

    def __init__(
        self,
        *,
        name: str,
        connection: McpConnection,
        definition: Mapping[str, Any],
    ) -> None:
        self.name = name
        self.connection = connection
        self.server = connection.name
        self.server_tool_name = str(definition.get("name", ""))
        self.description = str(definition.get("description") or "")
        schema = definition.get("inputSchema")
        self.schema: Any = clean_schema(schema) if isinstance(schema, Mapping) else {"type": "object", "properties": {}}
        annotations = definition.get("annotations")
        self.annotations: Mapping[str, Any] = annotations if isinstance(annotations, Mapping) else {}
        self.read_only = self.annotations.get("readOnlyHint") is True
        self.trust = connection.params.trust
        self.display_name = f"{self.server_tool_name} ({self.server} MCP Server)"

    @property
    def policy_annotations(self) -> dict[str, Any]:
        """What the policy reads of the tool (Gemini's registry metadata): its
        annotations and ``_serverName``, by which ``mcpName`` rules and trust match."""
        return {**self.annotations, "_serverName": self.server}

    @property
    def mcp_context(self) -> dict[str, Any]:
        """What Gemini's BeforeTool and AfterTool hooks get of an MCP call's server
        (``mcp_context``: its keys that are set)."""
        p = self.connection.params
        context: dict[str, Any] = {"server_name": self.server, "tool_name": self.server_tool_name}
        if p.command is not None:
            context["command"] = p.command
        if p.args:
            context["args"] = list(p.args)
        if p.cwd is not None:
            context["cwd"] = p.cwd
        if p.url is not None:
            context["url"] = p.url
        return context

    def declaration(self, model: str) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "parametersJsonSchema": self.schema}

    def validate(self, args: Mapping[str, Any], env: Any) -> str | None:
        return None

    def describe(self, args: Mapping[str, Any], env: Any) -> str:
        return js_json(dict(args))

    async def execute(
        self, args: Mapping[str, Any], env: Any, output: Callable[[str], Awaitable[None]] | None = None
    ) -> ToolResult:
        parts = await self.connection.call_tool(self.server_tool_name, args)
        return tool_result(self.server_tool_name, args, parts)
