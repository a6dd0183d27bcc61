"""The live backend's stream path (``_genai_stream``: the SDK's request layer, configs
converted once) against ``generate_content_stream``: the same requests on the wire and
the same chunks out, for the Gemini API and Vertex AI, through the fake Gemini server."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
import pytest
import trio
from google.genai import models as genai_models

from actors.gateway import BackendError
from actors.gateway import _genai_stream as genai_stream
from actors.gateway._fake import FakeEntry
from actors.gateway._genai import GenaiBackend, GenaiSettings
from bus.messages import GenerateRequest
from tests.fakes.gemini_server import FakeGeminiServer, RecordedRequest

SIGNATURE = "AbC+/w=="

CONFIG = {
    "systemInstruction": "You are terse.",
    "temperature": 0.2,
    "topP": 0.9,
    "thinkingConfig": {"includeThoughts": True, "thinkingBudget": 128},
    "tools": [
        {
            "functionDeclarations": [
                {
                    "name": "read_file",
                    "description": "Reads a file.",
                    "parametersJsonSchema": {
                        "type": "object",
                        "properties": {"path": {"type": "string"}, "limit": {"type": "integer", "minimum": 1}},
                        "required": ["path"],
                    },
                },
                {"name": "noop", "description": "Does nothing."},
            ]
        }
    ],
    "toolConfig": {"functionCallingConfig": {"mode": "AUTO"}},
    "safetySettings": [{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_NONE"}],
    "labels": {"team": "agentbus"},
}

CONTENTS = (
    {"role": "user", "parts": [{"text": "read a"}]},
    {"role": "model", "parts": [{"functionCall": {"name": "read_file", "args": {"path": "a"}, "id": "c1"}, "thoughtSignature": SIGNATURE}]},
    {"role": "user", "parts": [{"functionResponse": {"name": "read_file", "id": "c1", "response": {"output": "x = 1"}}}]},
)

CHUNKS = [
    {"candidates": [{"content": {"role": "model", "parts": [{"text": "thinking", "thought": True}]}, "index": 0}]},
    {"candidates": [{"content": {"role": "model", "parts": [{"text": "It sets x", "thoughtSignature": SIGNATURE}]}, "index": 0}]},
    {"candidates": [{"content": {"role": "model", "parts": [{"functionCall": {"name": "noop", "args": {}}}]}, "index": 0}]},
    {
        "candidates": [{"content": {"role": "model", "parts": [{"text": "."}]}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 9, "candidatesTokenCount": 3, "totalTokenCount": 12, "thoughtsTokenCount": 1},
        "modelVersion": "gemini-test",
        "responseId": "resp-1",
    },
    # not in the SDK's shape: an unknown field and an integer where it keeps a float
    {"candidates": [{"content": {"role": "model", "parts": [{"text": "!", "newField": 1}]}, "avgLogprobs": -1}]},
]


def request(config: Any = CONFIG, n: int = 0) -> GenerateRequest:
    return GenerateRequest(
        session_id="s",
        request_id=f"r{n}",
        reply_to="me",
        method="generateContentStream",
        model="gemini-test",
        contents=CONTENTS,
        config=config,
    )


async def serve(
    settings: GenaiSettings, requests: Sequence[GenerateRequest], *, lower_level: bool, monkeypatch: pytest.MonkeyPatch
) -> tuple[list[RecordedRequest], list[list[Any] | BackendError]]:
    """Run ``requests`` one after the other; what the server saw, what each emitted
    (or the error it failed with)."""
    monkeypatch.setattr(genai_stream, "LOWER_LEVEL", lower_level)
    server = FakeGeminiServer([FakeEntry("generateContentStream", CHUNKS, i) for i in range(len(requests))], strict=False)
    outcomes: list[list[Any] | BackendError] = []
    async with trio.open_nursery() as nursery:
        await nursery.start(server.run)
        backend = GenaiBackend(attrs.evolve(settings, base_url=server.base_url))
        async with backend.running():
            for req in requests:
                got: list[Any] = []

                async def emit(chunk: Any, got: list[Any] = got) -> None:
                    got.append(chunk)

                try:
                    await backend.generate(req, emit)
                except BackendError as exc:
                    outcomes.append(exc)
                else:
                    outcomes.append(got)
        nursery.cancel_scope.cancel()
    return server.requests, outcomes


def wire(req: RecordedRequest) -> tuple[str, dict[str, str], Any]:
    headers = {k: v for k, v in req.headers.items() if k != "host"}  # each run has its server
    return req.path, headers, req.body


SETTINGS = {
    "gemini-api": GenaiSettings(api_key="k", headers={"User-Agent": "agentbus-test"}),
    "vertex-ai": GenaiSettings(api_key="k", vertexai=True, api_version="v1beta1"),
}


@pytest.mark.parametrize("settings", SETTINGS.values(), ids=SETTINGS.keys())
async def test_the_stream_path_sends_and_yields_what_the_public_method_does(
    settings: GenaiSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    public_requests, public_chunks = await serve(settings, [request()], lower_level=False, monkeypatch=monkeypatch)
    ours_requests, ours_chunks = await serve(settings, [request()], lower_level=True, monkeypatch=monkeypatch)
    assert [wire(r) for r in ours_requests] == [wire(r) for r in public_requests]
    assert ours_chunks == public_chunks
    [chunks] = ours_chunks
    assert isinstance(chunks, list) and len(chunks) == len(CHUNKS)
    assert chunks[1]["candidates"][0]["content"]["parts"][0]["thoughtSignature"] == SIGNATURE
    assert chunks[4] == {"candidates": [{"content": {"role": "model", "parts": [{"text": "!"}]}, "avgLogprobs": -1.0}]}


async def test_a_config_seen_before_is_not_converted_again_but_a_new_one_is(monkeypatch: pytest.MonkeyPatch) -> None:
    other = {**CONFIG, "temperature": 0.7, "systemInstruction": "You are verbose."}
    sequence = [request(CONFIG, 0), request(other, 1), request(CONFIG, 2)]
    public, _ = await serve(SETTINGS["gemini-api"], sequence, lower_level=False, monkeypatch=monkeypatch)
    converted: list[Any] = []
    convert = genai_models._GenerateContentConfig_to_mldev

    def counting(api: Any, config: Any, *args: Any) -> Any:
        converted.append(config.system_instruction)
        return convert(api, config, *args)

    monkeypatch.setattr(genai_models, "_GenerateContentConfig_to_mldev", counting)
    ours, _ = await serve(SETTINGS["gemini-api"], sequence, lower_level=True, monkeypatch=monkeypatch)
    assert converted == ["You are terse.", "You are verbose."]
    assert [r.body for r in ours] == [r.body for r in public]
    assert ours[0].body == ours[2].body != ours[1].body
    assert ours[1].body["generationConfig"]["temperature"] == 0.7


async def test_an_invalid_config_fails_every_time(monkeypatch: pytest.MonkeyPatch) -> None:
    bad = {"temperature": "hot"}
    sent, outcomes = await serve(SETTINGS["gemini-api"], [request(bad, 0), request(bad, 1)], lower_level=True, monkeypatch=monkeypatch)
    assert not sent
    for outcome in outcomes:
        assert isinstance(outcome, BackendError)
        assert outcome.type == "config"
        assert outcome.message.startswith("invalid request config:")
