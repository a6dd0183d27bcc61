"""The loop detector actor: answers the turn's ``CheckLoop`` before it shows anything.

Accepts: ``ResetLoopDetection``, ``CheckLoop``, ``ClearLoopDetection``,
``CancelLoopCheck`` and ``DisableLoopDetection`` from the turn (or a client), and the
gateway's replies to its own LLM checks (``ModelChunk``, ``ModelFinished``,
``ModelFailed``, ``GenerationCancelled``).
Emits: one ``LoopVerdict`` per ``CheckLoop``, to its ``reply_to``; ``GenerateRequest``
(``generateContent``, role ``loop_detector``) and ``CancelGeneration`` to the gateway.
Owns: the session's detector state (``_logic.LoopDetector``: per-prompt windows of
calls and text, counts, the LLM check's schedule) and the LLM check in flight.
Stops: when its inbox closes (an LLM check in flight is cancelled, its gateway request
acknowledged, and its verdict sent), or by its supervisor's cancel.

Content and tool-call checks are answered at once from the pure core: in the turn's own
task while this actor is idle (``Bus.answer``: no task switch a streamed chunk), else
from the inbox. An LLM check
(``llm_check``) runs as a child task, so cancels and the gateway's replies keep flowing;
a failed or unparsable model answer is "no loop": the check never stops a turn.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, TypeAlias, assert_never

import attrs
import trio

from bus import Bus, DeliveryError, Envelope, Port
from bus.json_values import thaw
from bus.messages import (
    CancelGeneration,
    CancelLoopCheck,
    CheckLoop,
    ClearLoopDetection,
    DisableLoopDetection,
    GenerateRequest,
    GenerationCancelled,
    LoopVerdict,
    ModelChunk,
    ModelFailed,
    ModelFinished,
    ModelReply,
    ResetLoopDetection,
    new_id,
)

from ._logic import (
    ASK_DOUBLE_CHECK,
    LLM_DUE,
    NO_LOOP,
    LlmAnswer,
    LoopDetector,
    Verdict,
    llm_check_contents,
    parse_llm_answer,
)
from ._prompts import LOOP_CHECK_INSTRUCTION, LOOP_CHECK_SCHEMA, LOOP_CHECK_TASK

LoopsInbox: TypeAlias = (
    CheckLoop | ResetLoopDetection | ClearLoopDetection | DisableLoopDetection | CancelLoopCheck | ModelReply
)
"""What reaches the loop detector's address."""

LOOP_CHECK_MODEL = "gemini-3-flash-preview"
"""Gemini CLI's ``loop-detection`` alias."""
DOUBLE_CHECK_MODEL = "gemini-3-pro-preview"
"""Gemini CLI's ``loop-detection-double-check`` alias."""


def _verdict(msg: CheckLoop, verdict: Verdict, *, check_due: bool = False) -> LoopVerdict:
    return LoopVerdict(
        session_id=msg.session_id,
        request_id=msg.request_id,
        count=verdict.count,
        loop_type=verdict.loop_type,
        detail=verdict.detail,
        check_due=check_due,
        confirmed_by=verdict.confirmed_by,
    )


@attrs.frozen(kw_only=True)
class LoopWiring:
    session_id: str
    address: str
    gateway_address: str
    model_for: Callable[[str], str] = lambda alias: (
        DOUBLE_CHECK_MODEL if alias == "loop-detection-double-check" else LOOP_CHECK_MODEL
    )
    """Model alias (``loop-detection``, ``loop-detection-double-check``) -> model."""


@attrs.define(eq=False)
class _Check:
    """An LLM check in flight: its gateway replies and its cancel scope."""

    request: CheckLoop
    scope: trio.CancelScope
    send: trio.MemorySendChannel[ModelReply]
    receive: trio.MemoryReceiveChannel[ModelReply]
    gateway_request: str | None = None


