"""Stand-ins that make a replay's inputs come from the recording.

- ``RecordedTool`` wraps a tool's description (name, schema, kind) and answers
  validation and execution from the recording: the recorded live output, then the
  recorded ``ToolResult`` after the recorded duration (virtual time); a call recorded
  as cancelled (or cut off) waits until it is cancelled again.
- ``LiveTool`` runs the real tool in the replay's copy of the workspace. While any live
  call runs, the virtual clock runs at real speed and does not jump (a subprocess wait
  is not idleness); otherwise it jumps as usual.
  Its confirmation details (what an approval shows: a diff, the whole command) are
  made by the real tool on the replay's copy of the workspace; a ``RecordedTool``'s
  are the ones recorded in ``ApprovalRequested`` for the same call.
- ``RecordedPolicy`` answers the scheduler's policy checks with the decisions the
  recording shows, in the order the scheduler asked them.
"""

from __future__ import annotations

import collections
import inspect
import json
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs
import trio
import trio.testing

from actors.recording import RecordedLine
from actors.scheduler import DENIED_BY_POLICY
from actors.tools import OutputSink, Tool, ToolEnv
from bus.json_values import thaw
from bus.messages import (
    ApprovalRequested,
    ApprovalSettled,
    BatchSettled,
    RunTool,
    ToolCallUpdated,
    ToolFinished,
    ToolOutputStreamed,
    ToolResult,
)

PROCEED_ALWAYS = frozenset({"proceed_always", "proceed_always_and_save", "proceed_always_tool"})


@attrs.define
class RecordedCall:
    """One recorded run of a call: what it printed and how it ended."""

    name: str
    outputs: list[str] = attrs.field(factory=list)
    finished: ToolFinished | None = None


@attrs.define
class ToolScript:
    """Per call id (a FIFO: models may reuse ids across turns), the recorded runs and
    validation outcomes."""

    runs: dict[str, collections.deque[RecordedCall]] = attrs.field(factory=dict)
    validation: dict[str, collections.deque[str | None]] = attrs.field(factory=dict)
    kinds: dict[str, str] = attrs.field(factory=dict)
    """Tool name -> executor kind, from the addresses ``RunTool`` went to."""
    shown: dict[str, collections.deque[dict[str, Any]]] = attrs.field(factory=dict)
    """Per call (tool name and arguments, a FIFO), the confirmation details its
    ``ApprovalRequested`` showed, less the scheduler's own ``type`` and ``title``."""

    @classmethod
    def from_lines(cls, lines: Sequence[RecordedLine]) -> ToolScript:
        script = cls()
        open_runs: dict[str, RecordedCall] = {}
        validating: dict[tuple[str, str], str] = {}
        for rec in lines:
            msg = rec.env.message
            match msg:
                case RunTool():
                    run = RecordedCall(name=msg.name)
                    open_runs[msg.call_id] = run
                    script.runs.setdefault(msg.call_id, collections.deque()).append(run)
                    recipient = rec.env.recipient or ""
                    if recipient.startswith("exec."):
                        script.kinds.setdefault(msg.name, recipient[5:].split(":", 1)[0])
                case ApprovalRequested():
                    details = msg.details if isinstance(msg.details, Mapping) else {}
                    shown = {k: v for k, v in details.items() if k not in SCHEDULER_DETAILS}
                    script.shown.setdefault(_call_key(msg.name, msg.args), collections.deque()).append(shown)
                case ToolOutputStreamed():
                    if msg.call_id in open_runs:
                        open_runs[msg.call_id].outputs.append(msg.text)
                case ToolFinished():
                    found = open_runs.pop(msg.call_id, None)
                    if found is not None:
                        found.finished = msg
                case ToolCallUpdated(status="validating"):
                    validating[(msg.batch_id, msg.call_id)] = msg.call_id
                case BatchSettled():
                    for call in msg.calls:
                        if (msg.batch_id, call.call_id) in validating:
                            outcome = call.error_message if call.error_type == "invalid_tool_params" else None
                            script.validation.setdefault(call.call_id, collections.deque()).append(outcome)
                case _:
                    pass
        return script

    def next_run(self, call_id: str) -> RecordedCall | None:
        queue = self.runs.get(call_id)
        return queue.popleft() if queue else None

    def next_validation(self, call_id: str) -> str | None:
        queue = self.validation.get(call_id)
        return queue.popleft() if queue else None

    def next_shown(self, name: str, args: Mapping[str, Any]) -> dict[str, Any]:
        queue = self.shown.get(_call_key(name, args))
        return queue.popleft() if queue else {}


