"""``BusSession``: an ACP session whose actors run in this process.

It opens its session the way every front end does (``actors.host.opening.open_session``)
with its own model gateway (one per session: a fake-responses file restarts at its first
line for every session, as in Gemini CLI), follows the session's messages as an
observer, serves its executors' file reads and writes (``ReadTextFile``/``WriteTextFile``:
through the ACP client's ``fs/*`` where it offers them, else the local disk) and, when
the client offers terminals, the shell's commands (``RunInTerminal``, ``KillTerminal``:
``_terminal``), and runs the client-side hook points. What every ACP session does is ``_session.AcpSession``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import trio

from actors.frontends.acp._present import Presenter
from actors.frontends.acp._rpc import AUTH_REQUIRED, INTERNAL_ERROR, RESOURCE_NOT_FOUND, RpcError
from actors.frontends.acp._session import (
    CLOSE_GRACE_S,
    NOT_FOUND_TEXT,
    SUBSCRIPTION_CAPACITY,
    AcpOptions,
    AcpSession,
    Peer,
    Started,
    Waiter,
    recorded_settings,
    replay_of,
    write_local,
)
from actors.frontends.acp._terminal import run_in_client_terminal
from actors.frontends.acp._view import (
    SessionView,
)
from actors.gateway import GatewayActor
from actors.host import runtime
from actors.host import settings as _settings
from actors.host.args import HeadlessArgs
from actors.host.backend import make_backend
from actors.host.errors import FatalError, cause_of, error_text
from actors.host.opening import open_session
from actors.host.sessions import resumable_history
from actors.host.setup import (
    approval_mode_from,
    environment_context,
    model_from,
    print_warnings,
    session_config,
    session_setup,
)
from actors.host.user_calls import SHELL_TOOL, context_parts, ran
from actors.recording import Recording, recording_path
from bus import Bus, DeliveryError
from bus.json_values import thaw
from bus.messages import (
    AddContext,
    ApprovalAnswered,
    ApprovalMode,
    BatchSettled,
    CancelBatch,
    CancelTurn,
    CloseSession,
    CompletedCall,
    ConfigureSession,
    FileAccessed,
    HookEvent,
    HooksFinished,
    KillTerminal,
    Message,
    ReadTextFile,
    RunHooks,
    RunInTerminal,
    ScheduleBatch,
    SubmitPrompt,
    TerminalOutput,
    ToolCallRequest,
    WriteTextFile,
    as_approval_mode,
    as_approval_outcome,
    new_id,
)

if TYPE_CHECKING:
    from actors.host.mcp_config import McpServerConfig


class BusSession(AcpSession):
    """A session whose actors run in this process, on the connection's bus (see the
    module doc)."""

    def __init__(
        self,
        peer: Peer,
        bus: Bus,
        options: AcpOptions,
        *,
        session_id: str,
        workspace: Path,
        recording: Recording | None = None,
        mcp_servers: Sequence[McpServerConfig] = (),
    ) -> None:
        super().__init__(peer, options, session_id=session_id, workspace=workspace)
        self.bus = bus
        self.recording = recording
        self.mcp_servers = tuple(mcp_servers)
        """The client's MCP servers (``session/new``, ``session/load``), beside the settings' ones."""
        self.gateway_address = f"gateway:{session_id}"
        self.addrs: runtime.SessionAddresses | None = None
        self._port: Any = None
        self._hooks: dict[str, Waiter[Any]] = {}
        self._terminals: dict[str, trio.CancelScope] = {}
        """The shell's commands running in the client's terminals, by request id."""

    # -- life cycle -------------------------------------------------------------------------
    async def run(self, *, task_status: trio.TaskStatus[Started] = trio.TASK_STATUS_IGNORED) -> None:
        o = self.options
        try:
            settings = _settings.load_settings(self.workspace)
        except FatalError as exc:
            raise RpcError(INTERNAL_ERROR, exc.message) from None
        approval = approval_mode_from(o.approval_mode, o.yolo, settings)
        model = model_from(o.model, settings)
        history: Sequence[Any] = ()
        if self.recording is not None:
            history = resumable_history(self.recording)
            # A loaded session keeps its recorded mode and model unless flags say otherwise.
            recorded_mode, recorded_model = recorded_settings(self.recording)
            if recorded_mode and not (o.approval_mode or o.yolo):
                approval = recorded_mode
            if recorded_model and not o.model:
                model = recorded_model
        try:
            setup = session_setup(
                workspace=self.workspace,
                settings=settings,
                session_id=self.session_id,
                model=model,
                approval_mode=approval,
                interactive=True,
                policy_paths=o.policy,
                allowed_tools=o.allowed_tools,
                allowed_mcp_server_names=o.allowed_mcp_server_names,
            )
        except FatalError as exc:
            raise RpcError(INTERNAL_ERROR, exc.message) from None
        print_warnings(setup)
        presenter = Presenter(setup.tools, setup.env)
        # Not running anywhere (else it could not be claimed): what it left unsettled ended.
        replay = replay_of(self.recording, presenter, ended=True) if self.recording is not None else []
        backend = self._backend(settings)
        cfg = session_config(
            setup,
            history=(environment_context(setup), *history),
            recording=recording_path(o.data_directory(), self.session_id),
            settings=settings,
            mcp_allowed_names=o.allowed_mcp_server_names,
            mcp_extra=self.mcp_servers,
            settings_from_files=True,
        )
        caps = self.peer.client_caps
        cfg = attrs.evolve(
            cfg,
            gateway_address=self.gateway_address,
            file_access_address=self.address if (caps.read_text_file or caps.write_text_file) else None,
            terminal_address=self.address if caps.terminal else None,
        )
        self._env, self._tools = setup.env, setup.tools
        self.view = SessionView(presenter, approval_mode=approval, model=model)
        sub: Any = None
        ended = "the session closed"
        try:
            async with trio.open_nursery() as actors:
                await actors.start(GatewayActor(self.bus, backend, address=self.gateway_address).run)
                self._port = self.bus.connect(self.address)
                subs: list[Any] = []

                def observe(_addrs: runtime.SessionAddresses) -> None:
                    # After the supervisor: the recorder must be the session's first observer.
                    subs.append(
                        self.bus.subscribe(self.session_id, "acp", policy="block", capacity=SUBSCRIPTION_CAPACITY)
                    )

                # SessionStart hooks first, before our inbox task reads the port: their
                # context opens the history, as in the daemon's sessions.
                source = "resume" if self.recording is not None else "startup"
                self.addrs = await open_session(
                    actors, self.bus, cfg, self._port, interactive_source=source, observe=observe
                )
                sub = subs[0]
                async with trio.open_nursery() as helpers:
                    # Our own tasks (pump, inbox, permission requests, sends) end with
                    # the session; its actors finish on their own after SessionClosed.
                    self._nursery = helpers
                    helpers.start_soon(self._inbox)
                    helpers.start_soon(self._pump, sub)
                    self.started = True
                    task_status.started(Started(approval_mode=approval, model=model, replay=tuple(replay)))
                    await self._closed.wait()
                    helpers.cancel_scope.cancel(reason="the ACP session closed")
                # The gateway's inbox closes: it finishes, as the session's actors do.
                self.bus.unsubscribe(sub)
                self._port.close()
                self.bus.disconnect(self.gateway_address)
        except BaseException as exc:
            if isinstance(cause := cause_of(exc), Exception):  # not the connection's cancel
                ended = f"the session stopped: {error_text(cause)}"  # what a waiting prompt is told
            raise
        finally:
            # Also when the session could not start: loading it again (once its cause
            # is mended) claims the same addresses.
            if sub is not None:
                self.bus.unsubscribe(sub)
            if self._port is not None:
                self._port.close()
            self.bus.disconnect(self.gateway_address)
            self._closed.set()
            self._fail_waiters(ended)
            for hook in self._hooks.values():
                hook.fail(RpcError(INTERNAL_ERROR, "the session closed"))
            self._hooks.clear()

    def _backend(self, settings: Mapping[str, Any]) -> Any:
        o = self.options
        args = HeadlessArgs(
            fake_responses=o.fake_responses,
            fake_responses_non_strict=o.fake_responses_non_strict,
            record_responses=o.record_responses,
        )
        if self.peer.auth_type:
            settings = _settings.deep_merge(settings, {"security": {"auth": {"selectedType": self.peer.auth_type}}})
        try:
            return make_backend(args, settings)
        except FatalError as exc:
            live = not (o.fake_responses or o.fake_responses_non_strict)
            raise RpcError(AUTH_REQUIRED if live else INTERNAL_ERROR, exc.message) from None

    async def close(self, reason: str) -> None:
        """End the session (a running turn is cancelled first); returns once it ended."""
        if self._closing or self.addrs is None or self._closed.is_set():
            await self._closed.wait()
            return
        self._closing = True
        with trio.move_on_after(CLOSE_GRACE_S):
            await self._run_hooks("SessionEnd", "exit", {"reason": "exit"})
        await self._send(CloseSession(session_id=self.session_id, reason=reason), self.addrs.session)
        await self._closed.wait()

    # -- the bus side -------------------------------------------------------------------------
    async def _send(self, msg: Message, to: str) -> None:
        assert self._port is not None
        try:
            await self._port.send(msg, to=to)
        except DeliveryError:
            pass  # the session is ending; its pending waiters are failed then

    async def _submit(self, prompt_id: str, parts: tuple[Any, ...], text: str) -> None:
        assert self.addrs is not None
        await self._send(
            SubmitPrompt(session_id=self.session_id, prompt_id=prompt_id, parts=parts, display_text=text),
            self.addrs.session,
        )

    async def _send_cancel(self, turn_id: str) -> None:
        assert self.addrs is not None
        await self._send(
            CancelTurn(
                session_id=self.session_id, turn_id=turn_id, reason="cancelled by the ACP client", requested_by=self.address
            ),
            self.addrs.session,
        )

    async def _send_answer(self, correlation_id: str, outcome: str) -> None:
        assert self.addrs is not None
        to, session_id = self._answer_routes.pop(correlation_id, (self.addrs.scheduler, self.session_id))
        await self._send(
            ApprovalAnswered(session_id=session_id, correlation_id=correlation_id, outcome=as_approval_outcome(outcome), answered_by=self.address),
            to,
        )

    async def _send_configure(self, request_id: str, approval_mode: ApprovalMode | None, model: str | None) -> None:
        assert self.addrs is not None and self.view is not None
        await self._send(
            ConfigureSession(
                session_id=self.session_id,
                request_id=request_id,
                approval_mode=approval_mode,
                model=model,
                requested_by=self.address,
            ),
            self.addrs.session,
        )
        current = self.view.approval_mode
        if (
            approval_mode is not None
            and approval_mode != current
            and self._running_turn is not None
            and "plan" not in (approval_mode, current)
        ):
            # As Gemini CLI: the running turn's waiting and later calls go by the new mode
            # at once (a change to or from plan mode waits for the turn's end).
            try:
                await runtime.change_mode_mid_turn(self._port, self.bus, self.session_id, approval_mode, new_id=new_id)
            except DeliveryError:
                pass  # the session is ending

    async def _call_tool(self, request_id: str, name: str, args: dict[str, Any], share: bool) -> tuple[CompletedCall, bool]:
        assert self.addrs is not None and self.view is not None
        waiter: Waiter[CompletedCall] = Waiter()
        self._call_waiters[request_id] = waiter
        request = ToolCallRequest(call_id=f"{name}__user_{new_id()[:8]}", name=name, args=args, client_initiated=True)
        await self._send(
            ScheduleBatch(
                session_id=self.session_id,
                batch_id=request_id,
                reply_to=self.address,
                approval_mode=as_approval_mode(self.view.approval_mode),
                calls=(request,),
                interactive=True,
            ),
            self.addrs.scheduler,
        )
        call = await waiter.wait()
        if not (share and ran(call)):
            return call, False
        await self._send(
            AddContext(
                session_id=self.session_id, request_id=request_id, parts=tuple(context_parts(call)), requested_by=self.address
            ),
            self.addrs.session,
        )
        return call, True

    async def _cancel_call(self, request_id: str) -> None:
        assert self.addrs is not None
        await self._send(
            CancelBatch(session_id=self.session_id, batch_id=request_id, reason="cancelled by the ACP client"),
            self.addrs.scheduler,
        )

    async def _pump(self, sub: Any) -> None:
        async for env in sub:
            await self._feed(env.message)
            if self._closed.is_set():
                break

    async def _inbox(self) -> None:
        assert self._port is not None and self._nursery is not None
        async for env in self._port:
            match env.message:
                case ReadTextFile() | WriteTextFile() as request:
                    self._nursery.start_soon(self._serve_file, request)
                case RunInTerminal() as run:
                    kill = self._terminals[run.request_id] = trio.CancelScope()
                    self._nursery.start_soon(self._serve_terminal, run, kill)
                case KillTerminal() as stop:
                    killing = self._terminals.get(stop.request_id)
                    if killing is not None:
                        killing.cancel(reason=f"KillTerminal: {stop.reason}")
                case HooksFinished() as done:
                    waiter = self._hooks.pop(done.request_id, None)
                    if waiter is not None:
                        waiter.set(thaw(done.output))
                case BatchSettled() as settled:
                    call_waiter = self._call_waiters.pop(settled.batch_id, None)
                    if call_waiter is not None:
                        call_waiter.set(
                            settled.calls[0] if settled.calls else CompletedCall(call_id="", name="", status="cancelled")
                        )
                case _:
                    pass

    async def _serve_terminal(self, run: RunInTerminal, kill: trio.CancelScope) -> None:
        """``TerminalAccess`` for the shell executor: the command in the client's
        terminal (``_terminal``), shown inside its call."""
        assert self._port is not None

        async def shown(terminal_id: str) -> None:
            assert self.view is not None
            for effect in self.view.terminal_attached(run.call_id, SHELL_TOOL, terminal_id):
                await self._apply(effect)

        async def streamed(output: TerminalOutput) -> None:
            await self._send(output, run.reply_to)

        try:
            done = await run_in_client_terminal(
                self.peer.request, self.session_id, run, shown=shown, streamed=streamed, kill=kill
            )
        finally:
            self._terminals.pop(run.request_id, None)
        await self._send(done, run.reply_to)

    async def _run_hooks(self, event: HookEvent, target: str, data: Mapping[str, Any]) -> dict[str, Any] | None:
        """A client-side hook point (SessionStart, SessionEnd)."""
        if self.addrs is None or self.addrs.hooks is None:
            return None
        rid = new_id()
        waiter: Waiter[Any] = Waiter()
        self._hooks[rid] = waiter
        await self._send(
            RunHooks(
                session_id=self.session_id, request_id=rid, reply_to=self.address, event=event, target=target, input=data
            ),
            self.addrs.hooks,
        )
        try:
            out = await waiter.wait()
        except RpcError:
            return None
        return out if isinstance(out, dict) else None

    async def _serve_file(self, request: ReadTextFile | WriteTextFile) -> None:
        """``FileAccess`` for the session's executors."""
        assert self._port is not None
        reply: FileAccessed
        try:
            if isinstance(request, ReadTextFile):
                content = await self._read(request.path)
                reply = FileAccessed(session_id=self.session_id, request_id=request.request_id, content=content)
            else:
                if self.client_serves(request.path, write=True):
                    await self.peer.request(
                        "fs/write_text_file",
                        {"sessionId": self.session_id, "path": request.path, "content": request.content},
                    )
                else:
                    await trio.to_thread.run_sync(write_local, request.path, request.content)
                reply = FileAccessed(session_id=self.session_id, request_id=request.request_id)
        except RpcError as exc:
            reply = FileAccessed(
                session_id=self.session_id,
                request_id=request.request_id,
                error=exc.message,
                not_found=exc.code == RESOURCE_NOT_FOUND or bool(NOT_FOUND_TEXT.search(exc.message)),
            )
        except FileNotFoundError as exc:
            reply = FileAccessed(
                session_id=self.session_id, request_id=request.request_id, error=str(exc), not_found=True
            )
        except OSError as exc:
            reply = FileAccessed(session_id=self.session_id, request_id=request.request_id, error=str(exc))
        try:
            await self._port.send(reply, to=request.reply_to)
        except DeliveryError:
            pass
