"""The loop detector actor in real trio, with a scripted gateway and the autojump clock."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import trio

from actors.loops import DOUBLE_CHECK_MODEL, LOOP_CHECK_MODEL, LoopDetectorActor, LoopWiring
from bus import Bus, Envelope, Port
from bus.json_values import thaw
from bus.messages import (
    ApiError,
    CancelGeneration,
    CancelLoopCheck,
    CheckLoop,
    ClearLoopDetection,
    GenerateRequest,
    GenerationCancelled,
    LoopVerdict,
    ModelChunk,
    ModelFailed,
    ModelFinished,
    ResetLoopDetection,
    new_id,
)
from bus.testing import scripted_peer

SID = "s1"


def confidence(value: float) -> dict[str, Any]:
    text = json.dumps({"unproductive_state_analysis": f"sure at {value}", "unproductive_state_confidence": value})
    return {"candidates": [{"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP"}]}


def gateway(answers: list[dict[str, Any] | None | float], seen: list[GenerateRequest]) -> Callable[..., Any]:
    """Answers each request with the next entry: a response, ``None`` (a failure) or a
    delay (never answers until cancelled)."""

    async def reply(env: Envelope, port: Port) -> None:
        req = env.message
        assert isinstance(req, GenerateRequest)
        seen.append(req)
        answer = answers.pop(0)
        if isinstance(answer, float):
            await trio.sleep(answer)
            return
        if answer is None:
            await port.send(
                ModelFailed(session_id=SID, request_id=req.request_id, model=req.model, error=ApiError(message="boom")),
                to=req.reply_to,
            )
            return
        await port.send(ModelChunk(session_id=SID, request_id=req.request_id, index=0, chunk=answer), to=req.reply_to)
        await port.send(ModelFinished(session_id=SID, request_id=req.request_id, model=req.model), to=req.reply_to)

    return reply


async def start(nursery: trio.Nursery, answers: list[Any]) -> tuple[Bus, Port, list[GenerateRequest], list[Any]]:
    bus = Bus()
    seen: list[GenerateRequest] = []
    cancels: list[Any] = []

    async def on_cancel(env: Envelope, port: Port) -> None:
        msg = env.message
        assert isinstance(msg, CancelGeneration)
        cancels.append(msg)
        await port.send(GenerationCancelled(session_id=SID, request_id=msg.request_id), to="loops")

    await nursery.start(
        scripted_peer, bus, "gateway", {GenerateRequest: gateway(answers, seen), CancelGeneration: on_cancel}
    )
    await nursery.start(LoopDetectorActor(bus, LoopWiring(session_id=SID, address="loops", gateway_address="gateway")).run)
    turn = bus.connect("turn")
    await turn.send(ResetLoopDetection(session_id=SID, prompt_id="p1", user_prompt="fix it"), to="loops")
    return bus, turn, seen, cancels


async def ask(turn: Port, kind: str, **fields: Any) -> LoopVerdict:
    check = CheckLoop(session_id=SID, request_id=new_id(), reply_to="turn", prompt_id="p1", kind=kind, **fields)
    await turn.send(check, to="loops")
    reply = (await turn.receive()).message
    assert isinstance(reply, LoopVerdict) and reply.request_id == check.request_id
    return reply


async def test_tool_calls_and_content_are_answered_at_once(autojump_clock: trio.abc.Clock) -> None:
    async with trio.open_nursery() as nursery:
        _bus, turn, _seen, _ = await start(nursery, [])
        t0 = trio.current_time()
        counts = [(await ask(turn, "tool_call", name="ls", args={"d": "."})).count for _ in range(5)]
        assert counts == [0, 0, 0, 0, 1]
        assert trio.current_time() == t0
        await turn.send(ClearLoopDetection(session_id=SID, prompt_id="p1"), to="loops")
        assert (await ask(turn, "tool_call", name="ls", args={"d": "."})).count == 2
        # a reset for the current prompt changes nothing; a new prompt starts over
        await turn.send(ResetLoopDetection(session_id=SID, prompt_id="p1"), to="loops")
        assert (await ask(turn, "content", text="hello")).count == 2
        await turn.send(ResetLoopDetection(session_id=SID, prompt_id="p2"), to="loops")
        assert (await ask(turn, "content", text="hello")).count == 0
        nursery.cancel_scope.cancel()


async def _to_due(turn: Port) -> None:
    for i in range(1, 30):
        v = await ask(turn, "turn_started")
        assert not v.check_due and v.count == 0, i
    assert (await ask(turn, "turn_started")).check_due


HISTORY = ({"role": "user", "parts": [{"text": "fix it"}]}, {"role": "model", "parts": [{"text": "trying"}]})


async def test_an_llm_detected_loop_needs_the_second_model(autojump_clock: trio.abc.Clock) -> None:
    async with trio.open_nursery() as nursery:
        _bus, turn, seen, _ = await start(nursery, [confidence(0.95), confidence(0.92)])
        await _to_due(turn)
        verdict = await ask(turn, "llm_check", history=HISTORY)
        assert (verdict.count, verdict.loop_type, verdict.detail, verdict.confirmed_by) == (
            1,
            "llm_detected_loop",
            "sure at 0.92",
            DOUBLE_CHECK_MODEL,
        )
        assert [(r.method, r.model, r.role) for r in seen] == [
            ("generateContent", LOOP_CHECK_MODEL, "loop_detector"),
            ("generateContent", DOUBLE_CHECK_MODEL, "loop_detector"),
        ]
        first = seen[0].contents
        assert first[0]["parts"][0]["text"] == "<original_user_request>\nfix it\n</original_user_request>"
        assert tuple(thaw(first[1:3])) == HISTORY
        nursery.cancel_scope.cancel()


async def test_a_doubtful_second_model_is_no_loop(autojump_clock: trio.abc.Clock) -> None:
    async with trio.open_nursery() as nursery:
        _bus, turn, _seen, _ = await start(nursery, [confidence(0.95), confidence(0.5)])
        await _to_due(turn)
        assert (await ask(turn, "llm_check", history=HISTORY)).count == 0
        # interval now round(5 + 10 * 0.5) = 10: next check at turn 40
        due = [i for i in range(31, 45) if (await ask(turn, "turn_started")).check_due]
        assert due == [40]
        nursery.cancel_scope.cancel()


async def test_failed_or_garbled_checks_never_stop_a_turn(autojump_clock: trio.abc.Clock) -> None:
    garbled = {"candidates": [{"content": {"role": "model", "parts": [{"text": "yes, a loop"}]}, "finishReason": "STOP"}]}
    async with trio.open_nursery() as nursery:
        _bus, turn, seen, _ = await start(nursery, [None, garbled])
        await _to_due(turn)
        assert (await ask(turn, "llm_check", history=HISTORY)).count == 0
        for _ in range(10):
            await ask(turn, "turn_started")
        assert (await ask(turn, "llm_check", history=HISTORY)).count == 0
        assert len(seen) == 2
        nursery.cancel_scope.cancel()


async def test_a_cancelled_check_stops_its_model_call_and_still_answers(autojump_clock: trio.abc.Clock) -> None:
    async with trio.open_nursery() as nursery:
        _bus, turn, seen, cancels = await start(nursery, [60.0])
        await _to_due(turn)
        check = CheckLoop(session_id=SID, request_id="c1", reply_to="turn", prompt_id="p1", kind="llm_check", history=HISTORY)
        await turn.send(check, to="loops")
        await trio.sleep(1)
        t0 = trio.current_time()
        await turn.send(CancelLoopCheck(session_id=SID, request_id="c1", reason="turn cancelled"), to="loops")
        reply = (await turn.receive()).message
        assert isinstance(reply, LoopVerdict) and reply.request_id == "c1" and reply.count == 0
        assert trio.current_time() == t0
        assert [c.request_id for c in cancels] == [seen[0].request_id]
        nursery.cancel_scope.cancel()


async def test_a_disabled_detector_says_no_loop(autojump_clock: trio.abc.Clock) -> None:
    from bus.messages import DisableLoopDetection

    async with trio.open_nursery() as nursery:
        _bus, turn, _seen, _ = await start(nursery, [])
        await turn.send(DisableLoopDetection(session_id=SID), to="loops")
        assert all([(await ask(turn, "tool_call", name="ls")).count == 0 for _ in range(8)])
        nursery.cancel_scope.cancel()
