"""Whole sessions under explored schedules: the generated script, the harness that runs
it on trio's virtual clock, and the checks of DESIGN §5's seven invariants.

A ``Session`` is plain data with a short repr, so that a failing example shrinks to a
session one can read: what the model says (text, thoughts, parallel calls, malformed
chunks, invalid streams, API faults), what the tools do (virtual durations, outcomes,
live output, oversized results, real child processes), and what the client does
(prompts, approval answers, cancels, invalid commands, closing early, a follower that
drops and resubscribes from a sequence number).

``run_session`` runs a session's real actors with ``actors.host.runtime.supervise_session``,
as every entry point does (session, turn, scheduler, two executors, recorder, loop
detector), beside the real gateway actor, whose backend here plays the model script;
then it replays the recording (``replay_problem``, invariant 5). ``check`` returns
every ``Violation`` of the seven invariants. Runtime bugs the suite found and that are
not fixed yet are listed in ``KNOWN_RUNTIME_BUGS``; a run that meets one is excused the
invariant it breaks.

Everything that happens is on the virtual clock or synchronous (the tools' child
processes are started and killed without a checkpoint), so trio's scheduling choices,
which hypothesis drives through ``st.random_module()``, are the only source of
interleavings: an example is reproducible from its printed seed. (Hooks are left out:
they are real processes whose timing the virtual clock cannot own, and replay does not
support them yet.)
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
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import trio
import trio.testing
from hypothesis import strategies as st

from actors.frontends.replay import ReplayOptions, replay_recording
from actors.gateway import BackendError, GatewayActor
from actors.host import runtime
from actors.recording import Recording, RecordingCursor, load_recording
from actors.scheduler import plan_waves
from actors.tools import OutputSink, ToolEnv
from bus import Bus, DeliveryError, Envelope, Port
from bus.json_values import thaw
from bus.messages import (
    ApprovalAnswered,
    ApprovalRequested,
    ApprovalSettled,
    BatchCancelAcknowledged,
    BatchSettled,
    CancelBatch,
    CancelTurn,
    CheckLoop,
    CloseSession,
    ConfigureSession,
    GenerateRequest,
    GenerationCancelled,
    LoopVerdict,
    Message,
    ModelChunk,
    ModelFailed,
    ModelFinished,
    ModelRetrying,
    RunTool,
    ScheduleBatch,
    SessionClosed,
    StartTurn,
    SubmitPrompt,
    ToolCallUpdated,
    ToolFinished,
    ToolResult,
    TurnCancelAcknowledged,
    TurnEnded,
)
from tests.frontends.replay._session import _Verdict, executor_of

SID = "explored"
CLIENT = "client:explorer"
DEADLINE_S = 24 * 3600.0
"""Virtual seconds after which a session that has not closed is declared stuck (on the
autojump clock a deadlock reaches it at once)."""
BIG = 60_000
"""Characters of an oversized tool result."""
SHM = Path("/dev/shm")


# -- the script ------------------------------------------------------------------------------
class _Brief:
    """attrs classes whose repr leaves out the fields at their default."""

    def __repr__(self) -> str:
        shown = []
        for field in attrs.fields(type(self)):  # type: ignore[arg-type]
            value = getattr(self, field.name)
            if field.default is not attrs.NOTHING and value == field.default:
                continue
            shown.append(f"{field.name}={value!r}")
        return f"{type(self).__name__}({', '.join(shown)})"


@attrs.frozen(repr=False)
class Text(_Brief):
    text: str


@attrs.frozen(repr=False)
class Thought(_Brief):
    subject: str


@attrs.frozen(repr=False)
class Call(_Brief):
    """A function call; its arguments tell the test tool what to do."""

    tool: str
    ms: int = 0
    """Virtual milliseconds the call takes."""
    outcome: str = "ok"
    """``ok``, ``error`` (a tool error), ``crash`` (raises), ``invalid`` (fails validation)."""
    out: int = 0
    """Lines of live output."""
    big: bool = False
    """An oversized result."""
    ask: bool = False
    """The policy asks the client first."""
    wait: bool | None = None
    """``wait_for_previous``."""
    proc: bool = False
    """Runs a real child process for its duration."""
    bg: bool = False
    """Leaves a real child process in the background (killed when the session closes)."""

    def args(self) -> dict[str, Any]:
        out: dict[str, Any] = {"ms": self.ms, "outcome": self.outcome}
        for name in ("out", "big", "ask", "proc", "bg"):
            if getattr(self, name):
                out[name] = getattr(self, name)
        if self.wait is not None:
            out["wait_for_previous"] = self.wait
        return out


JUNK_PARTS: dict[str, dict[str, Any]] = {
    "nameless_call": {"functionCall": {"args": {"ms": 0}}},
    "args_not_object": {"functionCall": {"name": "probe", "args": [1, 2]}},
    "text_not_string": {"text": 42},
    "unknown_part": {"weird": True},
}
JUNK_CHUNKS: dict[str, Any] = {
    "empty_candidates": {"candidates": []},
    "no_content": {"candidates": [{"index": 0}]},
    "parts_not_list": {"candidates": [{"content": {"role": "model", "parts": "oops"}}]},
    "usage_only": {"usageMetadata": {"promptTokenCount": 12}},
}


@attrs.frozen(repr=False)
class Junk(_Brief):
    """A malformed part (``JUNK_PARTS``) or a whole malformed chunk (``JUNK_CHUNKS``)."""

    kind: str


Part = Text | Thought | Call | Junk


@attrs.frozen(repr=False)
class Reply(_Brief):
    """One streamed response: chunks of parts; ``finish`` None is an invalid stream."""

    chunks: tuple[tuple[Part, ...], ...]
    finish: str | None = "STOP"
    delay_ms: int = 0
    """Virtual pause before each chunk after the first."""


@attrs.frozen(repr=False)
class Fault(_Brief):
    """An API error: ``status`` None is a network error; ``midstream`` after a chunk."""

    status: int | None
    midstream: bool = False


Step = Reply | Fault


@attrs.frozen(repr=False)
class Prompt(_Brief):
    text: str
    queued: bool = False
    """Sent without waiting for the previous prompt's turn to end."""


