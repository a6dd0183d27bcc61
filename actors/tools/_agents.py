"""``invoke_agent`` and ``complete_task``: subagents as child sessions.

``invoke_agent`` (``agent_name``, ``prompt``) runs a subagent the way Gemini CLI's
``LocalAgentExecutor`` does, with the child's turns run by a child *session* (its own
session, turn, scheduler, executors, loop detector and recorder, started by the wiring
through ``ToolEnv.agents``). This module is the supervisor of that child: it talks to
it only in bus messages and maps what happens to Gemini CLI's termination modes.

- The child runs the query as one prompt; its session is bounded to the agent's
  ``max_turns`` model turns, and a deadline of ``timeout_mins`` (paused while one of its
  calls waits for approval) cancels its turn.
- ``GOAL``: a batch in which ``complete_task`` succeeded (the child's turn ends
  ``goal``); its argument, validated against the agent's output schema by the child's
  scheduler (a failure is an error back to the agent, not completion), is the result.
- ``ERROR_NO_COMPLETE_TASK_CALL``: the model answered without calling a tool;
  ``MAX_TURNS``; ``TIMEOUT``: each gets exactly one recovery turn — the warning message,
  one more model turn, a 60 s grace period — and becomes ``GOAL`` when that turn calls
  ``complete_task``.
- ``ERROR``: the child's turn failed (API error, loop...): the call's error.
- ``ABORTED``: the child's turn was cancelled by someone else than the deadline; the
  call ends cancelled. When this call itself is cancelled, the wiring cancels the child
  and waits for its acknowledgement before the call's cancelled result goes out.

Everything the child does is reported in the parent session as ``SubagentActivity``
nested under this call; its approval requests are re-published in the parent session
(answered straight to the child's scheduler).
"""

from __future__ import annotations

import datetime
import functools
import json
import math
from collections.abc import Mapping
from typing import Any, assert_never

import attrs
import trio

from bus.json_values import thaw
from bus.messages import (
    ApprovalRequested,
    ApprovalSettled,
    CancelTurn,
    ConfigureSession,
    StopReason,
    SubagentActivity,
    SubagentActivityKind,
    SubmitPrompt,
    TextStreamed,
    ThoughtStreamed,
    ToolCallRequested,
    ToolCallUpdated,
    ToolFinished,
    ToolResult,
    TurnCancelAcknowledged,
    TurnEnded,
    TurnNotice,
    new_id,
)

from ._agent_defs import (
    AGENT_TOOL,
    COMPLETE_TASK,
    GRACE_PERIOD_S,
    AgentDefinition,
    template,
)
from ._base import ChildSession, OutputSink, SubagentAccess, ToolEnv


@functools.cache
def agentbus_version() -> str:
    """Our version, for the agents' ``cliVersion`` input (looked up when first needed:
    ``importlib.metadata`` costs start-up time)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("agentbus")
    except PackageNotFoundError:  # a source checkout that is not installed
        return "0"

REJECTED_PREFIX = "User rejected this operation."
REJECTED_MESSAGE = (
    f"{REJECTED_PREFIX} Please acknowledge this, rethink your strategy, and try a different "
    "approach. If you cannot proceed without the rejected operation, summarize the issue and "
    f"use `{COMPLETE_TASK}` to report your findings and the blocker."
)
"""The response a subagent's model gets for a call the user rejected (soft rejection)."""

SETTLE_GRACE_S = 5.0

GOAL = "GOAL"
TIMEOUT = "TIMEOUT"
MAX_TURNS = "MAX_TURNS"
ABORTED = "ABORTED"
ERROR = "ERROR"
NO_COMPLETE = "ERROR_NO_COMPLETE_TASK_CALL"

_EXPLANATIONS = {
    TIMEOUT: "You have exceeded the time limit.",
    MAX_TURNS: "You have exceeded the maximum number of turns.",
    NO_COMPLETE: "You have stopped calling tools without finishing.",
}


def final_warning(reason: str) -> str:
    return (
        f"{_EXPLANATIONS[reason]} You have one final chance to complete the task with a short "
        f"grace period. You MUST call `{COMPLETE_TASK}` immediately with your best answer and "
        "explain that your investigation was interrupted. Do not call any other tools."
    )


