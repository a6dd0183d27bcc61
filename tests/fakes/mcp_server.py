"""A small MCP server for the MCP client's tests: the SDK's ``MCPServer`` over stdio (or
streamable HTTP on 127.0.0.1 with ``--http PORT``, SSE with ``--sse PORT``), or, with ``--hang``, a process that
reads its stdin and never answers ``initialize``; ``--garbage`` prints a line that is
not JSON-RPC first.

Tools: ``echo`` (text), ``picture`` (an image), ``both`` (text, audio, an embedded text
resource and a resource link), ``fail`` (an ``isError`` result), ``wait`` (writes
its pid to ``<file>.pid`` and ``started`` to the file, then waits until cancelled and writes ``cancelled``), ``crash``
(the process exits at once), ``pid`` (its process id).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
import mcp_types as types
from mcp.server.mcpserver import MCPServer


def note(path: str, text: str) -> None:
    Path(path).write_text(text)


def hang() -> None:
    while sys.stdin.buffer.read(1):
        pass


def main() -> None:
    if "--hang" in sys.argv:
        hang()
        return
    server = MCPServer("fake")

    @server.tool(description="Echo the text back.", structured_output=False)
    def echo(text: str) -> str:
        return f"echo: {text}"

    @server.tool(description="A one-pixel picture.", structured_output=False)
    def picture() -> list[types.ContentBlock]:
        return [types.ImageContent(type="image", data="iVBORw0KGgo=", mime_type="image/png")]

    @server.tool(description="Several kinds of content.", structured_output=False)
    def both() -> list[types.ContentBlock]:
        return [
            types.TextContent(type="text", text="first"),
            types.AudioContent(type="audio", data="UklGRg==", mime_type="audio/wav"),
            types.EmbeddedResource(
                type="resource",
                resource=types.TextResourceContents(uri="file:///notes.txt", text="the notes", mime_type="text/plain"),
            ),
            types.ResourceLink(type="resource_link", uri="file:///big.bin", name="big.bin"),
        ]

    @server.tool(description="Always fails.", structured_output=False)
    def fail(reason: str) -> str:
        raise ValueError(f"failed because {reason}")

    @server.tool(description="Waits until cancelled.", structured_output=False)
    async def wait(marker: str) -> str:
        note(marker + ".pid", str(os.getpid()))
        note(marker, "started")
        try:
            await anyio.sleep_forever()
        finally:
            note(marker, "cancelled")
        return "never"

    @server.tool(description="The server's process id.", structured_output=False)
    def pid() -> str:
        return str(os.getpid())

    @server.tool(description="Exits the server.", structured_output=False)
    def crash() -> str:
        os._exit(3)

    if "--garbage" in sys.argv:
        print("this is not JSON-RPC", flush=True)
    if "--http" in sys.argv:
        port = int(sys.argv[sys.argv.index("--http") + 1])
        server.run("streamable-http", host="127.0.0.1", port=port)
    elif "--sse" in sys.argv:
        port = int(sys.argv[sys.argv.index("--sse") + 1])
        server.run("sse", host="127.0.0.1", port=port)
    else:
        server.run()


if __name__ == "__main__":
    main()
