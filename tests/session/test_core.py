"""The session's pure core alone, with a scripted turn actor: one example per rule of
its mapping table (``actors/session/_core.py``)."""

from __future__ import annotations

import pytest

from actors.session import Publish, SessionCore, Stop, ToTurn
from bus.json_values import thaw
from bus.messages import (
    AddContext,
    CancelTurn,
    CloseSession,
    ConfigureSession,
    ContextAdded,
    HistoryCompressed,
    OpenSession,
    PromptQueued,
    SessionClosed,
    SessionConfigured,
    SessionOpened,
    StartTurn,
    SubmitPrompt,
    TurnCancelAcknowledged,
    TurnEnded,
)

from ._peers import SID, Session, counter_ids

ENV = {"role": "user", "parts": [{"text": "<session_context>cwd</session_context>"}]}
OLD = {"role": "user", "parts": [{"text": "earlier"}]}


def opened(**history: object) -> Session:
    s = Session()
    s.feed(OpenSession(session_id=SID, model="m1", approval_mode="default", workspace="/w"))
    return s


def prompt(pid: str, text: str = "hi") -> SubmitPrompt:
    return SubmitPrompt(session_id=SID, prompt_id=pid, parts=({"text": text},))


def cancel(by: str, turn_id: str | None = None) -> CancelTurn:
    return CancelTurn(session_id=SID, turn_id=turn_id, reason="user", requested_by=by)


def said(role: str, text: str) -> dict[str, object]:
    return {"role": role, "parts": [{"text": text}]}


def test_open_publishes_the_settings_and_whether_it_resumed() -> None:
    core = SessionCore(SID)
    fresh = core.feed(OpenSession(session_id=SID, model="m", approval_mode="plan", workspace="/w"), "c")
    assert fresh == [Publish(SessionOpened(session_id=SID, model="m", approval_mode="plan", workspace="/w"))]
    core = SessionCore(SID)
    resumed = core.feed(
        OpenSession(session_id=SID, model="m", approval_mode="plan", workspace="/w", history=(OLD,)), "c"
    )
    assert resumed == [
        Publish(SessionOpened(session_id=SID, model="m", approval_mode="plan", workspace="/w", resumed=True))
    ]
    assert thaw(core.state.history) == [OLD]


def test_a_prompt_starts_at_once_between_turns_and_queues_behind_a_running_one() -> None:
    s = opened()
    s.feed(prompt("p1"))
    s.feed(prompt("p2"))
    s.feed(prompt("p3"))
    assert [t.prompt_id for t in s.turn.started] == ["p1"]
    assert s.routed.published[1:] == [
        PromptQueued(session_id=SID, prompt_id="p2", position=1),
        PromptQueued(session_id=SID, prompt_id="p3", position=2),
    ]
    s.finish(history_added=(said("user", "hi"), said("model", "one")), model_requests=2)
    s.finish(history_added=(said("user", "hi"), said("model", "two")), model_requests=1)
    assert [t.prompt_id for t in s.turn.started] == ["p1", "p2", "p3"]
    third = s.turn.started[2]
    assert thaw(third.history) == [said("user", "hi"), said("model", "one"), said("user", "hi"), said("model", "two")]
    assert third.session_turns_used == 3
    assert third.turn_id == "t3"


def test_the_turn_carries_the_counters_of_the_last_turn() -> None:
    s = opened()
    s.feed(prompt("p1"))
    s.feed(prompt("p2"))
    s.finish(last_prompt_token_count=1234, compression_failed=True)
    second = s.turn.started[1]
    assert (second.last_prompt_token_count, second.compression_failed) == (1234, True)


def test_configuration_applies_from_the_next_turn() -> None:
    s = opened()
    s.feed(prompt("p1"))
    s.feed(ConfigureSession(session_id=SID, request_id="r", approval_mode="yolo", model="m2", max_session_turns=7))
    assert s.routed.published[-1] == SessionConfigured(
        session_id=SID, request_id="r", approval_mode="yolo", model="m2"
    )
    s.feed(prompt("p2"))
    s.finish()
    first, second = s.turn.started
    assert (first.model, first.approval_mode, first.max_session_turns) == ("m1", "default", -1)
    assert (second.model, second.approval_mode, second.max_session_turns) == ("m2", "yolo", 7)