# -- complete_task ----------------------------------------------------------------------
@attrs.define
class CompleteTaskTool:
    """The subagent's way to finish; its schema is the agent's output."""

    output_name: str | None = None
    output_schema: Mapping[str, Any] | None = None
    name: str = COMPLETE_TASK
    display_name: str = "Complete Task"
    kind: str = "other"

    def declaration(self, model: str) -> dict[str, Any]:
        if self.output_name is not None and self.output_schema is not None:
            schema: dict[str, Any] = {
                "type": "object",
                "properties": {self.output_name: thaw(self.output_schema)},
                "required": [self.output_name],
            }
            text = "Submit your final answer and complete the task. This is the ONLY way to finish."
        else:
            schema = {
                "type": "object",
                "properties": {
                    "result": {
                        "type": "string",
                        "description": (
                            "Your final results or findings for the agent that asked, complete "
                            "and in the format your instructions request."
                        ),
                    }
                },
                "required": ["result"],
            }
            text = (
                "Submit your final findings and complete the task. This is the ONLY way to finish."
            )
        return {"name": self.name, "description": text, "parametersJsonSchema": schema}

    def validate(self, args: Mapping[str, Any], env: ToolEnv) -> str | None:
        if self.output_name is not None:
            if args.get(self.output_name) is None:
                return f"Missing required argument '{self.output_name}' for completion."
            return None
        result = args.get("result")
        if result is None or (isinstance(result, str) and not result.strip()):
            return (
                'Missing required "result" argument. You must provide your findings when '
                f"calling {COMPLETE_TASK}."
            )
        return None

    def describe(self, args: Mapping[str, Any], env: ToolEnv) -> str:
        return "Completing task and submitting results."

    async def execute(
        self, args: Mapping[str, Any], env: ToolEnv, output: OutputSink | None = None
    ) -> ToolResult:
        value = args.get(self.output_name or "result")
        submitted = (
            value if isinstance(value, str) else json.dumps(value, indent=2, ensure_ascii=False)
        )
        display = (
            "Output submitted and task completed."
            if self.output_name is not None
            else "Result submitted and task completed."
        )
        return ToolResult(
            llm_content=display,
            return_display=display,
            data={"taskCompleted": True, "submittedOutput": submitted},
        )


# -- invoke_agent -----------------------------------------------------------------------
_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "agent_name": {
            "type": "string",
            "description": "Which subagent to run: one of those the system instruction lists.",
        },
        "prompt": {
            "type": "string",
            "description": (
                "Everything the subagent needs, since it sees nothing else: the whole task, "
                "its context and background, the questions to answer and the form the "
                "answer should take."
            ),
        },
    },
    "required": ["agent_name", "prompt"],
}


@attrs.define
class InvokeAgentTool:
    name: str = AGENT_TOOL
    display_name: str = "Invoke Subagent"
    kind: str = "agent"

    def declaration(self, model: str) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": (
                "Hands a task to a subagent, which works on it in its own context with its "
                "own tools and returns its result."
            ),
            "parametersJsonSchema": _SCHEMA,
        }

    def validate(self, args: Mapping[str, Any], env: ToolEnv) -> str | None:
        access = env.agents
        name = str(args.get("agent_name") or "")
        if access is None:
            return "Subagents are not available in this session."
        if name not in access.definitions():
            why = access.broken().get(name)
            if why is not None:
                return f"Subagent '{name}' could not be loaded: {why}"
            return f"Subagent '{name}' not found."
        if access.depth >= access.max_depth:
            return (
                f"Subagent '{name}' cannot be started: subagents may nest {access.max_depth} "
                f"deep (agents.maxDepth) and this session is at depth {access.depth}."
            )
        return None

    def describe(self, args: Mapping[str, Any], env: ToolEnv) -> str:
        return f"Delegating to agent '{args.get('agent_name', '')}'"

    async def execute(
        self,
        args: Mapping[str, Any],
        env: ToolEnv,
        output: OutputSink | None = None,
        *,
        call_id: str = "",
    ) -> ToolResult:
        access = env.agents
        problem = self.validate(args, env)
        if problem is not None or access is None:
            return ToolResult(
                error_type="invalid_tool_params", error_message=problem or "no subagents"
            )
        definition: AgentDefinition = access.definitions()[str(args["agent_name"])]
        try:
            run = _AgentRun(definition, access, env, call_id, output)
            outcome = await run.run(str(args.get("prompt") or ""))
        except _AgentFailed as failed:
            message = f"Subagent '{definition.name}' failed. Error: {failed}"
            return ToolResult(
                llm_content=message, error_type="subagent_failed", error_message=message
            )
        if outcome.terminate_reason == ABORTED:
            return ToolResult(cancelled=True, llm_content="")
        text = (
            f"Subagent '{definition.name}' finished.\n"
            f"Termination Reason: {outcome.terminate_reason}\n"
            f"Result:\n{outcome.result}"
        )
        return ToolResult(
            llm_content=text,
            return_display=text,
            data={
                "agentId": run.child_id,
                "result": outcome.result,
                "terminate_reason": outcome.terminate_reason,
                "turn_count": outcome.turn_count,
                "duration_ms": outcome.duration_ms,
            },
        )


