"""A small stdio MCP server (the SDK's ``MCPServer``) whose tool names Gemini CLI must
sanitise, for running agentbus and Gemini CLI side by side on the same server.

Tools: ``get weather`` (a space: text), ``résumé.lookup`` (non-ASCII: text), a name of
70 characters (cut to 63 in the middle: text), ``fail-hard`` (an ``isError`` result)
``tiny:image`` (an image), ``plan trip`` (a model argument: ``$defs`` and a nullable
field), ``nothing`` (no content), ``forecast`` (structured content) and ``media``
(audio, an embedded blob, a link with a title and a description), ``variable`` (one of
its environment variables) and ``refuse`` (a JSON-RPC error instead of a result).

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
from mcp import MCPError
from mcp.server.mcpserver import MCPServer
from pydantic import BaseModel


class Trip(BaseModel):
    city: str
    nights: int | None = None


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

    @server.tool(name="plan trip", description="Plans a trip.", structured_output=False)
    def plan_trip(trip: Trip, budget: float | None = None) -> str:
        return f"{trip.nights or 1} night(s) in {trip.city}" + (f" for {budget:g}" if budget is not None else "")

    @server.tool(name="nothing", description="Returns no content.", structured_output=False)
    def nothing() -> list[types.ContentBlock]:
        return []

    @server.tool(name="forecast", description="A structured forecast.", structured_output=True)
    def forecast(city: str) -> dict[str, object]:
        return {"city": city, "temperature": 21, "sky": "clear"}

    @server.tool(name="media", description="Audio, a blob and a described link.", structured_output=False)
    def media() -> list[types.ContentBlock]:
        return [
            types.AudioContent(type="audio", data="UklGRg==", mime_type="audio/wav"),
            types.EmbeddedResource(
                type="resource",
                resource=types.BlobResourceContents(uri="file:///a.bin", blob="AAEC", mime_type="application/octet-stream"),
            ),
            types.ResourceLink(
                type="resource_link", uri="https://example.com/r", name="r", title="The R", description="about r"
            ),
        ]

    @server.tool(name="variable", description="An environment variable of the server.", structured_output=False)
    def variable(name: str) -> str:
        return f"{name}={os.environ.get(name, '(unset)')}"

    @server.tool(name="refuse", description="Answers with a JSON-RPC error.", structured_output=False)
    def refuse() -> str:
        raise MCPError(-32602, "refused: no way")

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
