"""The connection actor: one client socket and its protocol.

Accepts: frames from its client (``_protocol`` admits them), replies to its own
client-initiated tool batches (``BatchSettled`` in its bus inbox, ``client:<n>``), the
shell commands of the sessions whose terminals its client serves (``RunInTerminal``,
``KillTerminal``: sent on to the client, whose ``TerminalOutput``/``TerminalExited``
frames go back to the executor; when it goes, its running commands end as failed), and the
events of the sessions it subscribed to (each through a ``lag`` subscription).
Emits: to sessions, ``SubmitPrompt``, ``CancelTurn``, ``ApprovalAnswered``,
``ScheduleBatch``/``CancelBatch`` (tool calls the user asked for) and ``AddContext`` (a
result the user shares with the model), each sent from its own address so the log says
who asked; to its client, replies, events and notices.
Owns: the socket, a bounded send buffer (``Limits.send_frames`` frames, ``_Outbox``)
drained by one writer task, one follower task per subscription. A frame goes to the
socket at once, from the task that made it, when nothing waits before it and the socket
takes it whole (no task switch per event); otherwise it waits in the buffer for the
writer.
Stops: when the client closes the socket; on a fatal protocol error (after the error
frame is flushed, bounded); on TCP, when no ``Hello`` with the token came within
``hello_timeout_s``, or when the daemon drops it still waiting for one to make room for a
newer connection (``drop_before_hello``); when its client stops reading for ``stall_timeout_s`` with
a full buffer; when the daemon stops (after a ``DaemonStopping`` notice). Pending tool
calls it asked for are cancelled.

**Following a session without gap or duplicate.** A follower subscribes to the session
on the bus first (``policy="lag"``), noting the live point (the next sequence number,
read in the same step, so every later message reaches the subscription), then sends
what the recording holds from the requested sequence number, then forwards live
messages. It tracks ``expected``, the next sequence number owed to the client: a live
message below it is a duplicate (already sent from the recording) and is dropped; one
above it means messages are missing (lag, or a message in flight while subscribing),
and since the recorder wrote everything before any message reaches a subscriber, the
recording holds exactly the missing ones: they are read and sent first. When the
subscription lags (its buffer full because the client is slow), the client gets
``ObserverLagged``, the lag is cleared, and the follower catches up from the recording
the same way. A slow client therefore never blocks the session (the bus never waits for
a ``lag`` subscriber) and never sees a gap. The subscription is handed only the
messages the client gets (``wants``: the bus passes the actors' own traffic by without
waking the follower), so a live message above ``expected`` whose gap starts at or after
the subscription's ``since`` is just that traffic (or numbers voided before anyone saw
them): ``expected`` moves on to it; only a gap before ``since`` is read from the recording.

**Questions still open.** A client that subscribes after an approval was asked (the one
asked went away; ``chat --resume`` starts at the live point) is asked too: ``Subscribed``
names the approvals waiting, and the ``ApprovalRequested`` of those older than the
client's start follow it at once, before anything else, so the events stay in order.
"""

from __future__ import annotations

import logging
import os
import socket
from collections import deque
from functools import partial
from typing import Any

import attrs
import trio

from actors.frontends.daemon._catchup import is_client_event
from actors.frontends.daemon._core import (
    DaemonCore,
    HeldElsewhere,
    LiveSession,
    RequestError,
    auth_env_from,
)
from actors.frontends.daemon._protocol import MAX_FRAME, ConnectionRules, FrameSplitter
from actors.host.at_command import expand_at_references_off_loop
from actors.host.mcp_session import McpInputError, run_prompt_command
from actors.host.user_calls import context_parts, ran
from actors.recording import RecordingCursor, everything
from bus import Bus, DeliveryError, Envelope, Port
from bus.codec import encode, encode_envelope
from bus.messages import (
    PROTOCOL_VERSION,
    AddContext,
    Answer,
    ApprovalAnswered,
    BatchSettled,
    CallTool,
    Cancel,
    CancelBatch,
    CancelTurn,
    CaughtUp,
    CompletedCall,
    ConnectionSummary,
    CreateSession,
    DaemonInfo,
    DaemonStatus,
    DaemonStopping,
    EndSession,
    Hello,
    KillTerminal,
    ListMcpServers,
    ListSessions,
    LoadSession,
    McpServerList,
    Message,
    ObserverLagged,
    Prompt,
    PromptAccepted,
    ProtocolError,
    RequestDone,
    RunInTerminal,
    ScheduleBatch,
    SessionList,
    SessionReady,
    SetMode,
    StopDaemon,
    SubmitPrompt,
    Subscribe,
    Subscribed,
    SubscriptionEnded,
    TerminalExited,
    TerminalOutput,
    ToolCallRequest,
    ToolCallResult,
    Unsubscribe,
    Welcome,
    as_approval_mode,
    as_approval_outcome,
    new_id,
)

log = logging.getLogger("agentbus.daemon")

READ_CHUNK = 1 << 16
HELLO_MAX_FRAME = 1 << 12
WRITE_BATCH = 1 << 16
"""Frames waiting in the buffer are written together, up to this many bytes."""
CATCHUP_SETTLE_ROUNDS = 20
"""Scheduler rounds a new follower gives a message that was being delivered when it
subscribed to reach the recording (the recorder writes it within two or three)."""


