"""The live backend's stream path (``_genai_stream``: the SDK's request layer, configs
converted once) against ``generate_content_stream``: the same requests on the wire and
the same chunks out, for the Gemini API and Vertex AI, through the fake Gemini server."""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from typing import Any

import attrs
import pytest
import trio
from google import genai
from google.genai import _common, types
from google.genai import models as genai_models
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from actors.gateway import BackendError
from actors.gateway import _genai_stream as genai_stream
from actors.gateway._fake import FakeEntry
from actors.gateway._genai import GenaiBackend, GenaiSettings
from bus.json_values import freeze, thaw
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


# -- contents: each converted once, as the SDK converts the whole list ----------------------------
def sdk_contents(api: Any, contents: list[Any]) -> Any:
    params = types._GenerateContentParameters(contents=contents)
    convert = genai_models._GenerateContentParameters_to_vertex if api.vertexai else genai_models._GenerateContentParameters_to_mldev
    return _common.encode_unserializable_types(_common.convert_to_dict(convert(api, params, None, params)))["contents"]


B64 = st.binary(max_size=6).map(lambda b: base64.b64encode(b).decode())
TEXT = st.text(max_size=8)
ARGS = st.dictionaries(st.sampled_from(["path", "n", "flag", "items"]), st.one_of(TEXT, st.integers(-5, 5), st.booleans(), st.lists(TEXT, max_size=2)), max_size=3)
PARTS = st.one_of(
    st.builds(lambda t: {"text": t}, TEXT),
    st.builds(lambda t, th: {"thought": th, "text": t}, TEXT, st.booleans()),
    st.builds(lambda t, s: {"text": t, "thoughtSignature": s}, TEXT, B64),
    st.builds(lambda n, a, i: {"functionCall": {"name": n, "args": a, **({"id": i} if i else {})}}, st.sampled_from(["read_file", "glob"]), ARGS, st.sampled_from(["", "c1"])),
    st.builds(lambda n, a, s: {"functionCall": {"name": n, "args": a}, "thoughtSignature": s}, st.just("noop"), ARGS, B64),
    st.builds(lambda n, r: {"functionResponse": {"name": n, "id": "c1", "response": r}}, st.just("read_file"), ARGS),
    st.builds(lambda d: {"inlineData": {"mimeType": "image/png", "data": d}}, B64),
)
CONTENTS_LISTS = st.lists(
    st.builds(lambda role, parts: {"role": role, "parts": parts}, st.sampled_from(["user", "model"]), st.lists(PARTS, min_size=1, max_size=3)),
    min_size=1,
    max_size=4,
)
APIS = {"gemini-api": genai.Client(api_key="k").aio._api_client, "vertex-ai": genai.Client(api_key="k", vertexai=True).aio._api_client}


@pytest.mark.parametrize("api", APIS.values(), ids=APIS.keys())
@settings(max_examples=150, deadline=None)
@given(contents=CONTENTS_LISTS)
def test_contents_converted_one_by_one_or_written_directly_are_what_the_sdk_makes_of_the_list(api: Any, contents: list[Any]) -> None:
    cache = genai_stream.ContentCache()
    want = sdk_contents(api, contents)
    assert cache.converted(api, freeze(contents)) == want
    assert cache.converted(api, freeze(contents)) == want  # from the cache
    assert json.dumps(cache.converted(api, freeze(contents))) == json.dumps(want)  # key order too


@pytest.mark.parametrize("api", APIS.values(), ids=APIS.keys())
@settings(max_examples=60, deadline=None)
@given(pool=CONTENTS_LISTS, steps=st.lists(st.tuples(st.integers(0, 4), st.integers(0, 3)), min_size=1, max_size=6))
def test_requests_sharing_their_first_contents_convert_as_the_sdk_does(
    api: Any, pool: list[Any], steps: list[tuple[int, int]]
) -> None:
    """A conversation's requests: the same content objects again, cut or grown at the
    end (and others); what is shared with the last request comes from it."""
    cache = genai_stream.ContentCache()
    frozen = [freeze(c) for c in pool]
    for keep, fresh in steps:
        contents = (*frozen[: keep + 1], *[freeze(c) for c in pool[:fresh]])
        want = sdk_contents(api, [thaw(c) for c in contents])
        assert json.dumps(cache.converted(api, contents)) == json.dumps(want)


@pytest.mark.parametrize("api", APIS.values(), ids=APIS.keys())
def test_contents_equal_in_python_but_not_in_json_are_not_taken_from_one_another(api: Any) -> None:
    """``0 == False == 0.0`` and mappings equal in another key order: the cache must not
    hand one's conversion to the other (found by the property above)."""
    cache = genai_stream.ContentCache()

    def content(value: Any) -> dict[str, Any]:
        return {"role": "user", "parts": [{"functionResponse": {"name": "f", "id": "c1", "response": value}}]}

    variants = [{"items": 0}, {"items": False}, {"items": 0.0}, {"a": 1, "b": 2}, {"b": 2, "a": 1}]
    for _ in range(2):
        for value in variants:
            got = cache.converted(api, freeze([content(value)]))
            assert json.dumps(got) == json.dumps(sdk_contents(api, [content(value)]))


@pytest.mark.parametrize(
    "contents",
    [
        [{"text": "a part where a content belongs"}],
        [{"role": "user", "parts": [{"text": "a"}], "extra": 1}],
        [{"role": "user", "parts": [{"text": 3}]}],
        [],
    ],
    ids=["part", "unknown-field", "not-text", "none"],
)
def test_contents_of_another_shape_go_to_the_sdk_whole(contents: list[Any]) -> None:
    api = APIS["gemini-api"]
    cache = genai_stream.ContentCache()
    try:
        want = sdk_contents(api, contents)
    except ValueError:  # pydantic's ValidationError among them
        try:
            got = cache.converted(api, freeze(contents))
        except ValidationError:
            return  # the SDK's own refusal, from the content alone
        assert got is None  # the SDK refuses the whole list (open_stream then asks it)
    else:
        assert cache.converted(api, freeze(contents)) in (None, want)


async def test_a_history_is_converted_once_as_it_grows(monkeypatch: pytest.MonkeyPatch) -> None:
    turns = [dict(c) for c in CONTENTS]
    sequence = [attrs.evolve(request(n=i), contents=tuple(turns[: i + 1])) for i in range(3)]
    public, _ = await serve(SETTINGS["gemini-api"], sequence, lower_level=False, monkeypatch=monkeypatch)
    converted: list[Any] = []
    convert = genai_models._Content_to_mldev

    def counting(content: Any, *args: Any) -> Any:
        converted.append(content.role)
        return convert(content, *args)

    monkeypatch.setattr(genai_models, "_Content_to_mldev", counting)
    ours, _ = await serve(SETTINGS["gemini-api"], sequence, lower_level=True, monkeypatch=monkeypatch)
    assert [r.body for r in ours] == [r.body for r in public]
    # the config's system instruction once; the first content is text alone (written
    # directly); the other two once each, though sent two and one more times
    assert converted == ["user", "model", "user"]
