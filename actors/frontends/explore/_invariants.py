"""The checks of DESIGN §5's seven invariants on a finished ``Run`` (``check`` returns
every ``Violation``). Runtime bugs the suite found and that are not fixed yet are listed
in ``KNOWN_RUNTIME_BUGS``; a run that meets one is excused the invariant it breaks.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from actors.frontends.explore._harness import DEADLINE_S, Run
from actors.frontends.explore._script import Session
from actors.scheduler import plan_waves
from bus import Envelope
from bus.json_values import thaw
from bus.messages import (
    ApprovalSettled,
    BatchCancelAcknowledged,
    BatchSettled,
    CancelBatch,
    CancelTurn,
    CheckLoop,
    GenerateRequest,
    GenerationCancelled,
    LoopVerdict,
    ModelChunk,
    ModelFailed,
    ModelFinished,
    ModelRetrying,
    RunTool,
    ScheduleBatch,
    SessionClosed,
    StartTurn,
    ToolFinished,
    TurnCancelAcknowledged,
    TurnEnded,
)

# -- the invariants --------------------------------------------------------------------------------
INVARIANTS = {
    1: "every function call in history has exactly one response, in request order, before the next model request",
    2: "a turn's end is its last message; after it none of its tools or model requests runs",
    3: "every request (model or tool) gets exactly one terminal reply",
    4: "sequence numbers are gap-free and the recording decodes to exactly what was delivered",
    5: "replaying the recording yields the same messages",
    6: "calls in a wave overlap in time; a barrier call overlaps nothing",
    7: "no task outlives its session; closing leaves no child process",
}


@attrs.frozen
class Violation:
    invariant: int
    detail: str

    def __str__(self) -> str:
        return f"invariant {self.invariant} ({INVARIANTS[self.invariant]}): {self.detail}"


class InvariantViolation(AssertionError):
    """An explored session broke invariants; the message shows the session."""

    def __init__(self, violations: Sequence[Violation], session: Session, seed: Any = None) -> None:
        self.violations = list(violations)
        self.invariants = {v.invariant for v in violations}
        self.session = session
        lines = [f"{len(violations)} invariant violation(s) in an explored session"]
        lines += [f"- {v}" for v in violations[:12]]
        lines.append(f"session: {session!r}")
        if seed is not None:
            lines.append(f"scheduler seed: {seed!r} (hypothesis prints how to reproduce it)")
        super().__init__("\n".join(lines))


@attrs.frozen
class KnownBug:
    invariant: int | None
    """The invariant it breaks; None: it crashes an actor (the whole run is excused)."""
    what: str


KNOWN_RUNTIME_BUGS: dict[str, KnownBug] = {
}
"""Runtime bugs this suite found and reported. Until they are fixed, a session that runs
into one is excused the invariant that bug breaks (each has a strict xfail test that
reproduces it, which starts passing, and so failing, once it is fixed)."""


FIXED_RUNTIME_BUGS: dict[str, KnownBug] = {
    "replay_wall_clock_after_retry": KnownBug(
        5,
        "the replay gives an attempt the wall clock of the attempt after it when the turn "
        "publishes the first attempt's id-less calls after the gateway's ModelRetrying: the "
        "replayed call ids differ",
    ),
    "replayed_api_error": KnownBug(
        5,
        "a replay re-raises a recorded API or network error without its HTTP status (and Google "
        "status, reason, network code), and its gateway's retry jitter is not the recorded one: "
        "the replayed ModelRetrying or ModelFailed differs",
    ),
    "invalid_chunk_with_call": KnownBug(
        1,
        "a chunk Gemini CLI calls invalid (it has an empty text part) is left out of the history, "
        "but its function calls still run: their responses then answer no call",
    ),
    "nameless_call_ids": KnownBug(
        1,
        "a function call with neither name nor id is answered, in the next request, under an id "
        "without the generic_tool__ prefix its call keeps",
    ),
    "start_turn_during_cancel_ack": KnownBug(
        None,
        "after a cancel the turn sends TurnEnded, then TurnCancelAcknowledged; a queued prompt's "
        "StartTurn can reach the turn actor in between, which then raises 'StartTurn while a turn "
        "is running'",
    ),
    "stale_ack_closes_session": KnownBug(
        None,
        "the session takes the acknowledgement of an earlier no-op CancelTurn (turn_id None) for "
        "that of the cancel it sent on CloseSession, closes at TurnEnded, and the turn then crashes "
        "sending its real TurnCancelAcknowledged to the closed session (DeliveryError)",
    ),
}
"""Runtime bugs this suite found that are fixed now; their reproductions stay as
regression tests (``test_fixed_runtime_bug_stays_fixed``)."""


def known_runtime_bugs(run: Run) -> list[str]:
    """The known runtime bugs ``run`` ran into."""
    found = []
    if run.crash is not None:
        found.append(run.crash)
    return found


def check(run: Run, *, excuse_known: bool = True) -> list[Violation]:
    """Every violation of the seven invariants in ``run`` (except those a known runtime
    bug explains, unless ``excuse_known`` is False)."""
    if run.crash is not None:
        if excuse_known:
            return []
        return [Violation(3, f"an actor crashed: {KNOWN_RUNTIME_BUGS[run.crash].what}")]
    found: list[Violation] = []
    for checker in (_history, _turn_ends, check_replies, check_sequence, _replay, _waves, _lifetimes):
        found.extend(checker(run))
    if excuse_known:
        excused = {KNOWN_RUNTIME_BUGS[name].invariant for name in known_runtime_bugs(run)}
        found = [v for v in found if v.invariant not in excused]
    return found


def _ids(parts: Iterable[Any], key: str) -> list[Any]:
    return [p[key].get("id") for p in parts if isinstance(p, Mapping) and isinstance(p.get(key), Mapping)]


def history_order_problems(contents: Sequence[Any], *, complete: bool) -> list[str]:
    """Every function call answered exactly once, in request order, by the next content
    (``complete``: none left unanswered at the end); no response without its call."""
    problems = []
    for i, content in enumerate(contents):
        parts = content.get("parts") or ()
        calls = _ids(parts, "functionCall")
        responses = _ids(parts, "functionResponse")
        if responses:
            before = contents[i - 1] if i else {}
            if before.get("role") != "model" or _ids(before.get("parts") or (), "functionCall") != responses:
                problems.append(f"content {i}: responses {responses} do not answer the calls before them")
        if not calls:
            continue
        if i + 1 == len(contents):
            if complete:
                problems.append(f"content {i}: calls {calls} are never answered")
            continue
        got = _ids(contents[i + 1].get("parts") or (), "functionResponse")
        if got != calls:
            problems.append(f"content {i}: calls {calls} answered by {got}")
    return problems


def _history(run: Run) -> Iterable[Violation]:
    history: list[Any] = []
    for env in run.envelopes:
        msg = env.message
        if isinstance(msg, GenerateRequest) and msg.role == "main":
            for p in history_order_problems(thaw(msg.contents), complete=True):
                yield Violation(1, f"model request at seq {env.seq}: {p}")
        elif isinstance(msg, TurnEnded):
            history.extend(thaw(msg.history_added))
    for p in history_order_problems(history, complete=True):
        yield Violation(1, f"the session's history: {p}")


def _turn_ids(run: Run) -> dict[str, tuple[int, int | None, set[str]]]:
    """turn id -> (seq of StartTurn, seq of TurnEnded, ids the turn issued)."""
    turns: dict[str, tuple[int, int | None, set[str]]] = {}
    current: str | None = None
    for env in run.envelopes:
        msg = env.message
        if isinstance(msg, StartTurn):
            current = msg.turn_id
            turns[current] = (env.seq, None, set())
        elif isinstance(msg, TurnEnded) and msg.turn_id in turns:
            start, _, ids = turns[msg.turn_id]
            turns[msg.turn_id] = (start, env.seq, ids)
            current = None
        elif current is not None and env.sender.startswith("turn:"):
            ids = turns[current][2]
            if isinstance(msg, GenerateRequest | CheckLoop):
                ids.add(msg.request_id)
            elif isinstance(msg, ScheduleBatch):
                ids.add(msg.batch_id)
                ids.update(c.call_id for c in msg.calls)
    return turns


_ID_FIELDS = ("turn_id", "request_id", "batch_id", "call_id")
ACTIVITY = ("turn:", "scheduler:", "exec.", "gateway", "loops:")
"""Who works for a turn: after its end none of them may still say anything about it."""
CANCELS = (CancelTurn, TurnCancelAcknowledged)
"""A cancel that crossed the turn's end, and its acknowledgement, may name it."""