@attrs.frozen(kw_only=True)
class Limits:
    send_frames: int = 256
    """Frames the connection buffers for a client that reads slowly (the events one
    session's follower forwards at one wake-up count as one)."""
    subscription_capacity: int = 512
    """Messages a subscription buffers before it lags."""
    stall_timeout_s: float = 30.0
    """A client whose socket accepts nothing for this long is disconnected."""
    flush_timeout_s: float = 0.5
    """Time to flush a final error or notice before closing."""
    max_frame: int = MAX_FRAME
    token: str = ""
    """The token ``Hello`` must carry (TCP connections); empty: none needed (Unix socket)."""
    hello_timeout_s: float = 3.0
    """A connection that needs a token and has not presented it by then is closed (a
    client sends its ``Hello`` at once: this bounds how long a silent one holds a place
    among those that wait for theirs)."""
    socket_send_buffer: int | None = None
    """``SO_SNDBUF`` of each client socket (None: the system's default)."""


@attrs.define(eq=False)
class _Follower:
    session_id: str
    scope: trio.CancelScope
    sub: Any = None
    """Its current bus subscription."""
    forwarding: bool = False
    """Waiting in ``_forward`` for the subscription's next message."""
    expected: int = 0
    """The next sequence number due to the client while ``forwarding``."""