@attrs.frozen(repr=False)
class Answer(_Brief):
    outcome: str = "proceed_once"
    after_ms: int = 0
    twice: bool = False
    """A second client answers too (the first answer wins)."""


MOMENTS = (
    "GenerateRequest",
    "ModelChunk",
    "ToolCallRequested",
    "ScheduleBatch",
    "RunTool",
    "ToolOutputStreamed",
    "ApprovalRequested",
    "ToolFinished",
    "BatchSettled",
    "TurnEnded",
)
"""Message types a client may act on (cancel or close) the moment it sees them."""


@attrs.frozen(repr=False)
class When(_Brief):
    """A moment of the session, as the client sees it: the ``nth`` message of type
    ``on``, or after ``after_messages`` messages, or at virtual time ``at_ms``."""

    on: str | None = None
    nth: int = 1
    after_messages: int | None = None
    at_ms: int | None = None

    def due(self, seen: int, counts: Mapping[str, int], latest: str) -> bool:
        if self.on is not None:
            return latest == self.on and counts.get(latest, 0) == self.nth
        return self.after_messages == seen


BOGUS_KINDS = ("unknown_answer", "cancel_unknown_turn", "empty_prompt", "configure")


@attrs.frozen(repr=False)
class Bogus(_Brief):
    """A command a careless client sends (see ``BOGUS_KINDS``)."""

    kind: str
    at_ms: int = 0


@attrs.frozen(repr=False)
class Follower(_Brief):
    """A subscriber with a small ``lag`` buffer; after ``drop_after`` messages it goes
    away for ``away_ms`` and resubscribes from ``rewind`` messages before where it was,
    catching up from the recording."""

    capacity: int = 4
    drop_after: int | None = None
    away_ms: int = 0
    rewind: int = 0
    slow_ms: int = 0
    """Virtual time it takes over each message (a slow client lags)."""


