"""The turn's conversations with its peers: each request (to the gateway, the hook
runner, the loop detector, the scheduler) and the wait for its terminal reply on the
turn's own channel, with what a cancel of the turn does meanwhile.

A reply that arrives while the turn waits for another one is deferred, never dropped;
a cancel stops the request waited for, which is still answered before the turn ends
(``TurnEnded`` is a turn's last message).
"""

from __future__ import annotations

import collections
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import trio

from bus import Port
from bus.json_values import thaw
from bus.messages import (
    BatchCancelAcknowledged,
    BatchSettled,
    CancelBatch,
    CancelGeneration,
    CancelHooks,
    CancelLoopCheck,
    CancelTurn,
    CheckLoop,
    GenerateMethod,
    GenerateRequest,
    GenerationCancelled,
    HookEvent,
    HooksFinished,
    LoopCheckKind,
    LoopVerdict,
    ModelChunk,
    ModelFailed,
    ModelFinished,
    ModelRetrying,
    ModelRole,
    NoticeKind,
    RunHooks,
    ScheduleBatch,
    Severity,
    StopReason,
    ToolCallRequest,
    TurnNotice,
    new_id,
)
from bus.planted import planted

from . import _compression
from ._core import (
    Routed,
    RunningTurn,
    TurnHistory,
    blocked_text,
    stopped_text,
)
from ._logic import (
    RequestBuilder,
    response_text,
    user_content,
)
from ._tokens import estimate_tokens, has_media
from ._wiring import TurnWiring

if TYPE_CHECKING:
    from bus.messages import Message  # the union: imported when first used (bus.messages)


class _Cancelled(Exception):
    """Internal: the turn was asked to stop."""


class _Done(Exception):
    """Internal: a hook ended the turn early."""

    def __init__(self, reason: StopReason) -> None:
        super().__init__(reason)
        self.reason: StopReason = reason


