"""``agentbus acp --attach``: ACP sessions that run in the agentbus daemon.

The front end is then a client of the daemon (``actors.frontends.daemon.client``) instead of a
host of actors: ``DaemonLink`` holds the one connection of an ACP connection and sorts
the daemon's events by session; each ``AttachedSession`` maps its session's events
with the same ``SessionView`` as in-process sessions and turns ACP requests into the
daemon's requests (``Prompt``, ``Cancel``, ``Answer``, ``SetMode``, ``CallTool``).

What differs from in-process sessions: the session belongs to the daemon, so it
outlives this ACP connection (the end of input unsubscribes; other clients keep
following it) and other clients may answer its approvals first; its tools run in the
daemon and read and write the daemon's disk (the client's ``fs/*`` serves only the
permission diffs), but when the client offers terminals the session's shell commands run
in them (``CreateSession.terminals``: the daemon sends this connection ``RunInTerminal``
and ``KillTerminal``, ``_terminal`` runs them, ``TerminalOutput`` and ``TerminalExited``
go back); ``session/set_model`` is not offered (the daemon has no such
request); a mode change waits for the running turn to end (the daemon restarts the
session's actors for it). The daemon holds the session's MCP servers: their prompts are
listed from it (``ListMcpServers``), and a prompt's text goes to it as typed (``Prompt``:
it runs ``/<prompt> args`` and expands ``@`` references, files and MCP resources, on
its side; images and embedded context follow as ``attachments``). ``session/load`` replays the recording from the local data
directory, then follows the session from the next sequence number, gap-free.

Accepts: the daemon's events (``Envelope``, ``SubscriptionEnded``, ``DaemonStopping``,
``RunInTerminal``, ``KillTerminal``).
Emits: the daemon's requests; ACP frames through its peer.
Owns: the daemon connection (``DaemonLink``), one event channel per session.
Stops: ``DaemonLink`` when the ACP connection ends (or the daemon closes the socket:
every session ends, pending prompts fail); a session on ``close()``, on
``SubscriptionEnded`` or when the daemon stops.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import trio

from actors.frontends.acp._present import Presenter
from actors.frontends.acp._protocol import mode_id
from actors.frontends.acp._rpc import (
    AUTH_REQUIRED,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    RESOURCE_NOT_FOUND,
    RpcError,
)
from actors.frontends.acp._session import (
    AcpOptions,
    AcpSession,
    Peer,
    Started,
    command_entry,
    replay_of,
)
from actors.frontends.acp._terminal import run_in_client_terminal
from actors.frontends.acp._view import Closed, Configured, Effect, SessionView, Update, zero_quota
from actors.frontends.daemon.client import DaemonClient, DaemonError, TcpAddress, open_client
from actors.frontends.daemon.paths import DaemonPaths
from actors.host.user_calls import SHELL_TOOL
from actors.recording import RecordingError, load_recording, recording_path
from actors.tools import ToolEnv, builtin_tools
from bus import Envelope
from bus.messages import (
    BatchSettled,
    CompletedCall,
    DaemonStopping,
    KillTerminal,
    Prompt,
    PromptAccepted,
    RunInTerminal,
    SubscriptionEnded,
    TerminalOutput,
)

SETTLE_WAIT_S = 2.0
"""At most this long a user's call's answer waits for the call's last update (a stream
that lags shows it later; it is not waited for long)."""
_ENDED = object()
"""Put on a session's channel when the daemon connection ends."""


DAEMON_CODES = {
    "unknown_session": RESOURCE_NOT_FOUND,
    "auth_required": AUTH_REQUIRED,
    "frame_too_large": INVALID_PARAMS,
}
"""The daemon's error codes that have an ACP counterpart (others: internal error)."""


def daemon_error(exc: DaemonError) -> RpcError:
    code = DAEMON_CODES.get(exc.code, INTERNAL_ERROR)
    return RpcError(code, f"agentbus daemon: {exc.message}", {"daemonCode": exc.code})


