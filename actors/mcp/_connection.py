"""One MCP server's connection for one session, held by a task in the session's nursery.

The connection is opened on first use (discovery at session start) and again on the
first use after the server went away: a server that exits or closes its stream is
reported once, the calls that were running fail with an error naming it, and the next
call reconnects. Connecting (spawning a stdio server, or reaching an HTTP one, then the
``initialize`` handshake) is bounded by the server's timeout; a server that never answers
costs its caller that long and no more, and the attempt is abandoned (its process killed).

The SDK's contexts (transport, ``ClientSession``) are entered and left by the holding
task, never by a caller, so a cancelled call cannot tear the connection down: the
cancelled request is answered by the SDK's ``notifications/cancelled`` to the server.
When the session ends its nursery cancels the holder, and the SDK stops a stdio server
(stdin closed, then at once, as Gemini CLI does, its process group terminated, and
killed if it outlives a bounded wait). The SDK is imported here, on first connection, never when
``actors.mcp`` is imported.
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any, TextIO

import trio

from ._params import ServerParams, Transport
from ._results import failed_request, raw_parts

# The SDK logs what it ignores (a server's line that is not JSON-RPC) with tracebacks;
# without a handler Python would print them on stderr. What matters is reported once,
# in one line, through the connection's ``report``.
logging.getLogger("mcp").addHandler(logging.NullHandler())

CLIENT_NAME = "gemini-cli-mcp-client"

NEEDS_AUTH = "it requires authentication (OAuth), which agentbus does not support yet"
"""Why a server that answered 401 could not be used."""
"""The client name Gemini CLI announces in ``initialize`` (servers may key on it)."""


class McpConnectError(Exception):
    """The server could not be reached, or did not answer in time."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def describe(exc: BaseException) -> str:
    """One line for an exception the SDK raised (exception groups: their first leaf)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, FileNotFoundError):
        return f"command not found: {exc.filename or exc}"
    if isinstance(exc, PermissionError):
        return f"cannot run the command: {exc.strerror or exc} ({exc.filename})"
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


class _Watched:
    """The transport's read stream, noticing when it ends (the server went away)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.closed = trio.Event()

    async def receive(self) -> Any:
        try:
            return await self.inner.receive()
        except trio.Cancelled:
            raise
        except BaseException:
            self.closed.set()
            raise

    async def aclose(self) -> None:
        await self.inner.aclose()

    def __aiter__(self) -> _Watched:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.inner.__anext__()
        except trio.Cancelled:
            raise
        except BaseException:
            self.closed.set()
            raise

    async def __aenter__(self) -> _Watched:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class _Attempt:
    def __init__(self) -> None:
        self.scope = trio.CancelScope()
        self.done = trio.Event()
        self.session: Any = None
        self.error: str | None = None
        self.ended = trio.Event()
        """Set when the attempt's connection is closed and forgotten."""


