"""An MCP server (the SDK's low-level ``Server`` over stdio) that offers what a careless
server offers, for the MCP client's bad-input tests.

Tools: ``bad_schema`` (an input schema that is not valid JSON Schema: a property of
type ``frobnicate``), ``strict`` (takes an integer ``n``, answers ``n=<n>``),
``huge`` (answers ``megabytes`` MB of text in one content block), ``echo`` (text).
With ``--builtin-name`` it also lists a tool whose registered name is a built-in's
(``mcp`` server: ``mcp_`` is not doubled).
"""

from __future__ import annotations

import sys
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server
from mcp.server.stdio import stdio_server

TOOLS = [
    types.Tool(
        name="bad_schema",
        description="A tool whose schema is not JSON Schema.",
        input_schema={"type": "object", "properties": {"x": {"type": "frobnicate"}}},
    ),
    types.Tool(
        name="strict",
        description="Takes an integer.",
        input_schema={"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
    ),
    types.Tool(
        name="huge",
        description="Answers that many megabytes of text.",
        input_schema={"type": "object", "properties": {"megabytes": {"type": "number"}}, "required": ["megabytes"]},
    ),
    types.Tool(
        name="echo",
        description="Echo the text back.",
        input_schema={"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    ),
]


async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    return types.ListToolsResult(tools=TOOLS)


async def call_tool(ctx: Any, params: Any) -> types.CallToolResult:
    args = params.arguments or {}
    if params.name == "huge":
        text = "x" * int(float(args["megabytes"]) * 1024 * 1024)
    elif params.name == "strict":
        text = f"n={args.get('n')!r}"
    else:
        text = f"{params.name}: {args}"
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)])


async def main() -> None:
    server = Server("bad", on_list_tools=list_tools, on_call_tool=call_tool)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    del sys.argv[1:]
    anyio.run(main)