SCHEDULER_DETAILS = frozenset({"type", "title"})
"""The keys of ``ApprovalRequested.details`` the scheduler sets, not the tool."""


def _call_key(name: str, args: Mapping[str, Any]) -> str:
    return json.dumps([name, thaw(args)], sort_keys=True, default=str)


class LiveClock:
    """Runs the virtual clock at real speed while live tools run (see module doc)."""

    def __init__(self, clock: trio.testing.MockClock | None) -> None:
        self.clock = clock
        self.active = 0
        self._jump = clock.autojump_threshold if clock is not None else 0.0

    def enter(self) -> None:
        self.active += 1
        if self.clock is not None and self.active == 1:
            self._jump = self.clock.autojump_threshold
            self.clock.autojump_threshold = math.inf
            self.clock.rate = 1.0

    def exit(self) -> None:
        self.active -= 1
        if self.clock is not None and self.active == 0:
            self.clock.rate = 0.0
            self.clock.autojump_threshold = self._jump


class _Delegate:
    """The description half of a tool (name, schema, kind) taken from ``inner``."""

    def __init__(self, inner: Tool) -> None:
        self.inner = inner
        self.name = inner.name
        self.display_name = inner.display_name
        self.kind = inner.kind

    def declaration(self, model: str) -> dict[str, Any]:
        return self.inner.declaration(model)

    def describe(self, args: Mapping[str, Any], env: ToolEnv) -> str:
        return self.inner.describe(args, env)


class RecordedTool(_Delegate):
    def __init__(self, inner: Tool, script: ToolScript, validating_call: Callable[[], str | None]) -> None:
        super().__init__(inner)
        self.script = script
        self.validating_call = validating_call
        self._cancelled: dict[str, ToolResult] = {}
        """The recorded result of each call recorded as cancelled, by call id."""

    def cancelled_result(self, streamed: str, call_id: str) -> ToolResult:
        """A call cancelled again ends with what was recorded for it."""
        return self._cancelled.pop(call_id, None) or ToolResult(cancelled=True, llm_content=streamed)

    def validate(self, args: Mapping[str, Any], env: ToolEnv) -> str | None:
        call_id = self.validating_call()
        return self.script.next_validation(call_id) if call_id is not None else None

    def confirmation_details(self, args: Mapping[str, Any], env: ToolEnv) -> dict[str, Any]:
        """The details the recorded approval of this call showed (the scheduler asks
        once per approval it requests, in the recorded order)."""
        return self.script.next_shown(self.name, args)

    async def execute(
        self, args: Mapping[str, Any], env: ToolEnv, output: OutputSink | None = None, *, call_id: str = ""
    ) -> ToolResult:
        run = self.script.next_run(call_id)
        if run is None:
            raise RuntimeError(f"the recording has no run of {self.name} call {call_id!r}")
        for text in run.outputs:
            if output is not None:
                await output(text)
        if run.finished is None or run.finished.result.cancelled:
            # It ends the way it did: cancelled. Output the executor had taken but whose
            # message never went out (the cancel cut its send short) is taken again
            # the same way: its send waits at the gate until the cancel arrives.
            if run.finished is not None:
                self._cancelled[call_id] = run.finished.result
            shown = "".join(run.outputs)
            kept = run.finished.result.llm_content if run.finished is not None else None
            if output is not None and isinstance(kept, str) and kept.startswith(shown) and len(kept) > len(shown):
                await output(kept[len(shown) :])
            await trio.sleep_forever()
        assert run.finished is not None
        # It finished as recorded even if a cancel now arrives while it "runs" (it did
        # when recorded: the cancel came too late); the pause is bounded.
        with trio.CancelScope(shield=True):
            await trio.sleep(run.finished.duration_ms / 1000)
        return run.finished.result


class LiveTool(_Delegate):
    def __init__(self, inner: Tool, clock: LiveClock) -> None:
        super().__init__(inner)
        self.clock = clock
        self._takes_call_id = "call_id" in inspect.signature(inner.execute).parameters
        close = getattr(inner, "close_session", None)
        if close is not None:
            self.close_session = close
        shows = getattr(inner, "confirmation_details", None)
        if shows is not None:
            self.confirmation_details = shows  # the real tool's, on the copy of the workspace
        cancelled = getattr(inner, "cancelled_result", None)
        if cancelled is not None:
            self.cancelled_result = cancelled  # the real tool's, as the live run had it

    def validate(self, args: Mapping[str, Any], env: ToolEnv) -> str | None:
        return self.inner.validate(args, env)

    async def execute(
        self, args: Mapping[str, Any], env: ToolEnv, output: OutputSink | None = None, *, call_id: str = ""
    ) -> ToolResult:
        self.clock.enter()
        try:
            if self._takes_call_id:
                result: ToolResult = await self.inner.execute(args, env, output, call_id=call_id)  # type: ignore[call-arg]
                return result
            return await self.inner.execute(args, env, output)
        finally:
            self.clock.exit()