class McpConnection:
    """The connection to ``params``' server; ``run`` holds it in the session's nursery."""

    def __init__(
        self,
        params: ServerParams,
        *,
        report: Callable[[str], None],
        roots: Sequence[Path] = (),
        client_version: str = "0",
        streams: Callable[[], AbstractAsyncContextManager[Any]] | None = None,
    ) -> None:
        self.params = params
        self._streams = streams
        """Opens the ``(read, write)`` streams in place of ``params``' transport (an
        in-memory server: the explored-schedule tests, where no process can live)."""
        self.report = report
        """Where the one line about a server that went away goes."""
        self.roots = tuple(roots)
        self.client_version = client_version
        self._nursery: trio.Nursery | None = None
        self._session: Any = None
        self._closed = trio.Event()
        """Set when the current connection's server went away."""
        self._attempt: _Attempt | None = None
        self._stopping = False
        self._bad_output_reported = False
        self._http_statuses: list[int] = []
        """The HTTP statuses of the current connection attempt's responses (streamable
        HTTP: the SDK's error does not say that a server asked for authentication)."""

    @property
    def name(self) -> str:
        return self.params.name

    @property
    def connected(self) -> bool:
        """A session is held and its server has not gone away (its stream may still be
        closing: a server that went away is not connected from that moment)."""
        return self._session is not None and not self._closed.is_set()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Hold the server's connections until cancelled (the session's end)."""
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                task_status.started()
                await trio.sleep_forever()
        finally:
            self._stopping = True

    # -- connecting ------------------------------------------------------------------------

    async def session(self) -> Any:
        """The connected ``ClientSession``, connecting first when there is none. Raises
        ``McpConnectError`` naming the server when it cannot be reached in time."""
        if self._session is not None and not self._closed.is_set():
            return self._session
        assert self._nursery is not None, "McpConnection.run is not running"
        attempt = self._attempt
        if attempt is not None and self._closed.is_set():
            # The server went away and its connection is being closed: a new one after.
            with trio.move_on_after(self.params.timeout_s):
                await attempt.ended.wait()
            attempt = self._attempt
        if attempt is None:
            attempt = self._attempt = _Attempt()
            self._nursery.start_soon(self._hold, attempt)
        timeout = self.params.timeout_s
        with trio.move_on_after(timeout) as waited:
            await attempt.done.wait()
        if waited.cancelled_caught:
            attempt.scope.cancel()
            raise McpConnectError(
                f"MCP server '{self.name}' did not answer within {_seconds(timeout)} "
                f"({self.params.where()})"
            )
        if attempt.error is not None:
            raise McpConnectError(f"MCP server '{self.name}' could not be started: {attempt.error}")
        return attempt.session

    async def _hold(self, attempt: _Attempt) -> None:
        lost = False
        transports = [self.params.transport]
        if self.params.sse_fallback and self.params.transport == "http":
            transports.append("sse")
        with attempt.scope:
            for transport in transports:
                try:
                    async with self._open(transport) as (session, closed):
                        self._session = attempt.session = session
                        self._closed = closed
                        attempt.error = None
                        attempt.done.set()
                        await closed.wait()
                        lost = True
                except Exception as exc:  # the server's failure, reported to who waits for it
                    attempt.error = describe(exc)
                    if 401 in self._http_statuses or "401 Unauthorized" in attempt.error:
                        attempt.error = NEEDS_AUTH
                    lost = attempt.done.is_set()
                if attempt.done.is_set():
                    break
        self._session = None
        if self._attempt is attempt:
            self._attempt = None
        attempt.ended.set()
        if not attempt.done.is_set():
            attempt.error = attempt.error or "the connection attempt was abandoned"
            attempt.done.set()
        elif lost and not self._stopping:
            self.report(
                f"MCP server '{self.name}' disconnected ({self.params.where()}); "
                "its next call reconnects."
            )

    @asynccontextmanager
    async def _open(self, transport: Transport) -> AsyncIterator[tuple[Any, trio.Event]]:
        from mcp import ClientSession
        from mcp_types import Implementation, ListRootsResult, Root

        async def list_roots(context: Any) -> Any:
            return ListRootsResult(
                roots=[Root(uri=root.as_uri(), name=root.name) for root in self.roots]  # type: ignore[arg-type]
            )

        async def on_message(message: Any) -> None:
            # A line that does not parse is a ValueError; other exceptions are the
            # transport's own failure (SSE: the server went away), reported as a disconnect.
            if isinstance(message, ValueError) and not self._bad_output_reported:
                self._bad_output_reported = True
                what = "" if type(message).__name__ == "ValidationError" else f": {describe(message)}"
                self.report(f"MCP server '{self.name}' sent a message that is not JSON-RPC (ignored){what}")

        self._http_statuses = []
        async with self._transport(transport) as (read, write):
            watched = _Watched(read)
            async with ClientSession(
                watched,  # type: ignore[arg-type]
                write,
                list_roots_callback=list_roots,
                message_handler=on_message,
                client_info=Implementation(name=CLIENT_NAME, version=self.client_version),
            ) as session:
                await session.initialize()
                yield session, watched.closed

    def _transport(self, transport: Transport) -> AbstractAsyncContextManager[Any]:
        p = self.params
        if self._streams is not None:
            return self._streams()
        if transport == "stdio":
            return _stdio(p)
        if transport == "sse":
            from mcp.client.sse import sse_client

            return sse_client(p.url or "", headers=dict(p.headers), timeout=min(p.timeout_s, 30.0))
        return _streamable_http(p.url or "", p.headers, self._http_statuses.append)

    # -- requests --------------------------------------------------------------------------

    async def list_tools(self) -> list[dict[str, Any]]:
        """Every tool the server lists (all pages), as JSON data by wire names; none when
        it has no tools capability. Raises ``McpConnectError``."""
        session = await self.session()
        caps = session.server_capabilities
        if caps is None or caps.tools is None:
            return []
        from mcp_types import PaginatedRequestParams

        tools: list[dict[str, Any]] = []
        cursor: str | None = None
        while True:
            try:
                with trio.fail_after(self.params.timeout_s):
                    page = await session.list_tools(
                        params=PaginatedRequestParams(cursor=cursor) if cursor else None
                    )
            except trio.TooSlowError:
                raise McpConnectError(
                    f"MCP server '{self.name}' did not list its tools within "
                    f"{_seconds(self.params.timeout_s)}"
                ) from None
            except Exception as exc:
                raise McpConnectError(
                    f"MCP server '{self.name}' failed to list its tools: {describe(exc)}"
                ) from None
            tools.extend(t.model_dump(by_alias=True, exclude_unset=True, mode="json") for t in page.tools)
            cursor = page.next_cursor
            if not cursor:
                return tools

    async def call_tool(self, tool: str, args: Mapping[str, Any]) -> list[dict[str, Any]]:
        """``tools/call``: Gemini's raw parts (a failed request as its error object).
        Cancellation propagates; the SDK tells the server ``notifications/cancelled``."""
        try:
            session = await self.session()
        except McpConnectError as exc:
            return failed_request(tool, exc.message)
        closed = self._closed
        try:
            result = await session.call_tool(tool, dict(args), read_timeout_seconds=self.params.timeout_s)
        except Exception as exc:
            message = call_error(exc)
            if _lost_server(exc):
                closed.set()  # streamable HTTP: the transport lost the server mid-call
            if closed.is_set():
                message = f"MCP server '{self.name}' disconnected during the call ({message})"
            return failed_request(tool, message)
        return raw_parts(tool, result.model_dump(by_alias=True, exclude_unset=True, mode="json"))


def call_error(exc: Exception) -> str:
    """A failed call's error as Gemini CLI words it: an error the server (or the SDK in its
    place) answered reads as the TypeScript SDK's McpError, ``MCP error <code>: <message>``,
    a timeout as its ``Request timed out``; anything else in one line."""
    from mcp import MCPError
    from mcp_types import REQUEST_TIMEOUT

    if not isinstance(exc, MCPError):
        return describe(exc)
    return f"MCP error {exc.code}: {'Request timed out' if exc.code == REQUEST_TIMEOUT else exc.message}"


def _lost_server(exc: Exception) -> bool:
    """The error the SDK's transport puts in place of a response when the server went
    away (``CONNECTION_CLOSED`` with its own words; a server's -32000 says otherwise)."""
    from mcp import MCPError
    from mcp_types import CONNECTION_CLOSED

    return (
        isinstance(exc, MCPError)
        and exc.code == CONNECTION_CLOSED
        and (exc.message == "Connection closed" or exc.message.startswith("SSE stream "))
    )


def _seconds(timeout: float) -> str:
    return f"{timeout:g}s" if timeout < 60 else f"{timeout / 60:g} min"


@asynccontextmanager
async def _stdio(p: ServerParams) -> AsyncIterator[Any]:
    import mcp.client.stdio
    from mcp.client.stdio import StdioServerParameters, stdio_client

    # Gemini CLI stops a server with SIGTERM at once; the SDK first waits 2 s for it to
    # exit after its stdin closes, which many servers (Node ones with timers) never do:
    # every session with one ended 2 s late. No grace: stdin closed, then SIGTERM to
    # the group (SIGKILL 2 s later, the SDK's), whatever the server does with its stdin.
    mcp.client.stdio.PROCESS_TERMINATION_TIMEOUT = 0.0
    # Its reader is quadratic in a line's length: read whole lines (``_stdio_lines``).
    from ._stdio_lines import install as read_whole_lines

    read_whole_lines()
    if not p.command:
        raise McpConnectError("no command configured")
    params = StdioServerParameters(command=p.command, args=list(p.args), env=dict(p.env), cwd=p.cwd)
    # The server's stderr is not ours to show (Gemini shows it only in debug mode).
    errlog = _devnull()
    try:
        async with stdio_client(params, errlog=errlog) as streams:
            yield streams
    finally:
        errlog.close()


def _devnull() -> TextIO:
    return open(os.devnull, "w")  # closed by its caller


@asynccontextmanager
async def _streamable_http(
    url: str, headers: Mapping[str, str], status: Callable[[int], None]
) -> AsyncIterator[Any]:
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client  # the SDK's own defaults

    async def noted(response: Any) -> None:
        status(response.status_code)

    async with create_mcp_http_client(headers=dict(headers)) as client:
        client.event_hooks = {"request": [], "response": [noted]}
        async with streamable_http_client(url, http_client=client) as streams:
            yield streams