def test_context_is_added_at_once_between_turns_and_after_the_running_turns_additions() -> None:
    s = opened()
    s.feed(AddContext(session_id=SID, request_id="a1", parts=({"text": "ls"},)), sender="chat")
    assert s.routed.published[-1] == ContextAdded(
        session_id=SID, request_id="a1", content=said("user", "ls"), requested_by="chat"
    )
    s.feed(prompt("p1"))
    mark = len(s.routed.published)
    s.feed(AddContext(session_id=SID, request_id="a2", parts=({"text": "pwd"},), requested_by="me"))
    assert s.since(mark) == []  # the turn runs: later
    s.feed(prompt("p2"))
    s.finish(history_added=(said("model", "ok"),))
    assert ContextAdded(session_id=SID, request_id="a2", content=said("user", "pwd"), requested_by="me") in s.since(
        mark
    )
    assert thaw(s.turn.started[1].history) == [said("user", "ls"), said("model", "ok"), said("user", "pwd")]


def test_a_cancel_with_nothing_running_is_acknowledged_at_once() -> None:
    s = opened()
    s.feed(cancel("chat"))
    assert s.routed.published[-1] == TurnCancelAcknowledged(session_id=SID, turn_id=None, requested_by="chat")
    assert s.routed.to_turn == []


def test_a_cancel_of_another_turn_is_acknowledged_at_once_and_the_running_turn_goes_on() -> None:
    s = opened()
    s.feed(prompt("p1"))
    s.feed(cancel("chat", turn_id="old"))
    assert s.routed.published[-1] == TurnCancelAcknowledged(session_id=SID, turn_id="old", requested_by="chat")
    assert s.core.state.cancelling is None
    assert s.turn.cancel_requested_by is None


def test_the_running_turns_cancel_is_forwarded_once_named_and_the_next_turn_waits_for_its_acknowledgement() -> None:
    core = SessionCore(SID, new_turn_id=counter_ids())
    core.feed(OpenSession(session_id=SID, model="m", approval_mode="default", workspace="/w"), "c")
    core.feed(prompt("p1"), "c")
    assert core.feed(prompt("p2"), "c") == [Publish(PromptQueued(session_id=SID, prompt_id="p2", position=1))]
    assert core.feed(cancel("chat"), "chat") == [ToTurn(cancel("chat", turn_id="t1"))]
    assert core.feed(cancel("acp"), "acp") == []  # folded into the first
    ended = TurnEnded(session_id=SID, turn_id="t1", stop_reason="cancelled")
    assert core.feed(ended, "turn") == []  # p2 waits for the acknowledgement
    stale = TurnCancelAcknowledged(session_id=SID, turn_id="t0", requested_by="x")
    assert core.feed(stale, "turn") == [Publish(stale)]  # not the one due
    ack = TurnCancelAcknowledged(session_id=SID, turn_id="t1", requested_by="chat")
    effects = core.feed(ack, "turn")
    assert effects[0] == Publish(ack)
    assert [type(e) for e in effects] == [Publish, ToTurn]
    start = effects[1]
    assert isinstance(start, ToTurn) and isinstance(start.message, StartTurn)
    assert (start.message.turn_id, start.message.prompt_id) == ("t2", "p2")


def test_an_acknowledgement_before_the_turns_end_lets_the_end_start_the_next_turn() -> None:
    core = SessionCore(SID, new_turn_id=counter_ids())
    core.feed(prompt("p1"), "c")
    core.feed(prompt("p2"), "c")
    core.feed(cancel("chat"), "chat")
    core.feed(TurnCancelAcknowledged(session_id=SID, turn_id="t1", requested_by="chat"), "turn")
    effects = core.feed(TurnEnded(session_id=SID, turn_id="t1", stop_reason="cancelled"), "turn")
    assert len(effects) == 1 and isinstance(effects[0], ToTurn)


def test_close_between_turns_stops_at_once() -> None:
    core = SessionCore(SID)
    assert core.feed(CloseSession(session_id=SID, reason="bye"), "c") == [
        Publish(SessionClosed(session_id=SID, reason="bye")),
        Stop(),
    ]
    with pytest.raises(RuntimeError):
        core.feed(prompt("late"), "c")
    assert core.inbox_closed() == []