class StubTool:
    """A tool the recording used that this build does not have: any arguments."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.display_name = name
        self.kind = "other"

    def declaration(self, model: str) -> dict[str, Any]:
        return {"name": self.name, "description": "", "parametersJsonSchema": {"type": "object"}}

    def validate(self, args: Mapping[str, Any], env: ToolEnv) -> str | None:
        return None

    def describe(self, args: Mapping[str, Any], env: ToolEnv) -> str:
        return self.name

    async def execute(self, args: Mapping[str, Any], env: ToolEnv, output: OutputSink | None = None) -> ToolResult:
        return ToolResult(error_type="tool_not_registered", error_message=f"{self.name} is not in this build")


@attrs.frozen
class Verdict:
    decision: str
    deny_message: str | None = None


def policy_decisions(lines: Sequence[RecordedLine]) -> list[Verdict]:
    """The answers the scheduler got from its policy, in the order it asked.

    A check shows as a call's first state after ``validating``: ``scheduled`` (allow),
    ``awaiting_approval`` (ask), or ``error`` with ``policy_violation`` (deny) or with
    the headless "requires user confirmation" error (ask). After a "proceed always"
    answer the scheduler checks the wave's other waiting calls again: allowed ones are
    scheduled before the answered call is.
    """
    settled: dict[tuple[str, str], tuple[str | None, str | None]] = {}
    for rec in lines:
        msg = rec.env.message
        if isinstance(msg, BatchSettled):
            for call in msg.calls:
                settled[(msg.batch_id, call.call_id)] = (call.error_type, call.error_message)
    out: list[Verdict] = []
    status: dict[tuple[str, str], str] = {}
    order: dict[str, list[str]] = {}
    asked: dict[str, tuple[str, str]] = {}
    for i, rec in enumerate(lines):
        msg = rec.env.message
        match msg:
            case ToolCallUpdated():
                key = (msg.batch_id, msg.call_id)
                calls = order.setdefault(msg.batch_id, [])
                if msg.call_id not in calls:
                    calls.append(msg.call_id)
                if status.get(key) == "validating":
                    if msg.status == "scheduled":
                        out.append(Verdict("allow"))
                    elif msg.status == "awaiting_approval":
                        out.append(Verdict("ask_user"))
                    elif msg.status == "error":
                        error_type, message = settled.get(key, (None, None))
                        if error_type == "policy_violation":
                            rest = (message or "")[len(DENIED_BY_POLICY) :].strip()
                            out.append(Verdict("deny", rest or None))
                        elif error_type == "unhandled_exception":
                            out.append(Verdict("ask_user"))
                status[key] = msg.status
            case ApprovalRequested():
                asked[msg.correlation_id] = (msg.batch_id, msg.call_id)
            case ApprovalSettled() if msg.outcome in PROCEED_ALWAYS and msg.correlation_id in asked:
                batch_id, answered = asked[msg.correlation_id]
                for other in order.get(batch_id, []):
                    if other == answered or status.get((batch_id, other)) != "awaiting_approval":
                        continue
                    out.append(Verdict("allow" if _scheduled_first(lines, i, batch_id, other, answered) else "ask_user"))
            case _:
                pass
    return out


def _scheduled_first(lines: Sequence[RecordedLine], start: int, batch_id: str, other: str, answered: str) -> bool:
    for rec in lines[start + 1 :]:
        msg = rec.env.message
        if isinstance(msg, ToolCallUpdated) and msg.batch_id == batch_id and msg.status == "scheduled":
            if msg.call_id == other:
                return True
            if msg.call_id == answered:
                return False
    return False


class RecordedPolicy:
    """The scheduler's ``PolicyLike``, answering from ``policy_decisions``."""

    def __init__(self, decisions: Sequence[Verdict]) -> None:
        self._decisions = collections.deque(decisions)
        self.asked = 0

    def check(
        self,
        tool_name: str,
        args: Mapping[str, Any],
        *,
        approval_mode: str | None = None,
        tool_annotations: Mapping[str, Any] | None = None,
    ) -> Verdict:
        self.asked += 1
        return self._decisions.popleft() if self._decisions else Verdict("allow")

    def add_session_rule(self, tool_name: str, **_: Any) -> None:
        pass  # the recorded decisions already reflect it
