"""A client of the agentbus daemon: connect (starting the daemon when absent), hello,
requests, and an async stream of events. ``agentbus chat`` and ``agentbus acp --attach``
use it; it is small on purpose.

    from actors.frontends.daemon.client import open_client

    async with open_client(client="my-tool") as client:
        ready = await client.create_session(workspace="/abs/project")
        sid = ready.session_id
        await client.subscribe(sid, from_seq=1)           # catch up, then live
        await client.prompt(sid, "Summarise @README.md")
        async for event in client.events:
            if isinstance(event, Envelope) and isinstance(event.message, TurnEnded):
                break

``open_client(paths=None, *, client="", start=True, start_timeout_s=10.0, token="")`` connects to
the daemon of ``paths`` (default: ``actors.frontends.daemon.default_paths()``), starting one when
none answers and ``start`` is true, and says hello. ``paths`` may be a ``TcpAddress``
instead (``tcp_address("tcp://HOST:PORT", token_file)``): a daemon listening on TCP
(``agentbus daemon --listen-tcp``), which needs its token in the hello and is never
started from here. Each request method sends one
request and returns its reply (``bus.messages.client``), or raises ``DaemonError`` with
the daemon's ``code`` and message:

- ``list_sessions(workspace="")`` -> ``SessionList``; ``create_session(workspace, ...)``,
  ``load_session(session_id)`` -> ``SessionReady`` (both send this process's auth
  environment: the session's model requests use its credentials); ``end_session(session_id)``;
- ``subscribe(session_id, from_seq=None, full=False)`` -> ``Subscribed`` (events follow on
  ``events``), ``unsubscribe(session_id)``;
- ``prompt(session_id, text)`` -> ``PromptAccepted``; ``cancel(session_id,
  tool_request_id="")``; ``answer(session_id, correlation_id, outcome)``;
  ``set_mode(session_id, approval_mode)``;
- ``call_tool(session_id, name, args, request_id=None)`` -> ``ToolCallResult`` (when the
  call has settled; cancel it with ``cancel(session_id, tool_request_id=request_id)``);
- ``status()`` -> ``DaemonInfo``; ``stop_daemon()``; ``request(message)`` for any request.

``events`` yields, in the order the daemon sent them: ``bus.Envelope`` (a session event;
per session in sequence order, without gap or duplicate), ``ObserverLagged`` (this
client fell behind; what follows was caught up from the recording),
``CaughtUp`` (a new subscription's events before its live point have all come: what
follows is live), ``SubscriptionEnded``, ``DaemonStopping`` and request-less
``ProtocolError`` notices.
It ends when the connection closes. The client buffers events without bound: read
them (the daemon bounds what it buffers for a slow client, not the other way round).
A request longer than the daemon's frame limit (``MAX_FRAME``, 64 MiB: a prompt may
carry a pasted file, as with ``agentbus acp``) is not sent: it raises ``DaemonError``
(``frame_too_large``) saying how large it is and what the daemon accepts, and the
connection stays usable.
``client.address`` is this connection's address: the ``answered_by`` of its approval
answers and the ``requested_by`` of its cancels.
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeAlias, TypeVar

import attrs
import trio

from actors.frontends.daemon._protocol import MAX_FRAME
from actors.frontends.daemon._tcp import (
    TcpAddress,
    TcpConfigError,
    parse_daemon_url,
    read_token_file,
)
from actors.frontends.daemon.paths import DaemonPaths, default_paths
from actors.gateway import auth_environment
from actors.host.errors import DaemonError
from bus import CodecError, Envelope
from bus.codec import decode, decode_envelope, encode
from bus.messages import (
    PROTOCOL_VERSION,
    Answer,
    CallTool,
    Cancel,
    CaughtUp,
    CreateSession,
    DaemonInfo,
    DaemonStatus,
    DaemonStopping,
    EndSession,
    Hello,
    ListMcpServers,
    ListSessions,
    LoadSession,
    McpServerList,
    Message,
    ObserverLagged,
    Prompt,
    PromptAccepted,
    ProtocolError,
    SessionList,
    SessionReady,
    SetMode,
    StopDaemon,
    Subscribe,
    Subscribed,
    SubscriptionEnded,
    ToolCallResult,
    Unsubscribe,
    Welcome,
    new_id,
)

Event: TypeAlias = Envelope | ObserverLagged | CaughtUp | SubscriptionEnded | DaemonStopping | ProtocolError | Message
"""What ``DaemonClient.events`` yields (see the module doc)."""

_T = TypeVar("_T")
READ_CHUNK = 1 << 16
MAX_REPLY_FRAME = 256 << 20


class DaemonUnavailableError(DaemonError):
    """No daemon answers (and none could be started)."""


@attrs.define(eq=False)
class _Pending:
    done: trio.Event = attrs.field(factory=trio.Event)
    reply: Message | None = None


class DaemonClient:
    """One connection to the daemon (see the module doc). Build it with ``open_client``."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self._stream = stream
        self._pending: dict[str, _Pending] = {}
        self._send_lock = trio.Lock()
        self._events_send, self.events = trio.open_memory_channel[Event](math.inf)
        self._closed: str | None = None
        self.address = ""
        self.pid = 0

    # -- plumbing -----------------------------------------------------------------------------------
    async def request(self, msg: Message) -> Message:
        """Send a request and wait for its reply; raises ``DaemonError`` on refusal."""
        rid = getattr(msg, "request_id", None)
        if not isinstance(rid, str):
            raise TypeError(f"{type(msg).__name__} is not a request")
        if self._closed is not None:
            raise DaemonError("closed", self._closed)
        slot = self._pending[rid] = _Pending()
        try:
            await self.send(msg)
            await slot.done.wait()
        finally:
            self._pending.pop(rid, None)
        reply = slot.reply
        if reply is None:
            raise DaemonError("closed", self._closed or "the connection closed")
        if isinstance(reply, ProtocolError):
            raise DaemonError(reply.code, reply.message)
        return reply

    async def send(self, msg: Message) -> None:
        """Send one frame without waiting for a reply; raises ``DaemonError`` (``invalid``)
        for a message whose text cannot be encoded (a lone surrogate: the caller makes
        what it got from outside encodable, ``bus.json_values.well_formed``)."""
        try:
            data = (encode(msg) + "\n").encode("utf-8")
        except UnicodeEncodeError:
            raise DaemonError(
                "invalid", f"{type(msg).__name__} not sent: its text is not valid Unicode (a lone surrogate)"
            ) from None
        if len(data) - 1 > MAX_FRAME:
            # Refused here, before a byte is sent: the daemon could only drop such a frame
            # and answer it without its request id (its reply would never come).
            # A prompt's frame carries its text and its parts (which repeat the text and
            # hold the files its @-references read).
            what = "prompt" if isinstance(msg, Prompt) else f"{type(msg).__name__} request"
            size = _mib(len(data) - 1)
            if isinstance(msg, Prompt) and msg.parts:
                size += " as sent (its text, and its parts: the text again and the files it references)"
            plural = "prompts" if isinstance(msg, Prompt) else "requests"
            raise DaemonError(
                "frame_too_large", f"the {what} is {size}; the daemon accepts {plural} up to {_mib(MAX_FRAME)}"
            )
        async with self._send_lock:
            if self._closed is not None:
                raise DaemonError("closed", self._closed)
            sent = False
            try:
                await self._stream.send_all(data)
                sent = True
            except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                raise DaemonError("closed", f"the connection closed: {exc}") from None
            finally:
                if not sent and self._closed is None:
                    # Cancelled part way: the daemon may hold half a frame, which the next
                    # one would join. The connection ends (its requests fail) rather than
                    # leave every later request unanswered.
                    self._closed = f"{type(msg).__name__} was interrupted while it was being sent"
                    await trio.aclose_forcefully(self._stream)

    async def _read(self) -> None:
        buf = bytearray()
        try:
            while True:
                try:
                    data = await self._stream.receive_some(READ_CHUNK)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    break
                if not data:
                    break
                buf += data
                while True:
                    nl = buf.find(b"\n")
                    if nl < 0:
                        if len(buf) > MAX_REPLY_FRAME:
                            raise DaemonError("frame_too_large", "the daemon sent an oversized frame")
                        break
                    line = bytes(buf[:nl])
                    del buf[: nl + 1]
                    if line.strip():
                        self._dispatch(line)
        finally:
            self._closed = self._closed or "the daemon closed the connection"
            for slot in self._pending.values():
                slot.done.set()
            self._events_send.close()

    def _dispatch(self, line: bytes) -> None:
        try:
            if line.startswith(b'{"v":'):
                env, _ = decode_envelope(line)
                self._events_send.send_nowait(env)
                return
            msg = decode(line)
        except CodecError as exc:
            self._events_send.send_nowait(ProtocolError(request_id=None, code="bad_frame", message=f"from the daemon: {exc}"))
            return
        rid = getattr(msg, "request_id", None)
        slot = self._pending.get(rid) if isinstance(rid, str) else None
        if slot is not None and not slot.done.is_set():
            slot.reply = msg
            slot.done.set()
        else:
            self._events_send.send_nowait(msg)

    async def aclose(self) -> None:
        self._closed = self._closed or "closed by the client"
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            await self._stream.aclose()

    # -- requests -------------------------------------------------------------------------------------
    async def hello(self, client: str = "", token: str = "") -> Welcome:
        reply = await self.request(Hello(request_id=new_id(), protocol=PROTOCOL_VERSION, client=client, token=token))
        assert isinstance(reply, Welcome)
        self.address, self.pid = reply.address, reply.pid
        return reply

    async def list_sessions(self, workspace: str = "") -> SessionList:
        return _expect(await self.request(ListSessions(request_id=new_id(), workspace=workspace)), SessionList)

    async def create_session(
        self,
        workspace: str,
        *,
        model: str = "",
        approval_mode: str = "",
        session_id: str = "",
        fake_responses: str = "",
        fake_chunk_delay_ms: int = 0,
        auth_env: Mapping[str, str] | None = None,
        mcp_servers: Sequence[Any] = (),
        terminals: bool = False,
    ) -> SessionReady:
        """``auth_env``: the credentials the session's model requests use (default:
        this process's auth environment, ``actors.gateway.AUTH_ENV``); ``mcp_servers``:
        the client's own MCP servers (ACP ``mcpServers`` entries) the daemon starts for
        the session; ``terminals``: this connection runs the session's shell commands
        (``RunInTerminal`` events, answered with ``send``)."""
        msg = CreateSession(
            request_id=new_id(),
            workspace=workspace,
            model=model,
            approval_mode=approval_mode,
            session_id=session_id,
            fake_responses=fake_responses,
            fake_chunk_delay_ms=fake_chunk_delay_ms,
            auth_env=auth_environment(auth_env),
            mcp_servers=tuple(mcp_servers),
            terminals=terminals,
        )
        return _expect(await self.request(msg), SessionReady)

    async def load_session(
        self,
        session_id: str,
        *,
        fake_responses: str = "",
        fake_chunk_delay_ms: int = 0,
        auth_env: Mapping[str, str] | None = None,
        mcp_servers: Sequence[Any] = (),
        terminals: bool = False,
    ) -> SessionReady:
        """``auth_env`` and ``mcp_servers`` as for ``create_session`` (the servers only
        for a session this starts: a running one keeps its own)."""
        msg = LoadSession(
            session_id=session_id,
            request_id=new_id(),
            fake_responses=fake_responses,
            fake_chunk_delay_ms=fake_chunk_delay_ms,
            auth_env=auth_environment(auth_env),
            mcp_servers=tuple(mcp_servers),
            terminals=terminals,
        )
        return _expect(await self.request(msg), SessionReady)

    async def end_session(self, session_id: str, reason: str = "") -> None:
        await self.request(EndSession(session_id=session_id, request_id=new_id(), reason=reason))

    async def subscribe(self, session_id: str, from_seq: int | None = None, *, full: bool = False) -> Subscribed:
        msg = Subscribe(session_id=session_id, request_id=new_id(), from_seq=from_seq, full=full)
        return _expect(await self.request(msg), Subscribed)

    async def unsubscribe(self, session_id: str) -> None:
        await self.request(Unsubscribe(session_id=session_id, request_id=new_id()))

    async def prompt(self, session_id: str, text: str, *, parts: tuple[Any, ...] = ()) -> PromptAccepted:
        msg = Prompt(session_id=session_id, request_id=new_id(), text=text, parts=parts)
        return _expect(await self.request(msg), PromptAccepted)

    async def list_mcp_servers(self, session_id: str) -> McpServerList:
        """The session's MCP servers: state, tools, prompts, resources."""
        return _expect(await self.request(ListMcpServers(session_id=session_id, request_id=new_id())), McpServerList)

    async def cancel(self, session_id: str, *, tool_request_id: str = "") -> None:
        await self.request(Cancel(session_id=session_id, request_id=new_id(), tool_request_id=tool_request_id))

    async def answer(self, session_id: str, correlation_id: str, outcome: str) -> None:
        await self.request(
            Answer(session_id=session_id, request_id=new_id(), correlation_id=correlation_id, outcome=outcome)
        )

    async def set_mode(self, session_id: str, approval_mode: str) -> None:
        await self.request(SetMode(session_id=session_id, request_id=new_id(), approval_mode=approval_mode))

    async def call_tool(
        self,
        session_id: str,
        name: str,
        args: Mapping[str, Any] | None = None,
        *,
        request_id: str | None = None,
        add_to_context: bool = False,
    ) -> ToolCallResult:
        msg = CallTool(
            session_id=session_id,
            request_id=request_id or new_id(),
            name=name,
            args=dict(args or {}),
            add_to_context=add_to_context,
        )
        return _expect(await self.request(msg), ToolCallResult)

    async def status(self) -> DaemonInfo:
        return _expect(await self.request(DaemonStatus(request_id=new_id())), DaemonInfo)

    async def stop_daemon(self) -> None:
        await self.request(StopDaemon(request_id=new_id()))


