"""The agent side of one ACP connection: JSON-RPC over a pair of byte streams.

Accepts: frames from the client (``_rpc.parse_frame``), one per line. Requests run in
their own tasks (a long ``session/prompt`` never blocks a ``session/cancel`` or the
answer to one of our requests), each in a cancel scope that ``$/cancel_request`` cancels
(-32800; a prompt ends ``cancelled`` instead); notifications are handled at once;
answers to our requests (``session/request_permission``, ``fs/*``, ``terminal/*``) wake
their waiters, and a request we stop waiting for is withdrawn with ``$/cancel_request``.
Emits: every frame through one writer task, so lines are never interleaved and go out
in the order they were produced.
Owns: the connection state (client capabilities, the chosen auth method, our pending
requests) and the ACP sessions (``AcpSession``), all on one bus.
Stops: at end of input or ``shutdown()`` (SIGINT/SIGTERM): every session is closed
(running turns cancelled and acknowledged, recordings flushed) within a bounded grace,
our pending requests fail, the writer drains, then the nursery ends. Malformed input
never stops it: each bad frame gets its JSON-RPC error and reading goes on.
"""

from __future__ import annotations

import sys
import traceback
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import attrs
import trio

from actors.frontends.acp._bus_session import BusSession
from actors.frontends.acp._protocol import (
    AUTH_METHOD_IDS,
    ClientCapabilities,
    absolute_dir,
    available_commands,
    config_choice,
    config_options,
    initialize_result,
    mcp_servers,
    models_state,
    modes_state,
    optional_str,
    params_object,
    prompt_blocks,
    required_str,
    unknown_method,
)
from actors.frontends.acp._rpc import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    REQUEST_CANCELLED,
    RESOURCE_NOT_FOUND,
    Invalid,
    Notification,
    Request,
    Response,
    RpcError,
    encode,
    error_frame,
    invalid_params,
    notification_frame,
    parse_frame,
    request_frame,
    result_frame,
)
from actors.frontends.acp._session import CLOSE_GRACE_S, AcpOptions, AcpSession, Waiter
from actors.host.errors import FatalError, cause_of, error_text
from actors.recording import RecorderError
from bus import Bus
from bus.session_ids import MAX_SESSION_ID, session_id_problem

MAX_FRAME = 64 * 1024 * 1024
"""Longest accepted line; a longer one is answered -32600 and skipped."""
OUT_BUFFER = 256
"""Frames queued for the writer (then producers wait: a client that does not read
slows its sessions down instead of growing our memory)."""
LIST_PAGE = 50


@attrs.frozen
class Reply:
    """A handler's result plus notifications to send right after the response."""

    result: Any
    then: tuple[tuple[str, Any], ...] = ()


Handler = Callable[[dict[str, Any]], Awaitable[Any]]


