"""``wire_chunk``: a streamed chunk exactly as google-genai's round trip (converter,
pydantic model, ``wire_json``) leaves it, without the round trip when that is the
identity. The oracle is the SDK itself (``sdk_wire_json``); results are compared as JSON
text with sorted keys, so that ``1`` and ``1.0`` differ."""

from __future__ import annotations

import copy
import enum
import json
import typing
import warnings
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pydantic
import pytest
from google.genai import types
from hypothesis import given
from hypothesis import strategies as st

from actors.gateway import load_fake_responses
from actors.gateway._genai_wire import sdk_wire_json, wire_chunk
from tests.conftest import SHARED

ROOT = Path(__file__).resolve().parents[2]


def outcome(fn: Any, chunk: Any) -> str:
    """The JSON text ``fn`` makes of a copy of ``chunk``, or the error it raises."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the SDK warns about enum values it does not know
        try:
            return json.dumps(fn(copy.deepcopy(chunk)), sort_keys=True)
        except Exception as exc:
            return f"{type(exc).__name__}: {exc}"


def check(chunk: Any, *, vertexai: bool = False) -> bool:
    """``wire_chunk`` agrees with the SDK on ``chunk``; returns whether it passed the
    chunk through as it is."""
    expected = outcome(lambda c: sdk_wire_json(c, vertexai=vertexai), chunk)
    got = outcome(lambda c: wire_chunk(c, vertexai=vertexai), chunk)
    assert got == expected
    probe = copy.deepcopy(chunk)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return wire_chunk(probe, vertexai=vertexai) is probe
        except Exception:
            return False


def recorded_chunks() -> list[Any]:
    files = [*ROOT.glob("scenarios/**/*.responses"), *(SHARED / "conformance" / "scenarios").glob("*/fixture.responses")]
    chunks: list[Any] = []
    for path in files:
        for entry in load_fake_responses(path):
            if entry.method == "generateContentStream":
                chunks.extend(entry.response)
    return chunks


def test_recorded_chunks_pass_through_unchanged() -> None:
    chunks = recorded_chunks()
    assert chunks
    assert all(check(c) for c in chunks)


def part(**fields: Any) -> dict[str, Any]:
    return {"candidates": [{"content": {"role": "model", "parts": [fields]}, "index": 0}]}


def candidate(**fields: Any) -> dict[str, Any]:
    return {"candidates": [fields]}


PASSED_THROUGH = {
    "text, finish, usage": {
        "candidates": [{"content": {"role": "model", "parts": [{"text": "hi"}]}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 1, "totalTokenCount": 4, "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 3}]},
        "modelVersion": "gemini-2.5-flash",
        "responseId": "r1",
    },
    "thought with signature": part(text="plan", thought=True, thoughtSignature="AbC+/w=="),
    "function call": part(functionCall={"name": "read_file", "args": {"path": "a", "n": [1, 2.5, None, {"x": True}]}, "id": "c1"}),
    "empty signature": part(text="x", thoughtSignature=""),
    "float log probability": candidate(avgLogprobs=-0.25),
    "safety ratings": candidate(safetyRatings=[{"category": "HARM_CATEGORY_HATE_SPEECH", "probability": "NEGLIGIBLE"}]),
    "blocked prompt": {"promptFeedback": {"blockReason": "OTHER"}, "usageMetadata": {"promptTokenCount": 1}},
    "inline data, one alphabet": part(inlineData={"mimeType": "image/png", "data": "iVBORw0KGgo="}),
}

CONVERTED = {
    "unknown field": part(text="x", somethingNew=1),
    "unknown top-level field": {"candidates": [], "newThing": {}},
    "null": part(text=None),
    "snake_case key": candidate(finish_reason="STOP"),
    "integer for a float": candidate(avgLogprobs=-1),
    "float for an integer": candidate(index=1.0),
    "bool for an integer": candidate(index=True),
    "string for an integer": {"usageMetadata": {"promptTokenCount": "5"}},
    "lower-case enum": candidate(finishReason="stop"),
    "unknown enum": candidate(finishReason="NEW_REASON"),
    "URL-safe signature": part(text="x", thoughtSignature="AbC-_w=="),
    "unpadded signature": part(text="x", thoughtSignature="AbC+/w"),
    "bad signature": part(text="x", thoughtSignature="AB=="),
    "inline data with + and /": part(inlineData={"mimeType": "image/png", "data": "AbC+/w=="}),
    "citation sources (renamed)": candidate(citationMetadata={"citationSources": [{"uri": "https://x"}]}),
    "finish message (dropped by the Gemini API converter)": candidate(finishMessage="done"),
    "the SDK's own field": {"sdkHttpResponse": {"headers": {}}, "candidates": []},
    "signature key inside arguments": part(functionCall={"name": "f", "args": {"thoughtSignature": "a-_b"}}),
    "not a number": candidate(avgLogprobs=float("nan")),
    "text that is a number": part(text=5),
    "candidates not a list": {"candidates": {"content": {}}},
    # (found by the deep profile: the SDK refuses it, so it must not pass through)
    "arguments not an object": part(functionCall={"name": "f", "args": []}),
}


@pytest.mark.parametrize("chunk", PASSED_THROUGH.values(), ids=PASSED_THROUGH.keys())
def test_chunks_already_in_the_sdks_shape_pass_through(chunk: Any) -> None:
    assert check(chunk)


@pytest.mark.parametrize("chunk", CONVERTED.values(), ids=CONVERTED.keys())
def test_other_chunks_take_the_sdks_round_trip(chunk: Any) -> None:
    assert not check(chunk)


def test_vertex_ai_keeps_its_own_fields() -> None:
    assert check(candidate(finishMessage="done"), vertexai=True)
    assert not check({"createTime": "2026-01-01T00:00:00Z", "candidates": []}, vertexai=True)


def test_a_config_that_keeps_unknown_fields_takes_the_sdks_round_trip() -> None:
    # (``include_all_fields``: read by the SDK with getattr; no config of this SDK has it)
    chunk = part(text="x")
    assert wire_chunk(chunk, vertexai=False, config=SimpleNamespace(include_all_fields=True)) is not chunk
    assert wire_chunk(chunk, vertexai=False, config=types.GenerateContentConfig()) is chunk


# -- generated chunks ----------------------------------------------------------------------------
def _wrongly(value: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Mostly ``value``; now and then something the SDK would coerce or reject."""
    odd: st.SearchStrategy[Any] = st.sampled_from([None, 1, 1.0, True, "x", [], {}, "AbC-_w==", float("inf")])
    return st.one_of(value, value, value, odd)