class TurnRequests:
    """One turn's state and its requests to its peers (``_turn._Turn`` is the loop)."""

    def __init__(
        self,
        port: Port,
        w: TurnWiring,
        running: RunningTurn,
        receive: trio.MemoryReceiveChannel[Routed],
        saver: _compression.OutputSaver | None = None,
        builder: RequestBuilder | None = None,
    ) -> None:
        self.port = port
        self.w = w
        self.r = running
        self.receive = receive
        """The replies the actor routes to this turn."""
        self.start = running.start
        self.sid = running.start.session_id
        self.tid = running.start.turn_id
        self.h = TurnHistory.of(running.start, keeps_cancelled_request=w.finish_tool is not None)
        self.requests = 0
        """Model turns counted for ``maxSessionTurns`` (Gemini CLI's processTurn calls)."""
        self.host_rounds = 0
        """Rounds of the headless host's tool loop (its own ``maxSessionTurns`` check)."""
        self.saver = saver
        self.builder = builder if builder is not None else RequestBuilder()
        """The main requests' contents, made from what each adds (``_logic.RequestBuilder``)."""
        self.model = running.start.model
        self.deferred: collections.deque[Routed] = collections.deque()
        """Replies that arrived while the turn waited for something else (hooks)."""

    async def publish(self, msg: Message) -> None:
        await self.port.publish(msg)

    async def _notice(self, kind: NoticeKind, severity: Severity, text: str) -> None:
        await self.publish(
            TurnNotice(session_id=self.sid, turn_id=self.tid, kind=kind, severity=severity, message=text)
        )

    async def _stopped(self, output: Mapping[str, Any], *, system_message_first: bool) -> None:
        await self._notice("agent_stopped", "warning", stopped_text(output, system_message_first=system_message_first))

    async def _blocked(self, output: Mapping[str, Any]) -> None:
        await self._notice("agent_blocked", "warning", blocked_text(output))

    def _hooked(self, event: HookEvent, target: str = "") -> bool:
        """Whether ``event``'s hooks would run (a hook runner is wired and one matches)."""
        return self.w.hooks_address is not None and self.w.has_hooks(event, target)

    async def _hooks(
        self, event: HookEvent, target: str, data: Mapping[str, Any], *, in_stream: bool = False
    ) -> dict[str, Any] | None:
        """Run ``event``'s hooks (when any match) and wait for their aggregated output.

        A cancel while hooks run kills them; then, outside a model stream, the turn ends
        cancelled; inside one (AfterModel), the stream loop handles the cancel next.
        """
        if not self._hooked(event, target):
            return None
        rid = new_id()
        await self.port.send(
            RunHooks(
                session_id=self.sid, request_id=rid, reply_to=self.w.address, event=event, target=target, input=data
            ),
            to=self.w.hooks_address,
        )
        held: list[Routed] = []
        try:
            while True:
                msg = await self._next()
                match msg:
                    case HooksFinished(request_id=rid):
                        out = thaw(msg.output)
                        return out if isinstance(out, dict) else None
                    case CancelTurn():
                        await self.port.send(
                            CancelHooks(session_id=self.sid, request_id=rid, reason="turn cancelled"),
                            to=self.w.hooks_address,
                        )
                        while not (isinstance(m := await self._next(), HooksFinished) and m.request_id == rid):
                            held.append(m)
                        if not in_stream:
                            raise _Cancelled
                        held.append(msg)  # the stream loop cancels its request next
                        return None
                    case _:
                        held.append(msg)  # e.g. model chunks that arrived meanwhile
        finally:
            self.deferred.extendleft(reversed(held))

    async def _cancel_request(self, request_id: str, *, reason: str = "turn cancelled") -> None:
        await self.port.send(
            CancelGeneration(session_id=self.sid, request_id=request_id, reason=reason),
            to=self.w.gateway_address,
        )
        await self._await_terminal(request_id)

    async def _await_terminal(self, request_id: str) -> None:
        held: list[Routed] = []  # a cancel of the turn that comes meanwhile is kept
        while True:
            msg = await self._next()
            if (
                isinstance(msg, ModelFinished | ModelFailed | GenerationCancelled)
                and msg.request_id == request_id
            ):
                self.deferred.extendleft(reversed(held))
                return
            if isinstance(msg, CancelTurn):
                held.append(msg)

    async def _check_loop(self, kind: LoopCheckKind, show: Message | None = None, **fields: Any) -> LoopVerdict:
        """Put an event to the loop detector and wait for its verdict (no detector: no
        loop); ``show``, the event, is published after a verdict of no loop. Replies
        that arrive meanwhile wait their turn; a cancel of the turn stops an LLM check,
        whose verdict still comes, and is handled by the next wait."""
        if self.w.loops_address is None:
            if show is not None:
                await self.publish(show)
            return LoopVerdict(session_id=self.sid, request_id="")
        check = CheckLoop(
            session_id=self.sid,
            request_id=new_id(),
            reply_to=self.w.address,
            prompt_id=self.start.prompt_id,
            kind=kind,
            **fields,
        )
        then = None if show is None else (lambda reply: None if reply.message.count else show)
        answered = await self.port.ask(check, to=self.w.loops_address, then=then)
        if answered is not None:
            # The detector was idle and answered in this task, and ``show`` went out
            # with its verdict: no wait, no hop.
            assert isinstance(answered.message, LoopVerdict) and answered.message.request_id == check.request_id
            return answered.message
        verdict = await self._verdict_of(check, kind)
        if show is not None and not verdict.count:
            await self.publish(show)
        return verdict

    async def _verdict_of(self, check: CheckLoop, kind: LoopCheckKind) -> LoopVerdict:
        # Only the channel can bring the verdict: what waits in ``deferred`` stays there
        # (untouched, so a stream of chunks costs O(1) per check), and what arrives now
        # queues behind it.
        held: list[Routed] = []
        try:
            while True:
                msg = await self.receive.receive()
                match msg:
                    case LoopVerdict(request_id=check.request_id):
                        return msg
                    case CancelTurn() if kind == "llm_check":
                        held.append(msg)
                        await self.port.send(
                            CancelLoopCheck(session_id=self.sid, request_id=check.request_id, reason="turn cancelled"),
                            to=self.w.loops_address,
                        )
                    case _:
                        held.append(msg)
        finally:
            self.deferred.extend(held)

    async def _count_tokens(self, parts: Sequence[Any]) -> int:
        """Gemini CLI's ``calculateRequestTokenCount``: the heuristic, or the
        ``countTokens`` API for images and files (the heuristic when that fails)."""
        if has_media(parts):
            chunks = await self._utility_call(
                "countTokens", self.model, ({"role": "user", "parts": list(parts)},), {}, "token_counter"
            )
            if chunks:
                total = chunks[-1].get("totalTokens")
                return total if isinstance(total, int) else 0
        return estimate_tokens(parts)

    async def _utility_text(
        self, model: str, contents: Sequence[Any], config: Mapping[str, Any], role: ModelRole
    ) -> str | None:
        chunks = await self._utility_call("generateContent", model, contents, config, role)
        return None if chunks is None else "".join(response_text(c) for c in chunks)

    async def _utility_call(
        self, method: GenerateMethod, model: str, contents: Sequence[Any], config: Mapping[str, Any], role: ModelRole
    ) -> list[Any] | None:
        """A model call of the turn's own (compression, next speaker, token count): the
        chunks of its answer, or ``None`` when it failed. A cancel of the turn stops it
        and ends the turn (the prompt is rolled back, as for an aborted stream)."""
        req = GenerateRequest(
            session_id=self.sid,
            request_id=new_id(),
            reply_to=self.w.address,
            method=method,
            model=model,
            contents=tuple(contents),
            config=config,
            role=role,
        )
        await self.port.send(req, to=self.w.gateway_address)
        chunks: list[Any] = []
        while True:
            msg = await self._next()
            match msg:
                case ModelChunk(request_id=req.request_id):
                    chunks.append(thaw(msg.chunk))
                case ModelRetrying(request_id=req.request_id):
                    chunks.clear()
                case ModelFinished(request_id=req.request_id):
                    return chunks
                case ModelFailed(request_id=req.request_id):
                    return None
                case CancelTurn():
                    await self._cancel_request(req.request_id)
                    self.h.rollback()
                    raise _Cancelled
                case _:
                    pass  # a reply to another request of the turn, no longer waited for

    async def _run_tools(self, calls: list[tuple[str, str, Any]]) -> BatchSettled:
        batch = ScheduleBatch(
            session_id=self.sid,
            batch_id=new_id(),
            reply_to=self.w.address,
            approval_mode=self.start.approval_mode,
            calls=tuple(
                ToolCallRequest(call_id=cid, name=name, args=args, prompt_id=self.start.prompt_id)
                for cid, name, args in calls
            ),
            interactive=self.w.interactive,
            model=self.model,
        )
        await self.port.send(batch, to=self.w.scheduler_address)
        cancelled = False
        settled: BatchSettled | None = None
        while True:
            msg = await self._next()
            match msg:
                case BatchSettled(batch_id=batch.batch_id):
                    settled = msg
                    if not cancelled:
                        return settled
                case BatchCancelAcknowledged(batch_id=batch.batch_id):
                    if settled is not None:
                        # Every call has its (cancelled) response: history stays valid.
                        parts = [p for c in settled.calls for p in c.response_parts]
                        self.h.add(user_content(parts))
                    raise _Cancelled
                case CancelTurn():
                    cancelled = True
                    await self.port.send(
                        CancelBatch(session_id=self.sid, batch_id=batch.batch_id, reason="turn cancelled"),
                        to=self.w.scheduler_address,
                    )
                    if planted("turn.end_before_tools"):
                        raise _Cancelled
                case _:
                    pass  # a reply to another request of the turn, no longer waited for

    async def _next(self) -> Routed:
        if self.deferred:
            return self.deferred.popleft()
        return await self.receive.receive()
