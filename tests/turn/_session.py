"""A whole session (session, turn, scheduler, loop detector, gateway) on one bus, for the
turn-guard scenarios: prompts in, every message captured."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import trio

from actors.gateway import FakeEntry, FakeResponsesBackend, GatewayActor
from actors.host import runtime
from bus import Bus
from bus.messages import CloseSession, GenerateRequest, SessionClosed, SubmitPrompt, TurnEnded
from bus.testing import Capture, capture_session
from tests.system.test_text_turn import session_config


def text_chunk(text: str, *, finish: bool = False, prompt_tokens: int | None = None) -> dict[str, Any]:
    chunk: dict[str, Any] = {"candidates": [{"content": {"role": "model", "parts": [{"text": text}]}}]}
    if finish:
        chunk["candidates"][0]["finishReason"] = "STOP"
    if prompt_tokens is not None:
        chunk["usageMetadata"] = {"promptTokenCount": prompt_tokens, "candidatesTokenCount": 1}
    return chunk


def call_chunk(name: str, args: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "candidates": [
            {"content": {"role": "model", "parts": [{"functionCall": {"name": name, "args": dict(args)}}]}, "finishReason": "STOP"}
        ]
    }


def stream(*chunks: dict[str, Any]) -> FakeEntry:
    return FakeEntry("generateContentStream", list(chunks), 1)


def answer(text: str) -> FakeEntry:
    """A ``generateContent`` entry answering ``text``."""
    return FakeEntry("generateContent", text_chunk(text, finish=True), 1)


def config(tmp_path: Path, **guards: Any) -> runtime.SessionConfig:
    return session_config(tmp_path, **{"loop_detection": True, **guards})


@attrs.define
class Run:
    capture: Capture
    ended: list[TurnEnded]

    def requests(self, role: str | None = None) -> list[GenerateRequest]:
        return [m for m in self.capture.of_type(GenerateRequest) if role is None or m.role == role]


async def run_session(
    tmp_path: Path,
    entries: Sequence[FakeEntry],
    prompts: Sequence[str] = ("go",),
    *,
    strict: bool = True,
    history: tuple[Any, ...] = (),
    **guards: Any,
) -> Run:
    bus = Bus()
    cfg = attrs.evolve(config(tmp_path, **guards), history=history)
    ended: list[TurnEnded] = []
    async with trio.open_nursery() as nursery:
        cap = await nursery.start(capture_session, bus, "s1")
        await nursery.start(GatewayActor(bus, FakeResponsesBackend(list(entries), strict=strict)).run)
        client = bus.connect("client")
        addrs = await nursery.start(runtime.supervise_session, bus, cfg)
        await client.send(runtime.open_session_message(cfg), to=addrs.session)
        for i, prompt in enumerate(prompts, start=1):
            await client.send(
                SubmitPrompt(session_id="s1", prompt_id=f"p{i}", parts=[{"text": prompt}]), to=addrs.session
            )
            done = len(ended)
            await cap.wait_for(lambda m, done=done: isinstance(m, TurnEnded) and len(cap.of_type(TurnEnded)) > done)
            ended.append(cap.of_type(TurnEnded)[-1])
        await client.send(CloseSession(session_id="s1", reason="done"), to=addrs.session)
        await cap.wait_for_type(SessionClosed)
        bus.disconnect("gateway")
        nursery.cancel_scope.cancel()
    return Run(cap, ended)


def texts(content: Mapping[str, Any]) -> list[str]:
    return [str(p["text"]) for p in content.get("parts") or () if "text" in p]