def _turn_ends(run: Run) -> Iterable[Violation]:
    turns = _turn_ids(run)
    spans = {span.key: span for span in (*run.tools.items, *run.model.items)}
    for turn_id, (_, end, ids) in turns.items():
        if end is None:
            continue
        for env in run.envelopes:
            if env.seq <= end or not env.sender.startswith(ACTIVITY) or isinstance(env.message, CANCELS):
                continue
            for field in _ID_FIELDS:
                value = getattr(env.message, field, None)
                if value is not None and (value == turn_id or value in ids):
                    yield Violation(2, f"{type(env.message).__name__} (seq {env.seq}) of turn {turn_id[:8]} after its TurnEnded (seq {end})")
                    break
        for key in ids:
            span = spans.get(key)
            if span is not None and (span.end_seq is None or span.end_seq > end):
                yield Violation(2, f"{key} still ran after its turn's TurnEnded (seq {end})")


_TERMINAL: dict[type, tuple[str, tuple[type, ...]]] = {
    GenerateRequest: ("request_id", (ModelFinished, ModelFailed, GenerationCancelled)),
    ScheduleBatch: ("batch_id", (BatchSettled,)),
    RunTool: ("call_id", (ToolFinished,)),
    CheckLoop: ("request_id", (LoopVerdict,)),
    StartTurn: ("turn_id", (TurnEnded,)),
}


