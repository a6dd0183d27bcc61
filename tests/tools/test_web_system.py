"""The web tools through a real session: scheduler, files executor, gateway, fake backend.

The tools' model calls travel as ``GenerateRequest`` messages from the executor to the
gateway, which serves them from the same fake-responses list as the main turn.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import trio

from actors.gateway import FakeEntry, FakeResponsesBackend, GatewayActor
from actors.host import runtime
from actors.tools import ToolEnv
from actors.tools._http import Resolver
from actors.tools._web_fetch import WebFetchTool
from actors.tools._web_search import WebSearchTool
from bus import Bus
from bus.json_values import thaw
from bus.messages import BatchSettled, CloseSession, SessionClosed, SubmitPrompt, TurnEnded
from bus.testing import capture_session


class AllowAll:
    def check(
        self, tool_name: str, args: Mapping[str, Any], *, approval_mode: str | None = None
    ) -> Any:
        return type("V", (), {"decision": "allow", "deny_message": None})()

    def add_session_rule(self, tool_name: str, **_: Any) -> None:
        pass


def call_stream(name: str, args: dict[str, Any]) -> FakeEntry:
    chunk = {
        "candidates": [
            {
                "content": {
                    "role": "model",
                    "parts": [{"functionCall": {"name": name, "args": args}}],
                },
                "finishReason": "STOP",
            }
        ]
    }
    return FakeEntry("generateContentStream", [chunk], 1)


def text_stream(text: str) -> FakeEntry:
    chunk = {
        "candidates": [
            {"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP"}
        ]
    }
    return FakeEntry("generateContentStream", [chunk], 1)


def generated(text: str, **grounding: Any) -> FakeEntry:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": [{"text": text}]}}
    if grounding:
        candidate["groundingMetadata"] = grounding
    return FakeEntry("generateContent", {"candidates": [candidate]}, 1)


async def test_search_then_fetch_through_the_gateway(tmp_path: Path) -> None:
    backend = FakeResponsesBackend(
        [
            call_stream("google_web_search", {"query": "venus"}),
            generated(
                "A day on Venus is long.",
                groundingChunks=[{"web": {"title": "nasa.gov", "uri": "https://nasa.gov/v"}}],
                groundingSupports=[{"segment": {"endIndex": 23}, "groundingChunkIndices": [0]}],
            ),
            call_stream("web_fetch", {"prompt": "fetch https://example.com/1"}),
            generated("Page 1 content"),
            call_stream("web_fetch", {"prompt": "fetch http://localhost/x"}),
            text_stream("done"),
        ]
    )
    cap, ended = await run_session(tmp_path, backend)
    assert ended.stop_reason == "end_turn"
    assert backend.remaining == 0
    search, fetch, blocked = [b.calls[0] for b in cap.of_type(BatchSettled)]
    assert (search.status, search.result_display) == (
        "success",
        'Search results for "venus" returned.',
    )
    assert thaw(search.response_parts)[0]["functionResponse"]["response"] == {
        "output": 'Web search results for "venus":\n\nA day on Venus is long.[1]\n\n'
        "Sources:\n[1] nasa.gov (https://nasa.gov/v)"
    }
    assert (fetch.status, fetch.result_display) == ("success", "Content processed from prompt.")
    assert thaw(fetch.response_parts)[0]["functionResponse"]["response"] == {
        "output": "<untrusted_context>\nPage 1 content\n</untrusted_context>"
    }
    message = "All requested URLs were skipped: [Blocked Host] http://localhost/x"
    assert (blocked.status, blocked.error_type, blocked.error_message) == (
        "error",
        "web_fetch_processing_error",
        message,
    )
    assert blocked.result_display == f"Error: {message}"


async def test_eleven_fetches_in_one_batch(tmp_path: Path) -> None:
    """The corpus' concurrency-limit-web-fetch-dns-shim, through the whole runtime."""
    calls = [
        {
            "functionCall": {
                "name": "web_fetch",
                "args": {"prompt": f"fetch https://example.com/{i}"},
            }
        }
        for i in range(1, 12)
    ]
    batch = FakeEntry(
        "generateContentStream",
        [{"candidates": [{"content": {"role": "model", "parts": calls}, "finishReason": "STOP"}]}],
        1,
    )
    pages = [generated(f"Page {i} content") for i in range(1, 11)]
    backend = FakeResponsesBackend([batch, *pages, text_stream("rate limited")])
    cap, ended = await run_session(tmp_path, backend)
    assert ended.stop_reason == "end_turn" and backend.remaining == 0
    [settled] = cap.of_type(BatchSettled)
    assert [c.status for c in settled.calls] == ["success"] * 10 + ["error"]
    assert settled.calls[-1].error_message == (
        "All requested URLs were skipped: [Rate limit exceeded] https://example.com/11"
    )


async def run_session(tmp_path: Path, backend: FakeResponsesBackend) -> tuple[Any, TurnEnded]:
    env = ToolEnv(workspace=tmp_path, project_temp_dir=tmp_path / "tmp", session_id="s1")
    tools = {
        "google_web_search": WebSearchTool(),
        "web_fetch": WebFetchTool(resolver=Resolver({"example.com": ("93.184.215.14",)})),
    }
    cfg = runtime.SessionConfig(
        session_id="s1",
        model="gemini-3-flash-preview",
        approval_mode="yolo",
        env=env,
        tools=tools,
        executor_of=lambda t: "files",
        policy=AllowAll(),
        request_config=lambda m: {},
        route_model=lambda m: m,
        classifier_choice=lambda c: c,
        classifier_request=None,
        wall_ms=lambda: 1000,
    )
    bus = Bus()
    async with trio.open_nursery() as nursery:
        cap = await nursery.start(capture_session, bus, "s1")
        await nursery.start(GatewayActor(bus, backend).run)
        client = bus.connect("client")
        addrs = await nursery.start(runtime.supervise_session, bus, cfg)
        await client.send(runtime.open_session_message(cfg), to=addrs.session)
        await client.send(
            SubmitPrompt(session_id="s1", prompt_id="p1", parts=[{"text": "tell me"}]),
            to=addrs.session,
        )
        with trio.fail_after(10):
            ended = await cap.wait_for_type(TurnEnded)
        await client.send(CloseSession(session_id="s1", reason="done"), to=addrs.session)
        await cap.wait_for_type(SessionClosed)
        bus.disconnect("gateway")
        nursery.cancel_scope.cancel()
    return cap, ended
