"""The loop detector's pure core: Gemini CLI's rules, as properties and examples."""

from __future__ import annotations

import string
from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from actors.common import js_json
from actors.loops._logic import (
    ASK_DOUBLE_CHECK,
    CONTENT_LOOP,
    LLM_DUE,
    LLM_LOOP,
    NO_LOOP,
    SWEEP_EVERY,
    TOOL_CALL_LOOP,
    LlmAnswer,
    LoopDetector,
    is_structural,
    llm_check_contents,
    parse_llm_answer,
    tool_call_key,
)


def fresh() -> LoopDetector:
    d = LoopDetector()
    d.reset("p1", "do it")
    return d


json_args = st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=5) | st.booleans(), max_size=3)


# -- tool calls ------------------------------------------------------------------------------
def _key(call: tuple[str, Any]) -> str:
    return tool_call_key(*call)


@given(st.lists(st.tuples(st.text(min_size=1, max_size=8), json_args), max_size=60, unique_by=_key))
def test_distinct_calls_never_loop(calls: list[tuple[str, Any]]) -> None:
    d = fresh()
    assert all(d.check_tool_call(name, args) == NO_LOOP for name, args in calls)


@given(
    k=st.integers(1, 5),
    prefix=st.integers(0, 30),
    data=st.data(),
)
def test_a_cycle_is_detected_exactly_at_its_fifth_repetition(k: int, prefix: int, data: st.DataObject) -> None:
    d = fresh()
    for i in range(prefix):
        assert d.check_tool_call(f"warmup{i}", {}) == NO_LOOP
    cycle = [(f"tool{j}", data.draw(json_args)) for j in range(k)]
    assume(len({tool_call_key(*c) for c in cycle}) == k)
    calls = cycle * 5
    for i, (name, args) in enumerate(calls[:-1]):
        assert d.check_tool_call(name, args) == NO_LOOP, i
    verdict = d.check_tool_call(*calls[-1])
    assert verdict.count == 1 and verdict.loop_type == TOOL_CALL_LOOP
    assert verdict.detail == f"Repeated tool call: {calls[-1][0]} with arguments {js_json(calls[-1][1])}"


def test_detail_is_gemini_clis_text() -> None:
    d = fresh()
    for _ in range(4):
        d.check_tool_call("read_file", {"file_path": "a.txt", "n": 1.0})
    v = d.check_tool_call("read_file", {"file_path": "a.txt", "n": 1.0})
    assert v.detail == 'Repeated tool call: read_file with arguments {"file_path":"a.txt","n":1}'


def test_the_window_spans_the_prompt_and_a_reset_forgets_it() -> None:
    d = fresh()
    for _ in range(4):
        d.check_tool_call("ls", {})
    d.reset("p2")
    for _ in range(4):
        assert d.check_tool_call("ls", {}) == NO_LOOP
    assert d.check_tool_call("ls", {}).count == 1


def test_a_reset_with_the_same_prompt_id_is_the_actors_business() -> None:
    # The core resets whenever asked; the actor ignores a reset for the current prompt.
    d = fresh()
    d.check_tool_call("ls", {})
    d.reset("p1")
    assert d.keys == []


def test_a_detection_is_sticky_until_cleared_and_the_count_stays() -> None:
    d = fresh()
    for _ in range(5):
        v = d.check_tool_call("ls", {})
    assert v.count == 1
    # sticky: every event now answers with the detection
    assert d.check_content("anything").count == 1
    assert d.turn_started() != NO_LOOP
    d.clear_detection()
    # the 25-key window still holds five "ls": one more is the second strike
    v2 = d.check_tool_call("ls", {})
    assert v2.count == 2 and v2.loop_type == TOOL_CALL_LOOP


def test_disabled_detects_nothing() -> None:
    d = fresh()
    d.disable()
    assert all(d.check_tool_call("ls", {}) == NO_LOOP for _ in range(10))
    assert d.turn_started() == NO_LOOP
    d.reset("p2")
    assert all(d.check_tool_call("ls", {}) == NO_LOOP for _ in range(10))


