"""Frozen JSON is where outside data is made fit to travel (issue 17, defect 7): every
text well-formed, what JSON text cannot carry refused with one error."""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bus.codec import decode, encode
from bus.json_values import MAX_DEPTH, JsonValueError, freeze, well_formed
from bus.messages import (
    ApiError,
    BatchSettled,
    CompletedCall,
    ModelFailed,
    SubmitPrompt,
    ToolCallUpdated,
    ToolFinished,
    ToolOutputStreamed,
    ToolResult,
)

any_text = st.text(
    st.characters(exclude_categories=()) | st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), max_size=30
)
"""Any code points, lone surrogates often (hypothesis leaves them out by default)."""


def nested(depth: int) -> object:
    value: object = "leaf"
    for i in range(depth):
        value = [value] if i % 2 else {"k": value}
    return value


@given(any_text)
def test_any_text_becomes_encodable_and_clean_text_stays_as_it_is(text: str) -> None:
    clean = well_formed(text)
    clean.encode("utf-8")
    assert well_formed(clean) == clean
    if not any("\ud800" <= ch <= "\udfff" for ch in text):
        assert clean is text
    assert freeze({text: [text]}) == {clean: (clean,)}


def test_lone_surrogates_are_shown_as_node_shows_them() -> None:
    # Bytes that are not UTF-8 (a file name, an argument): one U+FFFD per invalid
    # sequence, as Node decodes them.
    for raw in (b"bad\xffname", b"cut\xe2\x82", b"\xed\xa0\x80", b"ok\xc3\xa9"):
        assert well_formed(os.fsdecode(raw)) == raw.decode("utf-8", "replace")
    # A JSON escape: one U+FFFD per lone surrogate; a pair is the character it encodes.
    assert well_formed(json.loads('"a\\ud800b\\udc00"')) == "a\ufffdb\ufffd"
    assert well_formed("\ud83d\ude00") == "\U0001f600"


@given(any_text, any_text)
def test_messages_carrying_outside_text_always_encode(prompt: str, output: str) -> None:
    messages = [
        SubmitPrompt(session_id="s", prompt_id="p", parts=({"text": prompt},), display_text=prompt),
        ToolOutputStreamed(session_id="s", call_id="c", text=output),
        ToolFinished(
            session_id="s",
            call_id="c",
            result=ToolResult(llm_content=output, return_display={"x": output}, error_message=output),
        ),
        # Error texts can hold a path read from the disk (a symlink's target).
        ToolCallUpdated(session_id="s", batch_id="b", call_id="c", name="n", status="error", detail=output),
        BatchSettled(session_id="s", batch_id="b", calls=(CompletedCall(call_id="c", name="n", status="error", error_message=output),)),
        ModelFailed(session_id="s", request_id="r", model="m", error=ApiError(message=output)),
    ]
    for msg in messages:
        line = encode(msg)
        line.encode("utf-8")
        assert decode(line) == msg


@pytest.mark.parametrize(
    ("value", "needle"),
    [
        (nested(MAX_DEPTH + 1), f"nested deeper than {MAX_DEPTH} levels"),
        ({"n": 10**4400}, "more than 4300 digits"),
        ([float("nan")], "nan is not a JSON number"),
        ({"x": float("-inf")}, "-inf is not a JSON number"),
    ],
    ids=["deep", "huge int", "nan", "infinity"],
)
def test_what_json_cannot_carry_is_refused_with_one_error(value: object, needle: str) -> None:
    with pytest.raises(JsonValueError, match=needle):
        freeze(value)
    with pytest.raises(JsonValueError):
        ToolResult(llm_content=value)


def test_the_deepest_allowed_value_and_long_integers_that_json_can_carry_pass() -> None:
    msg = ToolFinished(session_id="s", call_id="c", result=ToolResult(data=nested(MAX_DEPTH)))
    assert decode(encode(msg)) == msg
    assert freeze([10**4000]) == (10**4000,)


def test_a_frozen_tuple_goes_into_a_message_as_it_is_and_grows_by_freezing_only_what_it_adds() -> None:
    from bus.json_values import FrozenTuple
    from bus.messages import GenerateRequest

    contents = FrozenTuple([freeze({"role": "user", "parts": [{"text": "hi"}]})])
    request = GenerateRequest(session_id="s", request_id="r", reply_to="t", method="generateContent", model="m",
                              contents=contents)
    assert request.contents is contents
    grown = contents.join([{"role": "model", "parts": [{"text": "\ud800"}]}])
    assert isinstance(grown, FrozenTuple) and grown[0] is contents[0]
    assert grown[1] == {"role": "model", "parts": ({"text": "\ufffd"},)} and hash(grown[1])
    with pytest.raises(JsonValueError):
        contents.join([float("nan")])
    assert decode(encode(request)) == request