def _for(annotation: Any, alias: str, depth: int) -> st.SearchStrategy[Any]:
    origin = typing.get_origin(annotation)
    if origin is typing.Union:
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        return st.one_of(*(_for(a, alias, depth) for a in args))
    if origin is list:
        (item,) = typing.get_args(annotation) or (Any,)
        return st.lists(_for(item, alias, depth), max_size=2)
    if annotation is str:
        return _wrongly(st.text(max_size=5))
    if annotation is bool:
        return _wrongly(st.booleans())
    if annotation is int:
        return _wrongly(st.integers(-5, 5))
    if annotation is float:
        return _wrongly(st.floats(-2, 2))
    if annotation is bytes:
        return _wrongly(st.sampled_from(["AbC+/w==", "Zm9v", "", "AbC+/w", "AB==", "iVBORw0KGgo="]))
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        values = [m.value for m in annotation if isinstance(m.value, str)][:4] or ["NONE"]
        return _wrongly(st.sampled_from([*values, values[0].lower(), "NOT_A_VALUE"]))
    if isinstance(annotation, type) and issubclass(annotation, pydantic.BaseModel) and annotation is not pydantic.BaseModel:
        return _model(annotation, depth + 1) if depth < 4 else st.just({})
    leaf = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.floats(-1, 1), st.text(max_size=3))
    return st.recursive(
        leaf,
        lambda inner: st.lists(inner, max_size=2)
        | st.dictionaries(st.sampled_from(["a", "b", "thoughtSignature", "inlineData"]), inner, max_size=2),
        max_leaves=4,
    )


def _model(cls: type[pydantic.BaseModel], depth: int = 0) -> st.SearchStrategy[dict[str, Any]]:
    cls.model_rebuild(raise_errors=False)
    fields = list(cls.model_fields.items())
    if not fields:
        return st.just({})

    @st.composite
    def build(draw: st.DrawFn) -> dict[str, Any]:
        chosen = draw(st.lists(st.sampled_from(fields), max_size=3, unique_by=lambda f: f[0]))
        out: dict[str, Any] = {}
        for name, info in chosen:
            alias = info.alias or name
            key = draw(st.sampled_from([alias, alias, alias, name]))
            out[key] = draw(_for(info.annotation, alias, depth))
        if draw(st.integers(0, 9)) == 0:
            out["unknownField"] = 1
        return out

    return build()


CANDIDATE_FIELDS = ["content", "finishReason", "index", "avgLogprobs", "safetyRatings", "citationMetadata", "finishMessage"]


@st.composite
def chunks(draw: st.DrawFn) -> dict[str, Any]:
    chunk = draw(_model(types.GenerateContentResponse))
    chunk.pop("parsed", None)  # an SDK-side value, not JSON
    content = draw(_model(types.Content))
    candidate = {"content": content, **draw(_model(types.Candidate))}
    chunk["candidates"] = [candidate]
    return chunk


@given(chunks(), st.booleans())
def test_generated_chunks_agree_with_the_sdk(chunk: dict[str, Any], vertexai: bool) -> None:
    check(chunk, vertexai=vertexai)
