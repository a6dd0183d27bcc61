"""Running an explored session's script (``run_session``): its real actors with
``actors.host.runtime.supervise_session``, as every entry point does (session, turn,
scheduler, two executors, recorder, loop detector), beside the real gateway actor, whose
backend here plays the model script; scripted tools and a scripted client; then the
recording is replayed (``replay_problem``).

Everything that happens is on the virtual clock or synchronous (the tools' child
processes are started and killed without a checkpoint), so trio's scheduling choices,
which hypothesis drives through ``st.random_module()``, are the only source of
interleavings: an example is reproducible from its printed seed. (Generated sessions
have no hooks: a hook is a real process whose timing the virtual clock cannot own; a
user's recording's hooks run as recorded stand-ins, ``_world.RecordedHooks``.)
"""

from __future__ import annotations

import functools
import itertools
import math
import os
import random
import signal
import subprocess
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn

import attrs
import trio
import trio.testing

from actors.frontends.explore._script import (
    JUNK_CHUNKS,
    JUNK_PARTS,
    Answer,
    Call,
    Fault,
    Follower,
    Junk,
    Session,
    Step,
    Text,
    Thought,
)
from actors.frontends.replay import ReplayOptions, replay_recording
from actors.gateway import BackendError, GatewayActor
from actors.host import runtime
from actors.recording import Recording, RecordingCursor, load_recording
from actors.tools import OutputSink, ToolEnv
from bus import Bus, DeliveryError, Envelope, Port
from bus.messages import (
    ApprovalAnswered,
    ApprovalRequested,
    CancelTurn,
    CloseSession,
    ConfigureSession,
    GenerateRequest,
    Message,
    SessionClosed,
    SubmitPrompt,
    ToolCallUpdated,
    ToolResult,
    TurnEnded,
    as_approval_outcome,
)

SID = "explored"
CLIENT = "client:explorer"
DEADLINE_S = 24 * 3600.0
"""Virtual seconds after which a session that has not closed is declared stuck (on the
autojump clock a deadlock reaches it at once)."""
BIG = 60_000
"""Characters of an oversized tool result."""
SHM = Path("/dev/shm")


@attrs.frozen
class Verdict:
    """A policy decision, as the scheduler's ``PolicyLike`` returns it."""

    decision: str
    deny_message: str | None = None


def executor_of(tool: Any) -> str:
    """Scripted tools: ``execute`` ones on the shell executor, the rest on files."""
    return "shell" if tool.kind == "execute" else "files"


# -- the model ------------------------------------------------------------------------------------
def step_json(steps_: Sequence[Step]) -> list[tuple[str, Any]]:
    """The script as the backend plays it; calls get unique ids ``c0``, ``c1``..."""
    out: list[tuple[str, Any]] = []
    n = 0
    for step in steps_:
        if isinstance(step, Fault):
            out.append(("fault", step))
            continue
        chunk_list: list[dict[str, Any]] = []
        for chunk in step.chunks:
            junk = next((p.kind for p in chunk if isinstance(p, Junk) and p.kind in JUNK_CHUNKS), None)
            if junk is not None:
                chunk_list.append(JUNK_CHUNKS[junk])
                continue
            json_parts: list[dict[str, Any]] = []
            for part in chunk:
                match part:
                    case Text(text=text):
                        json_parts.append({"text": text})
                    case Thought(subject=subject):
                        json_parts.append({"text": f"**{subject}** thinking about it", "thought": True})
                    case Call():
                        json_parts.append({"functionCall": {"id": f"c{n}", "name": part.tool, "args": part.args()}})
                        n += 1
                    case Junk(kind=kind):
                        json_parts.append(JUNK_PARTS[kind])
            chunk_list.append({"candidates": [{"content": {"role": "model", "parts": json_parts}}]})
        if step.finish is not None:
            last = chunk_list[-1]
            if isinstance(last.get("candidates"), list) and last["candidates"] and "content" in last["candidates"][0]:
                chunk_list[-1] = {"candidates": [{**last["candidates"][0], "finishReason": step.finish}]}
            else:
                chunk_list.append({"candidates": [{"content": {"role": "model", "parts": []}, "finishReason": step.finish}]})
        out.append(("reply", (chunk_list, step.delay_ms)))
    return out