class LoopDetectorActor:
    def __init__(self, bus: Bus, wiring: LoopWiring, detector: LoopDetector | None = None) -> None:
        self.bus = bus
        self.w = wiring
        self.core = detector or LoopDetector()
        self._check: _Check | None = None

    async def run(self, *, task_status: trio.TaskStatus[Port] = trio.TASK_STATUS_IGNORED) -> None:
        port = self.bus.connect(self.w.address)
        port.answer(self._answer)
        try:
            async with trio.open_nursery() as nursery:
                task_status.started(port)
                async for env in port:
                    msg = env.message
                    if not isinstance(msg, LoopsInbox):
                        continue  # no peer is wired to send it anything else
                    match msg:
                        case CheckLoop():
                            await self._on_check(port, nursery, msg)
                        case ResetLoopDetection():
                            if msg.prompt_id != self.core.prompt_id:
                                self.core.reset(msg.prompt_id, msg.user_prompt)
                        case ClearLoopDetection():
                            self.core.clear_detection()
                        case DisableLoopDetection():
                            self.core.disable()
                        case CancelLoopCheck():
                            if self._check is not None and self._check.request.request_id == msg.request_id:
                                self._check.scope.cancel(reason=f"CancelLoopCheck: {msg.reason}")
                        case ModelChunk() | ModelFinished() | ModelFailed() | GenerationCancelled():
                            check = self._check
                            if check is not None and check.gateway_request == msg.request_id:
                                check.send.send_nowait(msg)
                        case _ as unreachable:
                            assert_never(unreachable)
                if self._check is not None:
                    self._check.scope.cancel(reason="loop detector inbox closed")
        finally:
            port.close()

    def _answer(self, env: Envelope) -> LoopVerdict | None:
        """A check of a chunk, a call or a turn's start, answered in the turn's task
        while this actor is idle (``Bus.answer``): what ``_on_check`` would send."""
        msg = env.message
        if isinstance(msg, CheckLoop) and msg.kind != "llm_check":
            return self._verdict_now(msg)
        return None

    def _verdict_now(self, msg: CheckLoop) -> LoopVerdict:
        core = self.core
        outcome: Verdict | str
        match msg.kind:
            case "content":
                outcome = core.check_content(msg.text)
            case "tool_call":
                outcome = core.check_tool_call(msg.name, thaw(msg.args))
            case "turn_started":
                outcome = core.turn_started()
            case _:
                raise AssertionError(f"{msg.kind} is not answered at once")
        if outcome == LLM_DUE:
            return _verdict(msg, NO_LOOP, check_due=True)
        assert isinstance(outcome, Verdict)
        return _verdict(msg, outcome)

    async def _on_check(self, port: Port, nursery: trio.Nursery, msg: CheckLoop) -> None:
        if msg.kind == "llm_check":
            if self._check is not None:
                raise RuntimeError("llm_check while another LLM check runs")
            send, receive = trio.open_memory_channel[ModelReply](math.inf)
            self._check = _Check(msg, trio.CancelScope(), send, receive)
            nursery.start_soon(self._llm_check, port, self._check)
            return
        await self._send(port, msg, self._verdict_now(msg))

    async def _reply(self, port: Port, msg: CheckLoop, verdict: Verdict) -> None:
        await self._send(port, msg, _verdict(msg, verdict))

    async def _send(self, port: Port, msg: CheckLoop, reply: LoopVerdict) -> None:
        try:
            await port.send(reply, to=msg.reply_to)
        except DeliveryError:
            pass  # the turn is gone: nobody waits for this verdict

    async def _llm_check(self, port: Port, check: _Check) -> None:
        verdict: Verdict = NO_LOOP
        contents = llm_check_contents([thaw(c) for c in check.request.history], self.core.user_prompt, LOOP_CHECK_TASK)
        with check.scope:
            first = await self._ask(port, check, "loop-detection", contents)
            step = self.core.llm_first_pass(first)
            if step == ASK_DOUBLE_CHECK:
                model = self.w.model_for("loop-detection-double-check")
                second = await self._ask(port, check, "loop-detection-double-check", contents)
                verdict = self.core.llm_double_check(second, model)
            elif isinstance(step, Verdict):
                verdict = step
        self._check = None
        await self._reply(port, check.request, verdict)

    async def _ask(self, port: Port, check: _Check, alias: str, contents: list[Any]) -> LlmAnswer | None:
        """One loop-check call; ``None`` for a failure or an unusable answer. A cancel
        stops the gateway request and waits for its acknowledgement (shielded, bounded)."""
        req = GenerateRequest(
            session_id=self.w.session_id,
            request_id=new_id(),
            reply_to=self.w.address,
            method="generateContent",
            model=self.w.model_for(alias),
            contents=tuple(contents),
            config={
                "systemInstruction": LOOP_CHECK_INSTRUCTION,
                "responseMimeType": "application/json",
                "responseJsonSchema": LOOP_CHECK_SCHEMA,
                "temperature": 0,
            },
            role="loop_detector",
        )
        check.gateway_request = req.request_id
        await port.send(req, to=self.w.gateway_address)
        text: list[str] = []
        try:
            while True:
                msg = await check.receive.receive()
                match msg:
                    case ModelChunk():
                        text.append(_response_text(thaw(msg.chunk)))
                    case ModelFinished():
                        return parse_llm_answer("".join(text))
                    case ModelFailed() | GenerationCancelled():
                        return None
                    case _ as unreachable:
                        assert_never(unreachable)
        except trio.Cancelled:
            with trio.move_on_after(5, shield=True):
                try:
                    await port.send(
                        CancelGeneration(
                            session_id=self.w.session_id, request_id=req.request_id, reason="loop check cancelled"
                        ),
                        to=self.w.gateway_address,
                    )
                except DeliveryError:
                    pass  # no gateway any more: nothing runs there
                else:
                    while not isinstance(
                        await check.receive.receive(), ModelFinished | ModelFailed | GenerationCancelled
                    ):
                        pass
            raise


def _response_text(chunk: Any) -> str:
    candidates = chunk.get("candidates") or ()
    if not candidates:
        return ""
    parts = (candidates[0].get("content") or {}).get("parts") or ()
    return "".join(str(p["text"]) for p in parts if p.get("text") and not p.get("thought"))
