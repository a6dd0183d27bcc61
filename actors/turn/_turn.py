"""One prompt's loop: the turn's requests to the gateway, hooks, loop detector and
scheduler, in Gemini CLI's order, each waited for on the turn's own channel.

The decisions (guards, strikes, hook outputs, what ends the turn, the history's
changes) are the pure functions of ``_core``; the requests to the turn's peers and the
waiting for their replies are ``_requests``; this module is the order of it all.
The actor (``_actor``) starts one ``_Turn`` per ``StartTurn`` and routes replies to it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from bus import DeliveryError, llm_shapes
from bus.json_values import FrozenTuple, thaw
from bus.messages import (
    CancelGeneration,
    CancelTurn,
    ClearLoopDetection,
    GenerateRequest,
    HistoryCompressed,
    LoopVerdict,
    ModelChunk,
    ModelFailed,
    ModelFinished,
    ModelRetrying,
    ModelSelected,
    ResetLoopDetection,
    StopReason,
    StreamRetried,
    TextStreamed,
    ThoughtStreamed,
    ToolCallRequested,
    TurnCancelAcknowledged,
    TurnEnded,
    TurnError,
    TurnStarted,
    new_id,
)

from . import _compression, _next_speaker
from ._core import (
    LOOP_CHECK_HISTORY,
    LOOP_DETECTED_MESSAGE,
    MAX_SESSION_TURNS_MESSAGE,
    MAX_TURNS,
    api_error,
    hook_blocks,
    hook_clears_context,
    hook_context,
    hook_reason,
    hook_stops,
    host_round_limit,
    invalid_stream_message,
    loop_recovery_prompt,
    over_session_turns,
    settled_stop,
    strike,
)
from ._logic import (
    ModelTurnBuilder,
    is_function_response,
    parse_classifier_choice,
    parts_text,
    request_contents,
    response_text,
    user_content,
)
from ._requests import TurnRequests, _Cancelled, _Done
from ._tokens import estimate_tokens, history_parts, overflow_message, token_limit


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


class _Turn(TurnRequests):
    """The loop of one prompt. Waits only on its own channel of routed replies."""

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
                if hook_stops(before):
                    self.h.add(message)  # a stopped prompt stays in history
                    await self._stopped(before, system_message_first=True)
                    raise _Done("agent_stopped")
                if hook_blocks(before):
                    await self._blocked(before)
                    raise _Done("agent_blocked")  # a blocked prompt is discarded
                context = hook_context(before)
                if context is not None:
                    message = user_content([*message["parts"], {"text": context}])
            await self._select_model(message)
            stop_hook_active = False
            responses: list[str] = []
            bounded = MAX_TURNS  # Gemini CLI's boundedTurns: re-prompts left in this round
            from_host = True  # this request is a round of the host's tool loop, not a re-prompt
            while True:
                if from_host:
                    self.host_rounds += 1
                    bounded = MAX_TURNS
                    error = host_round_limit(
                        s, self.host_rounds, finish_tool=self.w.finish_tool, interactive=self.w.interactive
                    )
                    if error is not None:
                        # Like every guard below: the calls of the round it stops stay
                        # answered (DESIGN invariant 1), so the history stays valid.
                        self.h.keep_responses(message)
                        stop_reason = "turn_limit"
                        break
                from_host = False
                # -- Gemini CLI's processTurn: every model turn is counted, even one a
                # guard stops before it is sent.
                self.requests += 1
                self.h.in_flight = message
                if over_session_turns(s, self.requests):
                    await self._notice("max_session_turns", "error", MAX_SESSION_TURNS_MESSAGE)
                    self.h.keep_responses(message)
                    stop_reason = "max_session_turns"
                    break
                if bounded <= 0:
                    self.h.keep_responses(message)
                    break
                await self._hooks("PreCompress", "auto", {"trigger": "auto"})
                await self._compress()
                if await self._overflows(message):
                    self.h.keep_responses(message)
                    stop_reason = "context_window_overflow"
                    break
                verdict = await self._loop_turn_started()
                if verdict is not None:
                    # Ours: a request of function responses the check stopped is kept,
                    # so every call stays answered (Gemini CLI drops it).
                    self.h.keep_responses(message)
                    stop, recovery = await self._strike(verdict, bounded)
                    if stop is not None:
                        stop_reason = stop
                        break
                    message, bounded = recovery, bounded - 1
                    continue
                outcome = await self._generate(message)
                if outcome.stopped:
                    self.h.add(message)
                    stop_reason = "agent_stopped"
                    break
                if outcome.loop is not None:
                    # The stream was cut at the looping event: like any stream its consumer
                    # stops, a prompt is rolled back, function responses stay.
                    if is_function_response(message["parts"]):
                        self.h.add(message)
                    stop, recovery = await self._strike(outcome.loop, bounded)
                    if stop is not None:
                        stop_reason = stop
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
                        self.h.add(message)
                    break
                responses.append(outcome.text)
                self.h.answered(message, outcome.content, outcome.prompt_tokens)
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
                    cleared = hook_clears_context(after)
                    if hook_stops(after):
                        await self._stopped(after, system_message_first=True)
                        if cleared:
                            self.h.clear_context()
                        stop_reason = "agent_stopped"
                        break
                    if hook_blocks(after):
                        # Gemini CLI sends the hook's reason back as a new prompt.
                        await self._blocked(after)
                        if cleared:
                            self.h.clear_context()
                        bounded -= 1
                        stop_hook_active = True
                        message = user_content([{"text": hook_reason(after)}])
                        continue
                    break
                settled = await self._run_tools(outcome.calls)
                parts = [p for c in settled.calls for p in c.response_parts]
                message = user_content(parts)
                from_host = True
                ended = settled_stop(settled, self.w.finish_tool)
                if ended is not None:
                    self.h.add(message)  # answered, not sent: the turn is over
                    stop_reason, error = ended
                    break
        except _Done as done:
            stop_reason = done.reason
        except _Cancelled:
            stop_reason = "cancelled"
            self.h.cancelled()
        await self.port.send(
            TurnEnded(
                session_id=self.sid,
                turn_id=self.tid,
                stop_reason=stop_reason,
                history_added=FrozenTuple(self.h.added),  # (frozen contents, all of them)
                model_requests=self.requests,
                error=error,
                history_reset=self.h.reset,
                last_prompt_token_count=self.h.last_prompt_tokens,
                compression_failed=self.h.compression_failed,
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

    # -- model ---------------------------------------------------------------------
    async def _select_model(self, message: Any) -> None:
        """Choose the model for this prompt (sticky for its continuations)."""
        configured = self.start.model
        if configured == "auto" and self.w.classifier_request is not None:
            contents, config = self.w.classifier_request(
                request_contents(self.h.log, message, self.builder)
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
                    pass  # a reply to another request of the turn, no longer waited for
        choice = parse_classifier_choice("".join(text_parts))
        if choice is not None:
            return self.w.classifier_choice(choice)
        return self.w.route_model("auto")

    async def _generate(self, message: Any) -> _Outcome:
        """One main model request, with the BeforeModel, BeforeToolSelection and
        AfterModel hook points around it."""
        model = self.model
        contents: Any = request_contents(self.h.log, message, self.builder)
        # As it is, not a copy: the hooks' edits make new configs, and the same frozen
        # object in every request is known at once by the recorder (written by
        # reference) and the live backend (converted once).
        config: Any = self.w.request_config(model)
        builder = ModelTurnBuilder(now_ms=self.w.wall_ms())
        # The hooks' view of the request, made only when a hook will see it (it walks the
        # whole history).
        original_request = (
            llm_shapes.to_llm_request(model, contents, config)
            if self._hooked("BeforeModel") or self._hooked("AfterModel")
            else None
        )
        before = await self._hooks("BeforeModel", "", {"llm_request": original_request})
        if before is not None:
            specific = before.get("hookSpecificOutput") or {}
            stop = hook_stops(before)
            if stop or hook_blocks(before):
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
        selection = (
            await self._hooks(
                "BeforeToolSelection", "", {"llm_request": llm_shapes.to_llm_request(model, contents, config)}
            )
            if self._hooked("BeforeToolSelection")
            else None
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
                            if hook_stops(out):
                                await self._cancel_request(req.request_id)
                                await self._stopped(out, system_message_first=False)
                                return _Outcome(stopped=True)
                            if hook_blocks(out):
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
                    return _Outcome(error=api_error(err))
                case CancelTurn():
                    await self._cancel_request(req.request_id)
                    self.h.rollback()
                    raise _Cancelled
                case _:
                    pass  # a reply to another request of the turn, no longer waited for

    async def _read_chunk(self, builder: ModelTurnBuilder, chunk: Mapping[str, Any]) -> LoopVerdict | None:
        """Show a chunk's events in Gemini CLI's order; each text and each call is first
        put to the loop detector, and a looping one is not shown: its verdict returns."""
        reading = builder.read(chunk)
        for subject, description in reading.thoughts:
            await self.publish(
                ThoughtStreamed(session_id=self.sid, turn_id=self.tid, subject=subject, description=description)
            )
        if reading.text:
            shown = TextStreamed(session_id=self.sid, turn_id=self.tid, text=reading.text)
            verdict = await self._check_loop("content", shown, text=reading.text)
            if verdict.count:
                return verdict
        for call_id, name, args in reading.calls:
            asked = ToolCallRequested(session_id=self.sid, turn_id=self.tid, call_id=call_id, name=name, args=args)
            verdict = await self._check_loop("tool_call", asked, name=name, args=args)
            if verdict.count:
                return verdict
        return None

    # -- guards: loops, context window, compression, next speaker -------------------
    async def _loop_turn_started(self) -> LoopVerdict | None:
        """Gemini CLI's ``turnStarted`` before each request: a detection (maybe from an
        LLM check the detector asks for, on the last contents of the history)."""
        if self.w.loops_address is None:
            return None
        verdict = await self._check_loop("turn_started")
        if verdict.check_due:
            if self.r.cancel_requested_by is None:  # (a cancel may wait in ``deferred``)
                verdict = await self._check_loop("llm_check", history=self.h.last(LOOP_CHECK_HISTORY))
            if self.r.cancel_requested_by is not None:
                self.h.rollback()  # as for an aborted stream
                raise _Cancelled
        return verdict if verdict.count else None

    async def _strike(self, verdict: LoopVerdict, bounded: int) -> tuple[StopReason | None, Any]:
        """Gemini CLI's two strikes (``strike``): the reason the turn ends, or (``None``
        and) the recovery message after a first detection is cleared (its count stays)."""
        decision = strike(verdict, bounded)
        if decision == "loop_detected":
            await self._notice("loop_detected", "warning", LOOP_DETECTED_MESSAGE)
            return decision, None
        if decision == "max_session_turns":
            await self._notice("max_session_turns", "error", MAX_SESSION_TURNS_MESSAGE)
            return decision, None
        assert self.w.loops_address is not None
        await self.port.send(
            ClearLoopDetection(session_id=self.sid, prompt_id=self.start.prompt_id), to=self.w.loops_address
        )
        return None, user_content([{"text": loop_recovery_prompt(verdict.detail)}])

    async def _overflows(self, message: Any) -> bool:
        """The context-window check: the request's estimate against what is left."""
        limit = token_limit(self.model)
        remaining = limit - self.h.last_prompt_tokens
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
        original = self.h.last_prompt_tokens
        if original < threshold * limit:
            return  # the common case, decided without a thread
        truncate_chars = min(4 * (limit - original), self.w.truncate_tool_output_threshold)
        # In the actor's thread on purpose: it runs once per compression (half a context
        # window), costs milliseconds, and a worker thread would let a virtual clock
        # (tests, replay) jump while it works. The files it may write are bounded.
        plan = _compression.plan_compression(
            self.h.contents(),
            model=self.model,
            last_prompt_tokens=original,
            threshold=threshold,
            compression_failed=self.h.compression_failed,
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
                self.h.compression_failed = True
            await self.publish(compressed)
            return
        if result.history == self.h.contents():
            # Truncation found nothing to cut: the history stays, only its count is new.
            self.h.last_prompt_tokens = estimate_tokens(history_parts(result.history))
            return
        self.h.replace(result.history)
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
        history = self.h.contents()
        early = _next_speaker.without_model_call(history)
        if early != _next_speaker.ASK:
            return early == "model"
        contents, config = _next_speaker.request(history)
        text = await self._utility_text(self.w.next_speaker_model, contents, config, "next_speaker")
        return text is not None and _next_speaker.parse_answer(text) == "model"
