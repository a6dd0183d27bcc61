"""The timeline's slices (``_trace``): each message of a recording's process, in file
order, opens, closes or marks the slices its mapping table (``_trace``'s docstring) gives
it; ``_Builder`` holds what is open per actor, per call and per batch."""

from __future__ import annotations

import datetime
import json
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from actors.recording import Recording, Segment
from bus import Envelope
from bus.json_values import thaw
from bus.messages import (
    ActorFailed,
    ApprovalAnswered,
    ApprovalModeChanged,
    ApprovalRequested,
    ApprovalSettled,
    BatchCancelAcknowledged,
    BatchSettled,
    CancelBatch,
    CancelGeneration,
    CancelHooks,
    CancelTool,
    CancelTurn,
    CheckLoop,
    CloseSession,
    GenerateRequest,
    GenerationCancelled,
    HistoryCompressed,
    HookRan,
    HooksFinished,
    LoopVerdict,
    ModelChunk,
    ModelFailed,
    ModelFinished,
    ModelRetrying,
    OpenSession,
    PromptQueued,
    RunHooks,
    RunTool,
    ScheduleBatch,
    SessionClosed,
    SessionOpened,
    StartTurn,
    StreamRetried,
    SubmitPrompt,
    ToolCallRequested,
    ToolCallUpdated,
    ToolFinished,
    ToolOutputStreamed,
    TurnCancelAcknowledged,
    TurnEnded,
    TurnNotice,
    TurnStarted,
)

TERMINAL = frozenset({"success", "error", "cancelled"})
FLOW_TYPES = frozenset(
    {
        "StartTurn",
        "GenerateRequest",
        "ModelFinished",
        "ModelFailed",
        "GenerationCancelled",
        "ScheduleBatch",
        "BatchSettled",
        "RunTool",
        "ToolFinished",
        "RunHooks",
        "HooksFinished",
        "CancelTurn",
        "CancelBatch",
        "CancelTool",
        "ApprovalAnswered",
        "TurnEnded",
        "TurnCancelAcknowledged",
    }
)
ROLE_ORDER = ("client", "session", "turn", "loops", "gateway", "scheduler", "exec", "hooks")
GROUP_ORDER = ("", "calls", "approvals")

Track = tuple[str, str]
"""(actor address, group): group is ``""``, ``"calls"`` or ``"approvals"``."""


@attrs.define
class _Slice:
    track: Track
    name: str
    start: int
    end: int
    cat: str
    args: dict[str, Any]
    children: list[_Slice] = attrs.Factory(list)
    cname: str | None = None


@attrs.define
class _Open:
    track: Track
    name: str
    start: int
    cat: str
    args: dict[str, Any]
    marks: list[tuple[int, str]] = attrs.Factory(list)
    """Child boundaries: (time, the name of the child that starts there)."""


@attrs.define
class _Call:
    track: Track
    batch_id: str
    name: str
    first: int
    phases: list[tuple[int, str]]
    wave: int | None = None
    wave_start: int | None = None


@attrs.define
class _Batch:
    validate_start: int | None = None
    waves: dict[int, list[Any]] = attrs.Factory(dict)
    """wave -> [start, end, call names]"""


def short(value: Any, limit: int = 160) -> str:
    text = (
        value
        if isinstance(value, str)
        else json.dumps(thaw(value), ensure_ascii=False, default=str)
    )
    return text if len(text) <= limit else text[: limit - 1] + "…"


def wall_micros(wall: str | None) -> int | None:
    """An ISO wall stamp (``...Z``) as microseconds since the epoch; None if unreadable."""
    if not wall:
        return None
    try:
        stamp = datetime.datetime.fromisoformat(wall)
    except ValueError:
        return None
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=datetime.UTC)
    return (stamp - datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)) // datetime.timedelta(
        microseconds=1
    )


def _prompt_text(parts: Sequence[Any]) -> str:
    texts = [str(p.get("text", "")) for p in parts if isinstance(p, Mapping) and p.get("text")]
    return " ".join(" ".join(texts).split())