@attrs.frozen(repr=False)
class Session:
    model: tuple[Step, ...]
    """What the model answers, request after request (strict order, like a
    fake-responses file; when it runs out a request fails)."""
    prompts: tuple[Prompt, ...] = (Prompt("go"),)
    answers: tuple[Answer, ...] = ()
    """Answers to approval requests, in order (then ``proceed_once`` at once)."""
    cancels: tuple[When, ...] = ()
    """When the client sends ``CancelTurn``."""
    bogus: tuple[Bogus, ...] = ()
    close: When | None = None
    """When the client closes the session, whatever runs (else after its prompts)."""
    interactive: bool = True
    follower: Follower | None = None

    def __repr__(self) -> str:
        lines = ["Session("]
        lines.append("  model=[")
        lines += [f"    {step!r}," for step in self.model]
        lines.append("  ],")
        for field in attrs.fields(Session)[1:]:
            value = getattr(self, field.name)
            if value != field.default:
                lines.append(f"  {field.name}={value!r},")
        lines.append(")")
        return "\n".join(lines)


# -- strategies ------------------------------------------------------------------------------
WORDS = ("alpha", "beta", "gamma", "done", "ok", "hello world", "")
CHANT = "I will check the file again to make sure it is right. " * 12
"""Streamed text the loop detector finds repetitive."""

any_calls = st.builds(
    Call,
    tool=st.sampled_from(["probe", "probe", "shell_probe", "write_file", "deny_tool", "no_such_tool"]),
    ms=st.sampled_from([0, 5, 50, 400, 3000]),
    outcome=st.sampled_from(["ok", "ok", "ok", "error", "crash", "invalid"]),
    out=st.sampled_from([0, 0, 2]),
    big=st.sampled_from([False, False, False, True]),
    ask=st.sampled_from([False, False, True]),
    wait=st.sampled_from([None, None, True, False]),
    proc=st.sampled_from([False, False, False, True]),
    bg=st.sampled_from([False, False, False, True]),
)
"""Any call: failing, denied, unknown, asking, waiting, with processes..."""
plain_calls = st.builds(
    Call,
    tool=st.sampled_from(["probe", "probe", "shell_probe", "shell_probe", "write_file"]),
    ms=st.sampled_from([5, 50, 400]),
    bg=st.sampled_from([False, False, False, True]),
)
"""A call that runs and succeeds (``write_file`` is a barrier)."""
calls = st.one_of(plain_calls, plain_calls, any_calls)
texts = st.sampled_from(WORDS).map(Text)
thoughts = st.sampled_from(["Plan", "Check"]).map(Thought)
junk = st.sampled_from(sorted(JUNK_PARTS) + sorted(JUNK_CHUNKS)).map(Junk)
delays = st.sampled_from([0, 0, 10, 1000])

answer_replies = st.builds(
    lambda first, more, delay: Reply(chunks=(first, *more), delay_ms=delay),
    st.tuples(st.sampled_from(WORDS[:-1]).map(Text)) | st.tuples(thoughts, st.sampled_from(WORDS[:-1]).map(Text)),
    st.lists(st.lists(texts | thoughts, min_size=1, max_size=2).map(tuple), max_size=2),
    delays,
)
"""A final answer: text (and thoughts), no calls."""
call_replies = st.builds(
    lambda lead, groups, delay: Reply(chunks=((lead,), *groups) if lead is not None else tuple(groups), delay_ms=delay),
    st.none() | texts | thoughts,
    st.lists(st.lists(calls, min_size=1, max_size=4).map(tuple), min_size=1, max_size=2),
    delays,
)
"""Function calls (parallel ones in a chunk, or over chunks), maybe after some text."""
odd_steps: st.SearchStrategy[Step] = st.one_of(
    st.builds(Fault, status=st.sampled_from([429, 500, 503, 400, None]), midstream=st.booleans()),
    st.builds(
        Reply,
        chunks=st.lists(st.lists(texts | calls | junk, min_size=1, max_size=3).map(tuple), min_size=1, max_size=2).map(tuple),
        finish=st.sampled_from(["STOP", None, "MAX_TOKENS", "SAFETY", "MALFORMED_FUNCTION_CALL"]),
    ),
    st.just(Reply(chunks=((Text(CHANT),),))),
    # Five identical calls in one response: the loop detector's tool-call rule.
    calls.map(lambda c: Reply(chunks=((c,) * 5,))),
)
"""API faults, malformed chunks, invalid streams, loops."""
rounds = st.one_of(
    st.tuples(call_replies, answer_replies),
    st.tuples(call_replies, answer_replies),
    st.tuples(call_replies, call_replies, answer_replies),
    st.tuples(answer_replies),
    st.tuples(odd_steps),
)
"""What the model says for one prompt, most often: calls, then an answer."""

