"""Session start: every configured server connected and its tools, prompts and resources
listed at once, each bounded by its own timeout; a server that fails is one line naming
it, the others are used. A server whose tools were listed but whose prompts or resources
could not be is used for its tools (one line says what failed)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import attrs
import trio

from ._catalog import list_prompts, list_resources
from ._connection import McpConnectError, McpConnection, describe
from ._params import is_enabled


@attrs.frozen(kw_only=True)
class Discovered:
    """What one server offered: its enabled tool definitions (JSON data by wire names, in
    the server's order), or why it offers nothing."""

    connection: McpConnection
    tools: tuple[Mapping[str, Any], ...] = ()
    prompts: tuple[Mapping[str, Any], ...] = ()
    """Its prompts (``prompts/list``), in the server's order."""
    resources: tuple[Mapping[str, Any], ...] = ()
    """Its resources (``resources/list``), in the server's order."""
    error: str | None = None
    notes: tuple[str, ...] = ()
    """Lines about prompts or resources that could not be listed (the tools were)."""


async def discover(connections: Sequence[McpConnection]) -> list[Discovered]:
    """List every server's tools concurrently (each connection's ``run`` must be running);
    results in the order of ``connections``."""
    found: list[Discovered | None] = [None] * len(connections)

    async def one(i: int, conn: McpConnection) -> None:
        try:
            listed = await conn.list_tools()
        except McpConnectError as exc:
            found[i] = Discovered(connection=conn, error=exc.message)
            return
        except Exception as exc:
            found[i] = Discovered(connection=conn, error=f"MCP server '{conn.name}': {describe(exc)}")
            return
        enabled = tuple(t for t in listed if is_enabled(str(t.get("name") or ""), conn.params))
        notes: list[str] = []
        lists: dict[str, list[dict[str, Any]]] = {"prompts": [], "resources": []}

        async def fetch(kind: str, request: Callable[[McpConnection], Awaitable[list[dict[str, Any]]]]) -> None:
            try:
                lists[kind] = await request(conn)
            except McpConnectError as exc:
                notes.append(exc.message)

        async with trio.open_nursery() as both:  # one round trip, not two
            both.start_soon(fetch, "prompts", list_prompts)
            both.start_soon(fetch, "resources", list_resources)
        found[i] = Discovered(
            connection=conn,
            tools=enabled,
            prompts=tuple(lists["prompts"]),
            resources=tuple(r for r in lists["resources"] if r.get("uri")),
            notes=tuple(sorted(notes)),
        )

    async with trio.open_nursery() as nursery:
        for i, conn in enumerate(connections):
            nursery.start_soon(one, i, conn)
    return [d for d in found if d is not None]


def discovery_errors(found: Sequence[Discovered], report: Callable[[str], None]) -> None:
    for d in found:
        if d.error is not None:
            report(d.error)
        for note in d.notes:
            report(note)