class ConnectionActor:
    def __init__(
        self,
        core: DaemonCore,
        stream: trio.SocketStream,
        *,
        address: str,
        limits: Limits,
        daemon_info: Any = None,
    ) -> None:
        self.core = core
        self.bus: Bus = core.bus
        self.stream = stream
        self.address = address
        self.limits = limits
        self.daemon_info = daemon_info
        """Callable returning (pid, socket path, connection summaries) for DaemonStatus."""
        self.rules = ConnectionRules(token=limits.token)
        self._outbox = _Outbox(stream, limits.send_frames)
        self._followers: dict[str, _Follower] = {}
        self._tool_calls: dict[str, str] = {}
        """Pending CallTool request id -> session id."""
        self._shared_calls: set[str] = set()
        """Pending CallTool request ids whose result goes to the conversation too."""
        self._terminal_runs: dict[str, RunInTerminal] = {}
        """Shell commands its client runs in its terminals (``CreateSession.terminals``),
        by request id, until their ``TerminalExited``."""
        self._nursery: trio.Nursery | None = None
        self.in_stream_first = False
        """Events go out only once in the cluster's stream (a tunnel from another node)."""
        self.routes = None
        if getattr(core, "node", None) is not None:  # a node of a cluster: some sessions run on other nodes
            from actors.frontends.daemon._routing import Routes

            self.routes = Routes(self, core.node)
        self._writer_done = trio.Event()
        self._stop = trio.Event()
        self._closing = False
        self.lagged = 0
        self.done = trio.Event()

    @property
    def client(self) -> str:
        return self.rules.hello.client if self.rules.hello is not None else ""

    @property
    def waits_for_hello(self) -> bool:
        """A connection that needs the token, has not presented it, and is not closing."""
        return bool(self.limits.token) and self.rules.hello is None and not self._stop.is_set()

    def summary(self) -> ConnectionSummary:
        return ConnectionSummary(
            address=self.address,
            client=self.client,
            sessions=tuple(sorted(self.rules.sessions)),
            queued_frames=len(self._outbox.queue),
            lagged=self.lagged + sum(1 for f in self._followers.values() if f.sub is not None and f.sub.lagged_from),
            stalled=len(self._outbox.queue) >= self.limits.send_frames,
        )

    # -- lifecycle ---------------------------------------------------------------------------------
    async def run(self) -> None:
        port = self.bus.connect(self.address, capacity=64)
        if self.limits.socket_send_buffer is not None:
            self.stream.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.limits.socket_send_buffer)
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                nursery.start_soon(self._write)
                nursery.start_soon(self._inbox, port)
                nursery.start_soon(self._close_when_stopped, nursery)
                if self.rules.token:
                    nursery.start_soon(self._require_hello)
                await self._read(port)
                # Flush what is queued (a final error, a notice), bounded, then stop.
                self._closing = True
                self._outbox.close()
                with trio.move_on_after(self.limits.flush_timeout_s):
                    await self._writer_done.wait()
                nursery.cancel_scope.cancel(reason=f"connection {self.address} closed")
                self._stop.set()
        finally:
            self.core.stop_serving_terminals(self.address)
            with trio.move_on_after(self.limits.flush_timeout_s, shield=True):
                await self._end_terminal_runs(port)
                await self._cancel_tool_calls(port)
                if self.routes is not None:
                    await self.routes.close()
            port.close()
            self._outbox.close()
            self.stream.socket.close()
            self.done.set()

    def stop(self, reason: str) -> None:
        """The daemon stops: tell the client (if its buffer has room) and close."""
        if self._stop.is_set():
            return
        self._notice_nowait(DaemonStopping(reason=reason))
        self._closing = True
        self._outbox.close()
        self._stop.set()

    async def _require_hello(self) -> None:
        await trio.sleep(self.limits.hello_timeout_s)
        self.drop_before_hello("no Hello with the token in time")

    def drop_before_hello(self, why: str) -> None:
        """Close a connection that has not presented the token (yet): a timeout, or the
        daemon making room for a newer one. Nothing happens once it has."""
        if self.rules.hello is None and not self._stop.is_set():
            self._notice_nowait(ProtocolError(request_id=None, code="bad_token", message=why, fatal=True))
            self._closing = True
            self._outbox.close()
            self._stop.set()

    async def _close_when_stopped(self, nursery: trio.Nursery) -> None:
        await self._stop.wait()
        # The writer flushes what is queued, then the connection ends.
        with trio.move_on_after(self.limits.flush_timeout_s):
            await self._writer_done.wait()
        nursery.cancel_scope.cancel(reason="daemon stopping")

    # -- writing ---------------------------------------------------------------------------------------
    async def _write(self) -> None:
        outbox = self._outbox
        try:
            while True:
                batch = await outbox.take(WRITE_BATCH)
                if batch is None:
                    return
                with trio.move_on_after(self.limits.stall_timeout_s) as waited:
                    await self.stream.send_all(b"".join(batch))
                outbox.sent()
                if waited.cancelled_caught:
                    log.warning("%s: the client stopped reading; disconnecting", self.address)
                    self._abort("client stopped reading")
                    return
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            self._abort("client went away")
        finally:
            self._writer_done.set()

    def _abort(self, reason: str) -> None:
        self._closing = True
        if self._nursery is not None:
            self._nursery.cancel_scope.cancel(reason=f"{self.address}: {reason}")

    async def _send(self, msg: Message) -> None:
        await self._send_frame((encode(msg) + "\n").encode("utf-8"))

    async def _send_frame(self, frame: bytes) -> None:
        """Send ``frame`` (written at once or queued); waits only for room in a full
        buffer; raises ``_Closed`` when the connection is ending."""
        await self._outbox.put(frame)

    def _notice_nowait(self, msg: Message) -> None:
        self._outbox.put_nowait((encode(msg) + "\n").encode("utf-8"))

    # -- reading ---------------------------------------------------------------------------------------
    async def _read(self, port: Port) -> None:
        # Before the token is checked, a frame has room for a Hello and little more.
        splitter = FrameSplitter(HELLO_MAX_FRAME if self.rules.token else self.limits.max_frame)
        while not self._closing:
            try:
                data = await self.stream.receive_some(READ_CHUNK)
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                return
            if not data:
                return
            while data:
                if self.rules.hello is None:
                    # Up to the first frame's end only: the frames behind a Hello in the
                    # same read are split under the limit it unlocks (a request sent right
                    # after the Hello was dropped as too large for a Hello).
                    nl = data.find(b"\n")
                    piece, data = (data, b"") if nl < 0 else (data[: nl + 1], data[nl + 1 :])
                else:
                    piece, data = data, b""
                for frame in splitter.feed(piece):
                    verdict = self.rules.check(frame)
                    if self.rules.hello is not None:
                        splitter.limit = self.limits.max_frame
                    try:
                        if isinstance(verdict, ProtocolError):
                            await self._send(verdict)
                            if verdict.fatal:
                                return
                            continue
                        await self._handle(verdict, port)
                    except _Closed:
                        return
                    if self._closing:
                        return

    async def _inbox(self, port: Port) -> None:
        """Messages addressed to this connection: replies to its tool batches, and the
        shell commands its client runs (``RunInTerminal``, ``KillTerminal``: on to it)."""
        async for env in port:
            msg = env.message
            if isinstance(msg, RunInTerminal | KillTerminal):
                if isinstance(msg, RunInTerminal):
                    self._terminal_runs[msg.request_id] = msg
                elif msg.request_id not in self._terminal_runs:
                    continue
                try:
                    # A subagent's command runs in its session's terminals: the client
                    # knows the session it opened, not the subagent's.
                    await self._send(attrs.evolve(msg, session_id=_root(msg.session_id)))
                except _Closed:
                    return
            elif isinstance(msg, BatchSettled) and msg.batch_id in self._tool_calls:
                sid = self._tool_calls.pop(msg.batch_id)
                call = msg.calls[0] if msg.calls else CompletedCall(call_id="", name="", status="cancelled")
                added = msg.batch_id in self._shared_calls and ran(call) and await self._add_context(port, sid, call)
                self._shared_calls.discard(msg.batch_id)
                try:
                    await self._send(
                        ToolCallResult(session_id=sid, request_id=msg.batch_id, call=call, added_to_context=added)
                    )
                except _Closed:
                    return

    async def _add_context(self, port: Port, sid: str, call: CompletedCall) -> bool:
        """Share a user's call result with the model (``CallTool.add_to_context``)."""
        live = self.core.sessions.get(sid)
        if live is None or live.addrs is None:
            return False
        try:
            await port.send(
                AddContext(session_id=sid, request_id=call.call_id, parts=tuple(context_parts(call)), requested_by=self.address),
                to=live.addrs.session,
            )
        except DeliveryError:
            return False
        return True

    async def _end_terminal_runs(self, port: Port, session_id: str | None = None) -> None:
        """The commands its client was running (in ``session_id``; None: all) end as
        failed: the client can no longer say how they end. When the connection ends
        (``session_id`` None), commands still waiting in its inbox, never sent on, too."""
        if session_id is None:
            while True:
                try:
                    env = port.inbox.receive_nowait()
                except (trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError):
                    break
                if isinstance(env.message, RunInTerminal):
                    self._terminal_runs[env.message.request_id] = env.message
        for rid, run in list(self._terminal_runs.items()):
            if session_id not in (None, _root(run.session_id)):
                continue
            del self._terminal_runs[rid]
            why = "the editor running this command disconnected; it was stopped there"
            try:
                await port.send(
                    TerminalExited(session_id=run.session_id, request_id=rid, error=why), to=run.reply_to
                )
            except DeliveryError:
                pass  # the session is gone too

    async def _cancel_tool_calls(self, port: Port) -> None:
        """Tool calls this client asked for die with its connection."""
        pending, self._tool_calls = self._tool_calls, {}
        for batch_id, sid in pending.items():
            live = self.core.sessions.get(sid)
            if live is None or live.addrs is None:
                continue
            try:
                await port.send(
                    CancelBatch(session_id=sid, batch_id=batch_id, reason="the client disconnected"),
                    to=live.addrs.scheduler,
                )
            except DeliveryError:
                pass

    # -- requests ----------------------------------------------------------------------------------------
    async def _handle(self, msg: Message, port: Port) -> None:
        rid = getattr(msg, "request_id", None)
        try:
            await self._dispatch(msg, port)
        except RequestError as exc:
            # A refused request is answered, but is no protocol violation.
            await self._send(
                ProtocolError(request_id=rid, code=exc.code, message=exc.message, session_id=msg.session_id)
            )
        except _Closed:
            raise
        except Exception as exc:
            # A request this daemon fails on (a bug, an input nobody foresaw) is answered
            # and logged; the connection and its other requests carry on.
            log.exception("%s: %s failed", self.address, type(msg).__name__)
            await self._send(
                ProtocolError(
                    request_id=rid, code="failed", message=f"{type(msg).__name__} failed: {exc!r}"[:2000], session_id=msg.session_id
                )
            )

    async def _prompt_parts(self, text: str, live: Any) -> tuple[Any, ...]:
        """A prompt's parts: an MCP prompt's command run, or its ``@`` references
        expanded (files, MCP resources); a failure (and ``/<prompt> help``) is the
        request's ``invalid`` answer, one line."""
        mcp = live.addrs.mcp
        try:
            command = await run_prompt_command(mcp, text)
            if command is not None:
                if command.prompt is None:
                    raise RequestError("invalid", command.message)
                return ({"text": command.prompt},)
            return tuple(
                await expand_at_references_off_loop(
                    text, live.cfg.env.workspace, env=live.cfg.env, glob_available="glob" in live.cfg.tools, mcp=mcp
                )
            )
        except McpInputError as exc:
            raise RequestError("invalid", exc.message) from None

    async def _dispatch(self, msg: Message, port: Port) -> None:
        if self.routes is not None and await self.routes.route(msg):
            return  # another node of the cluster answers it (``_routing``)
        try:
            await self._dispatch_here(msg, port)
        except HeldElsewhere as exc:
            if self.routes is None or not exc.owner or isinstance(msg, CreateSession):
                raise  # (a new session whose id another node holds is refused)
            # Another node took the session meanwhile (a take-over race): it answers.
            await self.routes.send(exc.owner, msg)

    async def _dispatch_here(self, msg: Message, port: Port) -> None:
        core = self.core
        match msg:
            case Hello():
                await self._send(
                    Welcome(request_id=msg.request_id, protocol=PROTOCOL_VERSION, pid=os.getpid(), address=self.address)
                )
            case ListSessions():
                sessions = await core.list_sessions(msg.workspace)  # recordings read off the event loop
                await self._send(SessionList(request_id=msg.request_id, sessions=tuple(sessions)))
            case CreateSession():
                live = await core.create(
                    workspace=msg.workspace,
                    model=msg.model,
                    approval_mode=msg.approval_mode,
                    session_id=msg.session_id,
                    fake_responses=msg.fake_responses,
                    fake_chunk_delay_ms=msg.fake_chunk_delay_ms,
                    auth_env=auth_env_from(msg.auth_env),
                    mcp_servers=msg.mcp_servers,
                )
                self.rules.sessions.add(live.session_id)
                if msg.terminals:
                    core.serve_terminals(live.session_id, self.address)
                await self._send(
                    SessionReady(session_id=live.session_id, request_id=msg.request_id, summary=live.summary())
                )
            case LoadSession():
                live, resumed = await core.load(
                    msg.session_id,
                    fake_responses=msg.fake_responses,
                    fake_chunk_delay_ms=msg.fake_chunk_delay_ms,
                    auth_env=auth_env_from(msg.auth_env),
                    mcp_servers=msg.mcp_servers,
                )
                self.rules.sessions.add(live.session_id)
                if msg.terminals:
                    core.serve_terminals(live.session_id, self.address)
                await self._send(
                    SessionReady(
                        session_id=live.session_id, request_id=msg.request_id, summary=live.summary(), resumed=resumed
                    )
                )
            case EndSession():
                await core.end(msg.session_id, msg.reason)
                await self._send(RequestDone(request_id=msg.request_id, session_id=msg.session_id))
            case Subscribe():
                live, _ = await core.load(msg.session_id)
                self.rules.sessions.add(live.session_id)
                self._unfollow(msg.session_id)
                assert self._nursery is not None
                await self._nursery.start(self._follow, live, msg)
            case Unsubscribe():
                self._unfollow(msg.session_id)
                core.stop_serving_terminals(self.address, msg.session_id)
                await self._end_terminal_runs(port, msg.session_id)
                await self._send(RequestDone(request_id=msg.request_id, session_id=msg.session_id))
            case TerminalOutput() | TerminalExited():
                run = self._terminal_runs.get(msg.request_id)
                if run is None or _root(run.session_id) != msg.session_id:
                    raise RequestError("invalid", f"no command {msg.request_id!r} runs in this client's terminals")
                if isinstance(msg, TerminalExited):
                    del self._terminal_runs[msg.request_id]
                try:
                    await port.send(attrs.evolve(msg, session_id=run.session_id), to=run.reply_to)
                except DeliveryError:
                    pass  # the call ended meanwhile (its session closed)
            case Prompt():
                # First, so that the session's state is checked after the wait.
                await after_work_in_flight()
                live = core.running(msg.session_id)
                self._refuse_if_stopping(live)
                assert live.addrs is not None
                parts = msg.parts
                if not parts:
                    # An image alone (no text) is not preceded by an empty text part.
                    expanded = await self._prompt_parts(msg.text, live) if msg.text or not msg.attachments else ()
                    parts = (*expanded, *msg.attachments)
                try:
                    await port.send(
                        SubmitPrompt(session_id=msg.session_id, prompt_id=msg.request_id, parts=parts, display_text=msg.text),
                        to=live.addrs.session,
                    )
                except DeliveryError:
                    # Its actors stopped since the check (it failed, or was ended): a
                    # refusal, not a failure of this daemon.
                    raise RequestError("unknown_session", f"session {msg.session_id!r} is not running (it stopped just now)") from None
                await self._send(
                    PromptAccepted(session_id=msg.session_id, request_id=msg.request_id, prompt_id=msg.request_id)
                )
            case ListMcpServers():
                live = core.running(msg.session_id)
                assert live.addrs is not None
                servers = live.addrs.mcp.summaries() if live.addrs.mcp is not None else ()
                await self._send(McpServerList(session_id=msg.session_id, request_id=msg.request_id, servers=servers))
            case Cancel():
                live = core.running(msg.session_id)
                assert live.addrs is not None
                if msg.tool_request_id:
                    if msg.tool_request_id not in self._tool_calls:
                        raise RequestError("invalid", f"no tool call {msg.tool_request_id!r} of this connection runs")
                    await port.send(
                        CancelBatch(session_id=msg.session_id, batch_id=msg.tool_request_id, reason="cancelled by the user"),
                        to=live.addrs.scheduler,
                    )
                else:
                    await port.send(
                        CancelTurn(
                            session_id=msg.session_id, turn_id=None, reason="cancelled by the user", requested_by=self.address
                        ),
                        to=live.addrs.session,
                    )
                await self._send(RequestDone(request_id=msg.request_id, session_id=msg.session_id))
            case Answer():
                live = core.running(msg.session_id)
                assert live.addrs is not None
                # A subagent's approval is answered to its own scheduler.
                to, answer_sid = live.answer_routes.get(
                    msg.correlation_id, (live.addrs.scheduler, msg.session_id)
                )
                await port.send(
                    ApprovalAnswered(
                        session_id=answer_sid,
                        correlation_id=msg.correlation_id,
                        outcome=as_approval_outcome(msg.outcome),
                        answered_by=self.address,
                    ),
                    to=to,
                )
                await self._send(RequestDone(request_id=msg.request_id, session_id=msg.session_id))
            case SetMode():
                await core.set_mode(msg.session_id, msg.approval_mode)
                await self._send(RequestDone(request_id=msg.request_id, session_id=msg.session_id))
            case CallTool():
                live = core.running(msg.session_id)
                self._refuse_if_stopping(live)
                assert live.addrs is not None
                if msg.request_id in self._tool_calls:
                    raise RequestError("invalid", f"request id {msg.request_id!r} is already in use")
                self._tool_calls[msg.request_id] = msg.session_id
                if msg.add_to_context:
                    self._shared_calls.add(msg.request_id)
                call = ToolCallRequest(
                    call_id=f"{msg.name}__user_{new_id()[:8]}", name=msg.name, args=msg.args, client_initiated=True
                )
                try:
                    await port.send(
                        ScheduleBatch(
                            session_id=msg.session_id,
                            batch_id=msg.request_id,
                            reply_to=self.address,
                            approval_mode=as_approval_mode(live.entry.approval_mode),
                            calls=(call,),
                            interactive=True,
                        ),
                        to=live.addrs.scheduler,
                    )
                except DeliveryError:
                    self._tool_calls.pop(msg.request_id, None)
                    self._shared_calls.discard(msg.request_id)
                    raise RequestError("unknown_session", f"session {msg.session_id!r} is not running") from None
            case DaemonStatus():
                pid, sock, conns = self.daemon_info() if self.daemon_info else (os.getpid(), "", ())
                await self._send(
                    DaemonInfo(
                        request_id=msg.request_id,
                        pid=pid,
                        socket=sock,
                        started=core.started,
                        sessions=tuple(core.list()),
                        connections=tuple(conns),
                    )
                )
            case StopDaemon():
                await self._send(RequestDone(request_id=msg.request_id))
                core.request_stop(f"asked by {self.address} ({self.client})")
            case _:
                raise RequestError("not_a_request", f"{type(msg).__name__} is not a request")

    async def _in_stream(self, live: LiveSession, seq: int) -> None:
        """A tunnel's connection (another node's client) gets a message once the
        cluster's stream has it: a client that saw it will find it there when this
        node dies and another takes the session over from the stream."""
        if self.in_stream_first and live.mirror is not None:
            await live.mirror.in_stream(seq)

    def _refuse_if_stopping(self, live: LiveSession) -> None:
        if live.closing is not None:
            raise RequestError("busy", f"session {live.session_id!r} is stopping ({live.closing})")

    # -- following a session -------------------------------------------------------------------------------
    def _unfollow(self, session_id: str) -> None:
        follower = self._followers.pop(session_id, None)
        if follower is not None:
            follower.forwarding = False  # nothing more goes out directly, from now
            follower.scope.cancel(reason="unsubscribed")

    async def _follow(
        self,
        live: LiveSession,
        req: Subscribe,
        announce: bool = True,
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Follow ``live`` for ``req``; ``announce``: answer ``Subscribed`` (not when a
        subscription is taken up again after its node went away: the client has its
        answer)."""
        sid = live.session_id
        follower = _Follower(sid, trio.CancelScope())
        self._followers[sid] = follower
        wanted = everything if req.full else is_client_event
        cursor = RecordingCursor(live.recording)
        expected = 0
        started = False
        reason = "closed"
        current: LiveSession | None = live
        try:
            with follower.scope:
                while current is not None:
                    if current.addrs is not None and not current.stopped.is_set():
                        expected, started = await self._follow_run(
                            follower, current, req, cursor, expected, started, wanted, task_status, announce
                        )
                    elif not started:
                        raise RequestError("unknown_session", f"session {sid!r} stopped")
                    # What the subscription missed at the end (it lagged) is in the file.
                    expected = await self._catch_up(cursor, expected, None, wanted, current)
                    await current.stopped.wait()
                    if current.closing == "restart":
                        await current.replaced.wait()
                        current = current.successor
                    else:
                        reason = current.closing or (f"failed: {current.failure}" if current.failure else "closed")
                        current = None
                await self._send(SubscriptionEnded(session_id=sid, reason=reason))
        except _Closed:
            pass
        finally:
            if self._followers.get(sid) is follower:
                del self._followers[sid]

    async def _follow_run(
        self,
        follower: _Follower,
        live: LiveSession,
        req: Subscribe,
        cursor: RecordingCursor,
        expected: int,
        started: bool,
        wanted: Any,
        task_status: trio.TaskStatus[None],
        announce: bool = True,
    ) -> tuple[int, bool]:
        """Follow one run of the session (a mode change starts another); returns
        ``expected`` and whether the subscription was confirmed."""
        sid = live.session_id
        # Subscribe and read the live point in one step: every later message reaches us.
        sub = follower.sub = self.bus.subscribe(
            sid,
            self.address,
            policy="lag",
            capacity=self.limits.subscription_capacity,
            wants=None if wanted is everything else wanted,
        )
        live.subscribers += 1
        try:
            if not started:
                live_point = self.bus.next_seq(sid)
                expected = live_point if req.from_seq is None else max(1, req.from_seq)
                asked = await self._still_asked(live, live_point)
                if announce:
                    await self._send(
                        Subscribed(
                            session_id=sid,
                            request_id=req.request_id,
                            from_seq=expected,
                            next_seq=live_point,
                            pending_approvals=tuple(asked),
                        )
                    )
                task_status.started()
                started = True
                # Questions asked before the client's start are asked again, first.
                for env in asked.values():
                    if env.seq < expected:
                        await self._send_frame((encode_envelope(env) + "\n").encode("utf-8"))
                expected = await self._catch_up(cursor, expected, None, wanted, live)
                # A message numbered just before we subscribed may still be on its way
                # to the recorder; it is on disk within a few scheduler rounds.
                for _ in range(CATCHUP_SETTLE_ROUNDS):
                    if expected >= live_point:
                        break
                    await trio.lowlevel.checkpoint()
                    expected = await self._catch_up(cursor, expected, None, wanted, live)
                await self._send(CaughtUp(session_id=sid, next_seq=live_point))
            else:
                expected = await self._catch_up(cursor, expected, None, wanted, live)
            expected = await self._forward(follower, live, sub, cursor, expected, wanted)
        finally:
            live.subscribers -= 1
            follower.sub = None
            self.bus.unsubscribe(sub)
        return expected, started

    async def _still_asked(self, live: LiveSession, live_point: int) -> dict[str, Envelope]:
        """The ``ApprovalRequested`` of the approvals waiting at ``live_point`` by their
        correlation ids, in order.
        The daemon's monitor notes them as messages reach it: a message numbered just
        before the live point may still be on its way there (a few scheduler rounds)."""
        for _ in range(CATCHUP_SETTLE_ROUNDS):
            if live.seen() >= live_point:
                break
            await trio.lowlevel.checkpoint()
        asked = sorted((item for item in live.asked.items() if item[1].seq < live_point), key=lambda item: item[1].seq)
        return dict(asked)

    async def _forward(
        self, follower: _Follower, live: LiveSession, sub: Any, cursor: RecordingCursor, expected: int, wanted: Any
    ) -> int:
        """Forward live messages until the session's route closes; returns ``expected``.

        Each wake-up takes every message already waiting in the subscription (no
        checkpoint between them) and sends their frames as one write. While it waits
        with nothing queued, the bus hands it the next message in the sender's task
        (``_direct``): sent at once, without waking this task."""
        sub.direct = partial(self._direct, follower, live, sub, wanted)
        while True:
            if sub.lagged_from is not None:
                self.lagged += 1
                await self._send(ObserverLagged(session_id=sub.session_id, observer=self.address, resume_from=expected))
                sub.clear_lag()
                expected = await self._catch_up(cursor, expected, None, wanted, live)
            follower.expected, follower.forwarding = expected, True
            try:
                env = await sub.receive.receive()
            except (trio.EndOfChannel, trio.ClosedResourceError):
                return follower.expected
            finally:
                follower.forwarding = False
                expected = follower.expected
            batch: list[bytes] = []
            size = 0
            ended = False
            while True:
                expected = _next_due(sub, expected, env)
                if env.seq > expected:
                    # Missing messages come from the recording, before this one.
                    if batch:
                        await self._in_stream(live, expected - 1)
                        await self._send_frame(b"".join(batch))
                        batch, size = [], 0
                    expected = await self._catch_up(cursor, expected, env.seq, wanted, live)
                if env.seq >= expected:
                    if _shown(sub, wanted, env):
                        frame = encoded_frame(live, env)
                        batch.append(frame)
                        size += len(frame)
                    expected = env.seq + 1
                if size >= WRITE_BATCH:
                    break
                try:
                    env = sub.receive.receive_nowait()
                except trio.WouldBlock:
                    break
                except (trio.EndOfChannel, trio.ClosedResourceError):
                    ended = True
                    break
            if batch:
                if self.in_stream_first:
                    await self._in_stream(live, expected - 1)
                await self._send_frame(b"".join(batch))
            if ended:
                return expected

    def _direct(self, follower: _Follower, live: LiveSession, sub: Any, wanted: Any, env: Envelope) -> bool:
        """``_forward``'s step for one message, in the sender's task (``Subscription.direct``):
        only while it waits, caught up, and the frame goes straight into the outbox;
        False leaves the message to it."""
        if not follower.forwarding or self.in_stream_first:
            return False
        if env.seq != _next_due(sub, follower.expected, env):
            return False  # a gap: ``_forward`` catches up from the recording first
        if _shown(sub, wanted, env) and not self._outbox.put_nowait(encoded_frame(live, env)):
            return False
        follower.expected = env.seq + 1
        return True

    async def _catch_up(
        self, cursor: RecordingCursor, expected: int, before: int | None, wanted: Any, live: LiveSession | None = None
    ) -> int:
        # Not past a message the recorder is syncing: nobody sees it before it is on disk.
        held = partial(self.bus.held, live.session_id) if live is not None else None
        envs, nxt = await trio.to_thread.run_sync(cursor.read, expected, before, wanted, held)
        if envs and live is not None:
            await self._in_stream(live, envs[-1].seq)
        # Written WRITE_BATCH bytes at a time, a scheduler round between (a long
        # catch-up does not hold the loop).
        batch: list[bytes] = []
        size = 0
        for env in envs:
            frame = (encode_envelope(env) + "\n").encode("utf-8")
            batch.append(frame)
            size += len(frame)
            if size >= WRITE_BATCH:
                await self._send_frame(b"".join(batch))
                await trio.lowlevel.checkpoint()
                batch, size = [], 0
        if batch:
            await self._send_frame(b"".join(batch))
        return max(expected, nxt)


PROMPT_YIELD_ROUNDS = 8
"""How many scheduler rounds a new prompt lets runnable work go first (see
``after_work_in_flight``)."""


async def after_work_in_flight(rounds: int = PROMPT_YIELD_ROUNDS) -> None:
    """Let the work in flight go first: ``rounds`` scheduler rounds (about 20 us on an
    idle daemon).

    A prompt starts a turn, about a millisecond of CPU in several actors; on a busy
    daemon, turns that start as others stream delay those streams' events (trio runs
    the runnable tasks round by round, without priorities). A new prompt waits here
    first, so the events already on their way, a hop a round, reach their clients
    ahead of it: ``make bench``'s 100 sessions, chunk -> client p99 about 25 -> 16 ms,
    their prompts' turns starting some 30 ms later (prompt -> ``TurnStarted``, a row of
    its own). Rounds, not "until nothing else is runnable": trio does not count the
    tasks still due in the current round, and a daemon that is never idle must still
    start every prompt."""
    for _ in range(rounds):
        await trio.lowlevel.checkpoint()


SHARED_FRAME_MAX = 1 << 14
"""Frames up to this size are kept for the session's other subscribers (a session keeps
at most ``SHARED_FRAMES_KEPT`` of them: 1 MiB at worst; larger frames, rare, are
encoded per connection)."""
SHARED_FRAMES_KEPT = 64
"""How many recent frames a session with several subscribers keeps."""


def _root(session_id: str) -> str:
    """The session a subagent's session (``<parent>.<agent>-<id>``) belongs to."""
    return session_id.split(".", 1)[0]


