"""``AddContext``: a result the user shares becomes a user turn of its own — at once
between turns, after the running turn otherwise — and the model sees it exactly once
per request from then on; resume rebuilds it from ``ContextAdded``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import trio
import trio.testing

from actors.gateway import FakeResponsesBackend, GatewayActor
from actors.host import runtime
from actors.host.sessions import conversation_of
from actors.recording import load_recording
from bus import Bus
from bus.json_values import thaw
from bus.messages import (
    AddContext,
    CloseSession,
    ContextAdded,
    GenerateRequest,
    SessionClosed,
    StartTurn,
    SubmitPrompt,
    TurnEnded,
)
from bus.testing import capture_session
from tests.system.test_text_turn import session_config, stream

SHARED = {"text": "I ran the following shell command:\n```sh\nls\n```\n\nThis produced the following result:\n```\na.txt\n```"}


class GatedBackend:
    """Fake responses, each held until the test opens the gate."""

    def __init__(self, inner: FakeResponsesBackend) -> None:
        self.inner = inner
        self.gate = trio.Event()

    async def generate(self, request: GenerateRequest, emit: Any) -> str:
        await self.gate.wait()
        return await self.inner.generate(request, emit)


def contents_of(request: GenerateRequest) -> list[Any]:
    return list(thaw(request.contents))


async def test_shared_context_is_added_between_turns_once_and_survives_resume(tmp_path: Path) -> None:
    bus = Bus()
    recording = tmp_path / "rec.jsonl"
    cfg = session_config(tmp_path, recording)
    backend = GatedBackend(FakeResponsesBackend([stream("one"), stream("two"), stream("three")]))
    async with trio.open_nursery() as nursery:
        cap = await nursery.start(capture_session, bus, "s1")
        await nursery.start(GatewayActor(bus, backend).run)
        client = bus.connect("client:test")
        addrs = await nursery.start(runtime.supervise_session, bus, cfg)
        await client.send(runtime.open_session_message(cfg), to=addrs.session)

        async def prompt(pid: str, text: str) -> None:
            await client.send(SubmitPrompt(session_id="s1", prompt_id=pid, parts=[{"text": text}]), to=addrs.session)

        # 1. Between turns: added at once.
        await client.send(AddContext(session_id="s1", request_id="r1", parts=[SHARED]), to=addrs.session)
        added = await cap.wait_for_type(ContextAdded)
        assert thaw(added.content) == {"role": "user", "parts": [SHARED]}
        assert added.requested_by == "client:test"  # the sender, when the command names nobody
        backend.gate.set()
        await prompt("p1", "first")
        await cap.wait_for(lambda m: isinstance(m, TurnEnded))
        # 2. During a turn: held until it ends, then added before the next prompt runs.
        backend.gate = trio.Event()
        await prompt("p2", "second")
        await cap.wait_for(lambda m: isinstance(m, GenerateRequest) and len(cap.of_type(GenerateRequest)) == 2)
        later = {"text": "later"}
        await client.send(AddContext(session_id="s1", request_id="r2", parts=[later]), to=addrs.session)
        await trio.testing.wait_all_tasks_blocked()
        assert len(cap.of_type(ContextAdded)) == 1  # not while the turn runs
        await prompt("p3", "third")
        backend.gate.set()
        await cap.wait_for(lambda m: isinstance(m, TurnEnded) and len(cap.of_type(TurnEnded)) == 3)
        await client.send(CloseSession(session_id="s1", reason="done"), to=addrs.session)
        await cap.wait_for_type(SessionClosed)
        bus.disconnect("gateway")
        nursery.cancel_scope.cancel()

    kinds = [type(m).__name__ for m in cap.messages if isinstance(m, TurnEnded | ContextAdded | StartTurn)]
    assert kinds == ["ContextAdded", "StartTurn", "TurnEnded", "StartTurn", "TurnEnded", "ContextAdded", "StartTurn", "TurnEnded"]
    first, second, third = (contents_of(r) for r in cap.of_type(GenerateRequest))
    assert [json.dumps(c).count("I ran the following shell command") for c in (first, second, third)] == [1, 1, 1]
    # (The request joins adjacent user turns, as Gemini CLI's does.)
    assert texts(first)[-2:] == [SHARED["text"], "first"]
    assert "later" not in texts(second)
    # After the second turn's own additions, before the third prompt.
    assert texts(third)[-4:] == ["second", "two", "later", "third"]
    # A resumed session rebuilds the same conversation from the recording.
    rebuilt = conversation_of(load_recording(recording))
    assert [c["parts"] for c in rebuilt[-3:]] == [[later], [{"text": "third"}], [{"text": "three"}]]
    assert texts(rebuilt) == [*texts(third), "three"]
    assert rebuilt[0] == {"role": "user", "parts": [SHARED]}  # a user turn of its own in the history


def texts(contents: list[Any]) -> list[str]:
    return [str(p.get("text")) for c in contents for p in c.get("parts") or []]
