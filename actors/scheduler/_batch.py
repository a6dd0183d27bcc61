"""The running batch: one ``ScheduleBatch`` from validation to ``BatchSettled``, in
waves (BeforeTool hooks, policy and approvals for a whole wave, then its calls run
together; AfterTool hooks), each call's state changed only through the transition
table (``_call_state``). It reads executor replies, answers and cancels from its own
channel, which the actor (``_actor``) fills."""

from __future__ import annotations

import collections
import math
import random
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, assert_never

import attrs
import trio

from bus import DeliveryError, Port
from bus.json_values import thaw
from bus.messages import (
    ApprovalAnswered,
    ApprovalModeChanged,
    ApprovalRequested,
    ApprovalSettled,
    BatchCancelAcknowledged,
    BatchSettled,
    CancelBatch,
    CancelHooks,
    CancelTool,
    CompletedCall,
    Decision,
    HookEvent,
    HooksFinished,
    RunHooks,
    RunTool,
    ScheduleBatch,
    ToolCallRequest,
    ToolCallStatus,
    ToolCallUpdated,
    ToolFinished,
    ToolResult,
    new_id,
)
from bus.planted import planted

from ._call_state import CallState, advance, is_terminal
from ._logic import (
    ToolSpec,
    cancelled_response_parts,
    error_response_parts,
    function_response_parts,
    is_parallelizable,
    schema_error,
)
from ._policy_args import shell_always_allow
from ._policy_messages import confirmation_unsupported_message, tool_not_found_message
from ._wiring import DENIED_BY_POLICY, BatchInbox, PolicyVerdictLike

if TYPE_CHECKING:
    from bus.messages import Message  # the union: imported when first used (bus.messages)

    from ._actor import SchedulerActor


@attrs.define(eq=False)
class _Call:
    req: ToolCallRequest
    index: int
    args: Any = None
    """The arguments it runs with (a BeforeTool hook may replace the request's)."""
    name: str = ""
    """The tool it runs (a tail call's tool); ``req.name`` is what the model asked for."""
    status: CallState = "new"
    """Changed only by ``RunningBatch.update``, through the transition table."""
    modified_by_hook: bool = False
    forced_ask: bool = False
    replaced: tuple[CompletedCall, ...] = ()
    spec: ToolSpec | None = None
    result: CompletedCall | None = None
    decision: Decision | None = None
    wave: int = 0
    correlation_id: str | None = None
    started: float = 0.0

    @property
    def terminal(self) -> bool:
        return is_terminal(self.status)


async def send_quietly(port: Port, msg: Message, to: str) -> None:
    try:
        await port.send(msg, to=to)
    except DeliveryError:
        pass