def encoded_frame(live: LiveSession, env: Envelope) -> bytes:
    """``env`` as its client frame, encoded once however many connections follow the
    session: with more than one subscriber the session keeps its recent frames, and the
    other followers reuse them (the same envelope object: a resumed session numbers on
    from the recording, so a sequence number alone could name another message)."""
    frames = live.frames
    hit = frames.get(env.seq)
    if hit is not None and hit[0] is env:
        return hit[1]
    frame = (encode_envelope(env) + "\n").encode("utf-8")
    if live.subscribers > 1 and len(frame) <= SHARED_FRAME_MAX:
        frames[env.seq] = (env, frame)
        if len(frames) > SHARED_FRAMES_KEPT:
            del frames[next(iter(frames))]
    elif frames and live.subscribers <= 1:
        frames.clear()
    return frame


def _next_due(sub: Any, expected: int, env: Envelope) -> int:
    """The sequence number due next once ``env`` came: ``expected``, or ``env``'s own for
    a subscription that names its types, which the bus passed the others by (from
    ``since`` on, a missed one shows as ``lagged_from`` first)."""
    if env.seq > expected and sub.wants is not None and expected >= sub.since:
        return int(env.seq)
    return expected


def _shown(sub: Any, wanted: Any, env: Envelope) -> bool:
    """Whether the client is sent ``env`` (a subscription that names its types was
    handed only those)."""
    return sub.wants is not None or bool(wanted(type(env.message).__name__))


