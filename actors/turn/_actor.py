"""The turn actor: one prompt's model <-> tool loop, one turn at a time per session.

Accepts: ``StartTurn`` and ``CancelTurn`` from the session; the gateway's replies
(``ModelChunk``, ``ModelRetrying``, ``ModelFinished``, ``ModelFailed``,
``GenerationCancelled``), the scheduler's (``BatchSettled``,
``BatchCancelAcknowledged``) and the loop detector's (``LoopVerdict``).
Guards (Gemini CLI's ``processTurn``), before each model request: ``maxSessionTurns``,
the re-prompt bound ``MAX_TURNS``, compression (``_compression``; the new history goes
to the session as ``HistoryCompressed``), the context-window check (``_tokens``), and
the loop detector's ``turn_started`` check; while the response streams, every text
chunk and every call is put to the loop detector (``CheckLoop``) before it is shown,
and a looping one cuts the stream (first strike: a recovery prompt; second:
``loop_detected``); after an answer without calls, the next-speaker check
(``_next_speaker``, off by default).
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

import collections
import math
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import trio

from bus import Bus, DeliveryError, Port, llm_shapes
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
    ClearLoopDetection,
    GenerateMethod,
    GenerateRequest,
    GenerationCancelled,
    HistoryCompressed,
    HookEvent,
    HooksFinished,
    LoopCheckKind,
    LoopVerdict,
    Message,
    ModelChunk,
    ModelFailed,
    ModelFinished,
    ModelRetrying,
    ModelSelected,
    NoticeKind,
    ResetLoopDetection,
    RunHooks,
    ScheduleBatch,
    Severity,
    StartTurn,
    StopReason,
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
from bus.planted import planted

from . import _compression, _next_speaker
from ._logic import (
    ModelTurnBuilder,
    is_function_response,
    parse_classifier_choice,
    parts_text,
    request_contents,
    response_text,
    user_content,
)
from ._tokens import estimate_tokens, has_media, history_parts, overflow_message, token_limit

LOOP_DETECTED_MESSAGE = "Loop detected, stopping execution"
MAX_SESSION_TURNS_MESSAGE = "Maximum session turns exceeded"
LOOP_CHECK_HISTORY = 20
"""Contents of the history the LLM loop check reads (Gemini CLI's 20)."""


def loop_recovery_prompt(detail: str | None) -> str:
    """The user message of Gemini CLI's recovery turn after a first detected loop."""
    return (
        f"System: Potential loop detected. Details: {detail or 'Repetitive patterns identified'}. "
        "Please take a step back and confirm you're making forward progress. If not, take a step "
        "back, analyze your previous actions and rethink how you're approaching the problem. "
        "Avoid repeating the same tool calls or responses without new results."
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
    hooks_address: str | None = None
    """The session's hook runner, when hooks are configured."""
    has_hooks: Callable[[str, str], bool] = lambda event, target: False
    """Whether any hook matches (event, target): nothing is sent when none does."""
    loops_address: str | None = None
    """The session's loop detector; ``None``: loop detection is off."""
    compression_threshold: float | None = None
    """``model.compressionThreshold`` (fraction of the token limit; unset: 0.5)."""
    skip_next_speaker_check: bool = True
    """``model.skipNextSpeakerCheck`` (Gemini CLI's default: skip)."""
    project_temp_dir: str | None = None
    """Where compression saves function responses it cuts (``tool-outputs/``)."""
    truncate_tool_output_threshold: int = _compression.DEFAULT_TRUNCATE_TOOL_OUTPUT_THRESHOLD
    """``tools.truncateToolOutputThreshold``: the longest cut response kept (chars)."""
    next_speaker_model: str = _next_speaker.NEXT_SPEAKER_MODEL
    finish_tool: str | None = None
    """A subagent's session: a batch in which this tool (``complete_task``) succeeded
    ends the turn with ``goal``; the headless host's round limit does not apply (the
    subagent's supervisor bounds the session with ``maxSessionTurns``)."""


class _Cancelled(Exception):
    """Internal: the turn was asked to stop."""


class _Done(Exception):
    """Internal: a hook ended the turn early."""

    def __init__(self, reason: StopReason) -> None:
        super().__init__(reason)
        self.reason: StopReason = reason


@attrs.define
class _Outcome:
    """What one model request produced."""

    content: Any = None
    calls: list[tuple[str, str, Any]] = attrs.field(factory=list)
    text: str = ""
    error: TurnError | None = None
    invalid: str | None = None
    stopped: bool = False
    loop: LoopVerdict | None = None
    """The loop detector stopped the stream at an event it found looping."""
    prompt_tokens: int | None = None
    """``usageMetadata.promptTokenCount`` of the response's last chunk that had usage."""


MAX_TURNS = 100
"""Gemini CLI's bound on re-prompts within one round of the tool loop: recovery turns
after a loop, next-speaker continuations and AfterAgent retries each use one."""


def hook_reason(output: Mapping[str, Any]) -> str:
    """Gemini CLI's effective reason of a hook output."""
    return str(output.get("stopReason") or output.get("reason") or "No reason provided")


def escape_hook_context(text: str) -> str:
    return text.replace("<", "&lt;").replace(">", "&gt;")


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
        # The session's count of compression truncation files outlives each turn.
        self._saver = (
            _compression.OutputSaver(Path(wiring.project_temp_dir)) if wiring.project_temp_dir else None
        )

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
                            # Unbounded: the actor's loop must never block routing a reply
                            # while the turn waits on something else (a slow hook).
                            send, receive = trio.open_memory_channel[Message](math.inf)
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
                            | HooksFinished()
                            | ModelRetrying()
                            | ModelFinished()
                            | ModelFailed()
                            | GenerationCancelled()
                            | BatchSettled()
                            | BatchCancelAcknowledged()
                            | LoopVerdict()
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
            await _Turn(port, self.w, running, self._saver).run()
        finally:
            self._current = None


class _Turn:
    """The loop of one prompt. Waits only on its own channel of routed replies."""

    def __init__(
        self, port: Port, w: TurnWiring, running: _RunningTurn, saver: _compression.OutputSaver | None = None
    ) -> None:
        self.port = port
        self.w = w
        self.r = running
        self.start = running.start
        self.sid = running.start.session_id
        self.tid = running.start.turn_id
        self.base: tuple[Any, ...] = tuple(running.start.history)
        """The conversation before this turn's additions (a compression replaces it)."""
        self.added: list[Any] = []
        self.requests = 0
        """Model turns counted for ``maxSessionTurns`` (Gemini CLI's processTurn calls)."""
        self.host_rounds = 0
        """Rounds of the headless host's tool loop (its own ``maxSessionTurns`` check)."""
        self.saver = saver
        start = running.start
        self.last_prompt_tokens = (
            start.last_prompt_token_count
            if start.last_prompt_token_count >= 0
            else estimate_tokens(history_parts(self.base))
        )
        self.compression_failed = start.compression_failed
        self.tokens_at_base = self.last_prompt_tokens
        """``last_prompt_tokens`` as it was for ``base`` (restored when the prompt is
        rolled back)."""
        self.model = running.start.model
        self.reset_history = False
        self.deferred: collections.deque[Message] = collections.deque()
        """Replies that arrived while the turn waited for something else (hooks)."""
        self.in_flight: Any = None
        """The message of the model request being prepared or sent (for ``_rollback``)."""

    async def publish(self, msg: Message) -> None:
        await self.port.publish(msg)

    async def run(self) -> None:
        s = self.start
        await self.publish(TurnStarted(session_id=self.sid, turn_id=self.tid, prompt_id=s.prompt_id))
        message = user_content(s.parts)
        prompt_text = parts_text(s.parts)
        stop_reason: StopReason = "end_turn"
        error: TurnError | None = None
        try:
            if self.w.loops_address is not None:
                await self.port.send(
                    ResetLoopDetection(session_id=self.sid, prompt_id=s.prompt_id, user_prompt=prompt_text),
                    to=self.w.loops_address,
                )
            before = await self._hooks("BeforeAgent", "", {"prompt": prompt_text})
            if before is not None:
                if before.get("continue") is False:
                    self.added.append(message)  # a stopped prompt stays in history
                    await self._stopped(before, system_message_first=True)
                    raise _Done("agent_stopped")
                if before.get("decision") in ("block", "deny"):
                    await self._blocked(before)
                    raise _Done("agent_blocked")  # a blocked prompt is discarded
                context = (before.get("hookSpecificOutput") or {}).get("additionalContext")
                if context:
                    message = user_content(
                        [*message["parts"], {"text": f"<hook_context>{escape_hook_context(str(context))}</hook_context>"}]
                    )
            await self._select_model(message)
            stop_hook_active = False
            responses: list[str] = []
            bounded = MAX_TURNS  # Gemini CLI's boundedTurns: re-prompts left in this round
            from_host = True  # this request is a round of the host's tool loop, not a re-prompt
            while True:
                if from_host:
                    self.host_rounds += 1
                    bounded = MAX_TURNS
                    # The headless host's own check (Gemini CLI's FatalTurnLimitedError).
                    host_limited = self.w.finish_tool is None and not self.w.interactive
                    if host_limited and 0 <= s.max_session_turns < self.host_rounds:
                        # Like every guard below: the calls of the round it stops stay
                        # answered (DESIGN invariant 1), so the history stays valid.
                        self._keep_responses(message)
                        stop_reason = "turn_limit"
                        error = TurnError(
                            kind="turn_limit",
                            type="FatalTurnLimitedError",
                            message=TURN_LIMIT_MESSAGE,
                            exit_code=53,
                        )
                        break
                from_host = False
                # -- Gemini CLI's processTurn: every model turn is counted, even one a
                # guard stops before it is sent.
                self.requests += 1
                self.in_flight = message
                if 0 < s.max_session_turns < s.session_turns_used + self.requests:
                    await self._notice("max_session_turns", "error", MAX_SESSION_TURNS_MESSAGE)
                    self._keep_responses(message)
                    stop_reason = "max_session_turns"
                    break
                if bounded <= 0:
                    self._keep_responses(message)
                    break
                await self._hooks("PreCompress", "auto", {"trigger": "auto"})
                await self._compress()
                if await self._overflows(message):
                    self._keep_responses(message)
                    stop_reason = "context_window_overflow"
                    break
                verdict = await self._loop_turn_started()
                if verdict is not None:
                    # Ours: a request of function responses the check stopped is kept,
                    # so every call stays answered (Gemini CLI drops it).
                    self._keep_responses(message)
                    recovery = await self._strike(verdict, bounded)
                    if recovery is None:
                        stop_reason = "loop_detected" if verdict.count > 1 else "max_session_turns"
                        break
                    message, bounded = recovery, bounded - 1
                    continue
                outcome = await self._generate(message)
                if outcome.stopped:
                    self.added.append(message)
                    stop_reason = "agent_stopped"
                    break
                if outcome.loop is not None:
                    # The stream was cut at the looping event: like any stream its consumer
                    # stops, a prompt is rolled back, function responses stay.
                    if is_function_response(message["parts"]):
                        self.added.append(message)
                    recovery = await self._strike(outcome.loop, bounded)
                    if recovery is None:
                        stop_reason = "loop_detected" if outcome.loop.count > 1 else "max_session_turns"
                        break
                    message, bounded = recovery, bounded - 1
                    continue
                if outcome.error is not None or outcome.invalid is not None:
                    if outcome.invalid is not None:
                        stop_reason = "invalid_stream"
                    else:
                        stop_reason, error = "error", outcome.error
                    # A failed request that answered tools keeps its function responses;
                    # a failed prompt is rolled back (Gemini CLI's rules).
                    if is_function_response(message["parts"]):
                        self.added.append(message)
                    break
                if outcome.prompt_tokens is not None:
                    self.last_prompt_tokens = outcome.prompt_tokens
                responses.append(outcome.text)
                self.added.extend([message, outcome.content])
                self.in_flight = None
                if not outcome.calls:
                    if await self._next_speaker_is_model():
                        message, bounded = user_content([{"text": _next_speaker.CONTINUE_PROMPT}]), bounded - 1
                        continue
                    after = await self._hooks(
                        "AfterAgent",
                        "",
                        {
                            "prompt": prompt_text,
                            "prompt_response": "\n".join(t for t in responses if t) or "[no response text]",
                            "stop_hook_active": stop_hook_active,
                        },
                    )
                    if after is None:
                        break
                    cleared = bool((after.get("hookSpecificOutput") or {}).get("clearContext"))
                    if after.get("continue") is False:
                        await self._stopped(after, system_message_first=True)
                        if cleared:
                            self._clear_context()
                        stop_reason = "agent_stopped"
                        break
                    if after.get("decision") in ("block", "deny"):
                        # Gemini CLI sends the hook's reason back as a new prompt.
                        await self._blocked(after)
                        if cleared:
                            self._clear_context()
                        bounded -= 1
                        stop_hook_active = True
                        message = user_content([{"text": hook_reason(after)}])
                        continue
                    break
                settled = await self._run_tools(outcome.calls)
                parts = [p for c in settled.calls for p in c.response_parts]
                message = user_content(parts)
                from_host = True
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
                if self.w.finish_tool is not None and any(
                    c.name == self.w.finish_tool and c.status == "success" for c in settled.calls
                ):
                    self.added.append(message)  # answered, not sent: the task is done
                    stop_reason = "goal"
                    break
        except _Done as done:
            stop_reason = done.reason
        except _Cancelled:
            stop_reason = "cancelled"
            self.last_prompt_tokens = self.tokens_at_base  # the prompt is rolled back
        await self.port.send(
            TurnEnded(
                session_id=self.sid,
                turn_id=self.tid,
                stop_reason=stop_reason,
                history_added=tuple(self.added),
                model_requests=self.requests,
                error=error,
                history_reset=self.reset_history,
                last_prompt_token_count=self.last_prompt_tokens,
                compression_failed=self.compression_failed,
            ),
            to=self.w.session_address,
        )
        if self.r.cancel_requested_by is not None:
            try:
                await self.port.send(
                    TurnCancelAcknowledged(
                        session_id=self.sid, turn_id=self.tid, requested_by=self.r.cancel_requested_by
                    ),
                    to=self.w.session_address,
                )
            except DeliveryError:
                pass  # the session stopped meanwhile (its supervisor is closing it)

    async def _notice(self, kind: NoticeKind, severity: Severity, text: str) -> None:
        await self.publish(
            TurnNotice(session_id=self.sid, turn_id=self.tid, kind=kind, severity=severity, message=text)
        )

    async def _stopped(self, output: Mapping[str, Any], *, system_message_first: bool) -> None:
        shown = str(output.get("systemMessage") or "").strip() if system_message_first else ""
        await self._notice("agent_stopped", "warning", f"Agent execution stopped: {shown or hook_reason(output)}")

    async def _blocked(self, output: Mapping[str, Any]) -> None:
        shown = str(output.get("systemMessage") or "").strip()
        await self._notice("agent_blocked", "warning", f"Agent execution blocked: {shown or hook_reason(output)}")

    # -- hooks ---------------------------------------------------------------------
    async def _hooks(
        self, event: HookEvent, target: str, data: Mapping[str, Any], *, in_stream: bool = False
    ) -> dict[str, Any] | None:
        """Run ``event``'s hooks (when any match) and wait for their aggregated output.

        A cancel while hooks run kills them; then, outside a model stream, the turn ends
        cancelled; inside one (AfterModel), the stream loop handles the cancel next.
        """
        if self.w.hooks_address is None or not self.w.has_hooks(event, target):
            return None
        rid = new_id()
        await self.port.send(
            RunHooks(
                session_id=self.sid, request_id=rid, reply_to=self.w.address, event=event, target=target, input=data
            ),
            to=self.w.hooks_address,
        )
        held: list[Message] = []
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

    async def _generate(self, message: Any) -> _Outcome:
        """One main model request, with the BeforeModel, BeforeToolSelection and
        AfterModel hook points around it."""
        model = self.model
        contents: Any = request_contents(self.base + tuple(self.added), message)
        config: Any = dict(self.w.request_config(model))
        builder = ModelTurnBuilder(now_ms=self.w.wall_ms())
        original_request = llm_shapes.to_llm_request(model, contents, config)
        before = await self._hooks("BeforeModel", "", {"llm_request": original_request})
        if before is not None:
            specific = before.get("hookSpecificOutput") or {}
            stop = before.get("continue") is False
            if stop or before.get("decision") in ("block", "deny"):
                try:
                    synthetic = llm_shapes.synthetic_response(specific)
                except llm_shapes.LLMShapeError:
                    synthetic, stop = None, False  # Gemini CLI: as if no hook had answered
                else:
                    if stop:
                        await self._stopped(before, system_message_first=False)
                        return _Outcome(stopped=True)
                    await self._blocked(before)
                    if synthetic is not None:
                        loop = await self._read_chunk(builder, synthetic)
                        if loop is not None:
                            return _Outcome(loop=loop)
                    return _Outcome(content=builder.content(), calls=list(builder.calls), text=builder.text())
            if isinstance(specific.get("llm_request"), Mapping):
                model, contents, config = llm_shapes.apply_llm_request(
                    contents, config, model, specific["llm_request"]
                )
        selection = await self._hooks(
            "BeforeToolSelection", "", {"llm_request": llm_shapes.to_llm_request(model, contents, config)}
        )
        if selection is not None:
            tool_config = (selection.get("hookSpecificOutput") or {}).get("toolConfig")
            config = llm_shapes.apply_tool_config(config, tool_config)
        req = GenerateRequest(
            session_id=self.sid,
            request_id=new_id(),
            reply_to=self.w.address,
            method="generateContentStream",
            model=model,
            contents=contents,
            config=config,
            role="main",
        )
        await self.port.send(req, to=self.w.gateway_address)
        after_model = self.w.hooks_address is not None and self.w.has_hooks("AfterModel", "")
        last_replacement: str | None = None
        prompt_tokens: int | None = None
        while True:
            msg = await self._next()
            match msg:
                case ModelChunk(request_id=req.request_id):
                    chunk: Any = thaw(msg.chunk)
                    usage = chunk.get("usageMetadata")
                    if isinstance(usage, Mapping) and isinstance(usage.get("promptTokenCount"), int):
                        prompt_tokens = int(usage["promptTokenCount"])
                    if after_model:
                        out = await self._hooks(
                            "AfterModel",
                            "",
                            {"llm_request": original_request, "llm_response": llm_shapes.to_llm_response(chunk)},
                            in_stream=True,
                        )
                        if out is not None:
                            if out.get("continue") is False:
                                await self._cancel_request(req.request_id)
                                await self._stopped(out, system_message_first=False)
                                return _Outcome(stopped=True)
                            if out.get("decision") in ("block", "deny"):
                                await self._blocked(out)  # the original chunk still counts
                            else:
                                replacement = llm_shapes.modified_response(out.get("hookSpecificOutput"))
                                if replacement is not None:
                                    # A hook that answers every chunk with the same response
                                    # means "the response is this": say it once (Gemini CLI
                                    # repeats it per chunk; see docs/differences.md).
                                    text = response_text(replacement)
                                    if text and text == last_replacement:
                                        continue
                                    last_replacement = text
                                    chunk = replacement
                    loop = await self._read_chunk(builder, chunk)
                    if loop is not None:
                        # Cut the stream at the looping event, which is never shown.
                        await self._cancel_request(req.request_id, reason="loop detected")
                        return _Outcome(loop=loop)
                case ModelRetrying(request_id=req.request_id):
                    prompt_tokens = None
                    builder.reset()
                    builder.now_ms = self.w.wall_ms()
                    await self.publish(
                        StreamRetried(
                            session_id=self.sid, turn_id=self.tid, attempt=msg.attempt, reason=msg.reason
                        )
                    )
                case ModelFinished(request_id=req.request_id):
                    return _Outcome(
                        content=builder.content(),
                        calls=list(builder.calls),
                        text=builder.text(),
                        prompt_tokens=prompt_tokens,
                    )
                case ModelFailed(request_id=req.request_id):
                    err = msg.error
                    if err.invalid_stream is not None:
                        await self._notice(
                            "invalid_stream", "error", invalid_stream_message(err.invalid_stream, err.message)
                        )
                        return _Outcome(invalid=err.invalid_stream)
                    return _Outcome(
                        error=TurnError(
                            kind="api", type=err.type, message=err.message, exit_code=1, status=err.status
                        )
                    )
                case CancelTurn():
                    await self._cancel_request(req.request_id)
                    self._rollback()
                    raise _Cancelled
                case _:
                    pass

    async def _read_chunk(self, builder: ModelTurnBuilder, chunk: Mapping[str, Any]) -> LoopVerdict | None:
        """Show a chunk's events in Gemini CLI's order; each text and each call is first
        put to the loop detector, and a looping one is not shown: its verdict returns."""
        reading = builder.read(chunk)
        for subject, description in reading.thoughts:
            await self.publish(
                ThoughtStreamed(session_id=self.sid, turn_id=self.tid, subject=subject, description=description)
            )
        if reading.text:
            verdict = await self._check_loop("content", text=reading.text)
            if verdict.count:
                return verdict
            await self.publish(TextStreamed(session_id=self.sid, turn_id=self.tid, text=reading.text))
        for call_id, name, args in reading.calls:
            verdict = await self._check_loop("tool_call", name=name, args=args)
            if verdict.count:
                return verdict
            await self.publish(
                ToolCallRequested(session_id=self.sid, turn_id=self.tid, call_id=call_id, name=name, args=args)
            )
        return None

    async def _cancel_request(self, request_id: str, *, reason: str = "turn cancelled") -> None:
        await self.port.send(
            CancelGeneration(session_id=self.sid, request_id=request_id, reason=reason),
            to=self.w.gateway_address,
        )
        await self._await_terminal(request_id)

    async def _await_terminal(self, request_id: str) -> None:
        held: list[Message] = []  # a cancel of the turn that comes meanwhile is kept
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

    # -- guards: loops, context window, compression, next speaker -------------------
    def _history(self) -> tuple[Any, ...]:
        return self.base + tuple(self.added)

    def _rollback(self) -> None:
        """A cancel while a model request is prepared or streams. Gemini CLI rolls the
        whole prompt back; a subagent's session (``finish_tool``) keeps what it did and
        the request it was making, so that its recovery turn goes on from there (Gemini
        CLI's agent keeps its chat)."""
        if self.w.finish_tool is None:
            self.added.clear()
        elif self.in_flight is not None:
            self.added.append(self.in_flight)
            self.in_flight = None

    def _keep_responses(self, message: Any) -> None:
        """A request that is not sent keeps its function responses (every call stays
        answered); a prompt that is not sent is dropped."""
        if is_function_response(message["parts"]):
            self.added.append(message)

    def _clear_context(self) -> None:
        """A hook cleared the context: the conversation restarts from its environment."""
        self.reset_history = True
        self.added.clear()
        self.base = tuple(h for h in self.base if _compression.is_environment_context(h))
        self.last_prompt_tokens = self.tokens_at_base = estimate_tokens(history_parts(self.base))

    async def _check_loop(self, kind: LoopCheckKind, **fields: Any) -> LoopVerdict:
        """Put an event to the loop detector and wait for its verdict (no detector: no
        loop). Replies that arrive meanwhile wait their turn; a cancel of the turn stops
        an LLM check, whose verdict still comes, and is handled by the next wait."""
        if self.w.loops_address is None:
            return LoopVerdict(session_id=self.sid, request_id="")
        check = CheckLoop(
            session_id=self.sid,
            request_id=new_id(),
            reply_to=self.w.address,
            prompt_id=self.start.prompt_id,
            kind=kind,
            **fields,
        )
        await self.port.send(check, to=self.w.loops_address)
        # Only the channel can bring the verdict: what waits in ``deferred`` stays there
        # (untouched, so a stream of chunks costs O(1) per check), and what arrives now
        # queues behind it.
        held: list[Message] = []
        try:
            while True:
                msg = await self.r.receive.receive()
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

    async def _loop_turn_started(self) -> LoopVerdict | None:
        """Gemini CLI's ``turnStarted`` before each request: a detection (maybe from an
        LLM check the detector asks for, on the last contents of the history)."""
        if self.w.loops_address is None:
            return None
        verdict = await self._check_loop("turn_started")
        if verdict.check_due:
            if self.r.cancel_requested_by is None:  # (a cancel may wait in ``deferred``)
                verdict = await self._check_loop("llm_check", history=self._history()[-LOOP_CHECK_HISTORY:])
            if self.r.cancel_requested_by is not None:
                self._rollback()  # as for an aborted stream
                raise _Cancelled
        return verdict if verdict.count else None

    async def _strike(self, verdict: LoopVerdict, bounded: int) -> Any | None:
        """Gemini CLI's two strikes: a second detection in the prompt ends the turn
        (``loop_detected``); a first one clears the detection (the count stays) and
        returns the recovery message, unless no re-prompt is left (``max_session_turns``)."""
        if verdict.count > 1:
            await self._notice("loop_detected", "warning", LOOP_DETECTED_MESSAGE)
            return None
        if bounded <= 1:
            await self._notice("max_session_turns", "error", MAX_SESSION_TURNS_MESSAGE)
            return None
        assert self.w.loops_address is not None
        await self.port.send(
            ClearLoopDetection(session_id=self.sid, prompt_id=self.start.prompt_id), to=self.w.loops_address
        )
        return user_content([{"text": loop_recovery_prompt(verdict.detail)}])

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

    async def _overflows(self, message: Any) -> bool:
        """The context-window check: the request's estimate against what is left."""
        limit = token_limit(self.model)
        remaining = limit - self.last_prompt_tokens
        estimated = await self._count_tokens(list(message["parts"]))
        if estimated <= remaining:
            return False
        await self._notice(
            "context_window_will_overflow", "warning", overflow_message(estimated, remaining, limit)
        )
        return True

    def _save_output(self, text: str, tool_name: str) -> str:
        if self.saver is None:
            raise OSError("no project temp dir to save tool outputs in")
        return self.saver(text, tool_name)

    async def _compress(self) -> None:
        """Gemini CLI's automatic compression before a request (see ``_compression``).
        A new history goes to the session (``HistoryCompressed``) and replaces the
        turn's base; a failed attempt keeps the history and is only published."""
        threshold = _compression.effective_threshold(self.w.compression_threshold)
        limit = token_limit(self.model)
        original = self.last_prompt_tokens
        if original < threshold * limit:
            return  # the common case, decided without a thread
        truncate_chars = min(4 * (limit - original), self.w.truncate_tool_output_threshold)
        # In the actor's thread on purpose: it runs once per compression (half a context
        # window), costs milliseconds, and a worker thread would let a virtual clock
        # (tests, replay) jump while it works. The files it may write are bounded.
        plan = _compression.plan_compression(
            self._history(),
            model=self.model,
            last_prompt_tokens=original,
            threshold=threshold,
            compression_failed=self.compression_failed,
            save=self._save_output,
            truncate_chars=truncate_chars,
        )
        if isinstance(plan, _compression.Result):
            result = plan
        else:
            model = _compression.compression_model(self.model)
            config = {"systemInstruction": _compression.COMPRESSION_INSTRUCTION}
            summary = await self._utility_text(model, plan.summary_request(), config, "compressor")
            if summary is None:
                # Ours: a failed call keeps the history (Gemini CLI ends the prompt).
                result = _compression.Result(_compression.COMPRESSION_FAILED_EMPTY_SUMMARY, original, original)
            else:
                verified = await self._utility_text(model, plan.verify_request(summary), config, "compressor")
                final = _compression.final_summary(summary, verified or "")
                new_tokens = await self._count_tokens(history_parts(plan.new_history(final))) if final else 0
                result = _compression.decide(plan, final, new_tokens)
        if result.status == _compression.NOOP:
            return
        compressed = HistoryCompressed(
            session_id=self.sid,
            turn_id=self.tid,
            status=result.status,
            original_token_count=result.original_tokens,
            new_token_count=result.new_tokens,
            history=result.history or (),
        )
        if result.history is None:
            if result.status == _compression.COMPRESSION_FAILED_INFLATED_TOKEN_COUNT:
                self.compression_failed = True
            await self.publish(compressed)
            return
        if result.history == self._history():
            # Truncation found nothing to cut: the history stays, only its count is new.
            self.last_prompt_tokens = estimate_tokens(history_parts(result.history))
            return
        self.base, self.added = result.history, []
        self.last_prompt_tokens = self.tokens_at_base = estimate_tokens(history_parts(self.base))
        await self.port.send(compressed, to=self.w.session_address)
        if result.status == _compression.COMPRESSED:
            await self._notice(
                "chat_compressed",
                "info",
                _compression.compressed_message(result.original_tokens, result.new_tokens, limit),
            )

    async def _next_speaker_is_model(self) -> bool:
        """The next-speaker check (off unless ``model.skipNextSpeakerCheck`` is false)."""
        if self.w.skip_next_speaker_check:
            return False
        history = self._history()
        early = _next_speaker.without_model_call(history)
        if early != _next_speaker.ASK:
            return early == "model"
        contents, config = _next_speaker.request(history)
        text = await self._utility_text(self.w.next_speaker_model, contents, config, "next_speaker")
        return text is not None and _next_speaker.parse_answer(text) == "model"

    async def _utility_text(
        self, model: str, contents: Sequence[Any], config: Mapping[str, Any], role: str
    ) -> str | None:
        chunks = await self._utility_call("generateContent", model, contents, config, role)
        return None if chunks is None else "".join(response_text(c) for c in chunks)

    async def _utility_call(
        self, method: GenerateMethod, model: str, contents: Sequence[Any], config: Mapping[str, Any], role: str
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
                    self._rollback()
                    raise _Cancelled
                case _:
                    pass

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
                        self.added.append(user_content(parts))
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
                    pass

    async def _next(self) -> Message:
        if self.deferred:
            return self.deferred.popleft()
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