class DaemonLink:
    """The ACP connection's one connection to the daemon."""

    def __init__(self, paths: DaemonPaths | TcpAddress | None = None) -> None:
        self.paths = paths
        self.client: DaemonClient | None = None
        self._channels: dict[str, trio.MemorySendChannel[Any]] = {}

    async def run(self, *, task_status: trio.TaskStatus[DaemonLink] = trio.TASK_STATUS_IGNORED) -> None:
        try:
            async with open_client(self.paths, client="acp") as client:
                self.client = client
                task_status.started(self)
                async for event in client.events:
                    self._route(event)
        except DaemonError as exc:
            raise daemon_error(exc) from None
        finally:
            for channel in self._channels.values():
                channel.send_nowait(_ENDED)
            self._channels.clear()

    def _route(self, event: Any) -> None:
        if isinstance(event, Envelope):
            channel = self._channels.get(event.session_id)
            # A command for a terminal (ours or another client's) as the session saw it:
            # ours also came to us on its own, below.
            if channel is not None and not isinstance(event.message, RunInTerminal | KillTerminal):
                channel.send_nowait(event.message)
        elif isinstance(event, RunInTerminal | KillTerminal):
            channel = self._channels.get(event.session_id)
            if channel is not None:
                channel.send_nowait(event)
        elif isinstance(event, SubscriptionEnded):
            channel = self._channels.get(event.session_id)
            if channel is not None:
                channel.send_nowait(_ENDED)
        elif isinstance(event, DaemonStopping):
            for channel in self._channels.values():
                channel.send_nowait(_ENDED)

    def events_of(self, session_id: str) -> trio.MemoryReceiveChannel[Any]:
        # Unbounded: the daemon bounds what it buffers for us, not the other way round.
        send, receive = trio.open_memory_channel[Any](math.inf)
        self._channels[session_id] = send
        return receive

    def forget(self, session_id: str) -> None:
        channel = self._channels.pop(session_id, None)
        if channel is not None:
            channel.close()


