"""A small stdio MCP server (the SDK's ``MCPServer``) whose tool names Gemini CLI must
sanitise, for running agentbus and Gemini CLI side by side on the same server.

Tools: ``get weather`` (a space: text), ``résumé.lookup`` (non-ASCII: text), a name of
70 characters (cut to 63 in the middle: text), ``fail-hard`` (an ``isError`` result)
and ``tiny:image`` (an image).

With ``--linger MARKER`` it stays a second after its stdin closes before exiting, and
writes to MARKER how it ended: ``terminated`` (SIGTERM) or ``exited on its own``.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import mcp_types as types
from mcp.server.mcpserver import MCPServer

LONG_NAME = "a_tool_whose_name_is_much_longer_than_the_sixty_three_characters_allowed"


def main() -> None:
    server = MCPServer("names")

    @server.tool(name="get weather", description="The weather in a city.", structured_output=False)
    def get_weather(city: str) -> str:
        return f"Sunny in {city}, 21 degrees."

    @server.tool(name="résumé.lookup", description="Looks a person up.", structured_output=False)
    def resume_lookup(person: str) -> str:
        return f"{person}: engineer since 2019."

    @server.tool(name=LONG_NAME, description="Says how long its name is.", structured_output=False)
    def long_name() -> str:
        return f"my name has {len(LONG_NAME)} characters"

    @server.tool(name="fail-hard", description="Always fails.", structured_output=False)
    def fail_hard(reason: str) -> str:
        raise ValueError(f"it failed: {reason}")

    @server.tool(name="tiny:image", description="A one-pixel picture.", structured_output=False)
    def tiny_image() -> list[types.ContentBlock]:
        return [
            types.TextContent(type="text", text="Here is the picture:"),
            types.ImageContent(type="image", data="iVBORw0KGgo=", mime_type="image/png"),
        ]

    if "--linger" in sys.argv:
        marker = Path(sys.argv[sys.argv.index("--linger") + 1])

        def terminated(*_: object) -> None:
            marker.write_text("terminated")
            os._exit(0)

        signal.signal(signal.SIGTERM, terminated)
        server.run()
        time.sleep(1.0)
        marker.write_text("exited on its own")
        return
    server.run()


if __name__ == "__main__":
    main()