class _Closed(Exception):
    """The connection's send buffer is closed: the connection is ending."""


class _Outbox:
    """The frames a connection sends its client, in order, at most ``limit`` of them
    waiting. ``put`` writes a frame to the socket at once when nothing waits before it
    and the writer is not sending (a non-blocking write from the task that made it: no
    task switch, no scheduler round per event); what the socket does not take waits in
    the queue, and the writer task (``take``, ``sent``) sends it, several frames at a
    time, with the stall timeout."""

    def __init__(self, stream: Any, limit: int) -> None:
        # Only a plain socket is written to directly (a tunnel's stream is not one).
        self._socket = stream.socket if type(stream) is trio.SocketStream else None
        self.limit = limit
        self.queue: deque[bytes] = deque()
        self.sending = False
        """The writer took frames off the queue and is sending them."""
        self.closed = False
        self._wake: trio.Event | None = None
        """Set when the writer has something to do (it waits on it)."""
        self._room: trio.Event | None = None
        """Set when frames left a full queue (senders wait on it)."""

    def put_nowait(self, frame: bytes) -> bool:
        """Send or queue ``frame`` without waiting; False: closed, or no room."""
        if self.closed or len(self.queue) >= self.limit:
            return False
        self._put(frame)
        return True

    async def put(self, frame: bytes) -> None:
        """Send or queue ``frame``, waiting for room; raises ``_Closed`` once closed."""
        while not self.closed and len(self.queue) >= self.limit:
            room = self._room = self._room or trio.Event()
            await room.wait()
        if self.closed:
            raise _Closed()
        self._put(frame)

    def _put(self, frame: bytes) -> None:
        if not self.queue and not self.sending and self._socket is not None:
            try:
                written = os.write(self._socket.fileno(), frame)
            except OSError:  # the socket is full (or broken: the writer's send says so)
                written = 0
            if written == len(frame):
                return
            frame = frame[written:]
        self.queue.append(frame)
        if self._wake is not None:
            self._wake.set()

    def close(self) -> None:
        """No more frames: those queued are still sent; waiting senders get ``_Closed``."""
        self.closed = True
        self._socket = None
        for event in (self._wake, self._room):
            if event is not None:
                event.set()

    async def take(self, max_bytes: int) -> list[bytes] | None:
        """The writer's next frames (at least one, up to ``max_bytes`` unless the first is
        larger), marked as being sent until ``sent``; None when closed and all were sent."""
        while not self.queue:
            if self.closed:
                return None
            wake = self._wake = trio.Event()
            await wake.wait()
            self._wake = None
        if len(self.queue[0]) < max_bytes:
            # One scheduler round first: the tasks that events of the same round woke
            # queue their frames too, and they leave in one send.
            await trio.lowlevel.checkpoint()
        batch = [self.queue.popleft()]
        size = len(batch[0])
        while self.queue and size + len(self.queue[0]) <= max_bytes:
            frame = self.queue.popleft()
            batch.append(frame)
            size += len(frame)
        self.sending = True
        if self._room is not None:
            self._room.set()
            self._room = None
        return batch

    def sent(self) -> None:
        self.sending = False
