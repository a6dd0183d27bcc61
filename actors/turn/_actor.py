"""The turn actor: one prompt's model <-> tool loop, one turn at a time per session.

Accepts: ``StartTurn`` and ``CancelTurn`` from the session; the gateway's replies
(``ModelChunk``, ``ModelRetrying``, ``ModelFinished``, ``ModelFailed``,
``GenerationCancelled``) and the scheduler's (``BatchSettled``,
``BatchCancelAcknowledged``).
Emits: ``GenerateRequest`` to the gateway, ``ScheduleBatch``/``CancelBatch`` to the
scheduler, turn events for observers (``TurnStarted``, ``ModelSelected``,
``TextStreamed``, ``ThoughtStreamed``, ``ToolCallRequested``, ``StreamRetried``,
``TurnNotice``), and ``TurnEnded`` then (after a cancel) ``TurnCancelAcknowledged`` to
the session. ``TurnEnded`` is the last message of a turn: before sending it the turn
waits for the terminal reply of every request it made.
Owns: the running turn's state (its history additions, its requests in flight).
Stops: when its inbox closes (a running turn is cancelled the same way as by
``CancelTurn``), or by its supervisor's cancel.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs
import trio

from bus import Bus, Port
from bus._json import thaw
from bus.messages import (
    BatchCancelAcknowledged,
    BatchSettled,
    CancelBatch,
    CancelGeneration,
    CancelTurn,
    GenerateRequest,
    GenerationCancelled,
    Message,
    ModelChunk,
    ModelFailed,
    ModelFinished,
    ModelRetrying,
    ModelSelected,
    ScheduleBatch,
    StartTurn,
    StreamRetried,
    TextStreamed,
    ThoughtStreamed,
    ToolCallRequest,
    ToolCallRequested,
    TurnCancelAcknowledged,
    TurnEnded,
    TurnError,
    TurnNotice,
    TurnStarted,
    new_id,
)

from ._logic import (
    ModelTurnBuilder,
    is_function_response,
    parse_classifier_choice,
    request_contents,
    response_text,
    user_content,
)

TURN_LIMIT_MESSAGE = (
    "Reached max session turns for this session. Increase the number of turns by specifying "
    "maxSessionTurns in settings.json."
)

FATAL_TOOL_ERRORS = frozenset({"no_space_left"})


@attrs.frozen(kw_only=True)
class TurnWiring:
    """Addresses and configuration a turn actor is given by its supervisor."""

    session_id: str
    address: str
    session_address: str
    gateway_address: str
    scheduler_address: str
    request_config: Callable[[str], Mapping[str, Any]]
    """Model -> request config (system instruction, tool declarations, generation config)."""
    route_model: Callable[[str], str] = lambda model: model
    """Resolves a configured model name (``auto`` excluded) to the model to call."""
    classifier_choice: Callable[[str], str] = lambda choice: choice
    """Maps the router's ``model_choice`` (``flash``/``pro``) to a model name."""
    classifier_request: Callable[[Sequence[Any]], tuple[Any, Mapping[str, Any]]] | None = None
    """Builds the router classifier's (contents, config) from the request contents."""
    wall_ms: Callable[[], int] = lambda: int(time.time() * 1000)
    """Wall clock in ms, for call ids (injected so replays are deterministic)."""
    interactive: bool = False


class _Cancelled(Exception):
    """Internal: the turn was asked to stop."""


@attrs.define(eq=False)
class _RunningTurn:
    start: StartTurn
    send: trio.MemorySendChannel[Message]
    receive: trio.MemoryReceiveChannel[Message]
    cancel_requested_by: str | None = None


class TurnActor:
    def __init__(self, bus: Bus, wiring: TurnWiring) -> None:
        self.bus = bus
        self.w = wiring
        self._current: _RunningTurn | None = None

    async def run(self, *, task_status: trio.TaskStatus[Port] = trio.TASK_STATUS_IGNORED) -> None:
        port = self.bus.connect(self.w.address)
        try:
            async with trio.open_nursery() as nursery:
                task_status.started(port)
                async for env in port:
                    msg = env.message
                    match msg:
                        case StartTurn():
                            if self._current is not None:
                                raise RuntimeError("StartTurn while a turn is running")
                            send, receive = trio.open_memory_channel[Message](256)
                            self._current = _RunningTurn(msg, send, receive)
                            nursery.start_soon(self._drive, port, self._current)
                        case CancelTurn():
                            current = self._current
                            if current is None:
                                await port.send(
                                    TurnCancelAcknowledged(
                                        session_id=msg.session_id,
                                        turn_id=msg.turn_id,
                                        requested_by=msg.requested_by,
                                    ),
                                    to=self.w.session_address,
                                )
                            elif current.cancel_requested_by is None:
                                current.cancel_requested_by = msg.requested_by
                                await current.send.send(msg)
                        case (
                            ModelChunk()
                            | ModelRetrying()
                            | ModelFinished()
                            | ModelFailed()
                            | GenerationCancelled()
                            | BatchSettled()
                            | BatchCancelAcknowledged()
                        ):
                            if self._current is not None:
                                await self._current.send.send(msg)
                        case _:
                            pass
                # Inbox closed: stop a running turn the orderly way.
                if self._current is not None and self._current.cancel_requested_by is None:
                    self._current.cancel_requested_by = "shutdown"
                    await self._current.send.send(
                        CancelTurn(
                            session_id=self.w.session_id,
                            turn_id=self._current.start.turn_id,
                            reason="session closing",
                            requested_by="shutdown",
                        )
                    )
        finally:
            port.close()

    async def _drive(self, port: Port, running: _RunningTurn) -> None:
        try:
            await _Turn(port, self.w, running).run()
        finally:
            self._current = None