class AttachedSession(AcpSession):
    def __init__(
        self,
        peer: Peer,
        link: DaemonLink,
        options: AcpOptions,
        *,
        session_id: str | None,
        workspace: Path,
        mcp_servers: list[Any] | None = None,
    ) -> None:
        super().__init__(peer, options, session_id=session_id or "", workspace=workspace)
        self.link = link
        self.load = session_id is not None
        self.mcp_servers = list(mcp_servers or [])
        """The client's ``mcpServers`` (checked), which the daemon starts for the session."""
        self.mcp_servers_ignored = False
        """Loaded while it ran in the daemon: the client's servers were not started."""
        self._mcp_entries: list[dict[str, Any]] = []
        self._settling: dict[str, trio.Event] = {}
        """The user's own calls (by request id) whose settling the event stream has not
        shown yet: their prompt is answered after their last update."""

    expands_prompts = False  # the daemon runs MCP prompts and reads @ references

    def mcp_commands(self) -> list[dict[str, Any]]:
        return self._mcp_entries

    @property
    def client(self) -> DaemonClient:
        assert self.link.client is not None
        return self.link.client

    async def run(self, *, task_status: trio.TaskStatus[Started] = trio.TASK_STATUS_IGNORED) -> None:
        o = self.options
        fake = o.fake_responses or o.fake_responses_non_strict or ""
        terminals = self.peer.client_caps.terminal  # the daemon's commands run in the editor's terminals
        try:
            if self.load:
                ready = await self.client.load_session(
                    self.session_id, fake_responses=fake, mcp_servers=self.mcp_servers, terminals=terminals
                )
            else:
                mode = o.approval_mode or ("yolo" if o.yolo else "")
                ready = await self.client.create_session(
                    str(self.workspace),
                    model=o.model or "",
                    approval_mode=mode,
                    fake_responses=fake,
                    mcp_servers=self.mcp_servers,
                    terminals=terminals,
                )
        except DaemonError as exc:
            raise daemon_error(exc) from None
        # A session already running in the daemon keeps the servers it started with.
        self.mcp_servers_ignored = bool(self.load and self.mcp_servers and not ready.resumed)
        summary = ready.summary
        self.session_id = ready.session_id
        try:
            # The daemon holds the session's MCP servers: their prompts are its commands.
            listed = await self.client.list_mcp_servers(self.session_id)
        except DaemonError as exc:
            raise daemon_error(exc) from None
        self._mcp_entries = [
            command_entry(p.command, p.description, [(a, a in p.required) for a in p.arguments])
            for p in sorted((p for s in listed.servers for p in s.prompts), key=lambda p: p.command)
        ]
        self.address = self.client.address
        workspace = Path(summary.workspace or self.workspace)
        tools = {t.name: t for t in builtin_tools(summary.model)}
        self._env = ToolEnv(workspace=workspace, project_temp_dir=workspace / ".gemini" / "tmp", session_id=self.session_id)
        self._tools = tools
        presenter = Presenter(tools, self._env)
        replay: list[dict[str, Any]] = []
        from_seq: int | None = None
        view = SessionView(presenter, replay=True)
        if self.load:
            path = recording_path(o.data_directory(), self.session_id)
            try:
                recording = await trio.to_thread.run_sync(load_recording, path)
            except (OSError, RecordingError):
                recording = None  # not on this machine's data dir: no replay
            if recording is not None and recording.envelopes:
                replay = replay_of(recording, presenter, view)
                from_seq = recording.envelopes[-1].seq + 1
        events = self.link.events_of(self.session_id)
        try:
            await self.client.subscribe(self.session_id, from_seq=from_seq, full=True)
        except DaemonError as exc:
            self.link.forget(self.session_id)
            raise daemon_error(exc) from None
        # The daemon's messages follow the replay gap-free (from ``from_seq``; a question
        # asked before it is asked again): the replay's view maps them on.
        view.follow_on(approval_mode=summary.approval_mode, model=summary.model)
        view.model_fixed = True
        self.view = view
        try:
            async with trio.open_nursery() as helpers:
                self._nursery = helpers
                helpers.start_soon(self._pump, events)
                self.started = True
                task_status.started(
                    Started(approval_mode=summary.approval_mode, model=summary.model, replay=tuple(replay))
                )
                await self._closed.wait()
                helpers.cancel_scope.cancel(reason="the attached ACP session closed")
        finally:
            self._closed.set()
            self._fail_waiters()
            self.link.forget(self.session_id)

    async def close(self, reason: str) -> None:
        """Stop following the session; it keeps running in the daemon."""
        if not self._closing and not self._closed.is_set():
            self._closing = True
            with trio.move_on_after(2):
                try:
                    await self.client.unsubscribe(self.session_id)
                except DaemonError:
                    pass
        self._closed.set()

    async def _pump(self, events: trio.MemoryReceiveChannel[Any]) -> None:
        terminals: dict[str, trio.CancelScope] = {}
        async for msg in events:
            if msg is _ENDED:
                break
            if isinstance(msg, RunInTerminal):
                assert self._nursery is not None
                kill = terminals[msg.request_id] = trio.CancelScope()
                self._nursery.start_soon(self._serve_terminal, msg, kill, terminals)
            elif isinstance(msg, KillTerminal):
                killing = terminals.get(msg.request_id)
                if killing is not None:
                    killing.cancel(reason=f"KillTerminal: {msg.reason}")
            else:
                await self._feed(msg)
                if isinstance(msg, BatchSettled) and msg.batch_id in self._settling:
                    self._settling[msg.batch_id].set()  # every update of that call is out
        self._closed.set()

    async def _serve_terminal(self, run: RunInTerminal, kill: trio.CancelScope, running: dict[str, Any]) -> None:
        """A command of the daemon's session in the editor's terminal, as in-process
        sessions run theirs (``_terminal``); its output and end go back to the daemon."""

        async def shown(terminal_id: str) -> None:
            assert self.view is not None
            for effect in self.view.terminal_attached(run.call_id, SHELL_TOOL, terminal_id):
                await self._apply(effect)

        async def streamed(output: TerminalOutput) -> None:
            try:
                await self.client.send(output)
            except DaemonError:
                pass  # the daemon is gone: the session ends

        try:
            done = await run_in_client_terminal(
                self.peer.request, self.session_id, run, shown=shown, streamed=streamed, kill=kill
            )
        finally:
            running.pop(run.request_id, None)
        try:
            await self.client.send(done)
        except DaemonError:
            pass

    async def _apply(self, effect: Effect) -> None:
        # A mode change restarts the session's actors in the daemon: its SessionClosed
        # is not the end (SubscriptionEnded is).
        if isinstance(effect, Closed):
            return
        await super()._apply(effect)

    async def _call(self, request: Any) -> Any:
        try:
            return await request
        except DaemonError as exc:
            raise daemon_error(exc) from None

    async def _submit(self, prompt_id: str, parts: tuple[Any, ...], text: str) -> None:
        # ``text`` is expanded in the daemon (its MCP prompt command run, its @ references
        # read); ``parts`` are those beside it.
        request = Prompt(session_id=self.session_id, request_id=prompt_id, text=text, attachments=parts)
        try:
            accepted = await self.client.request(request)
        except DaemonError as exc:
            waiter = self._prompts.pop(prompt_id, None)  # refused: no turn will answer it
            if exc.code != "invalid" or waiter is None:
                raise daemon_error(exc) from None
            # A command or reference that cannot be carried out (or ``/<prompt> help``):
            # one message, as in an in-process session; the session goes on.
            await self._say(exc.message)
            waiter.set({"stopReason": "end_turn", "_meta": zero_quota()})
            return
        if isinstance(accepted, PromptAccepted) and accepted.prompt_id != prompt_id:
            waiter = self._prompts.pop(prompt_id, None)
            if waiter is not None:
                self._prompts[accepted.prompt_id] = waiter

    async def _send_cancel(self, turn_id: str) -> None:
        try:
            await self.client.cancel(self.session_id)
        except DaemonError:
            pass  # nothing runs any more

    async def _send_answer(self, correlation_id: str, outcome: str) -> None:
        try:
            await self.client.answer(self.session_id, correlation_id, outcome)
        except DaemonError:
            pass  # another client answered first, or the call is gone

    async def _call_tool(self, request_id: str, name: str, args: dict[str, Any], share: bool) -> tuple[CompletedCall, bool]:
        settled = self._settling[request_id] = trio.Event()
        try:
            result = await self._call(
                self.client.call_tool(self.session_id, name, args, request_id=request_id, add_to_context=share)
            )
            # The reply and the call's events come by different routes (the reply to the
            # request, the events through the session's stream, pumped by another task):
            # the prompt ends after the call's last update has gone to the editor.
            with trio.move_on_after(SETTLE_WAIT_S):
                await settled.wait()
        finally:
            del self._settling[request_id]
        return result.call, result.added_to_context

    async def _cancel_call(self, request_id: str) -> None:
        try:
            await self.client.cancel(self.session_id, tool_request_id=request_id)
        except DaemonError:
            pass  # it settled meanwhile

    async def _send_configure(self, request_id: str, approval_mode: str | None, model: str | None) -> None:
        assert self.view is not None
        if model is not None:
            raise RpcError(INTERNAL_ERROR, "changing the model is not available with --attach")
        if approval_mode is None:
            return
        changed = approval_mode != self.view.approval_mode
        await self._call(self.client.set_mode(self.session_id, approval_mode))
        if changed:
            self.view.approval_mode = approval_mode
            await super()._apply(
                Update({"sessionUpdate": "current_mode_update", "currentModeId": mode_id(approval_mode)})
            )
            await super()._apply(self.view.config_update())
        await super()._apply(Configured(request_id, approval_mode, self.view.model))

