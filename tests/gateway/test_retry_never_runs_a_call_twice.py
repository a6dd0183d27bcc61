"""A function call streamed by an attempt that is then retried is never executed: the
turn acts on calls only after ``ModelFinished`` and drops what it collected on
``ModelRetrying``. Whole session, real SDK, fake server resetting mid-stream."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import attrs
import trio

from actors.gateway import GatewayActor, RetryPolicy
from actors.gateway._fake import FakeEntry
from actors.gateway._genai import GenaiBackend, GenaiSettings
from actors.host import runtime
from actors.tools import builtin_tools, executor_kind
from bus import Bus
from bus.messages import (
    CloseSession,
    ModelRetrying,
    ScheduleBatch,
    SessionClosed,
    StreamRetried,
    SubmitPrompt,
    ToolCallRequested,
    TurnEnded,
)
from bus.testing import capture_session
from tests.fakes.gemini_server import FakeGeminiServer, Fault
from tests.system.test_text_turn import session_config


def call_then_text() -> FakeEntry:
    return FakeEntry(
        "generateContentStream",
        [
            {"candidates": [{"content": {"role": "model", "parts": [{"text": "Reading it."}]}}]},
            {"candidates": [{"content": {"role": "model", "parts": [{"functionCall": {"name": "read_file", "args": {"file_path": "a.txt"}}}]}}]},
            {"candidates": [{"content": {"role": "model", "parts": [{"text": ""}]}, "finishReason": "STOP"}]},
        ],
        0,
    )


def answer() -> FakeEntry:
    return FakeEntry(
        "generateContentStream",
        [{"candidates": [{"content": {"role": "model", "parts": [{"text": "No need after all."}]}, "finishReason": "STOP"}]}],
        1,
    )


async def test_a_call_in_a_retried_attempt_is_never_executed(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("secret")
    server = FakeGeminiServer([call_then_text(), answer()], faults=[Fault.error_chunk(503, after_chunks=2)])
    tools = {t.name: t for t in builtin_tools("gemini-test") if t.name == "read_file"}
    cfg = attrs.evolve(session_config(tmp_path), tools=tools, executor_of=executor_kind, registered_names=tuple(tools))
    bus = Bus()
    async with trio.open_nursery() as nursery:
        await nursery.start(server.run)
        backend = GenaiBackend(GenaiSettings(api_key="k", base_url=server.base_url))
        cap = await nursery.start(capture_session, bus, "s1")
        await nursery.start(GatewayActor(bus, backend, retry=RetryPolicy().scaled(0.001), rng=random.Random(1)).run)
        client = bus.connect("client")
        addrs = await nursery.start(runtime.supervise_session, bus, cfg)
        await client.send(runtime.open_session_message(cfg), to=addrs.session)
        await client.send(SubmitPrompt(session_id="s1", prompt_id="p1", parts=[{"text": "read a.txt"}]), to=addrs.session)
        with trio.fail_after(20):
            ended = await cap.wait_for_type(TurnEnded)
        await client.send(CloseSession(session_id="s1", reason="done"), to=addrs.session)
        await cap.wait_for_type(SessionClosed)
        bus.disconnect("gateway")
        nursery.cancel_scope.cancel()
    kinds = [type(m) for m in cap.messages]
    # the call was seen by the turn, then voided by the retry (the gateway may announce
    # the retry before the turn has read the chunk; the turn reads its mail in order)...
    assert kinds.index(ToolCallRequested) < kinds.index(StreamRetried)
    assert kinds.index(ModelRetrying) < kinds.index(StreamRetried)
    assert [m.mid_stream for m in cap.of_type(ModelRetrying)] == [True]
    # ...and never reached the scheduler
    assert cap.of_type(ScheduleBatch) == []
    assert ended.stop_reason == "end_turn"
    model_turn: Any = ended.history_added[-1]
    assert model_turn["role"] == "model"
    assert all("functionCall" not in part for part in model_turn["parts"])
    assert [r.chunks_sent for r in server.requests] == [2, 1]
