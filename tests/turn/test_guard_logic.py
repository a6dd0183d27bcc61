"""Pure parts of the turn guards: token estimate, compression planning, next speaker."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from actors.turn import _compression as comp
from actors.turn import _next_speaker as ns
from actors.turn._tokens import estimate_tokens, overflow_message, token_limit
from bus.json_values import thaw


# -- tokens ----------------------------------------------------------------------------------
def test_token_limits() -> None:
    assert token_limit("gemini-2.5-pro") == 1_048_576
    assert token_limit("anything-else") == 1_048_576
    assert token_limit("gemma-4-31b-it") == token_limit("gemma-4-26b-a4b-it") == 256_000


@pytest.mark.parametrize(
    ("parts", "tokens"),
    [
        ([{"text": "abcd" * 10}], 10),
        ([{"text": "é"}], 1),  # 1.5 floored
        ([{"text": "éé"}], 3),
        ([{"text": "😀"}], 3),  # two UTF-16 units, 1.5 each
        ([{"text": "a" * 100_001}], 25_000),  # long text: length / 4
        ([{"text": "é" * 100_001}], 25_000),
        ([{"inlineData": {"mimeType": "image/png", "data": "x"}}], 3000),
        ([{"fileData": {"mimeType": "application/pdf", "fileUri": "u"}}], 25_800),
        ([{"functionResponse": {"name": "abcd", "response": {"output": "x"}}}], 4),  # (4 + 14) / 4
        ([{"functionResponse": {"name": "ab", "response": "abcdef"}}], 2),
        ([{"functionCall": {"name": "ls", "args": {}}}], 10),  # len('{"functionCall":{"name":"ls","args":{}}}') / 4
        ([{"text": "abc"}, {"text": "d"}], 1),
        ([], 0),
    ],
)
def test_estimate_tokens(parts: list[Any], tokens: int) -> None:
    assert estimate_tokens(parts) == tokens


def test_nested_function_response_parts_are_counted_to_depth_3() -> None:
    inner = {"inlineData": {"mimeType": "image/png"}}
    part: dict[str, Any] = {"functionResponse": {"name": "", "response": None, "parts": [inner]}}
    assert estimate_tokens([part]) == 3000
    deep: dict[str, Any] = inner
    for _ in range(5):
        deep = {"functionResponse": {"name": "", "parts": [deep]}}
    assert estimate_tokens([deep]) == 0


def test_overflow_message() -> None:
    assert overflow_message(10, 1_000_000, 1_048_576) == (
        "Sending this message (10 tokens) might exceed the context window limit (1,000,000 tokens left)."
    )
    assert overflow_message(10, 5, 100).endswith("compress the chat history.")


# -- compression -----------------------------------------------------------------------------
def user(text: str) -> dict[str, Any]:
    return {"role": "user", "parts": [{"text": text}]}


def model(text: str) -> dict[str, Any]:
    return {"role": "model", "parts": [{"text": text}]}


def call(name: str, cid: str) -> dict[str, Any]:
    return {"role": "model", "parts": [{"functionCall": {"name": name, "args": {}, "id": cid}}]}


def response(name: str, cid: str, output: str) -> dict[str, Any]:
    return {"role": "user", "parts": [{"functionResponse": {"name": name, "id": cid, "response": {"output": output}}}]}


def test_split_point_is_a_real_user_turn_after_70_percent() -> None:
    history = [user("a" * 100), model("b" * 100), user("c" * 100), model("d" * 10), user("e"), model("f")]
    assert comp.find_split_point(history, 0.7) == 4
    # a function response is never a split point
    history = [user("a" * 100), call("ls", "1"), response("ls", "1", "x" * 300), model("done")]
    assert comp.find_split_point(history, 0.7) == len(history)  # ends with a plain answer: all of it
    history = [user("a" * 100), call("ls", "1"), response("ls", "1", "x" * 300), call("ls", "2")]
    assert comp.find_split_point(history, 0.7) == 0
    with pytest.raises(ValueError):
        comp.find_split_point(history, 1)


turns = st.lists(
    st.one_of(
        st.builds(user, st.text(max_size=40)),
        st.builds(model, st.text(max_size=40)),
        st.tuples(st.text(min_size=1, max_size=5), st.text(max_size=60)).map(lambda t: [call("ls", t[0]), response("ls", t[0], t[1])]),
    ),
    max_size=30,
)


@given(turns, st.floats(0.05, 0.95))
def test_a_split_never_separates_a_call_from_its_response(items: list[Any], fraction: float) -> None:
    history: list[Any] = []
    for item in items:
        history.extend(item if isinstance(item, list) else [item])
    split = comp.find_split_point(history, fraction)
    assert 0 <= split <= len(history)
    if 0 < split < len(history):
        assert history[split]["role"] == "user" and "text" in history[split]["parts"][0]


def test_truncation_keeps_the_newest_responses_within_the_budget(tmp_path: Path) -> None:
    saver = comp.OutputSaver(tmp_path)
    big = "line\n" * 60_000  # 300 000 chars = 75 000 tokens each
    history = [
        user("go"),
        call("run_shell_command", "1"),
        response("run_shell_command", "1", big),
        call("run_shell_command", "2"),
        response("run_shell_command", "2", big[:100_000]),
    ]
    out = comp.truncate_to_budget(history, saver, 40_000)
    newest = out[4]["parts"][0]["functionResponse"]["response"]["output"]
    older = out[2]["parts"][0]["functionResponse"]["response"]["output"]
    assert newest == big[:100_000]  # 25 000 tokens: within the budget
    assert older.startswith(
        f"Output too large. Showing first 8,000 and last 32,000 characters. For full output see: "
        f"{tmp_path / 'tool-outputs' / 'run_shell_command_1.txt'}\n"
    )
    assert "... [260,000 characters omitted] ..." in older
    assert (tmp_path / "tool-outputs" / "run_shell_command_1.txt").read_text() == big
    assert thaw(out[0]) == history[0]


def test_a_response_that_cannot_be_saved_is_kept_whole() -> None:
    def broken(text: str, tool: str) -> str:
        raise OSError("disk full")

    history = [response("a", "1", "x" * 300_000), response("a", "2", "y" * 300_000)]
    out = comp.truncate_to_budget(history, broken, 40_000)
    assert [thaw_output(c) for c in out] == ["x" * 300_000, "y" * 300_000]


def thaw_output(content: Any) -> str:
    return str(content["parts"][0]["functionResponse"]["response"]["output"])


def plan(history: list[Any], tokens: int, *, failed: bool = False) -> comp.Result | comp.Summarise:
    return comp.plan_compression(
        history,
        model="gemini-2.5-pro",
        last_prompt_tokens=tokens,
        threshold=0.5,
        compression_failed=failed,
        save=lambda t, n: "/nowhere",
        truncate_chars=40_000,
    )


def test_plan_statuses() -> None:
    assert plan([], 10**9) == comp.Result(comp.NOOP, 0, 0)
    history = [user("<session_context>env</session_context>"), user("a" * 400), model("b" * 400), user("c"), model("d")]
    assert plan(history, 524_287).status == comp.NOOP
    p = plan(history, 524_288)
    assert isinstance(p, comp.Summarise)
    assert [c["parts"][0]["text"][:1] for c in p.older] == ["<", "a", "b"]
    assert [c["parts"][0]["text"] for c in p.kept] == ["c", "d"]
    assert p.environment == history[0]
    new = p.new_history("SUMMARY")
    assert [c["parts"][0]["text"] for c in new][:3] == ["<session_context>env</session_context>", "SUMMARY", comp.SUMMARY_ACKNOWLEDGEMENT]
    # after an inflated summary: no model call; truncation only
    assert plan(history, 10**6, failed=True).status == comp.CONTENT_TRUNCATED
    assert plan(history, 600, failed=True).status == comp.NOOP  # under the threshold


def test_decide() -> None:
    p = comp.Summarise(100, (user("a"),), (user("b"), model("c")))
    assert comp.decide(p, "", 0).status == comp.COMPRESSION_FAILED_EMPTY_SUMMARY
    assert comp.decide(p, "s", 101).status == comp.COMPRESSION_FAILED_INFLATED_TOKEN_COUNT
    done = comp.decide(p, "s", 100)
    assert done.status == comp.COMPRESSED and done.history is not None and len(done.history) == 4
    assert comp.final_summary("first", "  ") == "first"
    assert comp.final_summary("first", " second ") == "second"


def test_summary_request_mentions_an_earlier_snapshot() -> None:
    p = comp.Summarise(100, (user("<state_snapshot>old</state_snapshot>"), model("x")), ())
    assert comp.UPDATE_SNAPSHOT_REQUEST in p.summary_request()[-1]["parts"][-1]["text"]
    p = comp.Summarise(100, (user("hello"),), ())
    assert comp.NEW_SNAPSHOT_REQUEST in p.summary_request()[-1]["parts"][-1]["text"]
    verify = p.verify_request("S")
    assert [c["role"] for c in verify] == ["user", "model", "user"]


def test_curated_history_drops_invalid_model_runs() -> None:
    bad = {"role": "model", "parts": [{"text": ""}]}
    history = [user("a"), model("b"), bad, user("c"), {"role": "model", "parts": []}]
    assert comp.curated_history(history) == [user("a"), user("c"), {"role": "model", "parts": []}]


def test_compression_models_and_threshold() -> None:
    assert comp.compression_model("gemini-2.5-flash") == "gemini-2.5-flash"
    assert comp.compression_model("gemini-3.1-pro-preview") == "gemini-3-pro-preview"
    assert comp.compression_model("custom") == "gemini-3-pro-preview"
    assert comp.effective_threshold(None) == comp.effective_threshold(0) == 0.5
    assert comp.effective_threshold(0.7) == 0.7
    assert comp.compressed_message(524_288, 1000, 1_048_576) == "Context compressed from 50% to 0%."


# -- next speaker ----------------------------------------------------------------------------
def test_next_speaker_without_a_model_call() -> None:
    assert ns.without_model_call([]) is None
    assert ns.without_model_call([user("a"), call("ls", "1"), response("ls", "1", "x")]) == "model"
    assert ns.without_model_call([user("a"), {"role": "model", "parts": []}]) == "model"
    assert ns.without_model_call([user("a")]) is None
    assert ns.without_model_call([user("a"), model("b")]) == ns.ASK


def test_next_speaker_answer() -> None:
    assert ns.parse_answer('{"reasoning": "r", "next_speaker": "model"}') == "model"
    assert ns.parse_answer('```json\n{"reasoning": "r", "next_speaker": "user"}\n```') == "user"
    assert ns.parse_answer('{"next_speaker": "nobody"}') is None
    assert ns.parse_answer("model") is None
    contents, config = ns.request([user("a"), model("b")])
    assert contents[-1]["parts"][-1]["text"] == ns.NEXT_SPEAKER_PROMPT
    assert config["responseMimeType"] == "application/json"
