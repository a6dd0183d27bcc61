"""The daemon's sessions: starting, resuming, sharing, ending and restarting them.

Each running session is one ``open_session`` (``actors.host.opening``) in the daemon's session
nursery, built exactly as a headless run builds it (``actors.host.setup``) but
interactive, and served by the daemon's one gateway. Sessions belong to the daemon,
not to a connection: they run until a client ends them or the daemon stops. The
registry (``_registry``) remembers them across restarts; a session the daemon does not
run yet is resumed from its recording (its history rebuilt by
``actors.host.sessions.resumable_history``) when a client first touches it.

A session starts as an interactive Gemini CLI session does: its SessionStart hooks run
(``startup``, or ``resume`` when it is resumed or restarted) and their
``additionalContext`` becomes a ``<hook_context>`` user turn at the end of the history
it opens with (``_setup.open_interactive_session``, shared with ACP).

Per session the daemon keeps a small monitor (a blocking observer that only updates
counters: is a turn running, which approvals wait, the first prompt) for listings and
for refusing a mode change mid-turn.

A mode change restarts the session's actors from the recording between turns: the
approval mode shapes the policy engine and the tool registry, which are built with
the session. Subscribers follow the restarted session without a gap (``successor``).
"""

from __future__ import annotations

import contextlib
import datetime
import logging
import os
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import attrs
import trio

from actors.frontends.daemon._backends import SessionBackends
from actors.frontends.daemon._registry import Registry, SessionEntry
from actors.gateway import BackendError, FakeResponsesError, RetryPolicy, auth_environment
from actors.host import runtime
from actors.host import sessions as sessions_on_disk
from actors.host import settings as _settings
from actors.host.auth import auth_type_from_env, check_auth
from actors.host.errors import FatalAuthenticationError, FatalError, error_text
from actors.host.opening import open_session
from actors.host.setup import (
    approval_mode_from,
    environment_context,
    model_from,
    run_hooks,
    session_config,
    session_setup,
)
from actors.recording import (
    RecordingError,
    read_meta,
    recording_path,
    secrets_from_env,
    session_in_use,
)
from bus import Bus, DeliveryError, Envelope, Port
from bus.json_values import thaw
from bus.messages import (
    ApprovalMode,
    ApprovalRequested,
    ApprovalSettled,
    BatchSettled,
    CloseSession,
    ConfigureSession,
    ProtocolErrorCode,
    ScheduleBatch,
    SessionClosed,
    SessionState,
    SessionSummary,
    SubmitPrompt,
    ToolCallUpdated,
    TurnEnded,
    TurnStarted,
    as_approval_mode,
    new_id,
)

log = logging.getLogger("agentbus.daemon")

SHUTDOWN_GRACE_S = 1.2
"""How long running turns get to cancel and acknowledge when the daemon stops."""
END_GRACE_S = 5.0


class RequestError(Exception):
    """A request the daemon cannot carry out; ``code`` as in ``ProtocolError``."""

    def __init__(self, code: ProtocolErrorCode, message: str) -> None:
        super().__init__(message)
        self.code: ProtocolErrorCode = code
        self.message = message


class HeldElsewhere(RequestError):
    """The session is another node's (``owner``, its lease's holder): a request this
    node was about to run there goes to that node instead (``_routing``)."""

    def __init__(self, message: str, owner: str) -> None:
        super().__init__("busy", message)
        self.owner = owner