def check_replies(run: Run) -> Iterable[Violation]:
    """Invariant 3: one terminal reply per request, one acknowledgement per cancel."""
    open_: dict[tuple[type, str], int] = {}
    for env in run.envelopes:
        msg = env.message
        spec = _TERMINAL.get(type(msg))
        if spec is not None:
            key = (type(msg), getattr(msg, spec[0]))
            if key in open_:
                yield Violation(3, f"{type(msg).__name__} {key[1]} sent again (seq {env.seq}) before its reply")
            open_[key] = env.seq
            continue
        for request_type, (field, replies) in _TERMINAL.items():
            if isinstance(msg, replies):
                key = (request_type, getattr(msg, field))
                if open_.pop(key, None) is None:
                    yield Violation(3, f"{type(msg).__name__} (seq {env.seq}) answers no open {request_type.__name__}")
            elif request_type is GenerateRequest and isinstance(msg, ModelChunk | ModelRetrying):
                if (GenerateRequest, msg.request_id) not in open_:
                    yield Violation(3, f"{type(msg).__name__} (seq {env.seq}) after its request's terminal reply")
    for (request_type, request_id), seq in open_.items():
        yield Violation(3, f"{request_type.__name__} {request_id} (seq {seq}) never got its terminal reply")
    # Cancels: each cancelled batch is acknowledged once; every cancel of a turn is
    # followed by an acknowledgement.
    cancelled: dict[str, int] = {}
    acks: dict[str, int] = {}
    pending_turn_cancel: int | None = None
    winners: dict[str, int] = {}
    for env in run.envelopes:
        msg = env.message
        if isinstance(msg, CancelBatch):
            cancelled[msg.batch_id] = cancelled.get(msg.batch_id, 0) + 1
        elif isinstance(msg, BatchCancelAcknowledged):
            acks[msg.batch_id] = acks.get(msg.batch_id, 0) + 1
        elif isinstance(msg, CancelTurn) and env.recipient is not None and env.recipient.startswith("turn:"):
            pending_turn_cancel = pending_turn_cancel or env.seq
        elif isinstance(msg, TurnCancelAcknowledged):
            pending_turn_cancel = None
        elif isinstance(msg, ApprovalSettled) and msg.outcome:
            winners[msg.correlation_id] = winners.get(msg.correlation_id, 0) + 1
    for batch_id in set(cancelled) | set(acks):
        if batch_id in cancelled and acks.get(batch_id, 0) != 1:
            yield Violation(3, f"batch {batch_id[:8]} cancelled, acknowledged {acks.get(batch_id, 0)} times")
        if batch_id not in cancelled:
            yield Violation(3, f"batch {batch_id[:8]} acknowledged a cancel nobody sent")
    if pending_turn_cancel is not None:
        yield Violation(3, f"CancelTurn (seq {pending_turn_cancel}) was never acknowledged")
    for correlation, count in winners.items():
        if count > 1:
            yield Violation(3, f"approval {correlation[:8]} settled {count} times")


