"""The live backend serves a request from any trio task, not only from tasks started
inside ``running()``: the daemon holds its live backends open in tasks of their own and
its gateway's request tasks call them (issue 17, defect 1)."""

from __future__ import annotations

from typing import Any

import trio

from actors.gateway._fake import FakeEntry
from actors.gateway._genai import GenaiBackend, GenaiSettings
from bus.messages import GenerateRequest
from tests.fakes.gemini_server import FakeGeminiServer


def request(method: str, text: str) -> GenerateRequest:
    return GenerateRequest(
        session_id="s",
        request_id=text,
        reply_to="t",
        method=method,
        model="gemini-x",
        contents=({"role": "user", "parts": [{"text": text}]},),
    )


def answer(method: str, text: str, index: int) -> FakeEntry:
    body = {"candidates": [{"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP"}]}
    return FakeEntry(method, [body] if method == "generateContentStream" else body, index)


async def hold(backend: GenaiBackend, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
    async with backend.running():
        task_status.started()
        await trio.sleep_forever()


async def test_a_task_outside_the_backends_running_block_gets_its_answers() -> None:
    methods = ("generateContent", "generateContentStream", "generateContentStream")
    server = FakeGeminiServer([answer(m, f"answer {i}", i) for i, m in enumerate(methods)])
    got: list[Any] = []

    async def emit(item: Any) -> None:
        got.append(item)

    async with trio.open_nursery() as nursery:
        await nursery.start(server.run)
        backend = GenaiBackend(GenaiSettings(api_key="k", base_url=server.base_url))
        await nursery.start(hold, backend)  # a sibling task holds it, as the daemon's does
        for i, method in enumerate(methods):
            assert await backend.generate(request(method, f"q{i}"), emit) == "gemini-x"
        # and from a task of another nursery, concurrently with this one
        async with trio.open_nursery() as callers:
            callers.start_soon(backend.generate, request("generateContentStream", "q3"), emit)
            callers.start_soon(backend.generate, request("generateContentStream", "q4"), emit)
            server.add_entries([answer("generateContentStream", "answer 3", 3), answer("generateContentStream", "answer 4", 4)])
        nursery.cancel_scope.cancel()
    texts = sorted(c["candidates"][0]["content"]["parts"][0]["text"] for c in got)
    assert texts == [f"answer {i}" for i in range(5)]