def now_iso(at: float | None = None) -> str:
    moment = datetime.datetime.now(datetime.UTC) if at is None else datetime.datetime.fromtimestamp(at, datetime.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


@attrs.define(eq=False)
class LiveSession:
    """One session the daemon runs."""

    entry: SessionEntry
    cfg: runtime.SessionConfig
    recording: Path
    addrs: runtime.SessionAddresses | None = None
    port: Port | None = None
    """The daemon's own address in the session (``daemon:<id>``): opens, closes, hooks."""
    scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    stopped: trio.Event = attrs.field(factory=trio.Event)
    closing: str | None = None
    """Why it is being stopped: ``end``, ``restart`` or ``shutdown``."""
    successor: LiveSession | None = None
    replaced: trio.Event = attrs.field(factory=trio.Event)
    """Set when a restart finished (``successor`` is the new run, or None if it failed)."""
    control: trio.Lock = attrs.field(factory=trio.Lock)
    busy: bool = False
    pending: dict[str, str] = attrs.field(factory=dict)
    """Approvals waiting: correlation id -> call id."""
    asked: dict[str, Envelope] = attrs.field(factory=dict)
    """Approvals waiting: correlation id -> its ``ApprovalRequested``, shown again to a
    client that subscribes after it was asked."""
    answer_routes: dict[str, tuple[str, str]] = attrs.field(factory=dict)
    """Correlation id -> (address, session id) for approvals of subagents, which their
    own scheduler answers."""
    user_batches: set[str] = attrs.field(factory=set)
    """Batches of the user's own calls not settled yet: they run outside any turn, so a
    turn's end does not settle their approvals."""
    title: str = ""
    updated_at: float = 0.0
    """Wall-clock time (``time.time()``) of its last message; formatted only when listed."""
    next_seq: int = 0
    subscribers: int = 0
    frames: dict[int, tuple[Envelope, bytes]] = attrs.field(factory=dict, repr=False)
    """Recent events as client frames, by sequence number, while several connections
    follow the session (``_connection.encoded_frame``): each is encoded once."""
    failure: str | None = None
    auth_env: Mapping[str, str] | None = attrs.field(default=None, repr=False)
    """The credentials its model requests use (``CreateSession.auth_env``; None: the
    daemon's own environment). Kept in memory only."""
    mcp_servers: tuple[Any, ...] = attrs.field(default=(), repr=False)
    """Its client's own MCP servers (``CreateSession.mcp_servers`` as
    ``mcp_config.McpServerConfig``), started with it again when it restarts. Kept in
    memory only (their environment and headers may hold secrets)."""
    mirror: Any = None
    """With ``--cluster``: its ``_cluster.SessionMirror`` (poked by the monitor)."""
    monitor: Any = None
    """The monitor's bus subscription: it is handed only the ``_MONITORED`` types (all
    messages with a ``mirror``)."""

    def seen(self) -> int:
        """The next sequence number the monitor has not looked at. It is handed only what
        it monitors: once it waits with nothing handed, it has looked at everything up to
        the subscription's position (the rest the bus passed by)."""
        sub = self.monitor
        if sub is not None:
            stats = sub.receive.statistics()
            if not stats.current_buffer_used and stats.tasks_waiting_receive:
                return max(self.next_seq, int(sub.position))
        return self.next_seq

    def last_updated(self) -> float:
        """Wall-clock time of its last message: its recording's last write (the monitor
        is not woken by every message), else of the last one the monitor saw."""
        try:
            return max(self.updated_at, os.stat(self.recording).st_mtime)
        except OSError:
            return self.updated_at

    @property
    def session_id(self) -> str:
        return self.entry.session_id

    def summary(self) -> SessionSummary:
        return SessionSummary(
            session_id=self.session_id,
            state="running",
            workspace=self.entry.workspace,
            model=self.entry.model,
            approval_mode=self.entry.approval_mode,
            title=self.title,
            last_updated=now_iso(self.last_updated()),
            busy=self.busy,
            pending_approvals=tuple(self.pending),
            next_seq=self.seen(),
            clients=self.subscribers,
        )


class DaemonCore:
    """Owns the running sessions (see the module doc)."""

    def __init__(
        self,
        bus: Bus,
        *,
        data_dir: Path,
        backends: SessionBackends,
        nursery: trio.Nursery,
        environ: dict[str, str] | None = None,
        node: Any = None,
    ) -> None:
        self.bus = bus
        self.node = node
        if node is not None:
            node.core = self
        """With ``--cluster``: the ``_cluster.ClusterNode`` that holds and mirrors each
        session this daemon runs (None: a daemon alone)."""
        self.data_dir = data_dir
        self.backends = backends
        self.nursery = nursery
        self.environ = dict(os.environ if environ is None else environ)
        self.registry = Registry(data_dir / "daemon" / "sessions.json")
        if self.registry.problem:
            log.warning("session registry unreadable, starting empty: %s", self.registry.problem)
        self.sessions: dict[str, LiveSession] = {}
        self.terminal_clients: dict[str, list[str]] = {}
        """Session id -> the connections that run its shell commands in their client's
        terminals (``CreateSession.terminals``), the latest last: it runs the next one."""
        self._starting: dict[str, trio.Event] = {}
        self._saving_registry = False
        self.stop_requested = trio.Event()
        self.stop_reason = ""
        self.stopping = False
        self.started = now_iso()

    # -- requests ----------------------------------------------------------------------------
    async def create(
        self,
        *,
        workspace: str,
        model: str = "",
        approval_mode: str = "",
        session_id: str = "",
        fake_responses: str = "",
        fake_chunk_delay_ms: int = 0,
        auth_env: Mapping[str, str] | None = None,
        mcp_servers: Any = (),
    ) -> LiveSession:
        self._refuse_when_stopping()
        ws = _workspace(workspace)
        servers = _client_mcp_servers(mcp_servers, ws)
        sid = session_id or str(uuid.uuid4())
        if not sessions_on_disk.SESSION_ID_RE.match(sid):
            raise RequestError("invalid", f"invalid session id {sid!r}")
        if sid in self.sessions or self.registry.get(sid) or recording_path(self.data_dir, sid).exists():
            raise RequestError("invalid", f'session "{sid}" already exists; load it instead')
        settings = self._settings(ws)
        entry = SessionEntry(
            session_id=sid,
            workspace=str(ws),
            model=model_from(model or None, settings),
            approval_mode=approval_mode_from(approval_mode or None, False, settings),
            fake_responses=_absolute(fake_responses, ws),
            fake_chunk_delay_ms=fake_chunk_delay_ms,
            created=now_iso(),
        )
        with self._reserve(sid):
            live = await self._start(entry, history=(), source="startup", auth_env=auth_env, mcp_servers=servers)
        self._remember(entry)
        return live

    async def load(
        self,
        session_id: str,
        *,
        fake_responses: str = "",
        fake_chunk_delay_ms: int = 0,
        auth_env: Mapping[str, str] | None = None,
        mcp_servers: Any = (),
    ) -> tuple[LiveSession, bool]:
        """The running session, starting (resuming) it when needed; True if resumed now.
        ``auth_env``: the client's credentials (see ``_use_credentials``);
        ``mcp_servers``: the client's own MCP servers, for a session started now (a
        running one keeps those it has)."""
        while session_id in self._starting:
            await self._starting[session_id].wait()
        live = self.sessions.get(session_id)
        if live is not None:
            if fake_responses:  # from now on, this file answers the session's model requests
                changed = attrs.evolve(
                    live.entry,
                    fake_responses=_absolute(fake_responses, Path(live.entry.workspace)),
                    fake_chunk_delay_ms=fake_chunk_delay_ms,
                )
                self._use_fake(changed)
                live.entry = changed
                self._remember(changed)
            elif auth_env is not None and not live.entry.fake_responses:
                await self.backends.prepare_live()
                self._use_credentials(live, auth_env)
            return live, False
        self._refuse_when_stopping()
        # Reserved before anything is awaited: a second load (a client's, a take-over)
        # waits for this one and then finds the session running.
        with self._reserve(session_id):
            entry = self.registry.get(session_id)
            path = recording_path(self.data_dir, session_id)
            fresh = False
            if self.node is not None:
                known_here = entry is not None
                entry = await self._from_cluster(session_id, path, entry)
                # A session of another node that died before a line of it reached the
                # stream: no client saw any of it (a client of another node sees what
                # is in the stream), so it starts afresh here.
                fresh = not known_here and entry is not None and not await trio.Path(path).exists()
            # Recordings are read in a worker thread: a long one would stall every session.
            if entry is None:
                entry = await trio.to_thread.run_sync(self._entry_from_recording, session_id, path)
            if fake_responses:
                entry = attrs.evolve(
                    entry,
                    fake_responses=_absolute(fake_responses, Path(entry.workspace)),
                    fake_chunk_delay_ms=fake_chunk_delay_ms,
                )
            history = () if fresh else await trio.to_thread.run_sync(self._history, path)
            servers = _client_mcp_servers(mcp_servers, Path(entry.workspace))
            live = await self._start(entry, history=history, source="resume", auth_env=auth_env, mcp_servers=servers)
        self._remember(entry)
        return live, True

    async def _from_cluster(self, session_id: str, path: Path, entry: SessionEntry | None) -> SessionEntry | None:
        """A session this node does not run, as the cluster knows it: its recording
        taken from the stream when the stream has more of it (it ran on another node),
        its entry from the directory when this node has none."""
        from actors.cluster import ClusterError

        try:
            record = await self.node.known_session(session_id)
            await self.node.fetch_recording(session_id, path)
        except ClusterError as exc:
            log.warning("session %s: the cluster could not be read: %s", session_id, exc)
            return entry
        if entry is None and record is not None:
            try:
                entry = SessionEntry(**{k: v for k, v in record["entry"].items() if k in _ENTRY_FIELDS})
            except TypeError:
                return None
        return entry

    async def adopt(self, session_id: str, record: dict[str, Any]) -> None:
        """Take over a session whose node died (``ClusterNode.adopt_orphans``): resumed
        from the cluster's stream as ``LoadSession`` resumes it (calls that were
        running get cancelled responses; nothing is re-run)."""
        if session_id in self.sessions or session_id in self._starting or self.stopping:
            return
        try:
            await self.load(session_id)
        except RequestError as exc:
            log.info("session %s: not taken over: %s", session_id, exc.message)
        except Exception:  # one session's take-over failing is its own: the node goes on
            log.exception("session %s: taking it over failed", session_id)
        else:
            log.info("session %s: taken over; it runs on this node now", session_id)

    def taken_elsewhere(self, session_id: str, why: str) -> None:
        """Another node of the cluster took the session's lease (this node could not
        renew it in time): it runs there now, so it stops here — one run of a session at
        a time — and this node forgets it (its clients get ``SubscriptionEnded``; asked
        again, the cluster routes them to the new owner)."""
        live = self.sessions.get(session_id)
        if live is None or live.closing is not None:
            return
        log.warning("session %s: %s; it stops on this node", session_id, why)
        live.closing = "taken over by another node of the cluster"
        self._forget(session_id)
        self.nursery.start_soon(self._close, live, live.closing)

    def runs_here(self, session_id: str) -> bool:
        """Whether this daemon runs ``session_id`` or is starting it."""
        return session_id in self.sessions or session_id in self._starting

    def running(self, session_id: str) -> LiveSession:
        live = self.sessions.get(session_id)
        if live is None or live.addrs is None:
            raise RequestError("unknown_session", f"session {session_id!r} is not running")
        return live

    async def end(self, session_id: str, reason: str) -> None:
        """Close a session for everyone and forget it (its recording stays)."""
        live = self.running(session_id)
        async with live.control:
            if live.closing is not None:
                raise RequestError("busy", f"session {session_id!r} is already stopping")
            live.closing = "end"
            if live.mirror is not None:
                live.mirror.ended_for_good = True  # the cluster's directory forgets it too
            assert live.addrs is not None and live.port is not None
            with trio.move_on_after(END_GRACE_S):
                await run_hooks(live.port, live.addrs, session_id, "SessionEnd", "exit", {"reason": "exit"})
            await self._close(live, reason or "ended by a client")
            with trio.move_on_after(END_GRACE_S):
                await live.stopped.wait()
            live.scope.cancel(reason="the session did not stop in time")
            await live.stopped.wait()
        self._forget(session_id)
        self.backends.forget(session_id)

    async def set_mode(self, session_id: str, approval_mode: str) -> LiveSession:
        """Restart the session's actors with ``approval_mode`` (between turns)."""
        live = self.running(session_id)
        async with live.control:
            if live.closing is not None:
                raise RequestError("busy", f"session {session_id!r} is stopping")
            if live.entry.approval_mode == approval_mode:
                return live
            if live.busy or live.pending:
                if "plan" in (approval_mode, live.entry.approval_mode):
                    raise RequestError(
                        "busy", "a turn is running: change to or from plan mode when it has ended"
                    )
                return await self._set_mode_mid_turn(live, as_approval_mode(approval_mode))
            live.closing = "restart"
            entry = attrs.evolve(live.entry, approval_mode=approval_mode)
            try:
                # Reserved from before the old run stops, so that no concurrent load
                # starts a second run of the session in between.
                with self._reserve(session_id):
                    if live.mirror is not None:
                        # Before the old run stops: its mirror keeps the lease for the
                        # new run rather than let it go when its last lines are in.
                        live.mirror.expect_handover()
                    await self._close(live, f"approval mode changed to {approval_mode}")
                    await live.stopped.wait()
                    new = await self._start(
                        entry,
                        history=await trio.to_thread.run_sync(self._history, live.recording),
                        source="resume",
                        auth_env=live.auth_env,
                        mcp_servers=live.mcp_servers,
                    )
            except BaseException:
                live.replaced.set()
                if live.mirror is not None:
                    live.mirror.handover_failed()
                raise
            self._remember(entry)
            live.successor = new
            live.replaced.set()
            return new

    async def _set_mode_mid_turn(self, live: LiveSession, approval_mode: ApprovalMode) -> LiveSession:
        """As Gemini CLI: the running turn's later decisions use the new mode and its
        waiting approvals that the mode allows are granted (the scheduler), and the next
        turns start in it (the session). The same for the subagents the turn runs (their
        sessions are ``<id>.<agent>-<n>``). Between default, auto_edit and yolo the tool
        registry is the same, so the session's actors go on."""
        assert live.port is not None and live.addrs is not None
        sid = live.session_id
        try:
            await live.port.send(
                ConfigureSession(session_id=sid, request_id=new_id(), approval_mode=approval_mode, requested_by=live.port.address),
                to=live.addrs.session,
            )
            await runtime.change_mode_mid_turn(live.port, self.bus, sid, approval_mode, new_id=new_id)
        except DeliveryError:
            raise RequestError("busy", f"session {sid!r} is stopping") from None
        live.entry = attrs.evolve(live.entry, approval_mode=approval_mode)
        self._remember(live.entry)
        return live

    async def list_sessions(self, workspace: str = "") -> list[SessionSummary]:
        """``list``, with the recordings of ``workspace`` read in a worker thread."""
        recorded = None
        if workspace:
            recorded = await trio.to_thread.run_sync(self._recorded, workspace)
        out = self.list(workspace, recorded=recorded)
        if self.node is not None:
            wanted = await trio.to_thread.run_sync(lambda: str(Path(workspace).resolve())) if workspace else None
            out += await self._cluster_sessions(wanted, {s.session_id for s in out})
        return out

    async def _cluster_sessions(self, wanted: str | None, known: set[str]) -> list[SessionSummary]:
        """The sessions the cluster's directory lists that this node does not know of
        (they ran, or run, on other nodes)."""
        from actors.cluster import ClusterError
        from actors.cluster.lease import lease_key

        try:
            records = await self.node.known_sessions()
            owners = await self.node.owners()
        except ClusterError as exc:
            log.warning("the cluster's sessions could not be listed: %s", exc)
            return []
        out = []
        for sid, record in sorted(records.items(), key=lambda item: str(item[1]["entry"].get("created", ""))):
            entry = record["entry"]
            if sid in known or (wanted is not None and entry.get("workspace") != wanted):
                continue
            state: SessionState = "dormant"
            if record.get("state") == "running":
                state = "running" if lease_key(sid) in owners else "interrupted"
            out.append(
                SessionSummary(
                    session_id=sid,
                    state=state,
                    workspace=str(entry.get("workspace", "")),
                    model=str(entry.get("model", "")),
                    approval_mode=str(entry.get("approval_mode", "")),
                    title=str(record.get("title", "")),
                    last_updated=str(entry.get("created", "")),
                )
            )
        return out

    def _recorded(self, workspace: str) -> list[sessions_on_disk.SessionInfo]:
        try:
            return sessions_on_disk.list_sessions(self.data_dir, Path(workspace).resolve())
        except OSError:
            return []

    def list(
        self, workspace: str = "", *, recorded: list[sessions_on_disk.SessionInfo] | None = None
    ) -> list[SessionSummary]:
        out = [live.summary() for live in self.sessions.values()]
        known = {s.session_id for s in out}
        for entry in self.registry.entries():
            if entry.session_id not in known:
                known.add(entry.session_id)
                out.append(
                    SessionSummary(
                        session_id=entry.session_id,
                        state="dormant",
                        workspace=entry.workspace,
                        model=entry.model,
                        approval_mode=entry.approval_mode,
                        last_updated=entry.created,
                    )
                )
        if workspace:
            if recorded is None:
                recorded = self._recorded(workspace)
            titles = {info.id: info for info in recorded}
            out = [
                attrs.evolve(s, title=s.title or titles[s.session_id].first_user_message)
                if s.session_id in titles
                else s
                for s in out
                if s.workspace == str(Path(workspace).resolve())
            ]
            for info in recorded:
                if info.id not in known:
                    out.append(
                        SessionSummary(
                            session_id=info.id,
                            state="recorded",
                            workspace=info.workspace,
                            title=info.first_user_message,
                            last_updated=info.last_updated,
                        )
                    )
            # One numbering for `--list-sessions`, `--resume N|latest`, `chat --resume` and
            # `/sessions`: Gemini CLI's order (by start, the newest last), whatever runs;
            # a session with no prompt yet (not listed on disk) comes after them.
            order = {info.id: i for i, info in enumerate(recorded)}
            out.sort(key=lambda s: order.get(s.session_id, len(order)))
        return out

    def request_stop(self, reason: str) -> None:
        if not self.stop_requested.is_set():
            self.stop_reason = reason
            self.stop_requested.set()

    async def shutdown(self, grace: float = SHUTDOWN_GRACE_S) -> None:
        """Cancel running turns (acknowledged), flush recordings, stop every session.
        The registry keeps them: the next daemon resumes them."""
        self.stopping = True
        lives = list(self.sessions.values())
        with trio.move_on_after(grace):
            for live in lives:
                if live.closing is None:
                    live.closing = "shutdown"
                    await self._close(live, "the daemon is shutting down")
            for live in lives:
                await live.stopped.wait()
        for live in lives:
            live.scope.cancel(reason="daemon shutdown: the session did not stop in time")
        for live in lives:
            await live.stopped.wait()
        self._save_registry_now()

    # -- the registry on disk ------------------------------------------------------------------
    def _remember(self, entry: SessionEntry) -> None:
        if self.registry.put(entry):
            self._registry_changed()

    def _forget(self, session_id: str) -> None:
        if self.registry.remove(session_id):
            self._registry_changed()

    def _registry_changed(self) -> None:
        """Write the registry soon, in a worker thread: one write for a burst of changes."""
        if not self._saving_registry:
            self._saving_registry = True
            self.nursery.start_soon(self._save_registry)

    async def _save_registry(self) -> None:
        try:
            while self.registry.dirty:
                await trio.to_thread.run_sync(self.registry.write, self.registry.snapshot())
        except OSError as exc:
            log.warning("cannot write the session registry %s: %s", self.registry.path, exc)
        finally:
            self._saving_registry = False

    def _save_registry_now(self) -> None:
        try:
            self.registry.save()
        except OSError as exc:
            log.warning("cannot write the session registry %s: %s", self.registry.path, exc)

    # -- running a session -----------------------------------------------------------------------
    def _refuse_when_stopping(self) -> None:
        if self.stopping or self.stop_requested.is_set():
            raise RequestError("failed", "the daemon is shutting down")

    def _settings(self, workspace: Path) -> dict[str, Any]:
        try:
            return _settings.load_settings(workspace)
        except FatalError as exc:
            raise RequestError("failed", exc.message) from None

    def _entry_from_recording(self, session_id: str, path: Path) -> SessionEntry:
        """(Blocking: a worker thread's.) The session's settings from its meta line."""
        if not path.exists():
            raise RequestError("unknown_session", f"no session {session_id!r} (no recording at {path})")
        try:
            meta = read_meta(path)
        except RecordingError as exc:
            raise RequestError("failed", f"cannot resume: {exc}") from None
        workspace = meta.get("workspace")
        if not isinstance(workspace, str) or not Path(workspace).is_dir():
            raise RequestError("failed", f"the workspace of session {session_id!r} ({workspace!r}) is gone")
        model, mode = meta.get("model"), meta.get("approval_mode")
        return SessionEntry(
            session_id=session_id,
            workspace=workspace,
            model=model if isinstance(model, str) and model else "auto",
            approval_mode=mode if isinstance(mode, str) and mode else "default",
            created=now_iso(),
        )

    def _history(self, path: Path) -> tuple[Any, ...]:
        """(Blocking: a worker thread's.) The history the session continues. A session
        the daemon knows always has a recording with its meta line (its recorder
        writes it first): none, or an empty one, means it was deleted, and an empty
        history would pass for the session's."""
        if in_use := session_in_use(path):
            raise RequestError("in_use", f"cannot resume: {in_use}")
        try:
            read_meta(path)
        except RecordingError as exc:
            log.warning("cannot resume session %s: %s", path.stem, exc)
            raise RequestError("failed", f"cannot resume session {path.stem!r}: {exc} (deleted?); its history is lost") from None
        try:
            history = sessions_on_disk.history_of_file(
                path, on_torn=lambda t: log.warning("%s:%s: %s; ignored", path, t.line, t.reason)
            )
        except RecordingError as exc:
            raise RequestError("failed", f"cannot resume: {exc}") from None
        return tuple(history)

    def _config(
        self,
        entry: SessionEntry,
        history: tuple[Any, ...],
        auth_env: Mapping[str, str] | None,
        mcp_servers: tuple[Any, ...] = (),
    ) -> runtime.SessionConfig:
        """The session's configuration; its model backend chosen (fake responses, or the
        live backend of ``auth_env``, else of the daemon's environment); its MCP servers
        those of its settings and its client's (``mcp_servers``)."""
        workspace = Path(entry.workspace)
        settings = self._settings(workspace)
        environ = self.environ if auth_env is None else auth_env
        try:
            check_auth(settings, environ, fake_model=bool(entry.fake_responses))
            setup = session_setup(
                workspace=workspace,
                settings=settings,
                session_id=entry.session_id,
                model=entry.model,
                approval_mode=entry.approval_mode,
                interactive=True,
            )
        except FatalAuthenticationError as exc:  # the client says so as headless does (exit 41)
            raise RequestError("auth_required", exc.message) from None
        except FatalError as exc:
            raise RequestError("failed", exc.message) from None
        # As headless: retries by the session's settings, credentials by its client's.
        self.backends.use_retry(entry.session_id, RetryPolicy.from_settings(_settings.get(settings, "general.maxAttempts")))
        if entry.fake_responses:
            self._use_fake(entry)
        else:
            try:
                self.backends.use_live(entry.session_id, auth_environment(environ), _auth_type(settings, environ))
            except BackendError as exc:
                raise RequestError("failed", exc.message) from None
        cfg = session_config(
            setup,
            history=(environment_context(setup), *history),
            recording=recording_path(self.data_dir, entry.session_id),
            settings=settings,
            secrets=secrets_from_env(environ),
            mcp_extra=mcp_servers,
            settings_from_files=True,
        )
        if cfg.scrubber is None:  # a later client's keys may join it (``_use_credentials``)
            cfg = attrs.evolve(cfg, scrubber=runtime.session_scrubber(()))
        sid = entry.session_id
        return attrs.evolve(cfg, terminal_address=lambda: self.terminal_client(sid))

    # -- the editors' terminals --------------------------------------------------------------
    def terminal_client(self, session_id: str) -> str | None:
        """The connection that runs the session's next shell command (None: the daemon)."""
        serving = self.terminal_clients.get(session_id)
        return serving[-1] if serving else None

    def serve_terminals(self, session_id: str, connection: str) -> None:
        serving = self.terminal_clients.setdefault(session_id, [])
        if connection in serving:
            serving.remove(connection)
        serving.append(connection)

    def stop_serving_terminals(self, connection: str, session_id: str | None = None) -> None:
        """``connection`` runs no more commands (of ``session_id``; None: of any session)."""
        for sid, serving in list(self.terminal_clients.items()):
            if connection in serving and session_id in (None, sid):
                serving.remove(connection)
            if not serving:
                del self.terminal_clients[sid]

    def _use_credentials(self, live: LiveSession, auth_env: Mapping[str, str]) -> None:
        """A client loads a running session with its credentials: when they make a
        complete auth configuration, the session's model requests use them from now on
        (the latest client's credentials are the user's current ones); otherwise the
        session keeps those it has, and the client may still follow it."""
        if auth_environment(auth_env) == auth_environment(live.auth_env if live.auth_env is not None else self.environ):
            return
        settings = self._settings(Path(live.entry.workspace))
        try:
            check_auth(settings, auth_env, fake_model=False)
            self.backends.use_live(live.session_id, auth_environment(auth_env), _auth_type(settings, auth_env))
        except (FatalError, BackendError) as exc:
            why = exc.message
            log.info("session %s keeps its credentials: the client's cannot be used (%s)", live.session_id, why)
            return
        live.auth_env = auth_env
        if live.cfg.scrubber is not None:  # its keys reach requests now: and so, maybe, the recording
            live.cfg.scrubber.add(secrets_from_env(auth_env))
        log.info("session %s: model requests use the credentials of the client that loaded it last", live.session_id)

    @contextlib.contextmanager
    def _reserve(self, session_id: str) -> Iterator[None]:
        """Make ``load`` of ``session_id`` wait while it is being (re)started."""
        self._starting[session_id] = started = trio.Event()
        try:
            yield
        finally:
            del self._starting[session_id]
            started.set()

    async def _start(
        self,
        entry: SessionEntry,
        *,
        history: tuple[Any, ...],
        source: str,
        auth_env: Mapping[str, str] | None,
        mcp_servers: tuple[Any, ...] = (),
    ) -> LiveSession:
        sid = entry.session_id
        if not entry.fake_responses:
            await self.backends.prepare_live()
        cfg = self._config(entry, history, auth_env, mcp_servers)
        live = LiveSession(
            entry=entry, cfg=cfg, recording=recording_path(self.data_dir, sid), auth_env=auth_env, mcp_servers=mcp_servers
        )
        if self.node is not None:
            try:
                live.mirror = await self.node.attach(sid, live.recording, entry)
            except BaseException:
                self.backends.forget(sid)
                raise
        self.sessions[sid] = live
        try:
            await self.nursery.start(self._run, live, source)
        except Exception as exc:
            self.backends.forget(sid)
            raise RequestError("failed", f"the session could not start: {error_text(exc)}") from None
        return live

    def _use_fake(self, entry: SessionEntry) -> None:
        if entry.fake_responses:
            try:
                self.backends.use_fake(entry.session_id, entry.fake_responses, entry.fake_chunk_delay_ms)
            except FakeResponsesError as exc:
                raise RequestError("failed", str(exc)) from None

    async def _run(self, live: LiveSession, source: str, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        sid = live.session_id
        port = live.port = self.bus.connect(f"daemon:{sid}")
        reported = False
        try:
            with live.scope:
                async with trio.open_nursery() as nursery:
                    def observe(_addrs: runtime.SessionAddresses) -> None:
                        # After the supervisor: the recorder is the session's first observer.
                        # A mirror is poked at every message (new lines to copy): then the
                        # monitor is handed all of them.
                        wants = None if live.mirror is not None else _MONITORED_NAMES.__contains__
                        monitor = live.monitor = self.bus.subscribe(
                            sid, f"daemon-monitor:{sid}", policy="block", capacity=256, wants=wants
                        )
                        nursery.start_soon(self._monitor, live, monitor)

                    # SessionStart hooks first: their context opens the history.
                    addrs = await open_session(
                        nursery, self.bus, live.cfg, port, interactive_source=source, observe=observe
                    )
                    live.addrs = addrs
                    live.next_seq = self.bus.next_seq(sid)
                    live.updated_at = time.time()
                    task_status.started()
                    reported = True
        except Exception as exc:
            if not reported:
                raise
            live.failure = error_text(exc)
            log.error("session %s failed: %s", sid, live.failure)
        finally:
            port.close()
            self.bus.forget_session(sid)
            if self.sessions.get(sid) is live:
                del self.sessions[sid]
                # However it stopped (ended, failed, its recording deleted): its backend
                # route goes, so a credential's backend no session uses is closed.
                self.backends.forget(sid)
            live.addrs = None
            if live.mirror is not None:
                live.mirror.session_ended()
            live.stopped.set()

    async def _monitor(self, live: LiveSession, sub: Any) -> None:
        try:
            async for env in sub:
                untitled = not live.title
                if not _observe(live, env):
                    break
                # The messages already waiting are taken at once, without a checkpoint
                # (and a wake-up) each.
                while True:
                    try:
                        env = sub.receive.receive_nowait()
                    except (trio.WouldBlock, trio.EndOfChannel):
                        break
                    if not _observe(live, env):
                        return
                if live.mirror is not None:
                    live.mirror.poke()
                    if untitled and live.title:
                        live.mirror.titled(live.title)
        finally:
            self.bus.unsubscribe(sub)

    async def _close(self, live: LiveSession, reason: str) -> None:
        if live.port is None or live.addrs is None:
            return
        try:
            await live.port.send(CloseSession(session_id=live.session_id, reason=reason), to=live.addrs.session)
        except DeliveryError:
            pass  # already stopped


_MONITORED = frozenset(
    (TurnStarted, TurnEnded, ScheduleBatch, BatchSettled, ToolCallUpdated, ApprovalRequested, ApprovalSettled,
     SubmitPrompt, SessionClosed)
)
"""The message types the monitor is handed; the bus passes the others (model chunks,
text) by (``LiveSession.seen`` and ``last_updated`` account for them)."""
_MONITORED_NAMES = frozenset(t.__name__ for t in _MONITORED)


_ENTRY_FIELDS = frozenset(attrs.fields_dict(SessionEntry))


def _observe(live: LiveSession, env: Envelope) -> bool:
    """The monitor's view of one message of ``live``; False after its last."""
    msg = env.message
    live.next_seq = env.seq + 1
    live.updated_at = time.time()
    if type(msg) not in _MONITORED:
        return True
    match msg:
        case TurnStarted():
            live.busy = True
        case TurnEnded():
            live.busy = False
            # No question of the model's outlives its turn: a cancel settles
            # the calls that waited without an ApprovalSettled (subagents'
            # too). The user's own calls run outside turns.
            for cid, asked in list(live.asked.items()):
                question = asked.message
                if not (isinstance(question, ApprovalRequested) and question.batch_id in live.user_batches):
                    _settled(live, cid)
        case ScheduleBatch() if any(call.client_initiated for call in msg.calls):
            live.user_batches.add(msg.batch_id)
        case BatchSettled():
            live.user_batches.discard(msg.batch_id)
        case ToolCallUpdated(status="success" | "error" | "cancelled"):
            for cid in [c for c, call_id in live.pending.items() if call_id == msg.call_id]:
                _settled(live, cid)
        case ApprovalRequested():
            live.pending[msg.correlation_id] = msg.call_id
            live.asked[msg.correlation_id] = env
            if msg.answer_to:
                live.answer_routes[msg.correlation_id] = (
                    msg.answer_to,
                    msg.answer_session_id or msg.session_id,
                )
        case ApprovalSettled():
            _settled(live, msg.correlation_id)
        case SubmitPrompt():
            if not live.title:
                live.title = sessions_on_disk.clean_message(msg.display_text)[:100]
        case SessionClosed():
            return False
        case _:
            pass
    return True


def auth_env_from(value: Any) -> dict[str, str] | None:
    """A request's ``auth_env`` checked: None, or names to string values (only the
    auth variables are kept); raises ``RequestError`` otherwise."""
    if value is None:
        return None
    if not isinstance(value, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise RequestError("invalid", "auth_env must be an object of environment variable names to strings")
    return auth_environment(value)


def _auth_type(settings: Mapping[str, Any], environ: Mapping[str, str]) -> str | None:
    """As headless: the settings' selected auth type, else the environment's."""
    selected = _settings.get(settings, "security.auth.selectedType")
    return selected if isinstance(selected, str) and selected else auth_type_from_env(environ)


def _client_mcp_servers(entries: Any, workspace: Path) -> tuple[Any, ...]:
    """A client's own MCP servers (ACP ``mcpServers`` entries, as JSON) as
    ``McpServerConfig``; a stdio one runs in the workspace. A malformed entry is
    ``invalid``, naming it."""
    if not entries:
        return ()
    from actors.host.mcp_config import McpConfigError, acp_mcp_servers

    try:
        return tuple(acp_mcp_servers(thaw(entries), str(workspace)))
    except McpConfigError as exc:
        raise RequestError("invalid", f"mcp_servers: {exc}") from None


def _workspace(workspace: str) -> Path:
    ws = Path(workspace)
    if not ws.is_absolute() or not ws.is_dir():
        raise RequestError("invalid", f"workspace {workspace!r} is not an absolute path to a directory")
    return ws.resolve()


def _absolute(path: str, base: Path) -> str:
    if not path:
        return ""
    p = Path(path)
    return str(p if p.is_absolute() else (base / p).resolve())


SummaryFn = Callable[[], list[SessionSummary]]


def _settled(live: LiveSession, correlation_id: str) -> None:
    """An approval is no longer waiting: nobody is asked it again."""
    live.pending.pop(correlation_id, None)
    live.asked.pop(correlation_id, None)
    live.answer_routes.pop(correlation_id, None)
