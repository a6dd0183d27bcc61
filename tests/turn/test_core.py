"""The turn's pure core alone: the router (which turn runs, where each message goes),
the guards, hook readings and what ends a turn, and the turn's history."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from actors.turn._core import (
    FATAL_TOOL_ERRORS,
    SHUTDOWN,
    TURN_LIMIT_MESSAGE,
    Acknowledge,
    Begin,
    Route,
    TurnHistory,
    TurnRouter,
    api_error,
    blocked_text,
    hook_clears_context,
    hook_context,
    host_round_limit,
    invalid_stream_message,
    over_session_turns,
    settled_stop,
    stopped_text,
    strike,
)
from bus.json_values import thaw
from bus.messages import (
    ApiError,
    BatchSettled,
    CancelTurn,
    CompletedCall,
    LoopVerdict,
    ModelChunk,
    StartTurn,
    TurnCancelAcknowledged,
    TurnError,
)

SID = "s1"


def start(turn_id: str = "t1", **fields: Any) -> StartTurn:
    return StartTurn(session_id=SID, turn_id=turn_id, prompt_id="p", model="m", approval_mode="default", **fields)


def cancel(by: str, turn_id: str | None = "t1") -> CancelTurn:
    return CancelTurn(session_id=SID, turn_id=turn_id, reason="user", requested_by=by)


CHUNK = ModelChunk(session_id=SID, request_id="r", index=0, chunk={})


# -- the router ------------------------------------------------------------------------------
def test_a_cancel_with_no_turn_running_is_acknowledged_at_once_as_asked() -> None:
    router = TurnRouter(SID)
    assert router.feed(cancel("chat", "old")) == [
        Acknowledge(TurnCancelAcknowledged(session_id=SID, turn_id="old", requested_by="chat"))
    ]


def test_the_running_turn_gets_its_first_cancel_and_replies_and_a_second_cancel_is_dropped() -> None:
    router = TurnRouter(SID)
    (begin,) = router.feed(start())
    assert isinstance(begin, Begin) and begin.turn.start == start()
    assert router.feed(CHUNK) == [Route(CHUNK)]
    assert router.feed(cancel("chat")) == [Route(cancel("chat"))]
    assert begin.turn.cancel_requested_by == "chat"
    assert router.feed(cancel("acp")) == []  # one acknowledgement per turn, to the first
    assert begin.turn.cancel_requested_by == "chat"


def test_a_start_while_a_turn_runs_is_the_sessions_bug() -> None:
    router = TurnRouter(SID)
    router.feed(start())
    with pytest.raises(RuntimeError):
        router.feed(start("t2"))


def test_after_a_turn_finishes_late_replies_are_dropped_and_the_next_turn_may_start() -> None:
    router = TurnRouter(SID)
    (begin,) = router.feed(start())
    assert isinstance(begin, Begin)
    router.finished(begin.turn)
    assert router.feed(CHUNK) == []
    assert router.feed(cancel("chat")) == [
        Acknowledge(TurnCancelAcknowledged(session_id=SID, turn_id="t1", requested_by="chat"))
    ]
    assert [type(e) for e in router.feed(start("t2"))] == [Begin]


def test_an_old_turns_finish_does_not_forget_the_new_one() -> None:
    router = TurnRouter(SID)
    (first,) = router.feed(start())
    assert isinstance(first, Begin)
    router.finished(first.turn)
    router.feed(start("t2"))
    router.finished(first.turn)
    assert router.feed(CHUNK) == [Route(CHUNK)]


def test_a_closed_inbox_cancels_the_running_turn_unless_a_cancel_is_already_due() -> None:
    router = TurnRouter(SID)
    assert router.inbox_closed() == []
    router.feed(start())
    assert router.inbox_closed() == [
        Route(CancelTurn(session_id=SID, turn_id="t1", reason="session closing", requested_by=SHUTDOWN))
    ]
    again = TurnRouter(SID)
    again.feed(start())
    again.feed(cancel("chat"))
    assert again.inbox_closed() == []


# -- guards ------------------------------------------------------------------------------------
def test_the_headless_hosts_round_limit() -> None:
    s = start(max_session_turns=2)
    assert host_round_limit(s, 2, finish_tool=None, interactive=False) is None
    assert host_round_limit(s, 3, finish_tool=None, interactive=False) == TurnError(
        kind="turn_limit", type="FatalTurnLimitedError", message=TURN_LIMIT_MESSAGE, exit_code=53
    )
    assert host_round_limit(s, 3, finish_tool=None, interactive=True) is None
    assert host_round_limit(s, 3, finish_tool="complete_task", interactive=False) is None
    assert host_round_limit(start(max_session_turns=-1), 10**6, finish_tool=None, interactive=False) is None
    assert host_round_limit(start(max_session_turns=0), 1, finish_tool=None, interactive=False) is not None


@given(bound=st.integers(-1, 20), used=st.integers(0, 20), requests=st.integers(1, 20))
def test_session_turns_count_every_model_turn_of_the_session(bound: int, used: int, requests: int) -> None:
    s = start(max_session_turns=bound, session_turns_used=used)
    assert over_session_turns(s, requests) == (bound > 0 and used + requests > bound)


@given(count=st.integers(1, 5), bounded=st.integers(0, 100))
def test_two_strikes(count: int, bounded: int) -> None:
    decision = strike(LoopVerdict(session_id=SID, request_id="r", count=count), bounded)
    if count > 1:
        assert decision == "loop_detected"
    else:
        assert decision == ("max_session_turns" if bounded <= 1 else "recover")


# -- hook outputs ------------------------------------------------------------------------------
def test_hook_readings() -> None:
    assert hook_context({"hookSpecificOutput": {"additionalContext": "<b>x</b>"}}) == (
        "<hook_context>&lt;b&gt;x&lt;/b&gt;</hook_context>"
    )
    assert hook_context({"hookSpecificOutput": {}}) is None
    assert hook_clears_context({"hookSpecificOutput": {"clearContext": True}})
    assert not hook_clears_context({})
    out = {"systemMessage": " shown ", "reason": "why"}
    assert stopped_text(out, system_message_first=True) == "Agent execution stopped: shown"
    assert stopped_text(out, system_message_first=False) == "Agent execution stopped: why"
    assert blocked_text({"stopReason": "stop"}) == "Agent execution blocked: stop"
    assert blocked_text({}) == "Agent execution blocked: No reason provided"


# -- what ends a turn ----------------------------------------------------------------------------
def settled(*calls: CompletedCall) -> BatchSettled:
    return BatchSettled(session_id=SID, batch_id="b", calls=calls)


def call(name: str = "ls", **fields: Any) -> CompletedCall:
    return CompletedCall(call_id=name, name=name, **fields)


def test_a_settled_batch_ends_the_turn_on_a_fatal_error_a_stop_or_a_subagents_goal() -> None:
    assert settled_stop(settled(call(), call("grep", status="error", error_type="x")), None) is None
    (fatal_type,) = FATAL_TOOL_ERRORS
    reason, error = settled_stop(
        settled(call(), call("write_file", status="error", error_type=fatal_type, error_message="full")), None
    ) or ("", None)
    assert reason == "error" and error == TurnError(
        kind="fatal_tool", type=fatal_type, message="Error executing tool write_file: full", exit_code=54
    )
    assert settled_stop(settled(call(status="error", error_type="stop_execution")), None) == ("stop_execution", None)
    done = settled(call("complete_task"))
    assert settled_stop(done, "complete_task") == ("goal", None)
    assert settled_stop(done, None) is None
    assert settled_stop(settled(call("complete_task", status="error")), "complete_task") is None


def test_a_failed_request_is_the_turns_api_error_and_an_invalid_stream_has_gemini_clis_text() -> None:
    err = ApiError(message="quota", status=429, type="TerminalQuotaError")
    assert api_error(err) == TurnError(kind="api", type="TerminalQuotaError", message="quota", exit_code=1, status=429)
    assert invalid_stream_message("SAFETY_BLOCKED", "x") == "The model response was blocked due to safety settings."
    assert invalid_stream_message("NO_FINISH_REASON", " raw ") == "raw"
    assert invalid_stream_message("NO_FINISH_REASON", "").startswith("Invalid stream:")


# -- the history ---------------------------------------------------------------------------------
ENV = {"role": "user", "parts": [{"text": "<session_context>cwd</session_context>"}]}
OLD = {"role": "user", "parts": [{"text": "earlier"}]}
PROMPT = {"role": "user", "parts": [{"text": "do it"}]}
ANSWER = {"role": "model", "parts": [{"functionCall": {"name": "ls", "args": {}}}]}
RESPONSES = {"role": "user", "parts": [{"functionResponse": {"name": "ls", "response": {}}}]}


def test_the_token_count_is_carried_over_or_estimated() -> None:
    assert TurnHistory.of(start(last_prompt_token_count=77)).last_prompt_tokens == 77
    estimated = TurnHistory.of(start(history=(OLD,)))
    assert estimated.last_prompt_tokens > 0 and estimated.tokens_at_base == estimated.last_prompt_tokens


def test_a_cancel_rolls_the_prompt_back_and_its_token_count() -> None:
    h = TurnHistory.of(start(history=(OLD,), last_prompt_token_count=10))
    h.in_flight = PROMPT
    h.answered(PROMPT, ANSWER, prompt_tokens=500)
    h.in_flight = RESPONSES
    h.rollback()
    h.cancelled()
    assert (h.added, h.last_prompt_tokens) == ([], 10)


def test_a_subagents_session_keeps_what_the_cancel_interrupted() -> None:
    h = TurnHistory.of(start(), keeps_cancelled_request=True)
    h.in_flight = PROMPT
    h.answered(PROMPT, ANSWER, prompt_tokens=None)
    h.in_flight = RESPONSES
    h.rollback()
    assert h.added == [PROMPT, ANSWER, RESPONSES] and h.in_flight is None


def test_a_request_not_sent_keeps_only_function_responses() -> None:
    h = TurnHistory.of(start())
    h.keep_responses(PROMPT)
    h.keep_responses(RESPONSES)
    assert h.added == [RESPONSES]


def test_a_cleared_context_keeps_the_environment_and_a_compression_replaces_everything() -> None:
    h = TurnHistory.of(start(history=(ENV, OLD), last_prompt_token_count=900))
    h.answered(PROMPT, ANSWER, prompt_tokens=1000)
    h.clear_context()
    assert h.reset and thaw(h.contents()) == [ENV]
    assert h.last_prompt_tokens == h.tokens_at_base < 900
    h.replace(({"role": "user", "parts": [{"text": "summary"}]},))
    assert h.contents() == ({"role": "user", "parts": [{"text": "summary"}]},) and h.added == []


@given(st.lists(st.sampled_from(["start", "cancel", "reply", "finish", "inbox closed"]), max_size=40))
def test_the_router_routes_only_to_a_running_turn_and_one_cancel_per_turn(actions: list[str]) -> None:
    """Whatever the session sends (one turn at a time, as it does): replies reach only a
    running turn, a cancel is either acknowledged at once (no turn runs) or given to the
    running turn, and each turn gets at most one cancel."""
    router = TurnRouter(SID)
    running = None
    cancels_routed = 0
    for n, action in enumerate(actions):
        if action == "start" and running is None:
            (begin,) = router.feed(start(f"t{n}"))
            assert isinstance(begin, Begin)
            running, cancels_routed = begin.turn, 0
        elif action == "cancel":
            effects = router.feed(cancel(f"c{n}", None))
            if running is None:
                assert [type(e) for e in effects] == [Acknowledge]
            else:
                assert all(isinstance(e, Route) for e in effects)
                cancels_routed += len(effects)
        elif action == "reply":
            assert router.feed(CHUNK) == ([Route(CHUNK)] if running is not None else [])
        elif action == "finish" and running is not None:
            router.finished(running)
            running = None
        elif action == "inbox closed":
            cancels_routed += len(router.inbox_closed())
        assert cancels_routed <= 1
        if running is not None:
            assert (running.cancel_requested_by is not None) == (cancels_routed == 1)