def _mib(size: int) -> str:
    mib = size / (1 << 20)
    return f"{mib:.0f} MiB" if mib == int(mib) else f"{mib:.1f} MiB"


def _expect(reply: Message, cls: type[_T]) -> _T:
    if not isinstance(reply, cls):
        raise DaemonError("invalid", f"expected {cls.__name__}, got {type(reply).__name__}")
    return reply


# -- connecting ---------------------------------------------------------------------------------------
async def connect_socket(paths: DaemonPaths) -> trio.SocketStream:
    """A stream to the daemon's socket; raises ``DaemonUnavailableError``."""
    try:
        return await trio.open_unix_socket(os.fspath(paths.socket))
    except OSError as exc:
        raise DaemonUnavailableError("unavailable", f"no daemon at {paths.socket}: {exc.strerror or exc}") from None


async def start_daemon(paths: DaemonPaths, *, start_timeout_s: float = 10.0) -> None:
    """Start a daemon in the background (``agentbus daemon --detach``) and wait until it
    accepts connections (another client starting one at the same time is fine)."""
    env = {**os.environ, "AGENTBUS_RUNTIME_DIR": os.fspath(paths.runtime_dir)}
    with trio.move_on_after(start_timeout_s):
        result = await trio.run_process(
            [sys.executable, "-m", "actors.frontends", "daemon", "--detach"],
            env=env,
            stdin=None,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
        if result.returncode != 0:
            detail = result.stderr.decode("utf-8", "replace").strip()
            raise DaemonUnavailableError("unavailable", f"the daemon did not start: {detail}")
        return
    raise DaemonUnavailableError("unavailable", f"the daemon did not start within {start_timeout_s} s")


async def connect_tcp(address: TcpAddress) -> trio.SocketStream:
    """A stream to a daemon's TCP listener; raises ``DaemonUnavailableError``."""
    try:
        return await trio.open_tcp_stream(address.host, address.port)
    except OSError as exc:
        raise DaemonUnavailableError("unavailable", f"no daemon at {address}: {exc.strerror or exc}") from None


def tcp_address(url: str, token_file: str | os.PathLike[str] | None = None) -> TcpAddress:
    """The daemon at ``tcp://HOST:PORT`` with the token read from ``token_file`` (default:
    the local daemon's ``daemon.token``, for a daemon of this user on this machine).
    Raises ``DaemonError`` (code ``invalid``) for a bad URL or an unreadable token file."""
    try:
        host, port = parse_daemon_url(url)
        if token_file is None:
            # The local daemon's token goes only to this machine's loopback address (the
            # daemon's default bind), never to another host or a name another local user
            # could answer first (``localhost`` may try ``::1`` before ``127.0.0.1``).
            if host == "localhost":
                host = "127.0.0.1"
            if host not in LOCAL_HOSTS:
                raise TcpConfigError(
                    f"{host} is not this machine's loopback address: give --token-file for a daemon elsewhere"
                )
        path = Path(token_file) if token_file is not None else default_paths().token
        return TcpAddress(host=host, port=port, token=read_token_file(path))
    except TcpConfigError as exc:
        raise DaemonError("invalid", str(exc)) from None


LOCAL_HOSTS = frozenset({"127.0.0.1", "::1"})


async def connect(
    paths: DaemonPaths | TcpAddress | None = None, *, start: bool = True, start_timeout_s: float = 10.0
) -> trio.SocketStream:
    if isinstance(paths, TcpAddress):
        return await connect_tcp(paths)
    paths = paths or default_paths()
    try:
        return await connect_socket(paths)
    except DaemonUnavailableError:
        if not start:
            raise
    await start_daemon(paths, start_timeout_s=start_timeout_s)
    return await connect_socket(paths)


@contextlib.asynccontextmanager
async def open_client(
    paths: DaemonPaths | TcpAddress | None = None,
    *,
    client: str = "",
    start: bool = True,
    start_timeout_s: float = 10.0,
    token: str = "",
) -> AsyncIterator[DaemonClient]:
    """Connect (see the module doc); the connection closes when the block ends."""
    stream = await connect(paths, start=start, start_timeout_s=start_timeout_s)
    daemon = DaemonClient(stream)
    if isinstance(paths, TcpAddress):
        token = token or paths.token
    refused: DaemonError | None = None
    async with trio.open_nursery() as nursery:
        nursery.start_soon(daemon._read)
        try:
            try:
                await daemon.hello(client, token)
            except DaemonError as exc:
                refused = exc  # raised below, as itself rather than inside a group
            else:
                yield daemon
        finally:
            await daemon.aclose()
            nursery.cancel_scope.cancel(reason="client closed")
    if refused is not None:
        raise refused


__all__ = [
    "DaemonClient",
    "DaemonError",
    "DaemonUnavailableError",
    "Event",
    "TcpAddress",
    "connect",
    "connect_tcp",
    "open_client",
    "start_daemon",
    "tcp_address",
]
