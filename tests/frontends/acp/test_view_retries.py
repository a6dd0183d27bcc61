"""An ACP client through a mid-stream retry: chunks cannot be taken back, so the new
attempt's repeat of what was sent is not sent again; a new attempt that says something
else is preceded by a chunk saying the text above is discarded."""

from __future__ import annotations

from typing import Any

from bus.messages import (
    GenerateRequest,
    Message,
    StreamRetried,
    TextStreamed,
    TurnEnded,
    TurnStarted,
)
from tests.frontends.acp.test_view import SID, updates, view

T = "t"


def text(t: str) -> TextStreamed:
    return TextStreamed(session_id=SID, turn_id=T, text=t)


def request(rid: str) -> GenerateRequest:
    return GenerateRequest(session_id=SID, request_id=rid, reply_to="turn", method="generateContentStream", model="m", contents=())


RETRIED = StreamRetried(session_id=SID, turn_id=T, attempt=1, reason="ECONNRESET")


def chunks(*msgs: Message, **kw: Any) -> list[str]:
    v = view(**kw)
    out: list[str] = []
    for m in (TurnStarted(session_id=SID, turn_id=T, prompt_id="p"), *msgs, TurnEnded(session_id=SID, turn_id=T, stop_reason="end_turn")):
        out += [u["content"]["text"] for u in updates(v.feed(m)) if u["sessionUpdate"] == "agent_message_chunk"]
    return out


def test_a_retry_that_repeats_the_text_sends_each_character_once() -> None:
    got = chunks(request("r1"), text("Alpha "), RETRIED, text("Alp"), text("ha Beta "), text("Gamma."))
    assert got == ["Alpha ", "Beta ", "Gamma."]


def test_a_retry_that_says_something_else_is_preceded_by_a_discard_notice() -> None:
    got = chunks(request("r1"), text("Alpha "), RETRIED, text("Gamma "), text("Delta."))
    assert got[0] == "Alpha " and got[2:] == ["Gamma ", "Delta."]
    assert "ECONNRESET" in got[1] and "above is discarded" in got[1]


def test_a_retry_that_stops_short_says_so_before_the_turn_ends() -> None:
    got = chunks(request("r1"), text("Alpha Beta"), RETRIED, text("Alpha"))
    assert got[0] == "Alpha Beta" and "discarded" in got[1] and got[2:] == ["Alpha"]


def test_only_the_retried_response_is_compared() -> None:
    """A retry in a later response of the turn compares with that response's text."""
    got = chunks(request("r1"), text("First. "), request("r2"), text("Alpha "), RETRIED, text("Alpha Beta."))
    assert got == ["First. ", "Alpha ", "Beta."]


def test_a_replayed_session_shows_the_same() -> None:
    got = chunks(request("r1"), text("Alpha "), RETRIED, text("Alpha Beta."), replay=True)
    assert got == ["Alpha ", "Beta."]
