"""The stdio MCP server the MCP benchmarks call (the SDK's ``MCPServer``): ``echo``
(text back at once) and ``sleep`` (text back after ``seconds``)."""

from __future__ import annotations

import anyio
from mcp.server.mcpserver import MCPServer


def main() -> None:
    server = MCPServer("bench")

    @server.tool(description="Echo the text back.", structured_output=False)
    def echo(text: str) -> str:
        return text

    @server.tool(description="Answer after some seconds.", structured_output=False)
    async def sleep(seconds: float) -> str:
        await anyio.sleep(seconds)
        return f"slept {seconds}"

    server.run()


if __name__ == "__main__":
    main()