@attrs.frozen
class AgentOutput:
    """Gemini CLI's ``OutputObject``."""

    result: str
    terminate_reason: str
    turn_count: int
    duration_ms: int


class _AgentFailed(Exception):
    pass


@attrs.define
class _Ended:
    stop_reason: StopReason
    timed_out: bool
    submitted: str | None
    model_requests: int
    error: str | None = None


class _AgentRun:
    """Supervises one child session for one ``invoke_agent`` call."""

    def __init__(
        self,
        definition: AgentDefinition,
        access: SubagentAccess,
        env: ToolEnv,
        call_id: str,
        output: OutputSink | None,
    ) -> None:
        self.d = definition
        self.access = access
        self.env = env
        self.call_id = call_id or new_id()
        self.output = output
        self.child_id = ""
        self.requests = 0
        """Model turns the child session counted so far (its ``maxSessionTurns`` count)."""
        self.budget = definition.timeout_mins * 60.0
        """Seconds of the deadline left (not counting time spent waiting for approval)."""
        self.awaiting: set[str] = set()
        """Correlation ids of the child's approval requests not settled yet."""
        self.completions: set[str] = set()
        self.submitted: str | None = None

    async def run(self, prompt: str) -> AgentOutput:
        d = self.d
        model = self.env.active_model or self.env.model
        mode = self.env.approval_mode or "default"
        today = datetime.date.today()
        inputs = {
            **d.inputs_for(prompt),
            "cliVersion": agentbus_version(),
            "activeModel": model,
            "today": f"{today.month}/{today.day}/{today.year}",
        }
        try:
            system = agent_system_prompt(d, inputs, self.access.environment(), approval_mode=mode)
            query = template(d.query, inputs) if d.query else "Get Started!"
        except ValueError as exc:
            raise _AgentFailed(str(exc)) from None
        try:
            return await self._supervise(d, prompt, system, query, model=model, approval_mode=mode)
        except _AgentFailed:
            raise
        except Exception as exc:  # the child crashed: that is this call's failure
            raise _AgentFailed(_describe(exc)) from None

    async def _supervise(
        self, d: AgentDefinition, prompt: str, system: str, query: str, *, model: str, approval_mode: str
    ) -> AgentOutput:
        started = trio.current_time()
        failure: str | None = None
        async with self.access.open_child(
            d,
            system_instruction=system,
            parent_call_id=self.call_id,
            model=model,
            approval_mode=approval_mode,
        ) as child:
            try:
                outcome, failure = await self._drive(child, d, prompt, query, started)
            finally:
                await self._settle_approvals(child)
        if failure is not None:
            # Raised outside the child's nursery (which would wrap it in a group).
            raise _AgentFailed(failure)
        return outcome

    async def _settle_approvals(self, child: ChildSession) -> None:
        """Approvals of the child still open in the parent's clients: settled (the
        child is gone or done), so that no client keeps asking (bounded: observers may
        be slow)."""
        with trio.move_on_after(SETTLE_GRACE_S, shield=True):
            for correlation_id in sorted(self.awaiting):
                await child.publish_parent(
                    ApprovalSettled(
                        session_id=self.env.session_id,
                        correlation_id=correlation_id,
                        outcome="cancel",
                        answered_by=f"agent:{child.session_id}",
                    )
                )
            self.awaiting.clear()

    async def _drive(
        self, child: ChildSession, d: AgentDefinition, prompt: str, query: str, started: float
    ) -> tuple[AgentOutput, str | None]:
        failure: str | None = None
        self.child_id = child.session_id
        await self._activity(child, "started", text=prompt)
        ended = await self._prompt(child, [{"text": query}], deadline=True)
        reason, result = self._reason(ended)
        turns = ended.model_requests - (1 if ended.stop_reason == "max_session_turns" else 0)
        if reason in (TIMEOUT, MAX_TURNS, NO_COMPLETE):
            recovered = await self._recover(child, reason)
            if recovered is not None:
                reason, result = GOAL, recovered
            else:
                result = {
                    TIMEOUT: f"Agent timed out after {_minutes(d.timeout_mins)} minutes.",
                    MAX_TURNS: f"Agent reached max turns limit ({d.max_turns}).",
                    NO_COMPLETE: f"Agent stopped calling tools but did not call '{COMPLETE_TASK}'.",
                }[reason]
                await self._activity(child, "error", text=result)
        if reason == ERROR:
            await self._activity(child, "error", text=result or "error")
            failure = result or "the subagent's turn failed"
        if reason == GOAL:
            result = result or "Task completed."
        elif not result:
            result = "Agent execution was terminated before completion."
        outcome = AgentOutput(
            result=result,
            terminate_reason=reason,
            turn_count=turns,
            duration_ms=int((trio.current_time() - started) * 1000),
        )
        await self._activity(child, "finished", text=result, status=reason)
        return outcome, failure

    def _reason(self, ended: _Ended) -> tuple[str, str]:
        match ended.stop_reason:
            case "goal":
                return GOAL, ended.submitted or ""
            case "cancelled":
                return (TIMEOUT, "") if ended.timed_out else (ABORTED, "")
            case "end_turn":
                return NO_COMPLETE, ""
            case "max_session_turns":
                return MAX_TURNS, ""
            case (
                "error"
                | "invalid_stream"
                | "loop_detected"
                | "stop_execution"
                | "agent_stopped"
                | "agent_blocked"
                | "context_window_overflow"
                | "turn_limit"
            ):
                return ERROR, ended.error or f"the subagent's turn ended: {ended.stop_reason}"
            case _ as unreachable:
                assert_never(unreachable)

    async def _recover(self, child: ChildSession, reason: str) -> str | None:
        await self._activity(
            child,
            "thought",
            text=f"Execution limit reached ({reason}). Attempting one final recovery turn with a grace period.",
        )
        # Exactly one more model turn (the child counts its turns; see _prompt).
        await child.send(
            ConfigureSession(
                session_id=child.session_id,
                request_id=new_id(),
                max_session_turns=self.requests + 1,
            )
        )
        ended = await self._prompt(
            child, [{"text": final_warning(reason)}], deadline=False, grace=GRACE_PERIOD_S
        )
        if ended.stop_reason == "goal":
            await self._activity(child, "thought", text="Graceful recovery succeeded.")
            return ended.submitted or "Task completed during grace period."
        why = "Grace period timed out." if ended.timed_out else ended.stop_reason
        await self._activity(
            child, "error", text=f"Graceful recovery attempt failed. Reason: {why}"
        )
        return None

    async def _prompt(
        self, child: ChildSession, parts: list[Any], *, deadline: bool, grace: float | None = None
    ) -> _Ended:
        """Submit one prompt to the child and follow it to its ``TurnEnded`` (and, when
        this run cancelled it, the acknowledgement)."""
        prompt_id = new_id()
        self.submitted = None
        await child.send(
            SubmitPrompt(session_id=child.session_id, prompt_id=prompt_id, parts=tuple(parts))
        )
        cancelling = False
        timed_out = False
        ended: TurnEnded | None = None
        acknowledged = False
        grace_at = trio.current_time() + grace if grace is not None else math.inf
        while ended is None or (cancelling and not acknowledged):
            now = trio.current_time()
            if deadline and not self.awaiting and not cancelling:
                wake = now + self.budget
            elif not deadline and not cancelling:
                wake = grace_at
            else:
                wake = math.inf
            msg: Any = None
            with trio.move_on_at(wake):
                msg = await child.receive()
            if msg is not None:
                if deadline and not self.awaiting:
                    self.budget -= trio.current_time() - now
                match msg:
                    case TurnEnded(session_id=child.session_id):
                        ended = msg
                    case TurnCancelAcknowledged(session_id=child.session_id):
                        acknowledged = True
                    case _:
                        await self._follow(child, msg)
                continue
            # The deadline (or the grace period) passed: cancel the child's turn.
            self.budget = 0.0
            timed_out = cancelling = True
            if ended is None:
                await child.send(
                    CancelTurn(
                        session_id=child.session_id,
                        turn_id=None,
                        reason="subagent timed out",
                        requested_by=f"agent:{child.session_id}",
                    )
                )
            else:
                acknowledged = True
        self.requests += ended.model_requests
        return _Ended(
            stop_reason=ended.stop_reason,
            timed_out=timed_out,
            submitted=self.submitted,
            model_requests=self.requests,
            error=ended.error.message if ended.error is not None else None,
        )

    async def _follow(self, child: ChildSession, msg: Any) -> None:
        """What the child does, for the parent's clients (and the completion's output)."""
        if getattr(msg, "session_id", None) != child.session_id:
            return
        match msg:
            case ThoughtStreamed():
                text = f"{msg.subject}: {msg.description}" if msg.subject else msg.description
                await self._activity(child, "thought", text=text)
            case TextStreamed():
                await self._activity(child, "text", text=msg.text)
            case ToolCallRequested():
                if msg.name == COMPLETE_TASK:
                    self.completions.add(msg.call_id)
                await self._activity(
                    child,
                    "tool_call",
                    tool_call_id=msg.call_id,
                    tool_name=msg.name,
                    args=thaw(msg.args),
                )
            case ToolCallUpdated() if msg.status in ("success", "error", "cancelled"):
                await self._activity(
                    child,
                    "tool_update",
                    tool_call_id=msg.call_id,
                    tool_name=msg.name,
                    status=msg.status,
                    text=msg.detail,
                )
            case ToolFinished() if msg.call_id in self.completions:
                data = thaw(msg.result.data)
                if isinstance(data, dict) and data.get("taskCompleted") is True and self.submitted is None:
                    submitted = data.get("submittedOutput")  # the first completion wins
                    self.submitted = submitted if isinstance(submitted, str) else None
            case TurnNotice():
                await self._activity(child, "error", text=msg.message)
            case ApprovalRequested():
                self.awaiting.add(msg.correlation_id)
                await child.publish_parent(
                    attrs.evolve(
                        msg,
                        session_id=self._parent_sid(child),
                        answer_to=msg.answer_to or f"scheduler:{child.session_id}",
                        answer_session_id=msg.answer_session_id or child.session_id,
                    )
                )
            case ApprovalSettled():
                self.awaiting.discard(msg.correlation_id)
                await child.publish_parent(attrs.evolve(msg, session_id=self._parent_sid(child)))
            case SubagentActivity():
                # A grandchild's activity, nested one level deeper under this call.
                await child.publish_parent(
                    attrs.evolve(
                        msg,
                        session_id=self._parent_sid(child),
                        call_id=self.call_id,
                        depth=msg.depth + 1,
                    )
                )
            case _:
                pass

    def _parent_sid(self, child: ChildSession) -> str:
        return self.env.session_id

    async def _activity(self, child: ChildSession, kind: SubagentActivityKind, **fields: Any) -> None:
        await child.publish_parent(
            SubagentActivity(
                session_id=self.env.session_id,
                call_id=self.call_id,
                agent_name=self.d.name,
                child_session_id=child.session_id,
                kind=kind,
                depth=1,
                **fields,
            )
        )
        if self.output is not None and kind in ("tool_call", "thought", "error"):
            line = fields.get("tool_name") or fields.get("text") or ""
            await self.output(f"[{self.d.name}] {kind.replace('_', ' ')}: {line}\n")