@given(results=st.lists(st.text(), min_size=5, max_size=5))
def test_polling_with_changing_results_is_a_loop_as_in_gemini_cli(results: list[str]) -> None:
    """gemini-cli #8234: the same status call repeated while its result changes is
    flagged. We keep Gemini CLI's rule (docs/differences.md): the key is the call alone,
    so what the calls returned cannot matter — the detector never sees results."""
    d = fresh()
    verdicts = []
    for _result in results:
        verdicts.append(d.check_tool_call("run_shell_command", {"command": "gh run view 42 --json status"}))
    assert [v.count for v in verdicts] == [0, 0, 0, 0, 1]


def test_polling_with_a_changing_argument_is_not_a_loop() -> None:
    d = fresh()
    assert all(
        d.check_tool_call("run_shell_command", {"command": f"sleep {10 * i}; gh run view 42"}) == NO_LOOP
        for i in range(30)
    )


# -- content ---------------------------------------------------------------------------------
def chunks_of(text: str, sizes: list[int]) -> list[str]:
    out, i = [], 0
    for size in sizes:
        if i >= len(text):
            break
        out.append(text[i : i + size])
        i += size
    if i < len(text):
        out.append(text[i:])
    return out


@given(n=st.integers(0, 3000), sizes=st.lists(st.integers(1, 200), max_size=400))
def test_distinct_text_of_any_length_never_loops(n: int, sizes: list[int]) -> None:
    text = " ".join(f"w{i}" for i in range(n))  # no 50-character window repeats
    d = fresh()
    assert all(d.check_content(c) == NO_LOOP for c in chunks_of(text, sizes))


# Letters and spaces: no chunk of it is ever structural (a lone "," would be a divider).
lower = st.text(alphabet=string.ascii_lowercase + " ", min_size=1, max_size=260)


def primitive(unit: str) -> bool:
    return (unit + unit).find(unit, 1) == len(unit)


