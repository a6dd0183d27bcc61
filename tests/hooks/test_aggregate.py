"""Aggregation (``hookAggregator.ts``) and sequential chaining: tables and properties."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from actors.hooks import (
    additional_context,
    aggregate,
    chain_input,
    clear_context,
    effective_reason,
    is_blocking,
    should_stop,
    tail_tool_call,
    tool_input_override,
)
from actors.hooks._aggregate import OR_MERGE_EVENTS

# Gemini CLI's mergeWithOrDecision events (reference: hookAggregator.ts, §7.4), stated
# here on their own: the implementation's set must be exactly these.
OR_EVENTS = ["AfterAgent", "AfterTool", "BeforeAgent", "BeforeTool", "SessionStart"]


def test_or_merge_events_are_gemini_clis() -> None:
    assert sorted(OR_MERGE_EVENTS) == OR_EVENTS


@pytest.mark.parametrize("event", [*OR_EVENTS, "BeforeModel", "SessionEnd", "BeforeToolSelection"])
def test_no_outputs_no_output(event: str) -> None:
    assert aggregate(event, []) is None
    assert aggregate(event, [None, None]) is None


@pytest.mark.parametrize(
    ("outputs", "expected"),
    [
        # a single hook still gets the defaults
        ([{}], {"continue": True, "suppressOutput": False, "decision": "allow"}),
        ([{"decision": "approve"}], {"continue": True, "suppressOutput": False, "decision": "allow"}),
        # deny/block beat ask beats allow; the last blocking one is kept
        (
            [{"decision": "ask", "reason": "r1"}, {"decision": "deny", "reason": "r2"}, {"decision": "allow", "reason": "r3"}],
            {"continue": True, "suppressOutput": False, "decision": "deny", "reason": "r1\nr2\nr3"},
        ),
        (
            [{"decision": "block"}, {"decision": "ask"}, {"decision": "deny"}],
            {"continue": True, "suppressOutput": False, "decision": "deny"},
        ),
        ([{"decision": "allow"}, {"decision": "ask"}], {"continue": True, "suppressOutput": False, "decision": "ask"}),
        # continue:false wins; without a decision no 'allow' is added
        (
            [{"continue": False, "stopReason": "s1"}, {"continue": True, "stopReason": "ignored"}, {"continue": False, "stopReason": "s2"}],
            {"continue": False, "suppressOutput": False, "stopReason": "s1\ns2"},
        ),
        # messages and contexts joined; empty strings skipped (JS truthiness)
        (
            [
                {"systemMessage": "a", "reason": "", "hookSpecificOutput": {"hookEventName": "AfterTool", "additionalContext": "c1"}},
                {"systemMessage": "b", "suppressOutput": True, "hookSpecificOutput": {"additionalContext": "c2", "x": 1}},
                {"hookSpecificOutput": {"additionalContext": 5, "x": 2}},
            ],
            {
                "continue": True,
                "suppressOutput": True,
                "hookSpecificOutput": {"hookEventName": "AfterTool", "additionalContext": "c1\nc2", "x": 2},
                "decision": "allow",
                "systemMessage": "a\nb",
            },
        ),
        # clearContext is an OR; other specific keys shallow-merged (later wins)
        (
            [
                {"hookSpecificOutput": {"clearContext": True, "tailToolCallRequest": {"name": "a"}}},
                {"hookSpecificOutput": {"clearContext": False, "tailToolCallRequest": {"name": "b"}}},
            ],
            {
                "continue": True,
                "suppressOutput": False,
                "hookSpecificOutput": {"clearContext": True, "tailToolCallRequest": {"name": "b"}},
                "decision": "allow",
            },
        ),
    ],
)
def test_or_merge_table(outputs: list[dict[str, Any]], expected: dict[str, Any]) -> None:
    for event in OR_EVENTS:
        assert aggregate(event, outputs) == expected


def test_or_merge_keeps_gemini_key_order() -> None:
    merged = aggregate("BeforeTool", [{"decision": "deny", "reason": "r", "systemMessage": "m"}])
    assert merged is not None
    assert list(merged) == ["continue", "suppressOutput", "decision", "reason", "systemMessage"]


def test_field_replacement_for_model_events() -> None:
    outputs = [
        {"decision": "block", "reason": "r1", "hookSpecificOutput": {"llm_request": {"model": "a"}, "k": 1}},
        {"reason": "r2", "hookSpecificOutput": {"llm_response": {"candidates": []}}},
    ]
    expected = {
        "decision": "block",
        "reason": "r2",
        "hookSpecificOutput": {"llm_request": {"model": "a"}, "k": 1, "llm_response": {"candidates": []}},
    }
    assert aggregate("BeforeModel", outputs) == expected
    assert aggregate("AfterModel", outputs) == expected
    assert aggregate("AfterModel", [{"decision": "allow"}]) == {"decision": "allow", "hookSpecificOutput": {}}


@pytest.mark.parametrize(
    ("configs", "mode", "names"),
    [
        ([{"mode": "ANY", "allowedFunctionNames": ["read_file"]}], "ANY", ["read_file"]),
        ([{"mode": "AUTO", "allowedFunctionNames": ["b", "a"]}, {"mode": "ANY", "allowedFunctionNames": ["c", "a"]}], "ANY", ["a", "b", "c"]),
        ([{"mode": "ANY", "allowedFunctionNames": ["x"]}, {"mode": "NONE", "allowedFunctionNames": ["y"]}], "NONE", []),
        ([{"allowedFunctionNames": ["Z", "a", "B"]}], "AUTO", ["B", "Z", "a"]),
        ([None, {}], "AUTO", []),
        ([{"mode": "none"}], "AUTO", []),
    ],
)
def test_tool_selection_union(configs: list[Any], mode: str, names: list[str]) -> None:
    outputs = [
        {"decision": "block", "hookSpecificOutput": {} if c is None else {"toolConfig": c}} for c in configs
    ]
    assert aggregate("BeforeToolSelection", outputs) == {
        "hookSpecificOutput": {
            "hookEventName": "BeforeToolSelection",
            "toolConfig": {"mode": mode, "allowedFunctionNames": names},
        }
    }


def test_tool_selection_sorts_like_javascript() -> None:
    # Array.prototype.sort compares UTF-16 code units: U+1F600 is D83D DE00, which sorts
    # before U+FF5E although its code point is higher.
    merged = aggregate("BeforeToolSelection", [{"hookSpecificOutput": {"toolConfig": {"allowedFunctionNames": ["\uff5e", "\U0001f600"]}}}])
    assert merged is not None
    assert merged["hookSpecificOutput"]["toolConfig"]["allowedFunctionNames"] == ["\U0001f600", "\uff5e"]


@pytest.mark.parametrize("event", ["SessionEnd", "PreCompress", "Notification"])
def test_simple_merge_for_other_events(event: str) -> None:
    assert aggregate(event, [{"a": 1, "systemMessage": "x"}, {"systemMessage": "y"}]) == {"a": 1, "systemMessage": "y"}


def test_array_output_spreads_its_indices() -> None:
    assert aggregate("SessionEnd", [[7, 8]]) == {"0": 7, "1": 8}


# ---------------------------------------------------------------------------- properties

decisions = st.sampled_from([None, "allow", "approve", "ask", "block", "deny", "bogus"])
outputs_st = st.lists(
    st.fixed_dictionaries(
        {},
        optional={
            "decision": decisions,
            "continue": st.booleans(),
            "reason": st.text(max_size=5),
            "systemMessage": st.text(max_size=5),
            "hookSpecificOutput": st.fixed_dictionaries({}, optional={"additionalContext": st.text(max_size=5), "clearContext": st.booleans()}),
        },
    ),
    min_size=1,
    max_size=6,
)


@given(outputs_st, st.sampled_from(OR_EVENTS))
def test_any_deny_or_block_yields_a_blocking_decision(outputs: list[dict[str, Any]], event: str) -> None:
    merged = aggregate(event, outputs)
    assert merged is not None
    blocking = [o["decision"] for o in outputs if o.get("decision") in ("block", "deny")]
    if blocking:
        assert merged["decision"] == blocking[-1]
        assert is_blocking(merged)
    elif any(o.get("decision") == "ask" for o in outputs):
        assert merged["decision"] == "ask"
    elif any(o.get("continue") is False for o in outputs):
        assert "decision" not in merged
    else:
        assert merged["decision"] == "allow"
    assert should_stop(merged) == any(o.get("continue") is False for o in outputs)
    assert clear_context(merged) == any(
        o.get("hookSpecificOutput", {}).get("clearContext") is True for o in outputs
    )


@given(outputs_st, st.permutations(range(6)))
def test_or_merge_decision_ignores_order_except_which_blocker(outputs: list[dict[str, Any]], order: list[int]) -> None:
    shuffled = [outputs[i] for i in order if i < len(outputs)]
    a, b = aggregate("BeforeTool", outputs), aggregate("BeforeTool", shuffled)
    assert a is not None and b is not None
    assert is_blocking(a) == is_blocking(b)
    assert a.get("decision") in ("block", "deny") or a.get("decision") == b.get("decision")
    assert a["continue"] == b["continue"]


@given(st.lists(st.fixed_dictionaries({}, optional={"mode": st.sampled_from(["AUTO", "ANY", "NONE", None]), "allowedFunctionNames": st.lists(st.sampled_from("abcd"), max_size=3)}), min_size=1, max_size=5))
def test_tool_selection_none_wins_and_names_are_a_sorted_union(configs: list[dict[str, Any]]) -> None:
    merged = aggregate("BeforeToolSelection", [{"hookSpecificOutput": {"toolConfig": c}} for c in configs])
    assert merged is not None
    tool_config = merged["hookSpecificOutput"]["toolConfig"]
    if any(c.get("mode") == "NONE" for c in configs):
        assert tool_config == {"mode": "NONE", "allowedFunctionNames": []}
    else:
        union = sorted({n for c in configs for n in c.get("allowedFunctionNames", [])})
        assert tool_config["allowedFunctionNames"] == union
        assert tool_config["mode"] == ("ANY" if any(c.get("mode") == "ANY" for c in configs) else "AUTO")


# ---------------------------------------------------------------------------- chaining


def test_chain_before_tool_merges_tool_input() -> None:
    base = {"tool_name": "write_file", "tool_input": {"file_path": "a", "content": "x"}}
    out = chain_input("BeforeTool", base, {"hookSpecificOutput": {"tool_input": {"content": "y", "extra": 1}}})
    assert out["tool_input"] == {"file_path": "a", "content": "y", "extra": 1}
    assert base["tool_input"] == {"file_path": "a", "content": "x"}  # not mutated


def test_chain_before_agent_appends_raw_context_to_prompt() -> None:
    out = chain_input("BeforeAgent", {"prompt": "hi"}, {"hookSpecificOutput": {"additionalContext": "<ctx>"}})
    assert out["prompt"] == "hi\n\n<ctx>"


def test_chain_before_model_merges_llm_request_shallowly() -> None:
    base = {"llm_request": {"model": "m", "messages": [{"role": "user", "content": "a"}], "config": {"topK": 1}}}
    out = chain_input("BeforeModel", base, {"hookSpecificOutput": {"llm_request": {"config": {"temperature": 0}}}})
    assert out["llm_request"] == {"model": "m", "messages": [{"role": "user", "content": "a"}], "config": {"temperature": 0}}


@pytest.mark.parametrize(
    ("event", "output"),
    [
        ("AfterTool", {"hookSpecificOutput": {"additionalContext": "c"}}),
        ("BeforeTool", {"decision": "allow"}),
        ("BeforeTool", {"hookSpecificOutput": {"tool_input": None}}),
        ("BeforeAgent", {"hookSpecificOutput": {"additionalContext": 3}}),
        ("BeforeTool", [1, 2]),
    ],
)
def test_chain_leaves_input_alone_otherwise(event: str, output: Any) -> None:
    base = {"prompt": "p", "tool_input": {"a": 1}}
    assert chain_input(event, base, output) == base


# ---------------------------------------------------------------------------- readers


def test_readers() -> None:
    out = {
        "stopReason": "",
        "reason": "because",
        "hookSpecificOutput": {
            "additionalContext": "<b>x</b>",
            "tool_input": {"a": 1},
            "tailToolCallRequest": {"name": "write_file", "args": {}},
            "clearContext": "true",
        },
    }
    assert effective_reason(out) == "because"
    assert effective_reason({"stopReason": "s", "reason": "r"}) == "s"
    assert effective_reason({}) == effective_reason(None) == "No reason provided"
    assert additional_context(out) == "&lt;b&gt;x&lt;/b&gt;"
    assert additional_context({"hookSpecificOutput": {"additionalContext": 1}}) is None
    assert tool_input_override(out) == {"a": 1}
    assert tail_tool_call(out) == {"name": "write_file", "args": {}}
    assert not clear_context(out)  # only the boolean true counts
    assert not should_stop({"continue": 0})