class RunningBatch:
    """One batch's lifecycle. Reads executor replies and answers from its own channel."""

    def __init__(self, actor: SchedulerActor, port: Port, batch: ScheduleBatch) -> None:
        self.actor = actor
        self.w = actor.w
        self.port = port
        self.batch = batch
        self.sid = batch.session_id
        # Unbounded: the actor's loop must never block routing a reply to a batch.
        self.inbox_send, self.inbox = trio.open_memory_channel[BatchInbox](math.inf)
        # update_topic calls go first (stable), as in Gemini CLI.
        ordered = sorted(batch.calls, key=lambda c: 0 if c.name == "update_topic" else 1)
        self.calls = [_Call(req, i, args=thaw(req.args), name=req.name) for i, req in enumerate(ordered)]
        self.cancel_reason: str | None = None
        self.deferred: collections.deque[BatchInbox] = collections.deque()
        """Replies that arrived while the batch waited for something else (hooks)."""

    async def update(self, call: _Call, status: ToolCallStatus, detail: str = "") -> None:
        call.status = advance(call.req.call_id, call.status, status)
        await self.port.publish(
            ToolCallUpdated(
                session_id=self.sid,
                batch_id=self.batch.batch_id,
                call_id=call.req.call_id,
                name=call.name,
                status=status,
                wave=call.wave,
                detail=detail,
            )
        )

    async def fail(self, call: _Call, error_type: str, message: str, display: Any = None) -> None:
        call.result = CompletedCall(
            call_id=call.req.call_id,
            name=call.name,
            args=call.args,
            status="error",
            response_parts=tuple(error_response_parts(call.req.name, call.req.call_id, message)),
            result_display=message if display is None else display,
            error_type=error_type,
            error_message=message,
            decision=call.decision,
            replaced=call.replaced,
        )
        await self.update(call, "error", message)

    async def cancel_call(self, call: _Call, reason: str, *, model_error: str | None = None) -> None:
        parts = (
            error_response_parts(call.req.name, call.req.call_id, model_error)
            if model_error is not None
            else cancelled_response_parts(call.req.name, call.req.call_id, reason)
        )
        call.result = CompletedCall(
            call_id=call.req.call_id,
            name=call.name,
            args=call.args,
            status="cancelled",
            response_parts=tuple(parts),
            result_display=reason,
            decision=call.decision,
            replaced=call.replaced,
        )
        await self.update(call, "cancelled", reason)

    async def run(self) -> None:
        for call in self.calls:
            await self.update(call, "validating")
            await self._validate(call)
        pending = collections.deque(self.calls)
        wave = 0
        while pending:
            await self._drain()
            if self.cancel_reason is not None:
                for call in pending:
                    if not call.terminal:
                        await self.cancel_call(call, "Operation cancelled")
                break
            first = pending.popleft()
            first.wave = wave
            if first.terminal:
                wave += 1
                continue
            members = [first]
            if is_parallelizable(first.name, first.args):
                while pending and (is_parallelizable(pending[0].name, pending[0].args) or planted("scheduler.barrier_joins_wave")):
                    nxt = pending.popleft()
                    nxt.wave = wave
                    members.append(nxt)
            await self._run_wave(members, pending)
            wave += 1
        await self._drain()
        await self.settle()
        # A cancel can cross the settlement: take what arrived meanwhile. ``_drain``
        # returns with the inbox empty, and nothing awaits between here and the actor
        # forgetting this batch unless an acknowledgement is due (a later cancel then
        # finds no batch and is acknowledged by the actor).
        await self._drain()
        if self.cancel_reason is not None:
            await send_quietly(
                self.port,
                BatchCancelAcknowledged(session_id=self.sid, batch_id=self.batch.batch_id),
                self.batch.reply_to,
            )

    async def _drain(self) -> None:
        """Take messages that arrived while nothing was waiting for them."""
        while True:
            if self.deferred:
                msg = self.deferred.popleft()
            else:
                try:
                    msg = self.inbox.receive_nowait()
                except trio.WouldBlock:
                    return
            match msg:
                case CancelBatch():
                    if self.cancel_reason is None:
                        self.cancel_reason = msg.reason
                case ApprovalAnswered():
                    await self._late_answer(msg)
                case ApprovalModeChanged() | ToolFinished() | HooksFinished():
                    # Nothing waits for them: the mode is already the batch's (the
                    # actor set it) and no call waits for an approval; no call of this
                    # batch runs; a cancelled hooks request's late answer.
                    pass
                case _ as unreachable:
                    assert_never(unreachable)

    async def settle(self) -> None:
        results = tuple(c.result for c in self.calls if c.result is not None)
        assert len(results) == len(self.calls), "every call must be terminal"
        if planted("scheduler.completion_order"):
            results = tuple(sorted(results, key=lambda r: r.duration_ms))
        await send_quietly(
            self.port,
            BatchSettled(session_id=self.sid, batch_id=self.batch.batch_id, calls=results),
            self.batch.reply_to,
        )

    async def _validate(self, call: _Call) -> None:
        """Registry and argument checks (Gemini CLI builds the invocation here)."""
        spec = self.w.tools.get(call.name)
        if spec is None:
            names = self.w.registered_names or tuple(self.w.tools)
            await self.fail(call, "tool_not_registered", tool_not_found_message(call.name, names))
            return
        call.spec = spec
        problem = self._check_args(spec, call.args)
        if problem is not None:
            await self.fail(call, "invalid_tool_params", problem)

    def _policy_check(
        self, call: _Call, args: Mapping[str, Any], approval_mode: str
    ) -> PolicyVerdictLike:
        """The policy's verdict on ``call`` with ``args`` (an MCP tool's annotations name
        its server)."""
        annotations = call.spec.annotations if call.spec is not None else None
        if annotations is None:
            return self.w.policy.check(call.name, args, approval_mode=approval_mode)
        return self.w.policy.check(
            call.name, args, approval_mode=approval_mode, tool_annotations=annotations
        )

    @staticmethod
    def _mcp_context(call: _Call) -> dict[str, Any]:
        """An MCP call's ``mcp_context`` for its hooks (none for other tools)."""
        context = call.spec.mcp_context if call.spec is not None else None
        return {"mcp_context": dict(context)} if context is not None else {}

    def _check_args(self, spec: ToolSpec, args: Any) -> str | None:
        """The schema and the tool's own checks, on the event loop: they are bounded (a
        real path, the ignore files of the path's ancestors), cheaper than a thread hop
        per call, and the explored schedules' virtual clock cannot see a worker thread
        (it would jump past every deadline while one runs). The tools' walks and reads
        run in threads (their executors)."""
        try:
            problem = schema_error(spec.schema, args)
            return problem if problem is not None else spec.validate(args, self.batch.approval_mode)
        except Exception as exc:  # as Gemini CLI's build(): a throwing check is the call's error
            return str(exc) or type(exc).__name__

    def _shown(self, spec: ToolSpec, args: Any) -> Mapping[str, Any]:
        """The tool's confirmation details, on the event loop as ``_check_args`` (they
        are bounded: one file read up to a size, a diff with an edit budget). A tool
        that fails to make them is still asked about, without them."""
        try:
            return spec.details(args, self.batch.approval_mode)
        except Exception:
            return {}

    async def _run_wave(self, members: list[_Call], pending: collections.deque[_Call]) -> None:
        # 1. BeforeTool hooks, then policy and approvals, for every call of the wave.
        for call in members:
            if not call.terminal:
                await self._before_tool(call)
            if not call.terminal and self.cancel_reason is None:
                await self._decide(call)
        while any(c.status == "awaiting_approval" for c in members):
            msg = await self._next()
            match msg:
                case ApprovalAnswered():
                    await self._answer(msg, members, pending)
                case ApprovalModeChanged():
                    await self._mode_changed(msg, members)
                case CancelBatch():
                    self.cancel_reason = msg.reason
                    for call in members:
                        if call.status == "awaiting_approval":
                            await self.cancel_call(call, "Operation cancelled")
                case ToolFinished() | HooksFinished():
                    pass  # no call of this wave runs yet; a cancelled hooks request's late answer
                case _ as unreachable:
                    assert_never(unreachable)
        # 2. Execution starts once every call of the wave is scheduled or terminal.
        scheduled = [c for c in members if c.status == "scheduled"]
        if not scheduled:
            return
        if self.cancel_reason is not None:
            for call in scheduled:
                await self.cancel_call(call, "Operation cancelled")
            return
        if planted("scheduler.shuffled_dispatch"):
            random.shuffle(scheduled)
        running: dict[str, _Call] = {}
        for call in scheduled:
            assert call.spec is not None
            running[call.req.call_id] = call
            call.started = trio.current_time()
            await self.update(call, "executing")
            await self.port.send(
                RunTool(
                    session_id=self.sid,
                    call_id=call.req.call_id,
                    reply_to=self.w.address,
                    name=call.name,
                    args=call.args,
                    approval_mode=self.batch.approval_mode,
                    model=self.batch.model,
                    client_initiated=call.req.client_initiated,
                ),
                to=call.spec.executor,
            )
        tails: list[_Call] = []
        while running:
            msg = await self._next()
            match msg:
                case ToolFinished():
                    finished = running.pop(msg.call_id, None)
                    if finished is not None:
                        tail = await self._complete(finished, msg)
                        if tail is not None:
                            tails.append(tail)
                case CancelBatch():
                    if self.cancel_reason is None:
                        self.cancel_reason = msg.reason
                        for call in running.values():
                            assert call.spec is not None
                            await self.port.send(
                                CancelTool(session_id=self.sid, call_id=call.req.call_id, reason=msg.reason),
                                to=call.spec.executor,
                            )
                case ApprovalAnswered():
                    await self._late_answer(msg)
                case ApprovalModeChanged() | HooksFinished():
                    # No call waits for an approval while the wave runs (the batch's
                    # mode, which the actor set, decides its later waves); a cancelled
                    # hooks request's late answer.
                    pass
                case _ as unreachable:
                    assert_never(unreachable)
        # 3. Tail calls asked by AfterTool hooks run next, before later waves.
        for tail in reversed(tails):
            pending.appendleft(tail)

    async def _next(self) -> BatchInbox:
        if self.deferred:
            return self.deferred.popleft()
        return await self.inbox.receive()

    async def _hooks(self, event: HookEvent, target: str, data: Mapping[str, Any]) -> dict[str, Any] | None:
        """Run ``event``'s hooks (when any match) and wait for the aggregated output;
        replies for other calls that arrive meanwhile are kept for later."""
        address = self.w.hooks_address
        if address is None or not self.w.has_hooks(event, target):
            return None
        rid = new_id()
        await self.port.send(
            RunHooks(session_id=self.sid, request_id=rid, reply_to=self.w.address, event=event, target=target, input=data),
            to=address,
        )
        held: list[BatchInbox] = []
        try:
            while True:
                msg = await self._next()
                if isinstance(msg, HooksFinished) and msg.request_id == rid:
                    out = thaw(msg.output)
                    return out if isinstance(out, dict) else None
                if isinstance(msg, CancelBatch) and self.cancel_reason is None:
                    self.cancel_reason = msg.reason
                    await self.port.send(
                        CancelHooks(session_id=self.sid, request_id=rid, reason=msg.reason), to=address
                    )
                    continue
                held.append(msg)
        finally:
            self.deferred.extendleft(reversed(held))

    async def _before_tool(self, call: _Call) -> None:
        out = await self._hooks(
            "BeforeTool", call.name, {"tool_name": call.name, "tool_input": call.args, **self._mcp_context(call)}
        )
        if self.cancel_reason is not None:
            await self.cancel_call(call, "Operation cancelled")
            return
        if out is None:
            return
        if out.get("continue") is False:
            reason = hook_reason(out)
            await self.fail(call, "stop_execution", f"Agent execution stopped by hook: {reason}")
            return
        if out.get("decision") in ("block", "deny"):
            await self.fail(call, "policy_violation", f"Tool execution blocked: {hook_reason(out)}")
            return
        if out.get("decision") == "ask":
            call.forced_ask = True
        new_input = (out.get("hookSpecificOutput") or {}).get("tool_input")
        if isinstance(new_input, Mapping) and call.spec is not None:
            problem = self._check_args(call.spec, dict(new_input))
            if problem is not None:
                await self.fail(
                    call,
                    "invalid_tool_params",
                    f"Tool parameter modification by hook failed validation: {problem}",
                )
                return
            call.args = dict(new_input)
            call.modified_by_hook = True

    async def _decide(self, call: _Call) -> None:
        args = call.args
        verdict = self._policy_check(call, args, self.batch.approval_mode)
        if call.forced_ask and verdict.decision != "deny":
            # A BeforeTool hook answered "ask": a person must confirm. Headless, that is
            # a clear tool error (Gemini CLI waits forever here; see docs/differences.md).
            verdict = _ForcedAsk()
        if verdict.decision == "allow":
            call.decision = "accept"
            await self.update(call, "scheduled")
        elif verdict.decision == "deny":
            extra = f" {verdict.deny_message}" if verdict.deny_message else ""
            await self.fail(call, "policy_violation", f"{DENIED_BY_POLICY}{extra}")
        elif call.req.client_initiated and not call.forced_ask:
            call.decision = "accept"
            await self.update(call, "scheduled")
        elif not self.batch.interactive:
            assert call.spec is not None
            await self.fail(
                call, "unhandled_exception", confirmation_unsupported_message(call.spec.display_name)
            )
        else:
            assert call.spec is not None
            kind = _details_type(call.spec.kind)
            details = {"type": kind, "title": call.spec.display_name}
            shown = self._shown(call.spec, call.args)
            needs = {"edit": "editing", "exec": "execution", "mcp": "MCP"}.get(kind, "information")
            await self._hooks(
                "Notification",
                "ToolPermission",
                {
                    "notification_type": "ToolPermission",
                    "message": f"Tool {call.spec.display_name} requires {needs}",
                    # Gemini CLI's serialised details: these keys of an edit or a command.
                    "details": {**{k: shown[k] for k in HOOK_DETAIL_KEYS.get(kind, ()) if k in shown}, **details},
                },
            )
            if self.cancel_reason is not None:
                # The batch was cancelled while the hook ran (that wait took the
                # CancelBatch): nobody is to be asked any more.
                await self.cancel_call(call, "Operation cancelled")
                return
            call.correlation_id = new_id()
            await self.update(call, "awaiting_approval")
            await self.port.publish(
                ApprovalRequested(
                    session_id=self.sid,
                    batch_id=self.batch.batch_id,
                    call_id=call.req.call_id,
                    correlation_id=call.correlation_id,
                    name=call.name,
                    args=call.args,
                    details={**shown, **details},
                )
            )

    async def _answer(
        self, msg: ApprovalAnswered, members: list[_Call], pending: collections.deque[_Call]
    ) -> None:
        call = next((c for c in members if c.correlation_id == msg.correlation_id), None)
        if call is None or call.status != "awaiting_approval":
            await self._late_answer(msg)
            return
        await self.port.publish(
            ApprovalSettled(
                session_id=self.sid,
                correlation_id=msg.correlation_id,
                outcome=msg.outcome,
                answered_by=msg.answered_by,
            )
        )
        outcome = msg.outcome
        if outcome == "cancel":
            call.decision = "reject"
            if self.w.reject_message is not None:
                await self.cancel_call(call, "User denied execution.", model_error=self.w.reject_message)
                return
            await self.cancel_call(call, "User denied execution.")
            for queued in pending:
                if not queued.terminal:
                    await self.cancel_call(queued, "User cancelled operation")
            return
        server = (call.spec.annotations or {}).get("_serverName") if call.spec is not None else None
        by_server = outcome == "proceed_always_server" and isinstance(server, str)
        if by_server or outcome in ("proceed_always", "proceed_always_and_save", "proceed_always_tool"):
            if by_server:
                # Gemini's "always allow this server": every tool of the call's MCP server.
                self.w.policy.add_session_rule("*", mcp_name=server)
            elif call.name == "run_shell_command":
                prefixes, redirection = shell_always_allow(str(call.args.get("command") or ""))
                self.w.policy.add_session_rule(
                    call.name, command_prefix=prefixes, allow_redirection=redirection
                )
            else:
                self.w.policy.add_session_rule(call.name)
            # Later calls of this wave that the new rule allows need no answer.
            for other in members:
                if other is not call and other.status == "awaiting_approval":
                    verdict = self._policy_check(other, other.args, self.batch.approval_mode)
                    if verdict.decision == "allow":
                        other.decision = "accept"
                        await self.update(other, "scheduled")
        call.decision = "modify" if outcome == "modify_with_editor" else "accept"
        await self.update(call, "scheduled")

    async def _mode_changed(self, msg: ApprovalModeChanged, members: list[_Call]) -> None:
        """Calls waiting for an approval that the new mode allows are approved (not the
        ones a hook asked to confirm)."""
        for call in members:
            if call.status != "awaiting_approval" or call.forced_ask or call.correlation_id is None:
                continue
            verdict = self._policy_check(call, call.args, msg.approval_mode)
            if verdict.decision != "allow":
                continue
            await self.port.publish(
                ApprovalSettled(
                    session_id=self.sid,
                    correlation_id=call.correlation_id,
                    outcome="proceed_once",
                    answered_by=msg.requested_by or "approval mode",
                )
            )
            call.decision = "auto_accept"
            await self.update(call, "scheduled")

    async def _late_answer(self, msg: ApprovalAnswered) -> None:
        """An answer that lost the race (or names no waiting call): tell who answered."""
        await self.port.publish(
            ApprovalSettled(
                session_id=self.sid, correlation_id=msg.correlation_id, outcome="", answered_by=""
            )
        )

    async def _complete(self, call: _Call, done: ToolFinished) -> _Call | None:
        """Settle an executed call (AfterTool hooks first); returns a tail call to run."""
        res: ToolResult = done.result
        name, cid = call.req.name, call.req.call_id  # responses keep the requested name
        duration = done.duration_ms
        if res.cancelled:
            reason = "User cancelled tool execution."
            llm = thaw(res.llm_content)
            if llm:
                parts = function_response_parts(name, cid, llm, self.w.model())
                parts[0]["functionResponse"]["response"]["error"] = f"[Operation Cancelled] {reason}"
            else:
                parts = error_response_parts(name, cid, f"[Operation Cancelled] {reason}")
            call.result = CompletedCall(
                call_id=cid,
                name=call.name,
                args=call.args,
                status="cancelled",
                response_parts=tuple(parts),
                result_display=res.return_display,
                duration_ms=duration,
                decision=call.decision,
                output_file=res.output_file,
                replaced=call.replaced,
            )
            await self.update(call, "cancelled", reason)
            return None
        llm_content = thaw(res.llm_content)
        display = thaw(res.return_display)
        error_type, error_message = res.error_type, res.error_message
        tail_request: Mapping[str, Any] | None = None
        after = await self._hooks(
            "AfterTool",
            call.name,
            {
                "tool_name": call.name,
                "tool_input": call.args,
                "tool_response": {
                    "llmContent": llm_content,
                    "returnDisplay": display,
                    **(
                        {"error": {"message": error_message, "type": error_type}}
                        if error_type is not None or error_message is not None
                        else {}
                    ),
                },
                **self._mcp_context(call),
            },
        )
        if after is not None:
            if after.get("continue") is False:
                reason = hook_reason(after)
                display = f"Agent execution stopped by hook: {reason}"
                error_type, error_message = "stop_execution", reason
            elif after.get("decision") in ("block", "deny"):
                reason = hook_reason(after)
                display = f"Tool result blocked: {reason}"
                error_type, error_message = "execution_failed", reason
            else:
                specific = after.get("hookSpecificOutput") or {}
                context = specific.get("additionalContext")
                if context:
                    llm_content = _append_text(llm_content, f"\n\n<hook_context>{context}</hook_context>")
                tail = specific.get("tailToolCallRequest")
                if isinstance(tail, Mapping) and tail.get("name"):
                    tail_request = tail
        if call.modified_by_hook:
            llm_content = _append_text(
                llm_content, "\n\n[System] Tool input parameters were modified by a hook before execution."
            )
        if error_type is not None or error_message is not None:
            message = error_message or "Unknown error"
            call.result = CompletedCall(
                call_id=cid,
                name=call.name,
                args=call.args,
                status="error",
                response_parts=tuple(error_response_parts(name, cid, message)),
                result_display=display if isinstance(display, str) and display else message,
                error_type=error_type or "unknown",
                error_message=message,
                duration_ms=duration,
                decision=call.decision,
                output_file=res.output_file,
                replaced=call.replaced,
            )
            await self.update(call, "error", message)
        else:
            call.result = CompletedCall(
                call_id=cid,
                name=call.name,
                args=call.args,
                status="success",
                response_parts=tuple(function_response_parts(name, cid, llm_content, self.w.model())),
                result_display=display,
                duration_ms=duration,
                decision=call.decision,
                output_file=res.output_file,
                replaced=call.replaced,
            )
            await self.update(call, "success")
        if tail_request is None:
            return None
        # Gemini CLI: the tail call takes the call's place (same id, same response name)
        # and runs next; the finished execution still counts in statistics.
        tail = _Call(
            call.req,
            call.index,
            args=dict(tail_request.get("args") or {}),
            name=str(tail_request["name"]),
            replaced=(*call.replaced, attrs.evolve(call.result, replaced=())),
            wave=call.wave,
        )
        call.result = None
        self.calls[self.calls.index(call)] = tail
        await self.update(tail, "validating")
        await self._validate(tail)
        return tail


@attrs.frozen
class _ForcedAsk:
    decision: str = "ask_user"
    deny_message: str | None = None


def hook_reason(output: Mapping[str, Any]) -> str:
    return str(output.get("stopReason") or output.get("reason") or "No reason provided")


def _append_text(llm_content: Any, text: str) -> Any:
    if isinstance(llm_content, str):
        return llm_content + text
    if isinstance(llm_content, list | tuple):
        return [*llm_content, {"text": text}]
    if llm_content:
        return [llm_content, {"text": text}]
    return text


HOOK_DETAIL_KEYS = {
    "edit": ("fileName", "filePath", "fileDiff", "newContent"),
    "exec": ("command", "rootCommand"),
}
"""What a ``ToolPermission`` notification hook gets of the details besides ``type`` and
``title`` (Gemini CLI's ``toSerializableDetails``; its ``originalContent`` is not sent)."""


def _details_type(kind: str) -> str:
    return {"edit": "edit", "execute": "exec", "fetch": "info"}.get(kind, "info")