@given(unit=lower, sizes=st.lists(st.integers(1, 120), min_size=1, max_size=200))
def test_chanting_is_detected_exactly_when_the_tenth_window_completes(unit: str, sizes: list[int]) -> None:
    assume(primitive(unit))
    p = len(unit)
    text = unit * (10 + 50 // p + 2)
    d = fresh()
    seen = 0
    detected_at = None
    for chunk in chunks_of(text, sizes):
        seen += len(chunk)
        v = d.check_content(chunk)
        if v.count:
            detected_at = seen
            break
    need = 9 * p + 50  # the first window's tenth occurrence ends here
    if p <= 250:
        assert detected_at is not None
        assert detected_at - len(chunk) < need <= detected_at  # the chunk that completes it
    else:
        assert detected_at is None


def test_content_detail_quotes_the_loop() -> None:
    d = fresh()
    v = NO_LOOP
    for _ in range(20):
        v = d.check_content("all work and no play makes jack a dull boy. ")
        if v.count:
            break
    assert v.loop_type == CONTENT_LOOP
    assert v.detail is not None and v.detail.startswith('Repeating content detected: "') and v.detail.endswith('..."')


@given(st.sampled_from(["```python\n", "| a | b |\n", "* item\n", "+ item\n", "1. item\n", "# Title\n", "> quote\n", "---", "====", "ABC"]))
def test_structure_resets_the_content_tracking(marker: str) -> None:
    line = "the same line of text, again and again and again.. "
    d = fresh()
    for _ in range(8):
        assert d.check_content(line) == NO_LOOP
    d.check_content(marker)
    if "```" in marker:
        d.check_content("```\n")  # close the block again
    for _ in range(8):
        assert d.check_content(line) == NO_LOOP


def test_a_dash_bullet_does_not_reset_as_in_gemini_cli() -> None:
    # Gemini CLI's list pattern is [*-+]: a range holding "*" and "+" only.
    assert is_structural("- item") == (0, False, False)
    assert is_structural("+ item")[1] is True
    assert is_structural("ALL CAPS")[1] is False  # a space is not in the divider range
    assert is_structural("ALLCAPS") == (0, True, True)  # ...but "A".."Z" are


def test_nothing_is_checked_inside_a_code_block() -> None:
    d = fresh()
    d.check_content("```\n")
    for _ in range(50):
        assert d.check_content("x = x + 1  # the same line of code, many times.\n") == NO_LOOP
    d.check_content("```\n")
    assert d.text == ""


def test_a_tool_call_resets_the_content_tracking() -> None:
    line = "I will look at the file once more to be sure of it. "
    d = fresh()
    for i in range(100):  # 8 chunks of 52 characters: the 10th window would need 518
        assert d.check_content(line) == NO_LOOP
        if i % 8 == 7:
            d.check_tool_call(f"read{i}", {})
    d2 = fresh()
    assert any(d2.check_content(line).count for _ in range(12))  # without the calls: a loop


def test_the_history_is_bounded() -> None:
    d = fresh()
    text = " ".join(f"w{i}" for i in range(40_000))
    for i in range(0, len(text), 100):
        d.check_content(text[i : i + 100])
    assert len(d.text) == 5000
    assert len(d.seen) <= SWEEP_EVERY + 5000


# -- LLM check -------------------------------------------------------------------------------
def test_llm_check_schedule() -> None:
    d = fresh()
    due = [i for i in range(1, 80) if d.turn_started() == LLM_DUE]
    assert due == [30, 40, 50, 60, 70]
    d = fresh()
    for _ in range(29):
        d.turn_started()
    assert d.turn_started() == LLM_DUE
    assert d.llm_first_pass(LlmAnswer(0.0, "fine")) == NO_LOOP
    assert d.interval == 15
    assert [i for i in range(31, 80) if d.turn_started() == LLM_DUE] == [45, 60, 75]
    assert d.llm_first_pass(LlmAnswer(0.95, "stuck")) == ASK_DOUBLE_CHECK
    assert d.llm_double_check(LlmAnswer(0.5, "not sure"), "m2") == NO_LOOP
    assert d.interval == 10
    v = d.llm_double_check(LlmAnswer(0.9, "stuck for real"), "m2")
    assert (v.count, v.loop_type, v.detail, v.confirmed_by) == (1, LLM_LOOP, "stuck for real", "m2")


def test_a_failed_llm_check_is_no_loop_and_keeps_the_interval() -> None:
    d = fresh()
    assert d.llm_first_pass(None) == NO_LOOP
    assert d.llm_double_check(None, "m") == NO_LOOP
    assert d.interval == 10


@given(st.floats(0, 1))
def test_interval_stays_within_5_and_15(confidence: float) -> None:
    d = fresh()
    d.llm_first_pass(LlmAnswer(confidence, ""))
    assert 5 <= d.interval <= 15


def test_llm_check_contents_trim_the_history() -> None:
    call = {"role": "model", "parts": [{"functionCall": {"name": "a", "args": {}}}]}
    resp = {"role": "user", "parts": [{"functionResponse": {"name": "a", "response": {}}}]}
    text = {"role": "model", "parts": [{"text": "hi"}]}
    contents = llm_check_contents([resp, text, call], "the ask", "judge")
    assert contents[0]["parts"][0]["text"] == "<original_user_request>\nthe ask\n</original_user_request>"
    assert contents[1:] == [text, {"role": "user", "parts": [{"text": "judge"}]}]
    contents = llm_check_contents([call, resp, text], "", "judge")
    assert contents[0] == {"role": "user", "parts": [{"text": "Recent conversation history:"}]}
    assert len(llm_check_contents([text] * 30, "", "judge")) == 21


def test_parse_llm_answer() -> None:
    assert parse_llm_answer('{"unproductive_state_analysis": "x", "unproductive_state_confidence": 0.95}') == LlmAnswer(0.95, "x")
    assert parse_llm_answer('```json\n{"unproductive_state_confidence": 1}\n```') == LlmAnswer(1.0, "")
    assert parse_llm_answer("not json") is None
    assert parse_llm_answer('{"unproductive_state_confidence": "high"}') is None
    assert parse_llm_answer('{"unproductive_state_confidence": true}') is None


# -- the fast index against a literal model of the rule --------------------------------------
PHRASES = ["the build failed again. ", "let me retry it. ", "checking the log now, ", "ok ", "x", "\n"]
def _chant(phrase: str, times: int, cuts: list[int]) -> list[tuple[str, str]]:
    return [("text", c) for c in chunks_of(phrase * times, cuts)]


events = st.lists(
    st.one_of(
        st.lists(st.sampled_from(PHRASES), min_size=1, max_size=12).map(lambda ps: [("text", "".join(ps))]),
        st.text(alphabet="abc ", max_size=120).map(lambda t: [("text", t)]),
        st.builds(_chant, st.sampled_from(PHRASES[:4]), st.integers(1, 40), st.lists(st.integers(1, 90), max_size=30)),
        st.sampled_from([("text", "```\n"), ("text", "# Heading\n"), ("text", "----"), ("call", ""), ("clear", "")]).map(
            lambda e: [e]
        ),
    ),
    max_size=150,
).map(lambda groups: [e for g in groups for e in g])


@given(events, st.sampled_from([0, 4_990, 6_000, 26_000]))
def test_the_fast_index_agrees_with_the_literal_rule(script: list[tuple[str, str]], prefix: int) -> None:
    """Also past the 5 000-character window (cuts) and past a sweep of the index."""
    from tests.loops._reference import ReferenceContent

    fast, slow = fresh(), ReferenceContent()
    lead = " ".join(f"w{i}" for i in range(prefix))[:prefix]
    for start in range(0, len(lead), 700):
        assert fast.check_content(lead[start : start + 700]).count == slow.content(lead[start : start + 700])
    for i, (kind, text) in enumerate(script):
        if kind == "text":
            assert fast.check_content(text).count == slow.content(text), i
        elif kind == "call":
            fast.check_tool_call(f"t{i}", {})  # distinct calls: only their reset matters
            slow.tool_call()
        else:
            fast.clear_detection()
            slow.clear()


def _js_patterns() -> list[Any]:
    import re

    ws = "[\t\n\v\f\r \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff]"
    anychar = "[^\n\r\u2028\u2029]"
    return [
        re.compile(f"(^|\n){ws}*(\\|{anychar}*\\||[|+-]{{3,}})"),
        re.compile(f"(^|\n){ws}*[*-+]{ws}"),
        re.compile(f"(^|\n){ws}*[0-9]+\\.{ws}"),
        re.compile(f"(^|\n)#+{ws}"),
        re.compile(f"(^|\n)>{ws}"),
    ]


@given(st.text(alphabet="|+-*#>.19 ax\n\r\t\u00a0\u2028\u3000", max_size=30))
def test_the_combined_element_pattern_is_the_five_of_gemini_cli(chunk: str) -> None:
    expected = chunk.count("```") > 0 or any(p.search(chunk) for p in _js_patterns())
    divider = __import__("re").fullmatch("[+-_=*\u2500-\u257f]+", chunk) is not None
    assert is_structural(chunk)[1] == (expected or divider)


@pytest.mark.parametrize(
    ("chunk", "resets"),
    [
        ("| a | b |", True),
        ("text\n|---|---|", True),
        ("+--+", True),
        ("* item", True),
        ("  + item", True),
        ("- item", False),
        ("12. item", True),
        ("x 12. item", False),
        ("## Title", True),
        ("#hashtag", False),
        ("> quoted", True),
        ("a > b", False),
        ("───", True),
        ("plain prose, nothing else", False),
    ],
)
def test_structure_examples(chunk: str, resets: bool) -> None:
    assert is_structural(chunk)[1] is resets