class _Turn:
    """The loop of one prompt. Waits only on its own channel of routed replies."""

    def __init__(self, port: Port, w: TurnWiring, running: _RunningTurn) -> None:
        self.port = port
        self.w = w
        self.r = running
        self.start = running.start
        self.sid = running.start.session_id
        self.tid = running.start.turn_id
        self.added: list[Any] = []
        self.requests = 0
        self.model = running.start.model

    async def publish(self, msg: Message) -> None:
        await self.port.publish(msg)

    async def run(self) -> None:
        s = self.start
        await self.publish(TurnStarted(session_id=self.sid, turn_id=self.tid, prompt_id=s.prompt_id))
        message = user_content(s.parts)
        stop_reason = "end_turn"
        error: TurnError | None = None
        try:
            await self._select_model(message)
            while True:
                used = s.session_turns_used + self.requests
                if s.max_session_turns >= 0 and used + 1 > s.max_session_turns:
                    stop_reason = "turn_limit"
                    error = TurnError(
                        kind="turn_limit",
                        type="FatalTurnLimitedError",
                        message=TURN_LIMIT_MESSAGE,
                        exit_code=53,
                    )
                    break
                outcome = await self._generate(message)
                if isinstance(outcome, TurnError | str):
                    if isinstance(outcome, str):
                        stop_reason = "invalid_stream"
                    else:
                        stop_reason, error = "error", outcome
                    # A failed request that answered tools keeps its function responses;
                    # a failed prompt is rolled back (Gemini CLI's rules).
                    if is_function_response(message["parts"]):
                        self.added.append(message)
                    break
                model_content, calls = outcome
                self.added.extend([message, model_content])
                if not calls:
                    break
                settled = await self._run_tools(calls)
                parts = [p for c in settled.calls for p in c.response_parts]
                message = user_content(parts)
                fatal = next((c for c in settled.calls if c.error_type in FATAL_TOOL_ERRORS), None)
                if fatal is not None:
                    self.added.append(message)
                    stop_reason = "error"
                    display = fatal.result_display if isinstance(fatal.result_display, str) else None
                    error = TurnError(
                        kind="fatal_tool",
                        type=fatal.error_type or "FatalToolExecutionError",
                        message=f"Error executing tool {fatal.name}: {display or fatal.error_message}",
                        exit_code=54,
                    )
                    break
                if any(c.error_type == "stop_execution" for c in settled.calls):
                    self.added.append(message)
                    stop_reason = "stop_execution"
                    break
        except _Cancelled:
            stop_reason = "cancelled"
        await self.port.send(
            TurnEnded(
                session_id=self.sid,
                turn_id=self.tid,
                stop_reason=stop_reason,
                history_added=tuple(self.added),
                model_requests=self.requests,
                error=error,
            ),
            to=self.w.session_address,
        )
        if self.r.cancel_requested_by is not None:
            await self.port.send(
                TurnCancelAcknowledged(
                    session_id=self.sid, turn_id=self.tid, requested_by=self.r.cancel_requested_by
                ),
                to=self.w.session_address,
            )

    # -- model ---------------------------------------------------------------------
    async def _select_model(self, message: Any) -> None:
        """Choose the model for this prompt (sticky for its continuations)."""
        configured = self.start.model
        if configured == "auto" and self.w.classifier_request is not None:
            contents, config = self.w.classifier_request(
                request_contents(self.start.history, message)
            )
            chosen = await self._classify(contents, config)
            self.model = chosen
        else:
            self.model = self.w.route_model(configured)
        await self.publish(ModelSelected(session_id=self.sid, turn_id=self.tid, model=self.model))

    async def _classify(self, contents: Any, config: Mapping[str, Any]) -> str:
        """The router's classifier call; any failure falls back to the default route."""
        req = GenerateRequest(
            session_id=self.sid,
            request_id=new_id(),
            reply_to=self.w.address,
            method="generateContent",
            model=self.w.classifier_choice("classifier"),
            contents=contents,
            config=config,
            role="classifier",
        )
        await self.port.send(req, to=self.w.gateway_address)
        text_parts: list[str] = []
        while True:
            msg = await self._next()
            match msg:
                case ModelChunk(request_id=req.request_id):
                    text_parts.append(response_text(msg.chunk))
                case ModelFinished(request_id=req.request_id):
                    break
                case ModelFailed(request_id=req.request_id):
                    return self.w.route_model("auto")
                case CancelTurn():
                    await self.port.send(
                        CancelGeneration(session_id=self.sid, request_id=req.request_id, reason="turn cancelled"),
                        to=self.w.gateway_address,
                    )
                    await self._await_terminal(req.request_id)
                    raise _Cancelled
                case _:
                    pass
        choice = parse_classifier_choice("".join(text_parts))
        if choice is not None:
            return self.w.classifier_choice(choice)
        return self.w.route_model("auto")

    async def _generate(self, message: Any) -> tuple[Any, list[tuple[str, str, Any]]] | TurnError | str:
        """One main model request. Returns (model content, calls), a TurnError, or the
        invalid-stream type."""
        self.requests += 1
        req = GenerateRequest(
            session_id=self.sid,
            request_id=new_id(),
            reply_to=self.w.address,
            method="generateContentStream",
            model=self.model,
            contents=request_contents(tuple(self.start.history) + tuple(self.added), message),
            config=self.w.request_config(self.model),
            role="main",
        )
        await self.port.send(req, to=self.w.gateway_address)
        builder = ModelTurnBuilder(now_ms=self.w.wall_ms())
        while True:
            msg = await self._next()
            match msg:
                case ModelChunk(request_id=req.request_id):
                    reading = builder.read(thaw(msg.chunk))
                    for subject, description in reading.thoughts:
                        await self.publish(
                            ThoughtStreamed(
                                session_id=self.sid, turn_id=self.tid, subject=subject, description=description
                            )
                        )
                    if reading.text:
                        await self.publish(
                            TextStreamed(session_id=self.sid, turn_id=self.tid, text=reading.text)
                        )
                    for call_id, name, args in reading.calls:
                        await self.publish(
                            ToolCallRequested(
                                session_id=self.sid, turn_id=self.tid, call_id=call_id, name=name, args=args
                            )
                        )
                case ModelRetrying(request_id=req.request_id):
                    builder.reset()
                    builder.now_ms = self.w.wall_ms()
                    await self.publish(
                        StreamRetried(
                            session_id=self.sid, turn_id=self.tid, attempt=msg.attempt, reason=msg.reason
                        )
                    )
                case ModelFinished(request_id=req.request_id):
                    return builder.content(), list(builder.calls)
                case ModelFailed(request_id=req.request_id):
                    err = msg.error
                    if err.invalid_stream is not None:
                        await self.publish(
                            TurnNotice(
                                session_id=self.sid,
                                turn_id=self.tid,
                                kind="invalid_stream",
                                severity="error",
                                message=invalid_stream_message(err.invalid_stream, err.message),
                            )
                        )
                        return err.invalid_stream
                    return TurnError(
                        kind="api",
                        type=err.type,
                        message=err.message,
                        exit_code=1,
                        status=err.status,
                    )
                case CancelTurn():
                    await self.port.send(
                        CancelGeneration(session_id=self.sid, request_id=req.request_id, reason="turn cancelled"),
                        to=self.w.gateway_address,
                    )
                    await self._await_terminal(req.request_id)
                    # Gemini CLI rolls the whole prompt back when its stream is aborted.
                    self.added.clear()
                    raise _Cancelled
                case _:
                    pass

    async def _await_terminal(self, request_id: str) -> None:
        while True:
            msg = await self._next()
            if (
                isinstance(msg, ModelFinished | ModelFailed | GenerationCancelled)
                and msg.request_id == request_id
            ):
                return

    # -- tools ---------------------------------------------------------------------
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
                        self.added.append(user_content(parts))
                    raise _Cancelled
                case CancelTurn():
                    cancelled = True
                    await self.port.send(
                        CancelBatch(session_id=self.sid, batch_id=batch.batch_id, reason="turn cancelled"),
                        to=self.w.scheduler_address,
                    )
                case _:
                    pass

    async def _next(self) -> Message:
        return await self.r.receive.receive()


INVALID_STREAM_MESSAGES = {
    "NO_RESPONSE_TEXT": (
        "The model returned an empty response with no text or thoughts. This may be a transient "
        "API issue; please try again."
    ),
    "THINKING_ONLY_RESPONSE": (
        "The model returned reasoning thoughts but no final response text. If your context "
        "window is near capacity, try using /compress."
    ),
    "MAX_TOKENS_EXCEEDED": (
        "Model response was truncated because it exceeded the token limit. Try using /compress "
        "to free up context space."
    ),
    "SAFETY_BLOCKED": "The model response was blocked due to safety settings.",
    "RECITATION_BLOCKED": "The model response was blocked due to recitation/copyright filters.",
    "OTHER_BLOCKED": "The model response was blocked due to other policy settings.",
}


def invalid_stream_message(kind: str, message: str) -> str:
    """What headless shows for an invalid stream (Gemini CLI's per-type texts)."""
    return INVALID_STREAM_MESSAGES.get(kind) or message.strip() or (
        "Invalid stream: The model returned an empty response or malformed tool call."
    )