def test_close_cancels_the_running_turn_and_stops_after_its_end_and_acknowledgement() -> None:
    s = opened()
    s.feed(prompt("p1"))
    s.feed(prompt("p2"))
    s.feed(CloseSession(session_id=SID, reason="bye"), sender="acp")
    assert s.routed.to_turn[-1] == CancelTurn(session_id=SID, turn_id="t1", reason="bye", requested_by="acp")
    s.feed(prompt("p3"))  # dropped: the session is closing
    mark = len(s.routed.published)
    s.finish()
    assert s.since(mark) == [
        TurnCancelAcknowledged(session_id=SID, turn_id="t1", requested_by="acp"),
        SessionClosed(session_id=SID, reason="bye"),
    ]
    assert s.routed.stopped
    assert [t.prompt_id for t in s.turn.started] == ["p1"]


def test_close_while_a_cancel_is_due_waits_for_that_cancel() -> None:
    s = opened()
    s.feed(prompt("p1"))
    s.feed(cancel("chat"))
    s.feed(CloseSession(session_id=SID, reason="bye"))
    assert [type(m) for m in s.routed.to_turn] == [StartTurn, CancelTurn]
    s.finish()
    assert s.routed.published[-2:] == [
        TurnCancelAcknowledged(session_id=SID, turn_id="t1", requested_by="chat"),
        SessionClosed(session_id=SID, reason="bye"),
    ]


def test_a_closed_inbox_stops_the_session() -> None:
    core = SessionCore(SID)
    core.feed(prompt("p1"), "c")
    assert core.inbox_closed() == [Publish(SessionClosed(session_id=SID, reason="inbox closed")), Stop()]


def test_a_reset_history_keeps_the_environment_and_a_compression_replaces_it() -> None:
    s = Session()
    s.feed(OpenSession(session_id=SID, model="m", approval_mode="default", workspace="/w", history=(ENV, OLD)))
    s.feed(prompt("p1"))
    s.feed(HistoryCompressed(session_id=SID, turn_id="t1", status="COMPRESSED", original_token_count=9,
                             new_token_count=1, history=(ENV, said("user", "summary"))))
    s.feed(prompt("p2"))
    s.finish(history_added=(said("model", "a"),), last_prompt_token_count=50)
    assert thaw(s.turn.started[1].history) == [ENV, said("user", "summary"), said("model", "a")]
    s.feed(prompt("p3"))
    s.finish(history_added=(said("user", "fresh"),), history_reset=True, last_prompt_token_count=70)
    third = s.turn.started[2]
    assert thaw(third.history) == [ENV, said("user", "fresh")]
    assert third.last_prompt_token_count == -1  # estimated again after a reset


def test_a_prompt_after_a_cancelled_turns_end_waits_for_the_cancels_acknowledgement() -> None:
    """The turn ended before the cancel reached it; its acknowledgement is still due. A
    prompt then waits (it started at once: a cancel of it, meanwhile, was folded into
    the old turn's and lost; found by the orderings state machine)."""
    core = SessionCore(SID, new_turn_id=counter_ids())
    core.feed(prompt("p1"), "c")
    core.feed(cancel("chat"), "chat")
    assert core.feed(TurnEnded(session_id=SID, turn_id="t1", stop_reason="end_turn"), "turn") == []
    assert core.feed(prompt("p2"), "c") == [Publish(PromptQueued(session_id=SID, prompt_id="p2", position=1))]
    effects = core.feed(TurnCancelAcknowledged(session_id=SID, turn_id="t1", requested_by="chat"), "turn")
    assert [type(e) for e in effects] == [Publish, ToTurn]
    assert core.feed(cancel("acp"), "acp") == [ToTurn(cancel("acp", turn_id="t2"))]


def test_a_close_after_a_cancelled_turns_end_waits_for_the_cancels_acknowledgement() -> None:
    """``SessionClosed`` comes after the acknowledgement of the cancel (it came first, and
    the acknowledgement was lost; found by the orderings state machine)."""
    core = SessionCore(SID, new_turn_id=counter_ids())
    core.feed(prompt("p1"), "c")
    core.feed(cancel("chat"), "chat")
    core.feed(TurnEnded(session_id=SID, turn_id="t1", stop_reason="end_turn"), "turn")
    assert core.feed(CloseSession(session_id=SID, reason="bye"), "c") == []
    ack = TurnCancelAcknowledged(session_id=SID, turn_id="t1", requested_by="chat")
    assert core.feed(ack, "turn") == [Publish(ack), Publish(SessionClosed(session_id=SID, reason="bye")), Stop()]