class _Builder:
    def __init__(self, recording: Recording) -> None:
        self.sid = recording.session_id
        self.origin: int | None = None
        self.last = -1
        self.pid = 0
        self.slices: dict[int, list[_Slice]] = {}
        self.instants: list[dict[str, Any]] = []
        self.flows: list[tuple[int, str, str, int, str]] = []
        self.tracks: dict[int, set[Track]] = {}
        self.open: dict[tuple[str, Any], _Open] = {}
        self.calls: dict[str, _Call] = {}
        self.batches: dict[str, _Batch] = {}
        self.approval_of_call: dict[str, str] = {}
        self.turns = 0

    # -- time ------------------------------------------------------------------------

    def stamp(self, wall: str | None) -> int:
        micros = wall_micros(wall)
        if micros is not None and self.origin is None:
            self.origin = micros - (self.last + 1)
        ts = (
            self.last + 1
            if micros is None or self.origin is None
            else max(micros - self.origin, self.last + 1)
        )
        self.last = ts
        return ts

    # -- building blocks -------------------------------------------------------------

    def track(self, address: str, group: str = "") -> Track:
        key = (address, group)
        self.tracks.setdefault(self.pid, set()).add(key)
        return key

    def begin(
        self, kind: str, key: Any, track: Track, name: str, ts: int, cat: str, **args: Any
    ) -> _Open | None:
        if (kind, key) in self.open:
            return None  # a repeated request (a second Ctrl-C): the first one's slice holds it
        opened = _Open(track, name, ts, cat, {k: v for k, v in args.items() if v is not None})
        self.open[(kind, key)] = opened
        return opened

    def end(
        self, kind: str, key: Any, ts: int, *, cname: str | None = None, **args: Any
    ) -> _Slice | None:
        opened = self.open.pop((kind, key), None)
        if opened is None:
            return None
        return self.emit(opened, ts, cname=cname, **args)

    def emit(
        self, opened: _Open, ts: int, *, cname: str | None = None, suffix: str = "", **args: Any
    ) -> _Slice:
        done = _Slice(
            opened.track,
            opened.name + suffix,
            opened.start,
            max(ts, opened.start),
            opened.cat,
            {**opened.args, **{k: v for k, v in args.items() if v is not None}},
            cname=cname,
        )
        if opened.marks:
            bounds = [(opened.start, opened.marks[0][1]), *opened.marks[1:]]
            for i, (at, name) in enumerate(bounds):
                until = bounds[i + 1][0] if i + 1 < len(bounds) else done.end
                done.children.append(_Slice(opened.track, name, at, until, opened.cat, {}))
        self.add(done)
        return done

    def add(self, done: _Slice) -> None:
        self.slices.setdefault(self.pid, []).append(done)

    def instant(self, address: str, ts: int, name: str, cat: str, **args: Any) -> None:
        track = self.track(address)
        self.instants.append(
            {
                "ph": "i",
                "s": "t",
                "name": name,
                "cat": cat,
                "pid": self.pid,
                "track": track,
                "ts": ts,
                "args": {k: v for k, v in args.items() if v is not None},
            }
        )

    # -- the fold --------------------------------------------------------------------

    def segment(self, number: int, seg: Segment) -> None:
        self.pid = number
        self.tracks.setdefault(number, set())
        for rec in seg.lines:
            self.message(rec.env, self.stamp(rec.wall))
        self.close_all(self.last)

    def message(self, env: Envelope, ts: int) -> None:  # noqa: C901 - one arm per message type
        m, s, r = env.message, env.sender, env.recipient
        self.track(s)
        if r is not None:
            self.track(r)
            if type(m).__name__ in FLOW_TYPES:
                self.flows.append((self.pid, s, r, ts, type(m).__name__))
        match m:
            case OpenSession() if r is not None:
                self.begin(
                    "session",
                    r,
                    self.track(r),
                    "session",
                    ts,
                    "session",
                    model=m.model,
                    approval_mode=m.approval_mode,
                )
            case SessionOpened():
                self.begin(
                    "session",
                    s,
                    self.track(s),
                    "session",
                    ts,
                    "session",
                    model=m.model,
                    resumed=m.resumed,
                )
            case SessionClosed():
                self.end("session", s, ts, reason=m.reason)
            case SubmitPrompt():
                self.instant(
                    s,
                    ts,
                    "prompt",
                    "session",
                    prompt_id=m.prompt_id,
                    text=short(m.display_text or _prompt_text(m.parts)),
                )
            case PromptQueued():
                self.instant(
                    s, ts, "prompt queued", "session", prompt_id=m.prompt_id, position=m.position
                )
            case CloseSession():
                self.instant(s, ts, "close session", "session", reason=m.reason)
            case StartTurn() if r is not None:
                self.start_turn(m.turn_id, r, ts, m.prompt_id, _prompt_text(m.parts))
            case TurnStarted():
                self.start_turn(m.turn_id, s, ts, m.prompt_id, "")
            case TurnEnded():
                bad = m.stop_reason not in ("end_turn", "goal")
                self.end(
                    "turn",
                    m.turn_id,
                    ts,
                    cname="terrible" if m.error is not None else ("bad" if bad else None),
                    stop_reason=m.stop_reason,
                    model_requests=m.model_requests,
                    error=short(m.error.message) if m.error is not None else None,
                )
            case ToolCallRequested():
                self.instant(
                    s,
                    ts,
                    f"call requested · {m.name}",
                    "tools",
                    call_id=m.call_id,
                    args=short(m.args),
                )
            case StreamRetried():
                self.instant(
                    s, ts, f"stream retried · attempt {m.attempt}", "model", reason=m.reason
                )
            case TurnNotice():
                self.instant(
                    s,
                    ts,
                    f"notice · {m.kind}",
                    "turn",
                    severity=m.severity,
                    message=short(m.message),
                )
            case HistoryCompressed():
                self.instant(
                    s,
                    ts,
                    f"history compressed · {m.status}",
                    "turn",
                    tokens=f"{m.original_token_count} -> {m.new_token_count}",
                )
            case GenerateRequest() if r is not None:
                self.begin(
                    "model",
                    m.request_id,
                    self.track(r),
                    f"model · {m.role}",
                    ts,
                    "model",
                    request_id=m.request_id,
                    model=m.model,
                    method=m.method,
                    requested_by=s,
                )
                if r != s:
                    self.begin(
                        "model-wait",
                        m.request_id,
                        self.track(s),
                        "model",
                        ts,
                        "model",
                        request_id=m.request_id,
                    )
            case ModelChunk():
                streaming = self.open.get(("model", m.request_id))
                if streaming is not None:
                    streaming.args["chunks"] = streaming.args.get("chunks", 0) + 1
                    streaming.args.setdefault("first_chunk_after_ms", (ts - streaming.start) / 1000)
            case ToolOutputStreamed():
                running = self.open.get(("run", m.call_id))
                if running is not None:
                    running.args["output_lines"] = running.args.get("output_lines", 0) + 1
            case ModelRetrying():
                opened = self.open.get(("model", m.request_id))
                if opened is not None:
                    if not opened.marks:
                        opened.marks.append((opened.start, "attempt 1"))
                    opened.marks.append((ts, f"attempt {m.attempt + 1}"))
                    self.instant(
                        opened.track[0],
                        ts,
                        f"retry {m.attempt} · {m.reason}",
                        "model",
                        delay_s=m.delay_s,
                        mid_stream=m.mid_stream,
                    )
            case ModelFinished() | ModelFailed() | GenerationCancelled():
                outcome = {
                    ModelFinished: "finished",
                    ModelFailed: "failed",
                    GenerationCancelled: "cancelled",
                }[type(m)]
                error = short(m.error.message) if isinstance(m, ModelFailed) else None
                latency = m.latency_ms if isinstance(m, ModelFinished) else None
                cname = {"failed": "terrible", "cancelled": "bad"}.get(outcome)
                self.end(
                    "model",
                    m.request_id,
                    ts,
                    cname=cname,
                    outcome=outcome,
                    error=error,
                    latency_ms=latency,
                )
                self.end("model-wait", m.request_id, ts, cname=cname, outcome=outcome)
            case CancelGeneration():
                self.instant(
                    r or s,
                    ts,
                    "cancel generation",
                    "cancel",
                    request_id=m.request_id,
                    reason=m.reason,
                )
            case ScheduleBatch() if r is not None:
                names = [c.name for c in m.calls]
                self.begin(
                    "batch",
                    m.batch_id,
                    self.track(r),
                    f"batch · {len(names)} call{'s' if len(names) != 1 else ''}",
                    ts,
                    "tools",
                    batch_id=m.batch_id,
                    calls=names,
                    approval_mode=m.approval_mode,
                )
                self.batches.setdefault(m.batch_id, _Batch())
                if r != s:
                    self.begin(
                        "tools-wait",
                        m.batch_id,
                        self.track(s),
                        "tools",
                        ts,
                        "tools",
                        batch_id=m.batch_id,
                    )
            case ToolCallUpdated():
                self.call_updated(m, s, ts)
            case BatchSettled():
                self.settle_batch(m.batch_id, ts)
                self.end("tools-wait", m.batch_id, ts)
            case CancelBatch() if r is not None:
                self.begin(
                    "cancel-batch",
                    m.batch_id,
                    self.track(r),
                    "cancel batch",
                    ts,
                    "cancel",
                    reason=m.reason,
                )
            case BatchCancelAcknowledged():
                self.end("cancel-batch", m.batch_id, ts)
            case RunTool() if r is not None:
                self.begin(
                    "run",
                    m.call_id,
                    self.track(r),
                    m.name,
                    ts,
                    "tools",
                    call_id=m.call_id,
                    args=short(m.args),
                )
            case ToolFinished():
                res = m.result
                status = (
                    "cancelled" if res.cancelled else ("error" if res.error_type else "success")
                )
                self.end(
                    "run",
                    m.call_id,
                    ts,
                    cname={"error": "terrible", "cancelled": "bad"}.get(status),
                    status=status,
                    duration_ms=m.duration_ms,
                    error=short(res.error_message) if res.error_message else None,
                )
            case CancelTool():
                self.instant(
                    r or s, ts, "cancel tool", "cancel", call_id=m.call_id, reason=m.reason
                )
            case ApprovalRequested():
                self.begin(
                    "approval",
                    m.correlation_id,
                    self.track(s, "approvals"),
                    f"approval · {m.name}",
                    ts,
                    "approval",
                    call_id=m.call_id,
                    correlation_id=m.correlation_id,
                    args=short(m.args),
                )
                self.approval_of_call[m.call_id] = m.correlation_id
            case ApprovalAnswered():
                self.instant(
                    s, ts, f"answer · {m.outcome}", "approval", correlation_id=m.correlation_id
                )
            case ApprovalSettled():
                self.end(
                    "approval",
                    m.correlation_id,
                    ts,
                    outcome=m.outcome or "(too late)",
                    answered_by=m.answered_by,
                )
                self.approval_of_call = {
                    c: k for c, k in self.approval_of_call.items() if k != m.correlation_id
                }
            case ApprovalModeChanged():
                self.instant(s, ts, f"approval mode · {m.approval_mode}", "approval")
            case RunHooks() if r is not None:
                self.begin(
                    "hooks",
                    m.request_id,
                    self.track(r),
                    f"hooks · {m.event}",
                    ts,
                    "hooks",
                    request_id=m.request_id,
                    requested_by=s,
                )
                if r != s:
                    self.begin(
                        "hooks-wait",
                        m.request_id,
                        self.track(s),
                        f"hooks · {m.event}",
                        ts,
                        "hooks",
                        request_id=m.request_id,
                    )
            case HookRan():
                self.instant(
                    s,
                    ts,
                    f"hook ran · {m.name}",
                    "hooks",
                    success=m.success,
                    exit_code=m.exit_code,
                    duration_ms=m.duration_ms,
                )
            case HooksFinished():
                cname = "terrible" if m.failed else None
                self.end(
                    "hooks",
                    m.request_id,
                    ts,
                    cname=cname,
                    ran=m.ran,
                    failed=list(m.failed) or None,
                    cancelled=m.cancelled or None,
                )
                self.end("hooks-wait", m.request_id, ts, cname=cname)
            case CancelHooks():
                self.instant(r or s, ts, "cancel hooks", "cancel")
            case CheckLoop() if r is not None:
                self.begin(
                    "loop",
                    m.request_id,
                    self.track(r),
                    f"check · {m.kind}",
                    ts,
                    "loops",
                    request_id=m.request_id,
                )
            case LoopVerdict():
                self.end("loop", m.request_id, ts, count=m.count or None, loop_type=m.loop_type)
                if m.loop_type is not None:
                    self.instant(
                        s,
                        ts,
                        f"loop detected · {m.loop_type}",
                        "loops",
                        detail=short(m.detail or ""),
                    )
            case CancelTurn() if r is not None:
                self.begin(
                    "cancel",
                    (r, m.requested_by),
                    self.track(r),
                    "cancel turn",
                    ts,
                    "cancel",
                    reason=m.reason,
                    requested_by=m.requested_by,
                    turn_id=m.turn_id,
                )
            case TurnCancelAcknowledged():
                self.end("cancel", (s, m.requested_by), ts, turn_id=m.turn_id)
            case ActorFailed():
                self.instant(s, ts, f"actor failed · {m.actor}", "error", reason=short(m.reason))
            case _:
                pass

    def start_turn(self, turn_id: str, address: str, ts: int, prompt_id: str, prompt: str) -> None:
        if ("turn", turn_id) in self.open:
            return
        self.turns += 1
        name = f"turn {self.turns}" + (f" · {short(prompt, 40)}" if prompt else "")
        self.begin(
            "turn",
            turn_id,
            self.track(address),
            name,
            ts,
            "turn",
            turn_id=turn_id,
            prompt_id=prompt_id,
            prompt=short(prompt) if prompt else None,
        )

    def call_updated(self, m: ToolCallUpdated, scheduler: str, ts: int) -> None:
        call = self.calls.get(m.call_id)
        if call is None:
            call = _Call(self.track(scheduler, "calls"), m.batch_id, m.name, ts, [])
            self.calls[m.call_id] = call
        batch = self.batches.setdefault(m.batch_id, _Batch())
        if m.status == "validating":
            if batch.validate_start is None:
                batch.validate_start = ts
        elif m.status not in TERMINAL and call.wave_start is None:
            call.wave, call.wave_start = m.wave, ts
            wave = batch.waves.setdefault(m.wave, [ts, ts, []])
            wave[2].append(m.name)
        if not call.phases or call.phases[-1][1] != m.status:
            call.phases.append((ts, m.status))
        if m.status != "awaiting_approval" and m.call_id in self.approval_of_call:
            # Answered by a rule ("always" for an earlier call), or the call ended unanswered.
            self.end(
                "approval", self.approval_of_call.pop(m.call_id), ts, outcome=f"(call {m.status})"
            )
        if m.status in TERMINAL:
            del self.calls[m.call_id]
            if call.wave is not None and call.wave in batch.waves:
                batch.waves[call.wave][1] = max(batch.waves[call.wave][1], ts)
            self.finish_call(
                m.call_id, call, ts, status=m.status, detail=short(m.detail) if m.detail else None
            )

    def finish_call(
        self, call_id: str, call: _Call, ts: int, *, suffix: str = "", **args: Any
    ) -> None:
        start = call.wave_start if call.wave_start is not None else call.first
        phases = [
            (at, status) for at, status in call.phases if at >= start and status not in TERMINAL
        ]
        opened = _Open(
            call.track,
            call.name,
            start,
            "tools",
            {"call_id": call_id, "batch_id": call.batch_id, "wave": call.wave},
        )
        opened.marks = phases
        status = args.get("status")
        self.emit(
            opened,
            ts,
            suffix=suffix,
            cname={"error": "terrible", "cancelled": "bad"}.get(str(status)),
            **args,
        )

    def settle_batch(self, batch_id: str, ts: int, *, suffix: str = "", **args: Any) -> None:
        opened = self.open.pop(("batch", batch_id), None)
        batch = self.batches.pop(batch_id, _Batch())
        if opened is None:
            return
        marks: list[tuple[int, str]] = []
        first_wave = min((w[0] for w in batch.waves.values()), default=ts)
        if batch.validate_start is not None and batch.validate_start < first_wave:
            marks.append((batch.validate_start, "validate"))
        done = self.emit(opened, ts, suffix=suffix, waves=len(batch.waves), **args)
        if marks:
            done.children.append(
                _Slice(opened.track, "validate", marks[0][0], first_wave, "tools", {})
            )
        for number in sorted(batch.waves):
            start, end, names = batch.waves[number]
            done.children.append(
                _Slice(
                    opened.track,
                    f"wave {number} · {len(names)} call{'s' if len(names) != 1 else ''}",
                    start,
                    end,
                    "tools",
                    {"wave": number, "calls": names},
                )
            )

    def close_all(self, ts: int) -> None:
        """The end of a process's part: whatever is still open ends here, unfinished."""
        for call_id, call in list(self.calls.items()):
            self.finish_call(call_id, call, ts, suffix=" (unfinished)", unfinished=True)
        self.calls.clear()
        for kind, key in list(self.open):
            if kind == "batch":
                self.settle_batch(key, ts, suffix=" (unfinished)", unfinished=True)
        for opened in list(self.open.values()):
            self.emit(opened, ts, suffix=" (unfinished)", unfinished=True)
        self.open.clear()
        self.batches.clear()
        self.approval_of_call.clear()