@attrs.define
class Span:
    """When something ran: virtual times, and the sequence number the session's next
    message had at its start and at its end (``end_seq <= s``: it ended before message
    ``s`` was sent)."""

    key: str
    start_t: float
    start_seq: int
    end_t: float | None = None
    end_seq: int | None = None
    how: str = ""


@attrs.define
class Spans:
    bus: Bus | None = None
    items: list[Span] = attrs.field(factory=list)
    now: Callable[[], float] = trio.current_time
    """The clock spans are timed by (live tools: the virtual clock less the time it
    ran at real speed, so that a wave's calls start together)."""

    def begin(self, key: str) -> Span:
        assert self.bus is not None
        span = Span(key, self.now(), self.bus.next_seq(SID))
        self.items.append(span)
        return span

    def end(self, span: Span, how: str) -> None:
        assert self.bus is not None
        span.end_t, span.end_seq, span.how = self.now(), self.bus.next_seq(SID), how


async def fail(emit: Callable[[Any], Any], status: int | None, *, midstream: bool) -> NoReturn:
    """An API fault as the live backend reports it: HTTP ``status`` (None: a network
    error), at connect or (``midstream``) after a first chunk."""
    if midstream:
        await emit({"candidates": [{"content": {"role": "model", "parts": [{"text": "partial"}]}}]})
    raise BackendError(
        f"fault {status}" if status is not None else "fetch failed",
        status=status,
        http_status=status,
        network_code=None if status is not None else "ECONNRESET",
        phase="stream" if midstream else "connect",
    )


class ScriptedBackend:
    """Plays the model script to the real gateway actor (which does the retries). The
    fake-responses format has no faults, hence this backend."""

    def __init__(self, script: Sequence[Step], spans: Spans) -> None:
        self.steps = step_json(script)
        self.spans = spans

    async def generate(self, request: GenerateRequest, emit: Callable[[Any], Any]) -> str:
        span = self.spans.begin(request.request_id)
        how = "cancelled"
        try:
            if request.method != "generateContentStream" or not self.steps:
                raise BackendError(f"No more mock responses for {request.method}")
            kind, payload = self.steps.pop(0)
            if kind == "fault":
                await fail(emit, payload.status, midstream=payload.midstream)
            chunk_list, delay_ms = payload
            for i, chunk in enumerate(chunk_list):
                if i and delay_ms:
                    await trio.sleep(delay_ms / 1000)
                await emit(chunk)
            how = "finished"
            return request.model
        except BackendError:
            how = "failed"
            raise
        finally:
            self.spans.end(span, how)


