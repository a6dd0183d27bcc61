"""Sessions on disk, pure parts: the history a recording leaves (also when its process
was killed mid-turn), closing dangling calls, listing text, relative times."""

from __future__ import annotations

import datetime
from typing import Any

from actors.host.sessions import (
    INTERRUPTED_TOOL_REASON,
    clean_message,
    close_dangling_calls,
    conversation_of,
    format_relative_time,
    history_problems,
    js_parse_int,
)
from actors.turn import INTERRUPTED_RESPONSE_PLACEHOLDER
from bus.messages import (
    BatchSettled,
    CompletedCall,
    GenerateRequest,
    Message,
    ModelChunk,
    ModelFinished,
    ModelRetrying,
    OpenSession,
    ScheduleBatch,
    StartTurn,
    StreamRetried,
    ToolCallRequested,
    TurnEnded,
)

S, T = "s", "t1"
CONTEXT = {"role": "user", "parts": [{"text": "<session_context>\nctx\n</session_context>"}]}


def opened() -> OpenSession:
    return OpenSession(session_id=S, model="m", approval_mode="yolo", workspace="/w", history=(CONTEXT,))


def call_chunk(*names: str, text: str = "") -> ModelChunk:
    parts: list[dict[str, Any]] = [{"text": text}] if text else []
    parts += [{"functionCall": {"name": n, "args": {"n": i}}} for i, n in enumerate(names)]
    return ModelChunk(
        session_id=S, request_id="r1", index=0, chunk={"candidates": [{"content": {"parts": parts}, "finishReason": "STOP"}]}
    )


def started_turn(prompt: str = "do it") -> list[Message]:
    return [
        opened(),
        StartTurn(session_id=S, turn_id=T, prompt_id="p", model="m", approval_mode="yolo", parts=({"text": prompt},)),
        GenerateRequest(session_id=S, request_id="r1", reply_to=f"turn:{S}", method="generateContentStream", model="m"),
    ]


def test_completed_turns_are_the_open_history_plus_every_addition() -> None:
    added = ({"role": "user", "parts": [{"text": "hi"}]}, {"role": "model", "parts": [{"text": "hello"}]})
    msgs: list[Message] = [opened(), TurnEnded(session_id=S, turn_id=T, stop_reason="end_turn", history_added=added)]
    assert conversation_of(msgs) == [CONTEXT, *[dict(a) for a in added]]


def test_killed_mid_tool_leaves_calls_that_get_cancelled_responses_and_the_placeholder() -> None:
    msgs = [
        *started_turn(),
        call_chunk("read_file", "grep_search", text="Looking."),
        ToolCallRequested(session_id=S, turn_id=T, call_id="read_file__read_file_77_0", name="read_file"),
        ToolCallRequested(session_id=S, turn_id=T, call_id="grep_search__grep_search_77_1", name="grep_search"),
        ModelFinished(session_id=S, request_id="r1", model="m"),
    ]  # ... and the process died while the tools ran
    history = conversation_of(msgs)
    assert [c["role"] for c in history] == ["user", "user", "model"]
    ids = [p["functionCall"]["id"] for p in history[-1]["parts"] if "functionCall" in p]
    assert ids == ["read_file__read_file_77_0", "grep_search__grep_search_77_1"]  # the ids the turn gave
    closed = close_dangling_calls(history)
    assert history_problems(closed) == []
    responses = closed[-2]["parts"]
    assert [r["functionResponse"]["id"] for r in responses] == ids
    assert responses[0]["functionResponse"]["response"]["error"] == f"[Operation Cancelled] Reason: {INTERRUPTED_TOOL_REASON}"
    assert closed[-1] == {"role": "model", "parts": [{"text": INTERRUPTED_RESPONSE_PLACEHOLDER}]}


def test_killed_after_the_batch_settled_keeps_the_real_responses() -> None:
    response = {"functionResponse": {"id": "read_file__x", "name": "read_file", "response": {"output": "data"}}}
    msgs = [
        *started_turn(),
        call_chunk("read_file"),
        ToolCallRequested(session_id=S, turn_id=T, call_id="read_file__x", name="read_file"),
        ModelFinished(session_id=S, request_id="r1", model="m"),
        ScheduleBatch(session_id=S, batch_id="b", reply_to=f"turn:{S}", approval_mode="default"),
        BatchSettled(
            session_id=S, batch_id="b", calls=(CompletedCall(call_id="read_file__x", name="read_file", response_parts=(response,)),)
        ),
    ]
    closed = close_dangling_calls(conversation_of(msgs))
    assert closed[-2] == {"role": "user", "parts": [response]}
    assert closed[-1]["parts"][0]["text"] == INTERRUPTED_RESPONSE_PLACEHOLDER
    assert history_problems(closed) == []


def test_killed_mid_stream_keeps_the_prompt_and_forgets_the_partial_answer() -> None:
    msgs = [*started_turn("question"), call_chunk(text="half an ans")]
    assert conversation_of(msgs)[-1] == {"role": "user", "parts": [{"text": "question"}]}


def test_a_retried_stream_uses_the_second_attempt_and_its_ids() -> None:
    msgs = [
        *started_turn(),
        call_chunk("glob"),
        ToolCallRequested(session_id=S, turn_id=T, call_id="glob__glob_1_0", name="glob"),
        ModelRetrying(session_id=S, request_id="r1", attempt=1, delay_s=1, reason="NO_FINISH_REASON", mid_stream=True),
        StreamRetried(session_id=S, turn_id=T, attempt=1, reason="NO_FINISH_REASON"),
        call_chunk("glob"),
        ToolCallRequested(session_id=S, turn_id=T, call_id="glob__glob_2_0", name="glob"),
        ModelFinished(session_id=S, request_id="r1", model="m"),
    ]
    model = conversation_of(msgs)[-1]
    assert [p["functionCall"]["id"] for p in model["parts"]] == ["glob__glob_2_0"]


def test_close_dangling_calls_leaves_a_valid_history_alone_and_fixes_partial_answers() -> None:
    call = {"functionCall": {"id": "a", "name": "x"}}
    call2 = {"functionCall": {"id": "b", "name": "y"}}
    answer = {"functionResponse": {"id": "a", "name": "x", "response": {"output": "1"}}}
    valid = [CONTEXT, {"role": "model", "parts": [call]}, {"role": "user", "parts": [answer]}, {"role": "model", "parts": [{"text": "ok"}]}]
    assert close_dangling_calls(valid) == valid
    partial = [CONTEXT, {"role": "model", "parts": [call, call2]}, {"role": "user", "parts": [answer]}]
    fixed = close_dangling_calls(partial)
    assert history_problems(fixed) == []
    assert history_problems(partial) != []


def test_listing_text_helpers_match_gemini_cli() -> None:
    now = datetime.datetime(2026, 1, 2, 12, 0, tzinfo=datetime.UTC)
    assert format_relative_time("2026-01-02T11:59:30.000Z", now) == "Just now"
    assert format_relative_time("2026-01-02T11:58:00.000Z", now) == "2 minutes ago"
    assert format_relative_time("2026-01-02T11:00:00.000Z", now) == "1 hour ago"
    assert format_relative_time("2025-12-30T12:00:00.000Z", now) == "3 days ago"
    assert clean_message("  fix\n\nthe   bug é ") == "fix the bug"
    assert js_parse_int("2abc") == 2 and js_parse_int(" -1") == -1 and js_parse_int("x") is None
