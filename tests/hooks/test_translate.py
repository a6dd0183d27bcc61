"""LLMRequest / LLMResponse translation (``hookTranslator.ts``) against the corpus' shapes.

The conformance corpus records each hook's input as Gemini sent it
(``expected/hook_calls.json``) and the model's streamed chunks (``fixture.responses``),
so the hook view of requests and responses can be checked exactly.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from actors.hooks import (
    LLMShapeError,
    aggregate,
    apply_llm_request,
    apply_tool_config,
    from_llm_response,
    modified_response,
    synthetic_response,
    to_llm_request,
    to_llm_response,
)
from tests.conftest import SHARED

SCENARIOS = SHARED / "conformance" / "scenarios"
needs_corpus = pytest.mark.skipif(
    not SCENARIOS.is_dir(), reason=f"conformance corpus not present at {SCENARIOS}"
)

SYSTEM = {"parts": [{"text": "You are Gemini CLI"}]}
TOOLS = [{"functionDeclarations": [{"name": "read_file", "parametersJsonSchema": {"type": "object"}}]}]
CALL = {"role": "model", "parts": [{"functionCall": {"name": "read_file", "args": {"file_path": "a"}, "id": "c1"}, "thoughtSignature": "sig"}]}
RESPONSE = {"role": "user", "parts": [{"functionResponse": {"name": "read_file", "id": "c1", "response": {"output": "x"}}}]}


def hook_calls(scenario: str, event: str) -> list[dict[str, Any]]:
    data = json.loads((SCENARIOS / scenario / "expected" / "hook_calls.json").read_text())
    return [
        {**call, "hook_input": json.loads(call["hook_input"]), "hook_output": json.loads(call["hook_output"]) if isinstance(call["hook_output"], str) else call["hook_output"]}
        for mode in ("stream-json", "json", "text")
        for call in data.get(mode, [])
        if call["hook_event_name"] == event
    ]


def streamed_chunks(scenario: str) -> list[dict[str, Any]]:
    chunks: list[dict[str, Any]] = []
    for line in (SCENARIOS / scenario / "fixture.responses").read_text().splitlines():
        if line.strip():
            entry = json.loads(line)
            if entry["method"] == "generateContentStream":
                chunks.extend(entry["response"])
    return chunks


def contents_for(llm_request: dict[str, Any]) -> list[dict[str, Any]]:
    """Wire contents that Gemini would have shown as these messages: the first user turn
    in two text parts (session context, prompt), tool calls and responses (no text) in
    between, as in a real history."""
    contents: list[dict[str, Any]] = []
    for i, message in enumerate(llm_request["messages"]):
        text = message["content"]
        head, sep, tail = text.partition("</session_context>")
        parts = [{"text": head + sep}, {"text": tail}] if sep and tail else [{"text": text}]
        contents.append({"role": message["role"], "parts": parts})
        if i == 0:
            contents += [CALL, RESPONSE]
    return contents


# ---------------------------------------------------------------------------- corpus


@needs_corpus
@pytest.mark.parametrize(
    ("scenario", "event"),
    [
        ("agent-flow-after-agent-clear-context", "BeforeModel"),
        ("hooks-before-model-modify-request", "BeforeModel"),
        ("hooks-before-model-block", "BeforeModel"),
        ("hooks-before-tool-selection", "BeforeToolSelection"),
        ("hooks-after-model-replace-response", "AfterModel"),
    ],
)
def test_llm_request_matches_what_gemini_sent(scenario: str, event: str) -> None:
    calls = hook_calls(scenario, event)
    assert calls
    for call in calls:
        request = call["hook_input"]["llm_request"]
        config = {
            **request["config"],
            "systemInstruction": SYSTEM,
            "tools": TOOLS,
            "thinkingConfig": {"includeThoughts": True},
            "maxOutputTokens": None,
        }
        assert to_llm_request(request["model"], contents_for(request), config) == request
        # echoing the request back changes nothing (the common "read, edit, print" hook)
        model, contents, new_config = apply_llm_request(contents_for(request), config, request["model"], request)
        assert (model, contents, new_config) == (
            request["model"],
            [
                {"role": c["role"], "parts": [{"text": "".join(p.get("text", "") for p in c["parts"])}]}
                if any("text" in p for p in c["parts"])
                else c
                for c in contents_for(request)
            ],
            {k: v for k, v in config.items() if k != "maxOutputTokens"},
        )


@needs_corpus
def test_llm_response_matches_what_after_model_hooks_saw() -> None:
    calls = hook_calls("hooks-after-model-replace-response", "AfterModel")
    chunks = streamed_chunks("hooks-after-model-replace-response")
    seen = [call["hook_input"]["llm_response"] for call in calls]
    # one AfterModel call per streamed chunk, per output mode
    assert seen == [to_llm_response(chunk) for chunk in chunks] * 3


@needs_corpus
def test_after_model_replacement_from_the_corpus() -> None:
    (call, *_) = hook_calls("hooks-after-model-replace-response", "AfterModel")
    merged = aggregate("AfterModel", [call["hook_output"]])
    assert merged is not None
    chunk = modified_response(merged["hookSpecificOutput"])
    assert chunk == {
        "candidates": [
            {
                "content": {"role": "model", "parts": [{"text": "[FILTERED] Response has been filtered for security compliance."}]},
                "finishReason": "STOP",
            }
        ]
    }
    assert to_llm_response(chunk) == {
        "text": "[FILTERED] Response has been filtered for security compliance.",
        **call["hook_output"]["hookSpecificOutput"]["llm_response"],
    }


@needs_corpus
def test_before_model_request_rewrite_from_the_corpus() -> None:
    (call, *_) = hook_calls("hooks-before-model-modify-request", "BeforeModel")
    request = call["hook_input"]["llm_request"]
    merged = aggregate("BeforeModel", [call["hook_output"]])
    assert merged is not None
    config = {**request["config"], "systemInstruction": SYSTEM}
    model, contents, new_config = apply_llm_request(
        contents_for(request), config, request["model"], merged["hookSpecificOutput"]["llm_request"]
    )
    assert model == request["model"] and new_config == config
    assert contents == [
        {"role": "user", "parts": [{"text": "Please respond with exactly: The security hook modified this request successfully."}]},
        CALL,
        RESPONSE,
    ]


@needs_corpus
def test_tool_selection_from_the_corpus() -> None:
    calls = hook_calls("hooks-before-tool-selection", "BeforeToolSelection")
    merged = aggregate("BeforeToolSelection", [calls[0]["hook_output"]])
    assert merged is not None
    config = apply_tool_config({"temperature": 1, "tools": TOOLS}, merged["hookSpecificOutput"]["toolConfig"])
    assert config == {
        "temperature": 1,
        "tools": TOOLS,
        "toolConfig": {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["read_file"]}},
    }


# ---------------------------------------------------------------------------- rules


def test_request_view_keeps_text_only() -> None:
    contents = [
        "bare string",
        {"role": "user", "parts": [{"text": "a"}, {"inlineData": {"mimeType": "image/png", "data": "x"}}, {"text": "b"}]},
        {"role": "model", "parts": [{"text": "thinking", "thought": True}, {"text": "answer"}]},
        {"role": "model", "parts": [{"text": ""}]},
        {"role": "function", "parts": {"text": "single part"}},
        {"parts": [{"text": "no role"}]},
        {"text": "a bare part"},
    ]
    assert to_llm_request(None, contents, None) == {
        "model": "gemini-2.5-flash",
        "messages": [
            {"role": "user", "content": "bare string"},
            {"role": "user", "content": "ab"},
            {"role": "model", "content": "thinkinganswer"},
            {"role": "user", "content": "single part"},
        ],
        "config": {},
    }


def test_messages_merge_back_keeping_non_text_parts() -> None:
    contents = [
        {"role": "user", "parts": [{"text": "q1"}]},
        {"role": "model", "parts": [{"text": "let me look", "thought": True}, {"text": "ok"}, CALL["parts"][0]]},
        RESPONSE,
        {"role": "model", "parts": [{"text": "done"}]},
    ]
    messages = [
        {"role": "user", "content": "Q1"},
        {"role": "model", "content": "OK"},
        {"role": "system", "content": "S"},
        {"role": "user", "content": "appended"},
        {"content": ["x", {"type": "text"}]},
    ]
    _, merged, _ = apply_llm_request(contents, {}, "m", {"messages": messages})
    assert merged == [
        {"role": "user", "parts": [{"text": "Q1"}]},
        {"role": "model", "parts": [{"text": "OK"}, CALL["parts"][0]]},
        RESPONSE,
        {"role": "system", "parts": [{"text": "S"}]},  # Gemini sets the hook's role as is
        {"role": "user", "parts": [{"text": "appended"}]},
        {"parts": [{"text": "x,[object Object]"}]},  # String(content), no role
    ]


def test_fewer_messages_keep_the_rest_and_empty_list_changes_nothing() -> None:
    contents = [{"role": "user", "parts": [{"text": "a"}]}, {"role": "model", "parts": [{"text": "b"}]}]
    assert apply_llm_request(contents, {}, "m", {"messages": [{"role": "user", "content": "A"}]})[1] == [
        {"role": "user", "parts": [{"text": "A"}]},
        {"role": "model", "parts": [{"text": "b"}]},
    ]
    assert apply_llm_request(contents, {}, "m", {"messages": []})[1] == contents


def test_model_and_config_overrides() -> None:
    config = {"temperature": 1, "topP": 0.95, "topK": 64, "systemInstruction": SYSTEM, "tools": TOOLS}
    model, _, new = apply_llm_request([], config, "gemini-3-flash-preview", {"model": "gemini-2.5-pro", "config": {"temperature": 0.2, "stopSequences": ["x"]}})
    assert model == "gemini-2.5-pro"
    # The four generation keys take the hook's values; the ones it left out are dropped.
    assert new == {"temperature": 0.2, "systemInstruction": SYSTEM, "tools": TOOLS}
    assert apply_llm_request([], config, "m", {"model": ""})[0] == "m"
    assert apply_llm_request([], config, "m", None) == ("m", [], config)
    assert apply_llm_request([], config, "m", "junk") == ("m", [], config)


def test_empty_text_content_misaligns_as_in_gemini() -> None:
    # toHookLLMRequest skips a content whose text is empty, fromHookLLMRequest does not.
    contents = [{"role": "user", "parts": [{"text": ""}]}, {"role": "model", "parts": [{"text": "b"}]}]
    view = to_llm_request("m", contents, {})
    assert view["messages"] == [{"role": "model", "content": "b"}]
    assert apply_llm_request(contents, {}, "m", view)[1] == [
        {"role": "model", "parts": [{"text": "b"}]},
        {"role": "model", "parts": [{"text": "b"}]},
    ]


def test_tool_config_rules() -> None:
    assert apply_tool_config({"tools": TOOLS}, None) == {"tools": TOOLS}
    assert apply_tool_config({}, {}) == {"toolConfig": {}, "tools": []}
    assert apply_tool_config({}, {"mode": "NONE", "allowedFunctionNames": []}) == {
        "toolConfig": {"functionCallingConfig": {"mode": "NONE", "allowedFunctionNames": []}},
        "tools": [],
    }


def test_response_view() -> None:
    chunk = {
        "candidates": [
            {
                "content": {"role": "model", "parts": [{"text": "t", "thought": True}, {"functionCall": {"name": "f", "args": {}}}, {"text": "a"}, {"text": ""}]},
                "finishReason": "STOP",
                "index": 0,
                "safetyRatings": [{"category": "HARM_CATEGORY_X", "probability": "LOW", "blocked": False}, {}],
            },
            {"content": {"role": "model"}},
        ],
        "usageMetadata": {"promptTokenCount": 3, "totalTokenCount": 5, "thoughtsTokenCount": 2},
        "modelVersion": "x",
    }
    assert to_llm_response(chunk) == {
        "text": "a",
        "candidates": [
            {
                "content": {"role": "model", "parts": ["t", "a", ""]},
                "finishReason": "STOP",
                "index": 0,
                "safetyRatings": [{"category": "HARM_CATEGORY_X", "probability": "LOW"}, {"category": "", "probability": ""}],
            },
            {"content": {"role": "model", "parts": []}},
        ],
        "usageMetadata": {"promptTokenCount": 3, "totalTokenCount": 5},
    }
    assert to_llm_response({}) == {"candidates": []}
    assert to_llm_response({"candidates": [{"content": {"parts": []}}]}) == {"candidates": [{"content": {"role": "model", "parts": []}}]}


def test_hook_responses() -> None:
    hso = {"llm_response": {"candidates": [{"content": {"role": "model", "parts": ["x", "y"]}}], "usageMetadata": {"totalTokenCount": 1}, "text": "ignored"}}
    assert synthetic_response(hso) == {
        "candidates": [{"content": {"role": "model", "parts": [{"text": "x"}, {"text": "y"}]}, "finishReason": "STOP"}],
        "usageMetadata": {"totalTokenCount": 1},
    }
    assert synthetic_response({}) is None
    assert modified_response({"llm_response": {"candidates": [{"content": {"parts": []}}]}}) is None
    assert modified_response({"llm_response": {"candidates": [{"content": {"parts": "abc"}}]}}) is None
    with pytest.raises(LLMShapeError):
        synthetic_response({"llm_response": {"candidates": "x"}})
    with pytest.raises(LLMShapeError):
        from_llm_response({"candidates": [{"content": {"parts": [1]}}]})


texts = st.text(min_size=1, max_size=8)
parts_st = st.lists(
    st.one_of(
        st.builds(lambda t: {"text": t}, texts),
        st.builds(lambda t: {"text": t, "thought": True}, texts),
        st.just({"functionCall": {"name": "f", "args": {}}}),
        st.just({"inlineData": {"mimeType": "image/png", "data": "AA=="}}),
    ),
    min_size=1,
    max_size=4,
)
contents_st = st.lists(st.builds(lambda r, p: {"role": r, "parts": p}, st.sampled_from(["user", "model"]), parts_st), max_size=6)


@given(contents_st, st.fixed_dictionaries({}, optional={"temperature": st.floats(0, 2), "topK": st.integers(1, 64)}))
def test_echoing_the_request_is_invisible_to_the_next_hook(contents: list[dict[str, Any]], config: dict[str, Any]) -> None:
    view = to_llm_request("m", contents, config)
    model, new_contents, new_config = apply_llm_request(contents, config, "m", view)
    assert to_llm_request(model, new_contents, new_config) == view
    assert new_config == config
    # non-text parts survive, in order
    def non_text(cs: list[dict[str, Any]]) -> list[Any]:
        return [p for c in cs for p in c["parts"] if "text" not in p]
    assert non_text(new_contents) == non_text(contents)


@given(st.lists(st.builds(lambda p, f: {"content": {"role": "model", "parts": p}, **({"finishReason": f} if f else {})}, st.lists(st.text(max_size=5), max_size=3), st.sampled_from([None, "STOP", "MAX_TOKENS"])), max_size=3))
def test_hook_response_round_trips(candidates: list[dict[str, Any]]) -> None:
    response = {"candidates": candidates}
    chunk = from_llm_response(response)
    view = to_llm_response(chunk)
    view.pop("text", None)
    assert view == response