# -- tools -------------------------------------------------------------------------------------
def spawn() -> subprocess.Popen[bytes]:
    """A real child process in its own group; started without a checkpoint."""
    return subprocess.Popen(
        ["sleep", "3600"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def kill(proc: subprocess.Popen[bytes]) -> None:
    """Kill and reap, without a checkpoint (so the virtual clock cannot move meanwhile)."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


@attrs.define
class Processes:
    """Every child process the session's tools started."""

    started: list[subprocess.Popen[bytes]] = attrs.field(factory=list)

    def alive(self) -> list[int]:
        return [p.pid for p in self.started if p.poll() is None]

    def kill_all(self) -> None:
        for proc in self.started:
            kill(proc)


class ExploreTool:
    """Does what its arguments say (``Call``), logging when it ran."""

    def __init__(self, name: str, kind: str, spans: Spans, procs: Processes) -> None:
        self.name = name
        self.display_name = name.title()
        self.kind = kind
        self.spans = spans
        self.procs = procs
        self.background: list[subprocess.Popen[bytes]] = []

    def declaration(self, model: str) -> dict[str, Any]:
        return {"name": self.name, "description": "explored", "parametersJsonSchema": {"type": "object"}}

    def validate(self, args: Mapping[str, Any], env: ToolEnv) -> str | None:
        return "the arguments are invalid" if args.get("outcome") == "invalid" else None

    def describe(self, args: Mapping[str, Any], env: ToolEnv) -> str:
        return self.name

    async def execute(
        self, args: Mapping[str, Any], env: ToolEnv, output: OutputSink | None = None, *, call_id: str = ""
    ) -> ToolResult:
        span = self.spans.begin(call_id)
        proc = None
        how = "cancelled"
        try:
            if args.get("proc"):
                proc = spawn()
                self.procs.started.append(proc)
            for i in range(int(args.get("out") or 0)):
                if output is not None:
                    await output(f"{self.name} line {i}\n")
            await trio.sleep(int(args.get("ms") or 0) / 1000)
            if args.get("bg"):
                child = spawn()
                self.procs.started.append(child)
                self.background.append(child)
            outcome = args.get("outcome", "ok")
            how = str(outcome)
            if outcome == "crash":
                raise RuntimeError("the tool crashed")
            if outcome == "error":
                return ToolResult(error_type="execution_failed", error_message=f"{self.name} failed")
            text = "x" * BIG if args.get("big") else f"{self.name} says ok"
            return ToolResult(llm_content=text, return_display="ok")
        finally:
            if proc is not None:
                kill(proc)
            self.spans.end(span, how)

    async def close_session(self, env: ToolEnv) -> None:
        for child in self.background:
            kill(child)
        self.background.clear()


def explore_tools(spans: Spans, procs: Processes) -> dict[str, Any]:
    return {
        "probe": ExploreTool("probe", "read", spans, procs),
        "shell_probe": ExploreTool("shell_probe", "execute", spans, procs),
        "write_file": ExploreTool("write_file", "edit", spans, procs),
        "deny_tool": ExploreTool("deny_tool", "read", spans, procs),
    }


class ExplorePolicy:
    """``deny_tool`` is denied; a call with ``ask`` asks (until "always"); else allow."""

    def __init__(self) -> None:
        self.always: set[str] = set()

    def check(
        self,
        tool_name: str,
        args: Mapping[str, Any],
        *,
        approval_mode: str | None = None,
        tool_annotations: Mapping[str, Any] | None = None,
    ) -> Verdict:
        if tool_name == "deny_tool":
            return Verdict("deny", "not here")
        if isinstance(args, Mapping) and args.get("ask") and tool_name not in self.always:
            return Verdict("ask_user")
        return Verdict("allow")

    def add_session_rule(self, tool_name: str, **_: Any) -> None:
        self.always.add(tool_name)


def request_config(model: str) -> dict[str, Any]:
    return {"systemInstruction": "explored"}


def session_config(workspace: Path, recording: Path, tools: Mapping[str, Any], interactive: bool) -> runtime.SessionConfig:
    return runtime.SessionConfig(
        session_id=SID,
        model="gemini-test",
        approval_mode="default",
        env=ToolEnv(workspace=workspace, project_temp_dir=workspace / "tmp", session_id=SID),
        tools=tools,
        executor_of=executor_of,
        policy=ExplorePolicy(),
        request_config=request_config,
        route_model=lambda m: m,
        classifier_choice=lambda c: c,
        classifier_request=None,
        recording=recording,
        interactive=interactive,
        loop_detection=True,
        # A clock that moves on with each reading, as a wall clock does between turns:
        # calls that come without an id get distinct ids.
        wall_ms=functools.partial(next, itertools.count(1_000, 7)),
    )


# -- running a session ---------------------------------------------------------------------
@attrs.define
class Run:
    """What happened in one explored session."""

    session: Session
    recording_path: Path
    timeline: list[tuple[float, Envelope]] = attrs.field(factory=list)
    tools: Spans = attrs.field(factory=Spans)
    model: Spans = attrs.field(factory=Spans)
    procs: Processes = attrs.field(factory=Processes)
    follower: list[tuple[int, list[Envelope]]] = attrs.field(factory=list)
    """The follower's view: (first seq asked for, envelopes received) per subscription."""
    returned_at: float | None = None
    """When ``supervise_session`` returned."""
    leftover_tasks: list[str] = attrs.field(factory=list)
    alive_after_close: list[int] = attrs.field(factory=list)
    stuck: bool = False
    recording: Recording | None = None
    replay_problem: str | None = None
    follower_lagged: int = 0
    crash: str | None = None
    """A known runtime bug that crashed an actor (``KNOWN_RUNTIME_BUGS``)."""

    @property
    def envelopes(self) -> list[Envelope]:
        return [env for _, env in self.timeline]

    def features(self) -> list[str]:
        """What this run exercised (hypothesis ``event``s: coverage of the exploration)."""
        if self.crash is not None:
            return [f"excused: {self.crash}"]
        out = [f"turn ended {env.message.stop_reason}" for env in self.envelopes if isinstance(env.message, TurnEnded)]
        kinds = {type(env.message).__name__ for env in self.envelopes}
        for name in ("TurnCancelAcknowledged", "ApprovalRequested", "ModelRetrying", "PromptQueued", "BatchCancelAcknowledged", "ToolOutputStreamed"):
            if name in kinds:
                out.append(f"saw {name}")
        notices = {str(getattr(env.message, "kind", "")) for env in self.envelopes if type(env.message).__name__ == "TurnNotice"}
        out += [f"notice {kind}" for kind in sorted(notices)]
        if any(span.how == "cancelled" for span in self.tools.items):
            out.append("a tool was cancelled while running")
        if self.procs.started:
            out.append("real child processes")
        if self.recording is not None and self.recording.voids:
            out.append("voids in the recording")
        if len(self.follower) > 1:
            out.append("the follower resubscribed")
        if self.follower_lagged:
            out.append("the follower lagged")
        waves: dict[tuple[str, int], int] = {}
        for env in self.envelopes:
            if isinstance(env.message, ToolCallUpdated) and env.message.status == "executing":
                key = (env.message.batch_id, env.message.wave)
                waves[key] = waves.get(key, 0) + 1
        if any(n > 1 for n in waves.values()):
            out.append("a parallel wave ran")
        from actors.frontends.explore._invariants import (
            known_runtime_bugs,  # (the invariants read runs: imported late)
        )

        out += [f"excused: {name}" for name in known_runtime_bugs(self)]
        return out

    def time_of(self, cls: type) -> float | None:
        return next((t for t, env in self.timeline if isinstance(env.message, cls)), None)


@attrs.define
class _ClientState:
    submitted: int = 0
    ended: int = 0
    seen: int = 0
    closed: trio.Event = attrs.field(factory=trio.Event)
    changed: trio.Event = attrs.field(factory=trio.Event)

    def poke(self) -> None:
        self.changed.set()
        self.changed = trio.Event()

    async def until(self, condition: Callable[[], bool]) -> None:
        while not condition():
            await self.changed.wait()


async def _send(port: Port, msg: Message, to: str) -> None:
    try:
        await port.send(msg, to=to)
    except DeliveryError:
        pass  # the session is gone: a client talking to a closed session


async def _client(
    bus: Bus, port: Port, addrs: runtime.SessionAddresses, cfg: runtime.SessionConfig, s: Session, state: _ClientState
) -> None:

    sub = bus.subscribe(SID, "client-view", policy="block", capacity=math.inf)
    answers = list(s.answers)

    def cancel() -> CancelTurn:
        return CancelTurn(session_id=SID, turn_id=None, reason="explored cancel", requested_by=CLIENT)

    async def answer(request: ApprovalRequested, how: Answer) -> None:
        await trio.sleep(how.after_ms / 1000)
        for who in (CLIENT, "client:second")[: 2 if how.twice else 1]:
            await _send(
                port,
                ApprovalAnswered(session_id=SID, correlation_id=request.correlation_id, outcome=as_approval_outcome(how.outcome), answered_by=who),
                addrs.scheduler,
            )

    async def prompts() -> None:
        for i, prompt in enumerate(s.prompts):
            if not prompt.queued:
                await state.until(lambda: state.ended >= state.submitted)
            state.submitted += 1
            await _send(
                port,
                SubmitPrompt(session_id=SID, prompt_id=f"p{i}", parts=({"text": prompt.text},), display_text=prompt.text),
                addrs.session,
            )
        await state.until(lambda: state.ended >= state.submitted)
        await _send(port, CloseSession(session_id=SID, reason="done"), addrs.session)

    async def later(ms: int, msg: Message, to: str, *, counts_as_prompt: bool = False) -> None:
        await trio.sleep(ms / 1000)
        if counts_as_prompt:
            state.submitted += 1
        await _send(port, msg, to)

    try:
        async with trio.open_nursery() as nursery:
            await _send(port, runtime.open_session_message(cfg), addrs.session)
            nursery.start_soon(prompts)
            for c in s.cancels:
                if c.at_ms is not None:
                    nursery.start_soon(later, c.at_ms, cancel(), addrs.session)
            close = CloseSession(session_id=SID, reason="closed early")
            if s.close is not None and s.close.at_ms is not None:
                nursery.start_soon(later, s.close.at_ms, close, addrs.session)
            for b in s.bogus:
                msg, to = _bogus(b.kind, addrs)
                nursery.start_soon(functools.partial(later, b.at_ms, msg, to, counts_as_prompt=b.kind == "empty_prompt"))
            counts: dict[str, int] = {}
            matched = [0] * len(s.cancels)
            async for env in sub:
                state.seen += 1
                msg = env.message
                latest = type(msg).__name__
                counts[latest] = counts.get(latest, 0) + 1
                for i, c in enumerate(s.cancels):
                    if c.where:
                        matched[i] += c.matches(msg)
                        due = c.matches(msg) and matched[i] == c.nth
                    else:
                        due = c.due(state.seen, counts, latest)
                    if due:
                        await _send(port, cancel(), addrs.session)
                if s.close is not None and s.close.due(state.seen, counts, latest):
                    await _send(port, close, addrs.session)
                if isinstance(msg, ApprovalRequested):
                    nursery.start_soon(answer, msg, answers.pop(0) if answers else Answer())
                elif isinstance(msg, TurnEnded):
                    state.ended += 1
                    state.poke()
                elif isinstance(msg, SessionClosed):
                    state.closed.set()
                    nursery.cancel_scope.cancel()
    finally:
        bus.unsubscribe(sub)


def _bogus(kind: str, addrs: runtime.SessionAddresses) -> tuple[Message, str]:
    if kind == "unknown_answer":
        return ApprovalAnswered(session_id=SID, correlation_id="no-such-approval", outcome="proceed_once", answered_by=CLIENT), addrs.scheduler
    if kind == "cancel_unknown_turn":
        return CancelTurn(session_id=SID, turn_id="no-such-turn", reason="bogus", requested_by=CLIENT), addrs.session
    if kind == "empty_prompt":
        return SubmitPrompt(session_id=SID, prompt_id="empty", parts=()), addrs.session
    assert kind == "configure"
    return ConfigureSession(session_id=SID, request_id="cfg", approval_mode="yolo", requested_by=CLIENT), addrs.session


async def _follow(bus: Bus, run: Run, spec: Follower, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
    """A remote client's follower: live from the bus (``lag``), the rest from the
    recording, as the daemon's connections do it."""
    path = run.recording_path
    expected = 1
    dropped = False
    started = False
    while True:
        cursor = RecordingCursor(path)
        segment: list[Envelope] = []
        run.follower.append((expected, segment))
        sub = bus.subscribe(SID, "follower", policy="lag", capacity=spec.capacity)
        live_point = bus.next_seq(SID)
        if not started:
            task_status.started()
            started = True

        def catch_up(
            before: int | None, cursor: RecordingCursor = cursor, segment: list[Envelope] = segment
        ) -> None:
            nonlocal expected
            envs, nxt = cursor.read(expected, before)
            segment.extend(envs)
            expected = max(expected, nxt)

        try:
            catch_up(None)
            for _ in range(10):  # a message numbered before we subscribed may be on its way to the file
                if expected >= live_point:
                    break
                await trio.lowlevel.checkpoint()
                catch_up(None)
            while not (segment and isinstance(segment[-1].message, SessionClosed)):
                if not dropped and spec.drop_after is not None and len(segment) >= spec.drop_after:
                    break
                if sub.lagged_from is not None:
                    run.follower_lagged += 1
                    sub.clear_lag()
                    catch_up(None)
                    continue
                env = await sub.receive.receive()
                if env.seq < expected:
                    continue
                if env.seq > expected:
                    catch_up(env.seq)
                segment.append(env)
                expected = env.seq + 1
                if spec.slow_ms:
                    await trio.sleep(spec.slow_ms / 1000)
        finally:
            bus.unsubscribe(sub)
        if segment and isinstance(segment[-1].message, SessionClosed):
            return
        dropped = True
        await trio.sleep(spec.away_ms / 1000)
        expected = max(1, expected - spec.rewind)


def _task_names() -> list[str]:
    names: list[str] = []
    root = trio.lowlevel.current_root_task()
    stack = [root] if root is not None else []
    while stack:
        task = stack.pop()
        names.append(task.name)
        for nursery in task.child_nurseries:
            stack.extend(nursery.child_tasks)
    return names


GATEWAY_TASK = "actors.gateway._actor.GatewayActor.run"
HARNESS_TASKS = "actors.frontends.explore."
"""The explorer's own tasks (the client, the timeline, the follower) are not the session's."""


@attrs.frozen
class World:
    """What a run's session is made of besides its client: its configuration (tools,
    policy...) and the model's backend. ``scripted_world`` plays a ``Session``'s own
    script; ``actors.frontends.explore.run_target`` builds one from a user's target."""

    config: runtime.SessionConfig
    backend: Any
    replay_tools: Mapping[str, Any]
    """The tool registry a replay of the run describes tools with."""
    real_models: bool = False
    """The replay resolves models and builds requests as a real session does (else as
    the scripted world: model names as they are, ``request_config``)."""


def scripted_world(s: Session, run: Run, workspace: Path) -> World:
    """The world of a generated session: scripted tools, policy and model."""
    tools = explore_tools(run.tools, run.procs)
    cfg = session_config(workspace, run.recording_path, tools, s.interactive)
    return World(cfg, ScriptedBackend(s.model, run.model), explore_tools(Spans(), Processes()))


async def _run(s: Session, run: Run, world: World) -> None:
    bus = Bus()
    run.tools.bus = run.model.bus = bus
    cfg = world.config
    async with trio.open_nursery() as nursery:
        await nursery.start(GatewayActor(bus, world.backend, rng=random.Random(0)).run)
        port = bus.connect(CLIENT)
        supervised = trio.Event()

        async def supervise(*, task_status: trio.TaskStatus[runtime.SessionAddresses] = trio.TASK_STATUS_IGNORED) -> None:
            await runtime.supervise_session(bus, cfg, task_status=task_status)
            run.returned_at = trio.current_time()
            supervised.set()

        addrs = await nursery.start(supervise)
        timeline = bus.subscribe(SID, "timeline", policy="block", capacity=math.inf)

        async def record_timeline() -> None:
            async for env in timeline:
                run.timeline.append((trio.current_time(), env))

        nursery.start_soon(record_timeline)
        follower_done = trio.Event()
        if s.follower is not None:

            async def follow(*, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
                await _follow(bus, run, s.follower, task_status=task_status)  # type: ignore[arg-type]
                follower_done.set()

            await nursery.start(follow)
        else:
            follower_done.set()
        state = _ClientState()
        with trio.move_on_after(DEADLINE_S) as deadline:
            await _client(bus, port, addrs, cfg, s, state)
            await supervised.wait()
            await follower_done.wait()
            await trio.testing.wait_all_tasks_blocked()
            run.leftover_tasks = [
                name
                for name in _task_names()
                if name.startswith("actors.") and not name.startswith(HARNESS_TASKS) and name != GATEWAY_TASK
            ]
            run.alive_after_close = run.procs.alive()
        run.stuck = deadline.cancelled_caught
        bus.unsubscribe(timeline)
        port.close()
        bus.disconnect("gateway")
        nursery.cancel_scope.cancel()


def scratch_dir() -> str | None:
    """Where runs keep their workspace and recording: memory when it can."""
    return str(SHM) if SHM.is_dir() and os.access(SHM, os.W_OK) else None


def run_session(s: Session) -> Run:
    """Run ``s`` on a fresh virtual clock; load its recording; replay it (invariant 5)."""
    with tempfile.TemporaryDirectory(dir=scratch_dir(), prefix="explored-") as tmp:
        workspace = Path(tmp)
        run = Run(session=s, recording_path=workspace / "rec.jsonl")
        execute(s, run, lambda clock: scripted_world(s, run, workspace))
    return run


def execute(s: Session, run: Run, world_of: Callable[[trio.testing.MockClock], World]) -> None:
    """Run ``s`` in the world ``world_of`` builds on a fresh virtual clock, then load the
    recording and replay it (invariant 5); a known crash is noted in ``run.crash``."""
    clock = trio.testing.MockClock(autojump_threshold=0)
    world = world_of(clock)
    try:
        trio.run(_run, s, run, world, clock=clock)
    except BaseExceptionGroup as group:
        for name, is_it in KNOWN_CRASHES.items():
            if group.split(is_it)[0] is not None:
                run.crash = name
                return
        raise
    finally:
        run.procs.kill_all()
    run.recording = load_recording(run.recording_path)
    if not run.stuck:
        run.replay_problem = replay_problem(run.recording, world.replay_tools, real_models=world.real_models)


KNOWN_CRASHES: dict[str, Callable[[BaseException], bool]] = {}
"""How each known crash (``KNOWN_RUNTIME_BUGS`` with no invariant) shows itself."""


def replay_problem(recording: Recording, tools: Mapping[str, Any], *, real_models: bool = False) -> str | None:
    """What differs when ``recording`` is replayed with ``--check`` (None: nothing)."""
    if real_models:
        options = ReplayOptions(check=True, tools=tools)
    else:
        options = ReplayOptions(
            check=True,
            tools=tools,
            route_model=lambda m: m,
            classifier_choice=lambda c: c,
            request_config=request_config,
        )
    try:
        result = trio.run(replay_recording, recording, options, clock=trio.testing.MockClock(autojump_threshold=0))
    except Exception as exc:  # a replay that cannot run at all breaks invariant 5 too
        return f"the replay failed: {type(exc).__name__}: {exc}"
    if result.divergence is not None:
        return result.divergence.render(recording.path)
    if result.messages != len(recording.envelopes):
        return f"the replay produced {result.messages} messages, the recording has {len(recording.envelopes)}"
    return None


