"""MCP servers' tools, prompts and resources for a session: one connection per configured server (stdio,
streamable HTTP or SSE, through the official ``mcp`` SDK, which runs on trio), the
discovery of their tools at session start, and the tools themselves, each run by its
server's executor (kind ``mcp.<server>``).

``import actors.mcp`` stays cheap: the SDK is imported on the first connection, only
when a server is configured.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from actors.common import lazy_exports

from ._params import DEFAULT_TIMEOUT_S, ServerParams, clean_schema, is_enabled, schema_problem

if TYPE_CHECKING:
    from ._catalog import get_prompt, list_prompts, list_resources, read_resource
    from ._connection import McpConnectError, McpConnection
    from ._discovery import Discovered, discover, discovery_errors
    from ._results import MCP_TOOL_ERROR, display_text, model_parts, tool_result
    from ._tool import McpTool

__getattr__ = lazy_exports(
    __name__,
    {
        "get_prompt": "._catalog",
        "list_prompts": "._catalog",
        "list_resources": "._catalog",
        "read_resource": "._catalog",
        "McpConnection": "._connection",
        "McpConnectError": "._connection",
        "Discovered": "._discovery",
        "discover": "._discovery",
        "discovery_errors": "._discovery",
        "MCP_TOOL_ERROR": "._results",
        "display_text": "._results",
        "model_parts": "._results",
        "tool_result": "._results",
        "McpTool": "._tool",
    },
)

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "MCP_TOOL_ERROR",
    "Discovered",
    "McpConnectError",
    "McpConnection",
    "McpTool",
    "ServerParams",
    "clean_schema",
    "discover",
    "discovery_errors",
    "display_text",
    "get_prompt",
    "is_enabled",
    "list_prompts",
    "list_resources",
    "model_parts",
    "read_resource",
    "schema_problem",
    "tool_result",
]
