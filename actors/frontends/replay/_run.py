"""Replaying a recording: each process's part of the file in turn, on a fresh gated bus.

The session's own actors (session, turn, scheduler, executors, and the gateway) run for
real; everything else the recording shows sending (clients, hook runners...) is played
by a scripted sender that sends its recorded messages, with the replay's ids, when the
gate says it is their turn. The model answers from the recording (``ReplayBackend``);
tools too (``RecordedTool``), or they run live in a copy of the workspace
(``LiveTool``). Policy decisions and validation outcomes come from the recording.
The wall clock the turn uses for call ids is the recording's.

A watchdog on the virtual clock ends a replay that cannot go on (a recorded message the
replay does not produce): nothing else can make progress then, so the clock jumps to
the watchdog at once.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import trio
import trio.testing

from actors.frontends.replay._backend import ReplayBackend, request_plans
from actors.frontends.replay._gate import GatedBus
from actors.frontends.replay._hooks import PlayedHooks, hook_points, recorded_hook_config
from actors.frontends.replay._normalise import (
    Normalised,
    forgive_later_fields,
    normalised,
    translate,
)
from actors.frontends.replay._tools import (
    LiveClock,
    LiveTool,
    RecordedPolicy,
    RecordedTool,
    StubTool,
    ToolScript,
    policy_decisions,
)
from actors.frontends.replay._view import View
from actors.gateway import GATEWAY_ADDRESS, GatewayActor
from actors.host import runtime
from actors.host.opening import open_session
from actors.recording import RecordedLine, Recording, Scrubber, Segment
from actors.tools import Tool, ToolEnv, builtin_tools, executor_kind
from bus import Envelope
from bus.codec import from_plain, to_plain
from bus.messages import (
    GenerateRequest,
    Message,
    ModelRetrying,
    OpenSession,
    ScheduleBatch,
    StartTurn,
    StreamRetried,
    ToolCallRequested,
    ToolCallUpdated,
    ToolOutputStreamed,
    as_approval_mode,
)

STALL_S = 3600.0
"""Virtual seconds without progress after which a replay is declared stuck."""

CORE_ROLES = ("session:", "turn:", "scheduler:", "exec.", "loops:")
"""Addresses of the session's own actors, which the replay runs for real; anything
else that sends (clients, hook runners) is played from the recording."""

GUARD_FIELDS = ("loop_detection", "compression_threshold", "skip_next_speaker_check", "truncate_tool_output_threshold")


@attrs.define
class Divergence:
    """Where the replay and the recording part."""

    kind: str
    """``differs`` (a message's content) or ``stalled`` (the recorded message never came)."""
    index: int
    recorded_line: RecordedLine | None
    recorded: Normalised | None
    replayed: list[Normalised]

    def render(self, path: Path | str) -> str:
        rec = self.recorded_line
        where = f"{path}:{rec.line} (seq {rec.env.seq})" if rec is not None else str(path)
        if self.kind == "differs":
            head = f"replay diverges from the recording at {where}"
        elif rec is None:
            head = f"replay produced messages that {path} does not have (after its last message)"
        else:
            head = f"replay stalled at {where}: the recorded message was not produced"
        lines = [head]
        if self.recorded is not None:
            lines.append(f"  recorded: {self.recorded.render()}")
        if not self.replayed:
            lines.append("  replayed: (nothing)")
        for i, got in enumerate(self.replayed):
            label = "replayed" if self.kind == "differs" else "waiting "
            lines.append(f"  {label if i == 0 else ' ' * len(label)}: {got.render()}")
        return "\n".join(lines)


@attrs.define
class ReplayResult:
    messages: int = 0
    segments: int = 0
    envelopes: list[Envelope] = attrs.field(factory=list)
    divergence: Divergence | None = None
    compared: int = 0


@attrs.frozen(kw_only=True)
class ReplayOptions:
    tools_mode: str = "recorded"
    """``recorded``: tool results from the file; ``live``: run them in ``workspace``."""
    workspace: Path | None = None
    """Live tools: the (fresh copy of the) workspace they run in."""
    check: bool = False
    tools: Mapping[str, Tool] | None = None
    """The tool registry to describe tools with (default: the built-in tools)."""
    clock: trio.testing.MockClock | None = None
    """The run's clock, for live tools (see ``LiveClock``)."""
    stall_s: float = STALL_S
    view: View | None = None
    route_model: Callable[[str], str] | None = None
    classifier_choice: Callable[[str], str] | None = None
    classifier_request: Callable[[Sequence[Any]], tuple[Any, Mapping[str, Any]]] | None = None
    request_config: Callable[[str], Mapping[str, Any]] | None = None
    scrubber: Scrubber = attrs.field(factory=Scrubber.from_env)


_SYNTH_ID = re.compile(r"^(?P<name>.+)__(?P=name)_(?P<ms>\d+)_\d+$")


class UnsupportedRecording(Exception):
    """The recording shows something this replay cannot re-drive (names file and line)."""


def check_supported(recording: Recording) -> None:
    """Every recording this build reads can be replayed (a session's hooks too: the
    session asks for them where it did and gets the recorded answers)."""


async def replay_recording(recording: Recording, options: ReplayOptions) -> ReplayResult:
    """Replay every part of ``recording``; stops at the first divergence when checking."""
    check_supported(recording)
    result = ReplayResult()
    clock = LiveClock(options.clock)
    for number, segment in enumerate(recording.segments, start=1):
        if not segment.lines:
            continue
        result.segments += 1
        if options.view is not None:
            options.view.segment(number, segment.meta)
        await _replay_segment(recording, segment, options, clock, result)
        if result.divergence is not None:
            break
    return result


def _is_core(address: str) -> bool:
    return address == GATEWAY_ADDRESS or address.startswith(CORE_ROLES)


def _first(lines: Sequence[RecordedLine], cls: type[Any]) -> Any:
    return next((r.env.message for r in lines if isinstance(r.env.message, cls)), None)


def _registry(
    segment: Segment, recording: Recording, options: ReplayOptions, script: ToolScript, model: str
) -> tuple[dict[str, Any], tuple[str, ...]]:
    names: list[str] = [str(n) for n in segment.meta.get("tools", []) or recording.meta.get("tools", []) or []]
    if not names:
        req = _first(segment.lines, GenerateRequest)
        config = req.config if req is not None else {}
        for group in config.get("tools") or ():
            names += [str(d.get("name")) for d in group.get("functionDeclarations") or ()]
    for name in script.kinds:
        if name not in names:
            names.append(name)
    known: Mapping[str, Tool] = options.tools or {t.name: t for t in builtin_tools(model)}
    registry: dict[str, Any] = {}
    for name in names:
        registry[name] = known.get(name) or StubTool(name)
    listed = segment.meta.get("tools") or recording.meta.get("tools")
    registered = tuple(str(n) for n in listed) if listed else tuple(names)
    return registry, registered


def _recorded_configs(lines: Sequence[RecordedLine]) -> dict[str, Any]:
    configs: dict[str, Any] = {}
    for rec in lines:
        msg = rec.env.message
        if isinstance(msg, GenerateRequest) and msg.role == "main" and rec.env.sender.startswith("turn:"):
            configs.setdefault(msg.model, msg.config)
    return configs


async def _replay_segment(
    recording: Recording, segment: Segment, options: ReplayOptions, live_clock: LiveClock, result: ReplayResult
) -> None:
    from actors.host.models import classifier_choice, classifier_request, resolve_model

    sid = recording.session_id
    live = options.tools_mode == "live"
    expected = [r for r in segment.lines if not (live and isinstance(r.env.message, ToolOutputStreamed))]
    if not expected:
        return
    opened: OpenSession | None = _first(segment.lines, OpenSession)
    start: StartTurn | None = _first(segment.lines, StartTurn)
    batch: ScheduleBatch | None = _first(segment.lines, ScheduleBatch)
    meta = segment.meta
    model = opened.model if opened is not None else str(meta.get("model", ""))
    approval = opened.approval_mode if opened is not None else str(meta.get("approval_mode", "default"))
    workspace = Path(opened.workspace if opened is not None else str(meta.get("workspace", "/")))
    moved: tuple[str, str] | None = None
    if live:
        assert options.workspace is not None
        moved = (str(options.workspace), str(workspace))
        workspace = options.workspace

    script = ToolScript.from_lines(segment.lines)
    scope = trio.CancelScope()
    validating: list[str | None] = [None]

    def on_admit(index: int, recorded: RecordedLine, env: Envelope) -> None:
        want = normalised(recorded.env, gate.recorded_ids, with_seq=not live)
        got = normalised(env, gate.replayed_ids, scrubber=options.scrubber, with_seq=not live, moved=moved)
        got = forgive_later_fields(want, got)
        result.envelopes.append(env)
        result.messages += 1
        msg = env.message
        if isinstance(msg, ToolCallUpdated) and msg.status == "validating":
            validating[0] = msg.call_id
        if options.check:
            result.compared += 1
            if want != got and result.divergence is None:
                result.divergence = Divergence("differs", index, recorded, want, [got])
                scope.cancel(reason="the replay diverged from the recording")

    gate = GatedBus(
        expected,
        on_admit=on_admit,
        free=(lambda m, s: isinstance(m, ToolOutputStreamed)) if live else (lambda m, s: False),
    )
    gate.start_session_at(sid, expected[0].env.seq)

    readings = _wall_clock_readings(expected)
    boundaries = sorted(readings)
    served: set[int] = set()

    def wall_ms() -> int:
        """The wall clock the turn read for a request's call ids, as the recording shows.

        The turn reads it once per attempt of a main request: before sending the
        request, or (a retry) on receiving ``ModelRetrying``. So: the attempt the gate
        last admitted if its reading was not given yet, else the next attempt to come
        (given again if that request is never sent, e.g. the turn was cancelled)."""
        admitted = [b for b in boundaries if b < gate.cursor]
        if admitted and admitted[-1] not in served:
            served.add(admitted[-1])
            return readings[admitted[-1]]
        upcoming = next((b for b in boundaries if b >= gate.cursor), None)
        if upcoming is None:
            return 0
        served.add(upcoming)
        return readings[upcoming]

    base_tools, registered = _registry(segment, recording, options, script, model)
    tools: dict[str, Any] = {}
    for name, tool in base_tools.items():
        if live:
            tools[name] = LiveTool(tool, live_clock)
        else:
            tools[name] = RecordedTool(tool, script, lambda: validating[0])

    def executor_of(tool: Any) -> str:
        return script.kinds.get(tool.name) or executor_kind(tool)

    configs = _recorded_configs(segment.lines)
    fallback_config = options.request_config

    def request_config(m: str) -> Mapping[str, Any]:
        if m in configs:
            return dict(configs[m])
        if fallback_config is not None:
            return fallback_config(m)
        from actors.host.setup import request_config_for

        config: Mapping[str, Any] = request_config_for(base_tools)(m)
        return config

    uses_router = any(
        isinstance(r.env.message, GenerateRequest) and r.env.message.role == "classifier" for r in segment.lines
    )
    env = ToolEnv(
        workspace=workspace,
        project_temp_dir=workspace / ".agentbus-replay-tmp" if live else workspace,
        session_id=sid,
        model=model,
        settings={},
    )
    interactive = bool(meta.get("interactive", batch.interactive if batch is not None else False))
    # The session's guards, as the meta line recorded them (fields this build knows).
    known_fields = {f.name for f in attrs.fields(runtime.SessionConfig)}
    guards = {k: meta[k] for k in GUARD_FIELDS if k in meta and k in known_fields}
    cfg = runtime.SessionConfig(
        **guards,
        session_id=sid,
        model=model,
        approval_mode=as_approval_mode(approval),
        env=env,
        tools=tools,
        executor_of=executor_of,
        policy=RecordedPolicy(policy_decisions(segment.lines)),
        request_config=request_config,
        route_model=options.route_model or resolve_model,
        classifier_choice=options.classifier_choice or classifier_choice,
        classifier_request=options.classifier_request or (classifier_request if uses_router else None),
        history=(),
        recording=None,
        gateway_address=GATEWAY_ADDRESS,
        interactive=interactive,
        max_session_turns=start.max_session_turns if start is not None else int(meta.get("max_session_turns", -1)),
        wall_ms=wall_ms,
        registered_names=registered,
        # The recorded hook runner's answers are played like a client's.
        hooks=recorded_hook_config(hook_points(r.env.message for r in segment.lines)),
        hook_runner=PlayedHooks,
    )

    def recorded_request_id(replayed: str) -> str | None:
        return gate.recorded_id("request_id", replayed)

    backend = ReplayBackend(request_plans(segment.lines), recorded_request_id)
    scripted: dict[str, list[tuple[int, RecordedLine]]] = {}
    for i, rec in enumerate(expected):
        if not _is_core(rec.env.sender):
            scripted.setdefault(rec.env.sender, []).append((i, rec))

    async def play(address: str, items: list[tuple[int, RecordedLine]]) -> None:
        port = gate.connect(address, capacity=100_000) if not gate.is_connected(address) else None
        async with trio.open_nursery() as inner:
            if port is not None:
                inner.start_soon(_drain, port)
            for index, rec in items:
                await gate.wait_for_cursor(index)
                plain = translate(to_plain(rec.env.message), gate.recorded_ids, gate.replayed_ids)
                message = from_plain(plain)
                await gate.send(message, sender=address, to=rec.env.recipient)
            inner.cancel_scope.cancel(reason="the recorded sender has sent everything")

    async def watchdog() -> None:
        while True:
            seen = gate.progress
            await trio.sleep(options.stall_s)
            if gate.progress == seen and live_clock.active == 0:
                nxt = gate.next_expected
                want = normalised(nxt.env, gate.recorded_ids, with_seq=not live) if nxt is not None else None
                waiting = [
                    normalised(
                        Envelope(seq=0, session_id=sid, sender=p.sender, recipient=p.recipient, message=p.message),
                        gate.replayed_ids,
                        with_seq=False,
                    )
                    for p in gate.pending
                ]
                result.divergence = Divergence("stalled", gate.cursor, nxt, want, waiting)
                scope.cancel(reason="the replay stalled")
                return

    view_sub = gate.subscribe(sid, "replay-view", capacity=1_000_000) if options.view is not None else None

    async def show() -> None:
        assert view_sub is not None and options.view is not None
        async for env_ in view_sub:
            options.view.on(env_.message)

    with scope:
        async with trio.open_nursery() as nursery:
            await nursery.start(GatewayActor(gate, backend).run)
            if view_sub is not None:
                nursery.start_soon(show)
            done = trio.Event()

            async def run_session(*, task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED) -> None:
                try:
                    # The recorded client's messages, OpenSession first, are played below.
                    async with trio.open_nursery() as session:
                        task_status.started(await open_session(session, gate, cfg, None))
                finally:
                    done.set()

            await nursery.start(run_session)
            for address, items in scripted.items():
                nursery.start_soon(play, address, items)
            nursery.start_soon(watchdog)
            await gate.finished.wait()
            if segment.closed:
                await done.wait()
            nursery.cancel_scope.cancel(reason="the replayed segment is over")
    if view_sub is not None:
        # Show what was delivered before the end.
        while True:
            try:
                env_ = view_sub.receive.receive_nowait()
            except (trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError):
                break
            assert options.view is not None
            options.view.on(env_.message)
        gate.unsubscribe(view_sub)


def _wall_clock_readings(lines: Sequence[RecordedLine]) -> dict[int, int]:
    """For each attempt of a main model request (index of its ``GenerateRequest`` or
    ``ModelRetrying``), the wall clock value the turn used to name calls that came
    without an id (``<name>__<name>_<ms>_<n>``); 0 when no such call shows it. A retry
    the turn never took (no ``StreamRetried``: it was cancelled first) read no clock."""
    readings: dict[int, int] = {}
    main: set[str] = set()
    current: int | None = None
    retried: int | None = None
    for index, rec in enumerate(lines):
        msg = rec.env.message
        if isinstance(msg, GenerateRequest) and msg.role == "main" and rec.env.sender.startswith("turn:"):
            if retried is not None:
                del readings[retried]  # a retry the turn never took (it was cancelled first)
            main.add(msg.request_id)
            readings[index] = 0
            current, retried = index, None
        elif isinstance(msg, ModelRetrying) and msg.request_id in main:
            # The turn reads the clock when it takes this retry from its inbox, which it
            # shows with StreamRetried: calls it publishes before that (from chunks that
            # came before the retry) belong to the attempt before.
            readings[index] = 0
            retried = index
        elif isinstance(msg, StreamRetried) and retried is not None:
            current, retried = retried, None
        elif isinstance(msg, ToolCallRequested) and current is not None and readings[current] == 0:
            m = _SYNTH_ID.match(msg.call_id)
            if m is not None and m.group("name") == msg.name:
                readings[current] = int(m.group("ms"))
    if retried is not None:
        del readings[retried]
    return readings


async def _drain(port: Any) -> None:
    async for _env in port:
        pass


def recorded_messages(recording: Recording) -> list[Message]:
    return [env.message for env in recording.envelopes]
