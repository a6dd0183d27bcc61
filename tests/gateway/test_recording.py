"""``RecordingBackend``: Gemini CLI's fake-responses lines, only for calls that complete."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio

from actors.gateway import (
    BackendError,
    ChunkSink,
    FakeResponsesBackend,
    RecordingBackend,
    load_fake_responses,
)
from actors.gateway._fake import FakeEntry
from bus.messages import GenerateRequest


def req(method: str) -> GenerateRequest:
    return GenerateRequest(session_id="s", request_id="r", reply_to="x", method=method, model="m")


CHUNK = {
    "candidates": [{"content": {"role": "model", "parts": [{"text": "hi"}]}, "finishReason": "STOP"}],
    "usageMetadata": {"promptTokenCount": 1, "totalTokenCount": 2},
    "modelVersion": "gemini-x",
    "responseId": "abc",
}


async def drain(backend: Any, request: GenerateRequest) -> list[Any]:
    got: list[Any] = []

    async def emit(chunk: Any) -> None:
        got.append(chunk)

    await backend.generate(request, emit)
    return got


async def test_completed_calls_are_recorded_with_only_the_kept_fields(tmp_path: Path) -> None:
    entries = [
        FakeEntry("generateContentStream", [{"candidates": [{"content": {"parts": [{"text": "a"}]}}]}, CHUNK], 1),
        FakeEntry("generateContent", CHUNK, 2),
        FakeEntry("countTokens", {"totalTokens": 7, "cachedContentTokenCount": 1, "promptTokensDetails": []}, 3),
    ]
    out = tmp_path / "rec.responses"
    backend = RecordingBackend(FakeResponsesBackend(entries), out)
    for method in ("generateContentStream", "generateContent", "countTokens"):
        await drain(backend, req(method))
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    kept = {k: CHUNK[k] for k in ("candidates", "usageMetadata")}
    assert lines == [
        {"method": "generateContentStream", "response": [{"candidates": [{"content": {"parts": [{"text": "a"}]}}]}, kept]},
        {"method": "generateContent", "response": kept},
        {"method": "countTokens", "response": {"totalTokens": 7, "cachedContentTokenCount": 1}},
    ]
    # the file is a fake-responses file
    assert [e.method for e in load_fake_responses(out)] == ["generateContentStream", "generateContent", "countTokens"]


class Failing:
    def __init__(self, *, cancel: bool = False) -> None:
        self.cancel = cancel

    async def generate(self, request: GenerateRequest, emit: ChunkSink) -> str:
        await emit(CHUNK)
        if self.cancel:
            await trio.sleep_forever()
        raise BackendError("terminated", phase="stream")


async def test_failed_calls_are_not_recorded(tmp_path: Path) -> None:
    out = tmp_path / "rec.responses"
    with pytest.raises(BackendError):
        await drain(RecordingBackend(Failing(), out), req("generateContentStream"))
    assert not out.exists()


async def test_interrupted_streams_are_not_recorded(tmp_path: Path) -> None:
    out = tmp_path / "rec.responses"
    with trio.move_on_after(0.01):
        await drain(RecordingBackend(Failing(cancel=True), out), req("generateContentStream"))
    assert not out.exists()
