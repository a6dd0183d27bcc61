"""An MCP server with prompts and resources for the tests of MCP prompts as commands and
``@server:uri`` references: the SDK's ``MCPServer`` over stdio.

Tools: ``echo``. Prompts: ``review(code)``, ``greet(name, greeting?)``, ``help`` (a
built-in command's name), ``Two Words`` (a name with a space), ``broken`` (fails),
``picture`` (its first message is an image), ``empty`` (no messages). Resources:
``notes://today`` (text), ``data://logo`` (binary), ``data://broken`` (fails),
``data://huge`` (text of ``HUGE_CHARS`` characters).
"""

from __future__ import annotations

import mcp_types as types
from mcp.server.mcpserver import MCPServer

HUGE_CHARS = 21 * 1024 * 1024
"""Over the 20 MB a resource may be."""


def main() -> None:
    server = MCPServer("prompts")

    @server.tool(description="Echo the text back.", structured_output=False)
    def echo(text: str) -> str:
        return f"echo: {text}"

    @server.prompt(description="Review a piece of code.")
    def review(code: str) -> str:
        return f'Please review this code:\n{code}\n(say "done")'

    @server.prompt(description="Greet someone.")
    def greet(name: str, greeting: str = "Hello") -> str:
        return f"{greeting}, {name}!"

    @server.prompt(name="help", description="The server's own help.")
    def server_help() -> str:
        return "Explain what this server offers."

    @server.prompt(name="Two Words", description="A prompt whose name has a space.")
    def two_words() -> str:
        return "two words"

    @server.prompt(description="Always fails.")
    def broken() -> str:
        raise ValueError("the prompt broke")

    @server.prompt(description="Starts with an image.")
    def picture() -> list[types.ContentBlock]:
        return [types.ImageContent(type="image", data="iVBORw0KGgo=", mime_type="image/png")]

    @server.prompt(description="No messages at all.")
    def empty() -> list[str]:
        return []

    @server.resource("notes://today", name="today", description="Today's notes.", mime_type="text/plain")
    def today() -> str:
        return "buy milk"

    @server.resource("data://logo", name="logo", mime_type="image/png")
    def logo() -> bytes:
        return b"\x89PNG\r\n\x1a\n" + bytes(range(8))

    @server.resource("data://broken", name="broken")
    def broken_resource() -> str:
        raise ValueError("the disk is gone")

    @server.resource("data://huge", name="huge", mime_type="text/plain")
    def huge() -> str:
        return "x" * HUGE_CHARS

    server.run()


if __name__ == "__main__":
    main()