followers = st.builds(
    Follower,
    capacity=st.sampled_from([1, 4, 1000]),
    drop_after=st.none() | st.integers(1, 60),
    away_ms=st.sampled_from([0, 5, 2000]),
    rewind=st.sampled_from([0, 0, 1, 5]),
    slow_ms=st.sampled_from([0, 0, 1]),
)


moments = st.one_of(
    st.builds(When, on=st.sampled_from(MOMENTS), nth=st.sampled_from([1, 1, 2])),
    st.builds(When, on=st.sampled_from(MOMENTS), nth=st.sampled_from([1, 1, 2])),
    st.builds(When, after_messages=st.integers(1, 80)),
    st.builds(When, at_ms=st.sampled_from([0, 1, 10, 60, 400, 3000, 60_000])),
)


def _session(turns: list[tuple[Prompt, tuple[Step, ...]]], **rest: Any) -> Session:
    return Session(model=tuple(step for _, r in turns for step in r), prompts=tuple(p for p, _ in turns), **rest)


def sessions() -> st.SearchStrategy[Session]:
    """Sessions of one to three prompts, each with what the model says to it (a round
    may fall short, e.g. after a loop or a retry: then the script runs out)."""
    prompts = st.builds(Prompt, text=st.sampled_from(["go", "again", "fix it"]), queued=st.sampled_from([False, False, True]))
    return st.builds(
        _session,
        turns=st.lists(st.tuples(prompts, rounds | st.just(())), min_size=1, max_size=3),
        answers=st.lists(
            st.builds(
                Answer,
                outcome=st.sampled_from(["proceed_once", "proceed_once", "proceed_always", "cancel"]),
                after_ms=st.sampled_from([0, 0, 10, 5000]),
                twice=st.sampled_from([False, False, True]),
            ),
            max_size=3,
        ).map(tuple),
        cancels=st.one_of(st.just(()), st.just(()), st.tuples(moments)),
        bogus=st.lists(
            st.builds(Bogus, kind=st.sampled_from(BOGUS_KINDS), at_ms=st.sampled_from([0, 5, 500])), max_size=1
        ).map(tuple),
        close=st.one_of(st.none(), st.none(), st.none(), moments),
        interactive=st.sampled_from([True, True, True, False]),
        follower=st.none() | followers,
    )


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

    def begin(self, key: str) -> Span:
        assert self.bus is not None
        span = Span(key, trio.current_time(), self.bus.next_seq(SID))
        self.items.append(span)
        return span

    def end(self, span: Span, how: str) -> None:
        assert self.bus is not None
        span.end_t, span.end_seq, span.how = trio.current_time(), self.bus.next_seq(SID), how


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
                if payload.midstream:
                    await emit({"candidates": [{"content": {"role": "model", "parts": [{"text": "partial"}]}}]})
                status = payload.status
                raise BackendError(
                    f"fault {status}" if status is not None else "fetch failed",
                    status=status,
                    http_status=status,
                    network_code=None if status is not None else "ECONNRESET",
                    phase="stream" if payload.midstream else "connect",
                )
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

    def check(self, tool_name: str, args: Mapping[str, Any], *, approval_mode: str | None = None) -> _Verdict:
        if tool_name == "deny_tool":
            return _Verdict("deny", "not here")
        if isinstance(args, Mapping) and args.get("ask") and tool_name not in self.always:
            return _Verdict("ask_user")
        return _Verdict("allow")

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
        notices = {env.message.kind for env in self.envelopes if type(env.message).__name__ == "TurnNotice"}
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
        waves = {}
        for env in self.envelopes:
            if isinstance(env.message, ToolCallUpdated) and env.message.status == "executing":
                key = (env.message.batch_id, env.message.wave)
                waves[key] = waves.get(key, 0) + 1
        if any(n > 1 for n in waves.values()):
            out.append("a parallel wave ran")
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
                ApprovalAnswered(session_id=SID, correlation_id=request.correlation_id, outcome=how.outcome, answered_by=who),
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
            async for env in sub:
                state.seen += 1
                msg = env.message
                latest = type(msg).__name__
                counts[latest] = counts.get(latest, 0) + 1
                for c in s.cancels:
                    if c.due(state.seen, counts, latest):
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
    stack = [trio.lowlevel.current_root_task()]
    while stack:
        task = stack.pop()
        names.append(task.name)
        for nursery in task.child_nurseries:
            stack.extend(nursery.child_tasks)
    return names


