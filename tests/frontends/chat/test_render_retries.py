"""What the chat shows when the model stream is retried: a connection-layer retry is a
progress line; a mid-stream retry after text marks that text as discarded, and the new
attempt's text follows in full."""

from __future__ import annotations

from actors.frontends.chat._render import Renderer
from bus.messages import (
    BatchSettled,
    ModelRetrying,
    StreamRetried,
    TextStreamed,
    TurnEnded,
    TurnStarted,
)
from tests.frontends.chat.test_render import S, T, show


def retrying(mid_stream: bool, delay: float = 1.0, reason: str = "ECONNRESET") -> ModelRetrying:
    return ModelRetrying(session_id=S, request_id="r", attempt=1, delay_s=delay, reason=reason, mid_stream=mid_stream)


def retried(reason: str = "ECONNRESET") -> StreamRetried:
    return StreamRetried(session_id=S, turn_id=T, attempt=1, reason=reason)


def text(t: str) -> TextStreamed:
    return TextStreamed(session_id=S, turn_id=T, text=t)


START = TurnStarted(session_id=S, turn_id=T, prompt_id="p")
END = TurnEnded(session_id=S, turn_id=T, stop_reason="end_turn")


def test_text_a_retry_throws_away_is_marked_discarded() -> None:
    out = show(Renderer(), START, text("Alpha "), retrying(True), retried(), text("Alpha "), text("Beta Gamma."), END)
    assert out == (
        "Alpha \n"
        "↺ the stream failed (ECONNRESET): the text above from “Alpha” is discarded; retrying in 1s\n"
        "Alpha Beta Gamma.\n"
    )


def test_the_gateways_retry_before_the_failed_attempts_last_text_waits_for_the_turn() -> None:
    """The gateway's ModelRetrying can reach a client before the turn's last text of the
    failed attempt: the mark comes with the turn's StreamRetried, after that text."""
    out = show(Renderer(), START, text("Alpha "), retrying(True), text("Beta "), retried(), text("Alpha Beta Gamma."), END)
    assert out.splitlines() == [
        "Alpha Beta ",
        "↺ the stream failed (ECONNRESET): the text above from “Alpha Beta” is discarded; retrying in 1s",
        "Alpha Beta Gamma.",
    ]


def test_a_long_discarded_text_is_quoted_by_its_start() -> None:
    out = show(Renderer(), START, text("x" * 50 + "\nmore"), retrying(True), retried(), END)
    assert "from “" + "x" * 30 + "…” is discarded" in out


def test_a_retry_before_any_text_is_a_progress_line_once() -> None:
    connect = show(Renderer(), START, retrying(False, 5.2, "503 UNAVAILABLE"), retried("503 UNAVAILABLE"), text("ok"), END)
    assert connect == "(retrying in 5.2s: 503 UNAVAILABLE)\nok\n"
    mid = show(Renderer(), START, retrying(True, 2.0, "NO_RESPONSE_TEXT"), retried("NO_RESPONSE_TEXT"), text("ok"), END)
    assert mid == "(retrying in 2s: NO_RESPONSE_TEXT)\nok\n"


def test_text_of_an_earlier_response_is_not_marked() -> None:
    """After a tool batch, only the new response's text is the attempt's."""
    settled = BatchSettled(session_id=S, batch_id="b", calls=())
    out = show(Renderer(), START, text("Looking.\n"), settled, retrying(True), retried(), text("Done."), END)
    assert out == "Looking.\n(retrying in 1s: ECONNRESET)\nDone.\n"
