"""An MCP server's prompts and resources: listed at session start beside its tools (every
page, none when the server lacks the capability or answers "method not found", as
Gemini CLI's ``discoverPrompts``/``discoverResources``), a prompt got (``prompts/get``)
and a resource read (``resources/read``) on demand. Each request is bounded by the
server's timeout; a failure is ``McpConnectError`` with one line naming the server."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from functools import partial
from typing import Any

import trio

from ._connection import McpConnectError, McpConnection, _seconds, describe

METHOD_NOT_FOUND = -32601


def _method_not_found(exc: BaseException) -> bool:
    error = getattr(exc, "error", None)
    return getattr(error, "code", None) == METHOD_NOT_FOUND or "Method not found" in str(exc)


async def _bounded(conn: McpConnection, what: str, request: Callable[[], Awaitable[Any]]) -> Any:
    try:
        with trio.fail_after(conn.params.timeout_s):
            return await request()
    except trio.TooSlowError:
        raise McpConnectError(
            f"MCP server '{conn.name}' did not answer {what} within {_seconds(conn.params.timeout_s)}"
        ) from None


def _dump(item: Any) -> dict[str, Any]:
    dumped: dict[str, Any] = item.model_dump(by_alias=True, exclude_unset=True, mode="json")
    return dumped


async def _list(conn: McpConnection, capability: str, method: str, field: str) -> list[dict[str, Any]]:
    session = await conn.session()
    caps = session.server_capabilities
    if caps is None or getattr(caps, capability, None) is None:
        return []
    from mcp_types import PaginatedRequestParams

    out: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        params = PaginatedRequestParams(cursor=cursor) if cursor else None
        request: Callable[..., Awaitable[Any]] = getattr(session, method)
        try:
            page = await _bounded(conn, f"{capability}/list", partial(request, params=params))
        except McpConnectError:
            raise
        except Exception as exc:
            if _method_not_found(exc):
                return out
            raise McpConnectError(
                f"MCP server '{conn.name}' failed to list its {capability}: {describe(exc)}"
            ) from None
        out.extend(_dump(p) for p in getattr(page, field))
        cursor = page.next_cursor
        if not cursor:
            return out


async def list_prompts(conn: McpConnection) -> list[dict[str, Any]]:
    """Every prompt the server lists, as JSON data by wire names."""
    return await _list(conn, "prompts", "list_prompts", "prompts")


async def list_resources(conn: McpConnection) -> list[dict[str, Any]]:
    """Every resource the server lists, as JSON data by wire names."""
    return await _list(conn, "resources", "list_resources", "resources")


async def get_prompt(conn: McpConnection, name: str, arguments: Mapping[str, str]) -> dict[str, Any]:
    """``prompts/get``: the result as JSON data (``messages``...). Raises
    ``McpConnectError`` with the server's error."""
    session = await conn.session()
    try:
        result = await _bounded(conn, f"prompts/get {name}", lambda: session.get_prompt(name, dict(arguments)))
    except McpConnectError:
        raise
    except Exception as exc:
        raise McpConnectError(describe(exc)) from None
    return _dump(result)


async def read_resource(conn: McpConnection, uri: str) -> dict[str, Any]:
    """``resources/read``: the result as JSON data (``contents``). Raises
    ``McpConnectError`` with the server's error."""
    session = await conn.session()
    try:
        result = await _bounded(conn, f"resources/read {uri}", lambda: session.read_resource(uri))
    except McpConnectError:
        raise
    except Exception as exc:
        raise McpConnectError(describe(exc)) from None
    return _dump(result)