GATEWAY_TASK = "actors.gateway._actor.GatewayActor.run"


async def _run(s: Session, run: Run, workspace: Path) -> None:
    bus = Bus()
    run.tools.bus = run.model.bus = bus
    tools = explore_tools(run.tools, run.procs)
    cfg = session_config(workspace, run.recording_path, tools, s.interactive)
    backend = ScriptedBackend(s.model, run.model)
    async with trio.open_nursery() as nursery:
        await nursery.start(GatewayActor(bus, backend, rng=random.Random(0)).run)
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
                name for name in _task_names() if name.startswith("actors.") and name != GATEWAY_TASK
            ]
            run.alive_after_close = run.procs.alive()
        run.stuck = deadline.cancelled_caught
        bus.unsubscribe(timeline)
        port.close()
        bus.disconnect("gateway")
        nursery.cancel_scope.cancel()


def run_session(s: Session) -> Run:
    """Run ``s`` on a fresh virtual clock; load its recording; replay it (invariant 5)."""
    base = SHM if SHM.is_dir() and os.access(SHM, os.W_OK) else None
    with tempfile.TemporaryDirectory(dir=base, prefix="explored-") as tmp:
        workspace = Path(tmp)
        run = Run(session=s, recording_path=workspace / "rec.jsonl")
        try:
            trio.run(_run, s, run, workspace, clock=trio.testing.MockClock(autojump_threshold=0))
        except BaseExceptionGroup as group:
            for name, is_it in KNOWN_CRASHES.items():
                if group.split(is_it)[0] is not None:
                    run.crash = name
                    return run
            raise
        finally:
            run.procs.kill_all()
        run.recording = load_recording(run.recording_path)
        if not run.stuck:
            run.replay_problem = replay_problem(run.recording, explore_tools(Spans(), Processes()))
    return run


KNOWN_CRASHES: dict[str, Callable[[BaseException], bool]] = {}
"""How each known crash (``KNOWN_RUNTIME_BUGS`` with no invariant) shows itself."""


def replay_problem(recording: Recording, tools: Mapping[str, Any]) -> str | None:
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
    for checker in (_history, _turn_ends, _replies, _sequence, _replay, _waves, _lifetimes):
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


def _replies(run: Run) -> Iterable[Violation]:
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
    for (request_type, key), seq in open_.items():
        yield Violation(3, f"{request_type.__name__} {key} (seq {seq}) never got its terminal reply")
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


def _sequence(run: Run) -> Iterable[Violation]:
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
                starts = {s.start_t for s in ran}
                ends = [s.end_t for s in ran if s.end_t is not None]
                if len(starts) > 1 or (ends and max(starts) > min(ends)):
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
