"""A whole session (session, turn, gateway, scheduler, recorder) on one bus, no tools."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import trio

from actors.gateway import FakeEntry, FakeResponsesBackend, GatewayActor
from actors.host import runtime
from actors.recording import load_recording
from actors.tools import ToolEnv
from bus import Bus
from bus.messages import (
    CloseSession,
    ModelChunk,
    SessionClosed,
    SubmitPrompt,
    TextStreamed,
    TurnEnded,
)
from bus.testing import assert_gap_free, capture_session


class AllowAll:
    def check(self, tool_name: str, args: Mapping[str, Any], *, approval_mode: str | None = None) -> Any:
        return type("V", (), {"decision": "allow", "deny_message": None})()

    def add_session_rule(self, tool_name: str, **_: Any) -> None:
        pass


def stream(*texts: str, finish: bool = True) -> FakeEntry:
    chunks: list[dict[str, Any]] = [
        {"candidates": [{"content": {"role": "model", "parts": [{"text": t}]}}]} for t in texts
    ]
    if finish:
        chunks[-1]["candidates"][0]["finishReason"] = "STOP"
    return FakeEntry("generateContentStream", chunks, 1)


def session_config(tmp_path: Path, recording: Path | None = None, **overrides: Any) -> runtime.SessionConfig:
    """A text-only session (no tools, every call allowed); ``overrides`` go to SessionConfig."""
    env = ToolEnv(workspace=tmp_path, project_temp_dir=tmp_path / "tmp")
    return runtime.SessionConfig(
        session_id="s1",
        model="gemini-test",
        approval_mode="default",
        env=env,
        tools={},
        executor_of=lambda t: "files",
        policy=AllowAll(),
        route_model=lambda m: m,
        classifier_choice=lambda c: c,
        classifier_request=None,
        recording=recording,
        wall_ms=lambda: 1000,
        **{"request_config": lambda m: {}, **overrides},
    )


async def run_prompt(tmp_path: Path, backend: FakeResponsesBackend, recording: Path | None = None):
    bus = Bus()
    cfg = session_config(tmp_path, recording)
    async with trio.open_nursery() as nursery:
        cap = await nursery.start(capture_session, bus, "s1")
        await nursery.start(GatewayActor(bus, backend).run)
        client = bus.connect("client")
        addrs = await nursery.start(runtime.supervise_session, bus, cfg)
        await client.send(runtime.open_session_message(cfg), to=addrs.session)
        await client.send(SubmitPrompt(session_id="s1", prompt_id="p1", parts=[{"text": "hi"}]), to=addrs.session)
        ended = await cap.wait_for_type(TurnEnded)
        await client.send(CloseSession(session_id="s1", reason="done"), to=addrs.session)
        await cap.wait_for_type(SessionClosed)
        bus.disconnect("gateway")
        nursery.cancel_scope.cancel()
    return cap, ended


async def test_text_streams_and_history_grows(tmp_path: Path) -> None:
    cap, ended = await run_prompt(tmp_path, FakeResponsesBackend([stream("Hello", " world")]))
    assert [m.text for m in cap.of_type(TextStreamed)] == ["Hello", " world"]
    assert ended.stop_reason == "end_turn"
    assert ended.history_added[0]["parts"][0]["text"] == "hi"
    assert ended.history_added[1] == {"role": "model", "parts": ({"text": "Hello world"},)}
    assert_gap_free(cap.envelopes)
    assert isinstance(cap.messages[-1], SessionClosed)


async def test_exhausted_fixture_ends_turn_with_api_error_and_rolls_back(tmp_path: Path) -> None:
    cap, ended = await run_prompt(tmp_path, FakeResponsesBackend([]))
    assert ended.stop_reason == "error"
    assert ended.error is not None
    assert ended.error.message.startswith("No more mock responses for generateContentStream, got request:\n")
    assert ended.history_added == ()


async def test_invalid_stream_is_retried_then_reported(tmp_path: Path, autojump_clock: trio.abc.Clock) -> None:
    backend = FakeResponsesBackend([stream("x", finish=False)] * 4)
    start = trio.current_time()
    cap, ended = await run_prompt(tmp_path, backend)
    assert ended.stop_reason == "invalid_stream"
    # four attempts, 1 s + 2 s + 4 s apart, in virtual time
    assert trio.current_time() - start == 7
    assert len(cap.of_type(ModelChunk)) == 4


async def test_recording_decodes_to_the_delivered_messages(tmp_path: Path) -> None:
    rec = tmp_path / "rec.jsonl"
    cap, _ = await run_prompt(tmp_path, FakeResponsesBackend([stream("a", "b")]), rec)
    lines = rec.read_text().splitlines()
    assert json.loads(lines[0])["kind"] == "meta"  # the recording's first line describes it
    assert load_recording(rec).envelopes == cap.envelopes