class AcpServer:
    def __init__(
        self,
        receive: trio.abc.ReceiveStream,
        send: trio.abc.SendStream,
        options: AcpOptions,
        *,
        client_caps: ClientCapabilities | None = None,
        leftover: bytes = b"",
        log: Callable[[str], None] | None = None,
    ) -> None:
        """``client_caps``: ``initialize`` was answered before the server started (see
        ``_main``); ``leftover``: input read before it started."""
        self.receive = receive
        self.send = send
        self.options = options
        self.bus = Bus()
        self.client_caps = client_caps or ClientCapabilities()
        self.initialized = client_caps is not None
        self.auth_type: str | None = None
        self.sessions: dict[str, AcpSession] = {}
        self._leftover = leftover
        self._log = log or (lambda text: sys.stderr.write(text + "\n"))
        self._out_send, self._out_receive = trio.open_memory_channel[bytes](OUT_BUFFER)
        self._pending: dict[int | str, Waiter[Response]] = {}
        self._next_id = 0
        self._closed = False
        self._nursery: trio.Nursery | None = None
        self._read_scope = trio.CancelScope()
        self._drained = trio.Event()
        self._close_reason = "the ACP client went away"
        self._daemon: Any = None
        self._daemon_lock = trio.Lock()
        self._methods: dict[str, Handler] = {
            "initialize": self._initialize,
            "authenticate": self._authenticate,
            "session/new": self._new_session,
            "session/load": self._load_session,
            "session/prompt": self._prompt,
            "session/set_mode": self._set_mode,
            "session/set_model": self._set_model,
            "session/set_config_option": self._set_config_option,
            "session/list": self._list_sessions,
            "session/resume": self._resume_session,
            "session/close": self._close_session_request,
            "session/delete": self._delete_session,
        }
        self._serving: dict[int | str, tuple[str, trio.CancelScope, Any]] = {}
        """Client requests being served: id -> (method, its scope, its params)."""

    # -- running --------------------------------------------------------------------------
    async def run(self) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            nursery.start_soon(self._write_frames)
            try:
                with self._read_scope:
                    await self._read_frames()
            finally:
                with trio.move_on_after(CLOSE_GRACE_S + 1, shield=True):
                    await self._shut_down()
                nursery.cancel_scope.cancel(reason="the ACP connection ended")

    def shutdown(self, reason: str = "agentbus acp stopped") -> None:
        """Stop reading; sessions are closed as at end of input."""
        self._close_reason = reason
        self._read_scope.cancel(reason=reason)

    async def _shut_down(self) -> None:
        async with trio.open_nursery() as nursery:
            for session in list(self.sessions.values()):
                nursery.start_soon(self._close_session, session)
        self._closed = True
        gone = RpcError(INTERNAL_ERROR, "the connection closed")
        for waiter in self._pending.values():
            waiter.fail(gone)
        self._pending.clear()
        self._out_send.close()
        # The writer drains what is queued (bounded by the caller's grace).
        await self._drained.wait()

    async def _close_session(self, session: AcpSession) -> None:
        with trio.move_on_after(CLOSE_GRACE_S):
            await session.close(self._close_reason)

    async def _write_frames(self) -> None:
        try:
            async with self._out_receive:
                async for frame in self._out_receive:
                    try:
                        await self.send.send_all(frame)
                    except (trio.BrokenResourceError, trio.ClosedResourceError):
                        self._log("agentbus acp: the client stopped reading; output dropped")
                        self.shutdown("the ACP client stopped reading")
                        return
        finally:
            self._drained.set()

    async def _read_frames(self) -> None:
        buf = bytearray(self._leftover)
        skipping = False
        while True:
            while True:
                nl = buf.find(b"\n")
                if nl < 0:
                    break
                line = bytes(buf[:nl])
                del buf[: nl + 1]
                if skipping:
                    skipping = False
                    continue
                if len(line) > MAX_FRAME:
                    await self._refuse_oversized()
                elif line.strip():
                    await self._dispatch(line)
            if len(buf) > MAX_FRAME and not skipping:
                await self._refuse_oversized()
                skipping = True
            if skipping:
                buf.clear()
            data = await self.receive.receive_some(65536)
            if not data:
                if buf.strip() and not skipping:
                    await self._dispatch(bytes(buf))
                return
            buf += data

    async def _refuse_oversized(self) -> None:
        await self.send_frame(
            error_frame(None, RpcError(INVALID_REQUEST, "Invalid Request", {"details": "frame too large"}))
        )

    async def _dispatch(self, line: bytes) -> None:
        frame = parse_frame(line)
        if self.options.debug:
            self._log(f"acp <- {line[:2000]!r}")
        match frame:
            case Invalid():
                await self.send_frame(error_frame(frame.id, frame.error))
            case Response():
                waiter = self._pending.pop(frame.id, None)
                if waiter is not None:
                    waiter.set(frame)
            case Notification():
                self._notification(frame)
            case Request():
                assert self._nursery is not None
                self._nursery.start_soon(self._serve, frame)

    def _notification(self, note: Notification) -> None:
        if note.method == "session/cancel":
            params = note.params if isinstance(note.params, dict) else {}
            sid = params.get("sessionId")
            session = self.sessions.get(sid) if isinstance(sid, str) else None
            if session is not None:
                session.cancel()
        elif note.method == "$/cancel_request":
            params = note.params if isinstance(note.params, dict) else {}
            self._cancel_request(params.get("requestId"))
        # Other notifications (extensions, unknown ones) are ignored, as the spec says.

    def _cancel_request(self, rid: Any) -> None:
        """``$/cancel_request``: a prompt ends as ``session/cancel`` ends it (its answer is
        the ``cancelled`` stop reason); any other request stops and is answered -32800.
        An id that is not pending (answered already, or never sent) is ignored."""
        serving = self._serving.get(rid) if isinstance(rid, int | str) and not isinstance(rid, bool) else None
        if serving is None:
            return
        method, scope, params = serving
        if method == "session/prompt":
            sid = params.get("sessionId") if isinstance(params, dict) else None
            session = self.sessions.get(sid) if isinstance(sid, str) else None
            if session is not None:
                session.cancel(withdraw=True)
                return
        scope.cancel(reason="$/cancel_request from the ACP client")

    async def _serve(self, req: Request) -> None:
        handler = self._methods.get(req.method)
        then: tuple[tuple[str, Any], ...] = ()
        if handler is None:
            frame = error_frame(req.id, unknown_method(req.method))
        else:
            scope = trio.CancelScope()
            if req.id not in self._serving:  # a reused id: the first one keeps the entry
                self._serving[req.id] = (req.method, scope, req.params)
            frame = error_frame(req.id, RpcError(REQUEST_CANCELLED, "Request cancelled"))
            try:
                with scope:
                    result = await handler(params_object(req.params))
                    if isinstance(result, Reply):
                        result, then = result.result, result.then
                    frame = result_frame(req.id, result)
            except RpcError as exc:
                frame = error_frame(req.id, exc)
            except Exception as exc:  # a bug in one request must not end the connection
                self._log("".join(traceback.format_exception(exc)))
                frame = error_frame(req.id, RpcError(INTERNAL_ERROR, f"Internal error: {error_text(exc)}"))
            finally:
                if self._serving.get(req.id, (None, None))[1] is scope:
                    del self._serving[req.id]
        await self.send_frame(frame)
        for method, params in then:
            await self.notify(method, params)

    # -- the peer interface (for sessions) ------------------------------------------------------
    async def send_frame(self, frame: dict[str, Any]) -> None:
        if self.options.debug:
            self._log(f"acp -> {str(frame)[:2000]}")
        try:
            await self._out_send.send(encode(frame))
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            pass  # shutting down: nothing more goes out

    async def notify(self, method: str, params: Any) -> None:
        await self.send_frame(notification_frame(method, params))

    async def request(self, method: str, params: Any) -> Any:
        """Send a request to the client and wait for its answer (``RpcError`` if it
        answers with an error or the connection closes first)."""
        if self._closed:
            raise RpcError(INTERNAL_ERROR, "the connection closed")
        rid = self._next_id
        self._next_id += 1
        waiter: Waiter[Response] = Waiter()
        self._pending[rid] = waiter
        try:
            await self.send_frame(request_frame(rid, method, params))
            response = await waiter.wait()
        except trio.Cancelled:
            # Nobody waits for the answer any more (the turn was cancelled, another
            # client answered...): tell the client it may stop (the spec's cascade).
            if rid in self._pending and not self._closed:
                with trio.move_on_after(1, shield=True):
                    await self.notify("$/cancel_request", {"requestId": rid})
            raise
        finally:
            self._pending.pop(rid, None)
        if response.error is not None:
            raise response.error
        return response.result

    # -- methods ----------------------------------------------------------------------------------
    async def _initialize(self, params: dict[str, Any]) -> Any:
        result, caps = initialize_result(params)
        self.client_caps = caps
        self.initialized = True
        return result

    async def _authenticate(self, params: dict[str, Any]) -> Any:
        method = required_str(params, "methodId")
        if method not in AUTH_METHOD_IDS:
            raise invalid_params(f"unknown authentication method {method!r}", methodId=method)
        self.auth_type = method
        return {}

    def _session(self, params: dict[str, Any]) -> AcpSession:
        sid = required_str(params, "sessionId")
        session = self.sessions.get(sid)
        if session is None:
            raise invalid_params(f"no session {sid!r}", sessionId=sid)
        return session

    async def _start(self, session: AcpSession) -> Any:
        """Run ``session`` beside the others; what it started with. A session that
        cannot start (its recording cannot be opened, its settings are broken...) is
        this request's error, in its cause's words: the connection and its other
        sessions go on."""
        assert self._nursery is not None
        try:
            started = await self._nursery.start(self._run_session, session)
        except Exception as exc:
            cause = cause_of(exc)
            if isinstance(cause, RpcError):
                raise cause from None  # the session's own answer (auth required...)
            if _unforeseen(exc):
                self._log("".join(traceback.format_exception(exc)))
            raise RpcError(INTERNAL_ERROR, f"The session could not start: {error_text(exc)}") from None
        self.sessions[session.session_id] = session
        return started

    async def _run_session(self, session: AcpSession, *, task_status: trio.TaskStatus[Any]) -> None:
        try:
            await session.run(task_status=task_status)
        except* Exception as group:
            # (``except*``: a failure beside the connection's own cancellation is still
            # this session's alone; the cancellation goes on up.)
            if not session.started:
                raise  # ``_start`` answers the request with it
            # A session that fails after it started ends alone; the connection goes on.
            if _unforeseen(group):
                self._log(f"agentbus acp: session {session.session_id} failed:\n" + "".join(traceback.format_exception(group)))
            else:
                self._log(f"agentbus acp: session {session.session_id} stopped: {error_text(group)}")
        finally:
            self.sessions.pop(session.session_id, None)

    async def _daemon_link(self) -> Any:
        """The connection to the daemon (``--attach``), opened by the first session."""
        from actors.frontends.acp._attach import DaemonLink

        async with self._daemon_lock:
            if self._daemon is None:
                assert self._nursery is not None
                self._daemon = await self._nursery.start(self._run_link, DaemonLink(self.options.daemon_paths))
            return self._daemon

    async def _run_link(self, link: Any, *, task_status: trio.TaskStatus[Any]) -> None:
        try:
            await link.run(task_status=task_status)
        except RpcError as exc:
            if link.client is None:
                raise
            self._log(f"agentbus acp: the daemon connection ended: {exc.message}")
        finally:
            if self._daemon is link:
                self._daemon = None

    async def _new_session(self, params: dict[str, Any]) -> Any:
        cwd = absolute_dir(params)
        servers = mcp_servers(params, cwd)  # checked here: a malformed entry is invalid params
        session: AcpSession
        if self.options.attach:
            from actors.frontends.acp._attach import AttachedSession

            session = AttachedSession(
                self,
                await self._daemon_link(),
                self.options,
                session_id=None,
                workspace=Path(cwd),
                mcp_servers=params.get("mcpServers") or [],
            )
        else:
            session = BusSession(
                self, self.bus, self.options, session_id=str(uuid.uuid4()), workspace=Path(cwd), mcp_servers=servers
            )
        started = await self._start(session)
        return Reply(
            {"sessionId": session.session_id, **self._state(started.approval_mode, started.model)},
            then=(self._commands_update(session.session_id),),
        )

    def _state(self, approval_mode: str, model: str) -> dict[str, Any]:
        """What ``session/new``, ``load`` and ``resume`` answer with: the config options,
        and ``modes`` and Gemini CLI's ``models`` for clients that predate them. With
        ``--attach`` the model cannot be changed: the model option offers only it."""
        fixed = self.options.attach
        return {
            "modes": modes_state(approval_mode),
            "models": models_state(model, fixed=fixed),
            "configOptions": config_options(approval_mode, model, fixed_model=fixed),
        }

    def _commands_update(self, sid: str) -> tuple[str, Any]:
        return (
            "session/update",
            {
                "sessionId": sid,
                "update": {
                    "sessionUpdate": "available_commands_update",
                    # the built-in commands, then the session's MCP prompts
                    "availableCommands": available_commands()
                    + (session.mcp_commands() if (session := self.sessions.get(sid)) else []),
                },
            },
        )

    async def _load_session(self, params: dict[str, Any]) -> Any:
        return await self._open_existing(params, replay=True)

    async def _resume_session(self, params: dict[str, Any]) -> Any:
        return await self._open_existing(params, replay=False)

    async def _open_existing(self, params: dict[str, Any], *, replay: bool) -> Any:
        """``session/load`` (the conversation replayed as updates, then the answer) and
        ``session/resume`` (the same session, nothing replayed). A session killed in
        the middle of a turn goes on from its recording: its interrupted calls are
        closed in the history (``resumable_history``)."""
        from actors.frontends.acp._session import replay_of
        from actors.recording import RecordingError, load_recording, recording_path, session_in_use

        sid = required_str(params, "sessionId")
        if problem := session_id_problem(sid):  # it names a file: never a path of the caller's
            raise invalid_params(problem, sessionId=sid[:MAX_SESSION_ID])
        cwd = absolute_dir(params)
        servers = mcp_servers(params, cwd)
        running = self.sessions.get(sid)
        if not replay and running is not None and running.view is not None:
            # Resumed while it runs here: it goes on as it is.
            return self._state(running.view.approval_mode, running.view.model)
        if self.options.attach and running is None:
            from actors.frontends.acp._attach import AttachedSession

            attached = AttachedSession(
                self,
                await self._daemon_link(),
                self.options,
                session_id=sid,
                workspace=Path(cwd),
                mcp_servers=params.get("mcpServers") or [],
            )
            started = await self._start(attached)
            if attached.mcp_servers_ignored:
                self._log(
                    f"agentbus acp: session {sid} already runs in the daemon: it keeps its MCP servers,"
                    f" the client's {len(attached.mcp_servers)} are not started"
                )
            if replay:
                for update in started.replay:
                    await self.notify("session/update", {"sessionId": sid, "update": update})
            return Reply(self._state(started.approval_mode, started.model), then=(self._commands_update(sid),))
        path = recording_path(self.options.data_directory(), sid)
        if not path.is_file():
            raise RpcError(RESOURCE_NOT_FOUND, f"Session not found: {sid}", {"sessionId": sid})
        try:
            recording = await trio.to_thread.run_sync(load_recording, path)
        except RecordingError as exc:
            raise RpcError(INTERNAL_ERROR, f"Cannot load session {sid}: {exc}") from None
        running = self.sessions.get(sid)
        if running is None and (in_use := session_in_use(path)):
            raise RpcError(INTERNAL_ERROR, f"Cannot load session {sid}: {in_use}")  # owned by another process
        then = (self._commands_update(sid),)
        if running is not None and running.view is not None:
            # Loaded again while it runs here: replay what it did, keep it running.
            updates = replay_of(recording, running.view.presenter) if replay else []
            approval, model = running.view.approval_mode, running.view.model
        else:
            session = BusSession(
                self, self.bus, self.options, session_id=sid, workspace=Path(cwd), recording=recording, mcp_servers=servers
            )
            started = await self._start(session)
            updates, approval, model = list(started.replay) if replay else [], started.approval_mode, started.model
        # The whole history first, then the answer (the spec's order; reference D6).
        for update in updates:
            await self.notify("session/update", {"sessionId": sid, "update": update})
        return Reply(self._state(approval, model), then=then)

    async def _close_session_request(self, params: dict[str, Any]) -> Any:
        """``session/close``: its running work is cancelled (as ``session/cancel``), then
        it ends here (with ``--attach``: this connection stops following it)."""
        session = self._session(params)
        session.cancel(withdraw=True)
        await session.close("closed by the ACP client (session/close)")
        self.sessions.pop(session.session_id, None)
        return {}

    async def _delete_session(self, params: dict[str, Any]) -> Any:
        """``session/delete``: its recording goes, so ``session/list`` no longer shows it.
        A session running here is closed first; one another process runs (the daemon,
        another ``agentbus``) is refused, naming it; an unknown id succeeds (the spec)."""
        from actors.recording import delete_recording, recording_path

        sid = required_str(params, "sessionId")
        if problem := session_id_problem(sid):
            raise invalid_params(problem, sessionId=sid[:MAX_SESSION_ID])
        running = self.sessions.get(sid)
        if running is not None:
            running.cancel(withdraw=True)
            await running.close("deleted by the ACP client (session/delete)")
            self.sessions.pop(sid, None)
        if self.options.attach:
            await self._end_in_daemon(sid)
        path = recording_path(self.options.data_directory(), sid)
        try:
            in_use = await trio.to_thread.run_sync(delete_recording, path)
        except FileNotFoundError:
            return {}
        except OSError as exc:
            raise RpcError(INTERNAL_ERROR, f"Cannot delete session {sid}: {error_text(exc)}") from None
        if in_use:
            raise RpcError(INTERNAL_ERROR, f"Cannot delete session {sid}: {in_use}", {"sessionId": sid})
        return {}

    async def _end_in_daemon(self, sid: str) -> None:
        """``--attach``: the daemon ends the session (its other clients are told), so
        that its recording can go; a session the daemon does not run is fine."""
        from actors.frontends.daemon.client import DaemonError

        link = await self._daemon_link()
        try:
            await link.client.end_session(sid, reason="deleted by an ACP client (session/delete)")
        except DaemonError as exc:
            if exc.code != "unknown_session":
                raise RpcError(INTERNAL_ERROR, f"agentbus daemon: {exc.message}", {"daemonCode": exc.code}) from None

    async def _prompt(self, params: dict[str, Any]) -> Any:
        session = self._session(params)
        return await session.prompt(prompt_blocks(params))

    async def _set_mode(self, params: dict[str, Any]) -> Any:
        session = self._session(params)
        await session.configure(mode=required_str(params, "modeId"))
        return {}

    async def _set_model(self, params: dict[str, Any]) -> Any:
        """Gemini CLI's (schema 0.10's) model selector, kept for clients written for it."""
        session = self._session(params)
        await session.configure(model=required_str(params, "modelId"))
        return {}

    async def _set_config_option(self, params: dict[str, Any]) -> Any:
        session = self._session(params)
        current = session.view.model if session.view is not None else ""
        fixed = self.options.attach
        mode, model = config_choice(params, current, fixed_model=fixed)
        configured = await session.configure(mode=mode, model=model)
        return {"configOptions": config_options(configured.approval_mode, configured.model, fixed_model=fixed)}

    async def _list_sessions(self, params: dict[str, Any]) -> Any:
        from actors.host.sessions import list_sessions, scan_session
        from actors.recording import iter_recordings

        cwd = optional_str(params, "cwd")
        cursor = optional_str(params, "cursor")
        start = 0
        if cursor is not None:
            if not cursor.isdigit():
                raise invalid_params("unknown cursor", cursor=cursor)
            start = int(cursor)
        data_dir = self.options.data_directory()
        if self.options.attach:
            return await self._list_daemon_sessions(cwd, start)

        def scan() -> list[Any]:
            if cwd is not None:
                return list_sessions(data_dir, Path(cwd).resolve())
            return [info for info in map(scan_session, iter_recordings(data_dir)) if info is not None]

        try:
            found = await trio.to_thread.run_sync(scan)
        except OSError as exc:  # the data directory is not one
            raise RpcError(INTERNAL_ERROR, f"Cannot list sessions: {error_text(exc)}") from None
        infos = sorted(found, key=lambda s: s.last_updated, reverse=True)
        page = infos[start : start + LIST_PAGE]
        result: dict[str, Any] = {
            "sessions": [
                {"sessionId": s.id, "cwd": s.workspace, "title": s.first_user_message, "updatedAt": s.last_updated}
                for s in page
            ]
        }
        if start + LIST_PAGE < len(infos):
            result["nextCursor"] = str(start + LIST_PAGE)
        return result

    async def _list_daemon_sessions(self, cwd: str | None, start: int) -> Any:
        from actors.frontends.daemon.client import DaemonError

        link = await self._daemon_link()
        try:
            listed = await link.client.list_sessions(workspace=cwd or "")
        except DaemonError as exc:
            raise RpcError(INTERNAL_ERROR, f"agentbus daemon: {exc.message}") from None
        infos = [s for s in listed.sessions if cwd is None or s.workspace == cwd]
        infos.sort(key=lambda s: s.last_updated, reverse=True)
        result: dict[str, Any] = {
            "sessions": [
                {"sessionId": s.session_id, "cwd": s.workspace, "title": s.title, "updatedAt": s.last_updated}
                for s in infos[start : start + LIST_PAGE]
            ]
        }
        if start + LIST_PAGE < len(infos):
            result["nextCursor"] = str(start + LIST_PAGE)
        return result


def _unforeseen(exc: BaseException) -> bool:
    """A failure nobody foresaw (a bug: its traceback is the report), not one the user
    can act on from its one line (a recording, the disk, the settings)."""
    return not isinstance(cause_of(exc), RecorderError | OSError | FatalError | RpcError)