def _describe(exc: BaseException) -> str:
    """The cause of a crash, unwrapped from exception groups (``Cancelled`` skipped)."""
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            if not isinstance(inner, trio.Cancelled):
                return _describe(inner)
    return f"{type(exc).__name__}: {exc}"


def _minutes(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def agent_system_prompt(
    definition: AgentDefinition,
    inputs: Mapping[str, Any],
    environment: str,
    *,
    approval_mode: str = "default",
) -> str:
    """The agent's system instruction: its prompt (a template over the inputs), the
    environment, and the rules of running as a subagent."""
    text = template(definition.system_prompt, inputs)
    text += f"\n\n# Environment Context\n{environment}"
    if approval_mode == "plan":
        text += (
            "\n\n# Execution Constraints\nThe session is in plan mode: do not change source "
            "code; write tools may only write the plan's Markdown files."
        )
    rules = [
        "Nobody can answer questions while you work: decide for yourself and keep going.",
        "Use the tools step by step until the task is done.",
        "Give file tools absolute paths, built from the environment context above.",
        "When the user rejects a tool call, take note, change your approach, and do not "
        "repeat the rejected call.",
    ]
    if definition.output_name is not None:
        rules.append(f"Finish by calling `{COMPLETE_TASK}` with your structured output.")
    else:
        rules.append(
            f"Finish by calling `{COMPLETE_TASK}` with your complete findings in its `result` "
            "argument, in the format your instructions ask for."
        )
    rules.append(f"Call no other tool in the turn in which you call `{COMPLETE_TASK}`.")
    rules.append(
        f"`{COMPLETE_TASK}` is the only way to finish: stopping without calling it means the "
        "task failed."
    )
    return text + "\n\nRules:\n" + "\n".join(f"* {rule}" for rule in rules)