def check_sequence(run: Run) -> Iterable[Violation]:
    """Invariant 4: the recording is what was delivered, gap-free; followers saw it too."""
    recording = run.recording
    assert recording is not None
    delivered = run.envelopes
    if recording.envelopes != delivered:
        recorded = recording.envelopes
        first = next((i for i, (a, b) in enumerate(zip(recorded, delivered, strict=False)) if a != b), min(len(recorded), len(delivered)))
        yield Violation(
            4,
            f"the recording ({len(recorded)} messages) differs from what was delivered ({len(delivered)}) "
            f"from index {first}: recorded {_show(recorded, first)}, delivered {_show(delivered, first)}",
        )
    numbers = sorted([e.seq for e in recording.envelopes] + [n for a, b in recording.voids for n in range(a, b + 1)])
    if numbers != list(range(1, len(numbers) + 1)):
        yield Violation(4, f"sequence numbers are not gap-free: {_gaps(numbers)}")
    for first, got in run.follower:
        want = [e for e in delivered if e.seq >= first][: len(got)]
        if got != want:
            i = next((i for i, (a, b) in enumerate(zip(got, want, strict=False)) if a != b), len(want))
            yield Violation(4, f"a follower resubscribed from seq {first} got {_show(got, i)} where {_show(want, i)} was delivered")
    if run.follower and not (run.follower[-1][1] and isinstance(run.follower[-1][1][-1].message, SessionClosed)):
        yield Violation(4, "the follower never saw the session close")


def _show(envs: Sequence[Envelope], i: int) -> str:
    if i >= len(envs):
        return "(nothing)"
    return f"seq {envs[i].seq} {type(envs[i].message).__name__}"


def _gaps(numbers: Sequence[int]) -> str:
    missing = sorted(set(range(1, (numbers[-1] if numbers else 0) + 1)) - set(numbers))
    dupes = sorted({n for n in numbers if numbers.count(n) > 1})
    return f"missing {missing[:5]}, repeated {dupes[:5]}"


def _replay(run: Run) -> Iterable[Violation]:
    if run.replay_problem is not None:
        yield Violation(5, run.replay_problem)


TIME_EPSILON = 1e-6
"""Virtual seconds two times may differ by and still be the same instant (they are
computed by subtracting real-speed spans, which rounds)."""


def _waves(run: Run) -> Iterable[Violation]:
    spans = {span.key: span for span in run.tools.items}
    for env in run.envelopes:
        batch = env.message
        if not isinstance(batch, ScheduleBatch):
            continue
        requested = [(c.name, thaw(c.args)) for c in batch.calls]
        ids = [c.call_id for c in batch.calls]
        for wave in plan_waves(requested):
            ran = [spans[ids[i]] for i in wave if ids[i] in spans]
            if len(wave) > 1 and len(ran) > 1:
                starts = [s.start_t for s in ran]
                ends = [s.end_t for s in ran if s.end_t is not None]
                # Times are virtual time less real-speed spans: equal up to rounding.
                if max(starts) - min(starts) > TIME_EPSILON or (ends and max(starts) > min(ends) + TIME_EPSILON):
                    yield Violation(6, f"the wave {[ids[i] for i in wave]} did not run together: {[(s.key, s.start_t, s.end_t) for s in ran]}")
            if len(wave) == 1 and ran:
                barrier = ran[0]
                for other in run.tools.items:
                    if other is barrier or other.end_seq is None or barrier.end_seq is None:
                        continue
                    if not (other.end_seq <= barrier.start_seq or other.start_seq >= barrier.end_seq):
                        if other.end_t != other.start_t and barrier.end_t != barrier.start_t:
                            yield Violation(6, f"barrier call {barrier.key} overlapped {other.key}")


def _lifetimes(run: Run) -> Iterable[Violation]:
    if run.stuck:
        waiting = [span.key for span in (*run.tools.items, *run.model.items) if span.end_seq is None]
        yield Violation(7, f"the session never finished (stuck after {DEADLINE_S:.0f} virtual s; still running: {waiting})")
        return
    closed = run.time_of(SessionClosed)
    if closed is None:
        yield Violation(7, "the session never published SessionClosed")
    elif run.returned_at is None or run.returned_at != closed:
        yield Violation(7, f"the session's actors stopped at {run.returned_at}, not when it closed ({closed})")
    if run.leftover_tasks:
        yield Violation(7, f"tasks outlived the session: {run.leftover_tasks}")
    if run.alive_after_close:
        yield Violation(7, f"child processes outlived the session: {run.alive_after_close}")

