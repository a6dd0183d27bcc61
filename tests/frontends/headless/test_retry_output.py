"""Headless output through retries, without a process: the text a retried stream shows
(``RetriedText``, then ``HeadlessPrinter`` in each format) and the stderr line of a
connection-layer retry."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from actors.frontends.headless._output import HeadlessPrinter
from actors.frontends.headless._retried_text import RetriedText
from actors.gateway import retry_notice
from bus.messages import (
    GenerateRequest,
    Message,
    ModelRetrying,
    StreamRetried,
    TextStreamed,
    TurnEnded,
)

S, T = "s", "t"


def pieces(text: str, cuts: list[int]) -> list[str]:
    at = sorted({c % (len(text) + 1) for c in cuts} | {0, len(text)})
    return [text[a:b] for a, b in zip(at, at[1:], strict=False) if b > a]


def what_a_reader_keeps(attempts: list[list[str]]) -> tuple[str, bool]:
    """Feed attempts (each a list of text pieces; all but the last fail), as a reader
    that drops what it has on ``diverged`` would: (the text it ends with, diverged?)."""
    r = RetriedText()
    kept, diverged = "", False
    for i, attempt in enumerate(attempts):
        if i:
            r.retry()
        for piece in attempt:
            shown = r.feed(piece)
            if shown is not None:
                if shown.diverged:
                    kept, diverged = "", True
                kept += shown.text
    end = r.end()
    if end is not None:
        assert end.diverged
        kept, diverged = end.text, True
    return kept, diverged


@given(
    st.lists(st.text(max_size=12), min_size=1, max_size=4),
    st.lists(st.lists(st.integers(0, 20), max_size=4), min_size=4, max_size=4),
)
def test_the_reader_ends_with_the_last_attempts_text(texts: list[str], cuts: list[list[int]]) -> None:
    attempts = [pieces(t, c) for t, c in zip(texts, cuts, strict=False)]
    final = texts[-1]
    kept, _ = what_a_reader_keeps(attempts)
    assert kept == final


@given(st.text(min_size=1, max_size=20), st.text(max_size=20), st.lists(st.integers(0, 40), max_size=5))
def test_a_retry_that_repeats_what_was_shown_shows_only_the_rest(partial: str, rest: str, cuts: list[int]) -> None:
    final = partial + rest
    r = RetriedText()
    out = [s for p in pieces(partial, cuts) if (s := r.feed(p)) is not None]
    r.retry()
    out += [s for p in pieces(final, cuts) if (s := r.feed(p)) is not None]
    assert r.end() is None
    assert not any(s.diverged for s in out)
    assert "".join(s.text for s in out) == final  # each character once


def test_a_retry_that_stops_short_of_what_was_shown_diverges_at_the_end() -> None:
    assert what_a_reader_keeps([["Alpha ", "Beta"], ["Alpha"]]) == ("Alpha", True)
    assert what_a_reader_keeps([["Alpha "], []]) == ("", True)


# -- the printer -----------------------------------------------------------------------------
def printer(fmt: str) -> tuple[HeadlessPrinter, io.StringIO, io.StringIO]:
    out, err = io.StringIO(), io.StringIO()
    p = HeadlessPrinter(fmt, out, err, session_id=S, requested_model="m", clock_ms=lambda: 0.0, max_attempts=10)
    return p, out, err


def request(rid: str) -> GenerateRequest:
    return GenerateRequest(session_id=S, request_id=rid, reply_to="turn", method="generateContentStream", model="m", contents=())


def text(t: str) -> TextStreamed:
    return TextStreamed(session_id=S, turn_id=T, text=t)


RETRIED = StreamRetried(session_id=S, turn_id=T, attempt=1, reason="ECONNRESET")
END = TurnEnded(session_id=S, turn_id=T, stop_reason="end_turn")


def run(fmt: str, *msgs: Message) -> tuple[str, str]:
    p, out, err = printer(fmt)
    p.start()
    for m in msgs:
        p.on(m)
        if isinstance(m, TurnEnded):
            p.finish(m)
    return out.getvalue(), err.getvalue()


def deltas(stdout: str) -> list[Any]:
    events = [json.loads(line) for line in stdout.splitlines()]
    return [e["content"] if e["type"] == "message" else (e["type"], e["severity"]) for e in events if e["type"] in ("message", "error")]


@pytest.mark.parametrize("fmt", ["text", "json", "stream-json"])
def test_a_connection_retry_without_a_status_is_one_line_on_stderr(fmt: str) -> None:
    retrying = ModelRetrying(session_id=S, request_id="r1", attempt=1, delay_s=4.61, reason="ECONNREFUSED")
    out, err = run(fmt, request("r1"), retrying, text("ok"), END)
    assert err == "Attempt 1 failed. Retrying with backoff... (ECONNREFUSED; attempt 2 of 10 in 4.6s)\n"
    assert "Attempt" not in out


def test_a_mid_stream_retry_says_nothing_on_stderr_by_itself() -> None:
    retrying = ModelRetrying(session_id=S, request_id="r1", attempt=1, delay_s=1.0, reason="ECONNRESET", mid_stream=True)
    out, err = run("text", request("r1"), text("Alpha "), retrying, RETRIED, text("Alpha "), text("Beta."), END)
    assert (out, err) == ("Alpha Beta.\n", "")


def test_a_retry_that_stops_short_is_announced_before_the_turn_ends() -> None:
    msgs = (request("r1"), text("Alpha "), text("Beta"), RETRIED, text("Alpha"), END)
    stream = deltas(run("stream-json", *msgs)[0])
    assert stream == ["Alpha ", "Beta", ("error", "warning"), "Alpha"]
    doc = json.loads(run("json", *msgs)[0])
    assert doc["response"] == "Alpha"


def test_json_keeps_the_earlier_responses_of_the_turn() -> None:
    """Only the retried response's text is replaced, not the text before it."""
    msgs = (request("r1"), text("First. "), request("r2"), text("Alpha "), RETRIED, text("Gamma."), END)
    assert json.loads(run("json", *msgs)[0])["response"] == "First. Gamma."


def test_the_notice_text() -> None:
    assert retry_notice(3, 20.04, "503 UNAVAILABLE", max_attempts=10) == (
        "Attempt 3 failed with status 503. Retrying with backoff... (503 UNAVAILABLE; attempt 4 of 10 in 20.0s)"
    )
    assert retry_notice(1, 5, "ETIMEDOUT").endswith("(ETIMEDOUT; attempt 2 in 5.0s)")


def test_a_subagents_connection_retry_is_announced_too() -> None:
    """Gemini CLI's warning comes from every retried call of the process."""
    p, out, err = printer("stream-json")
    p.on_descendant(ModelRetrying(session_id="child", request_id="c1", attempt=2, delay_s=10.0, reason="429 RESOURCE_EXHAUSTED"))
    p.on_descendant(ModelRetrying(session_id="child", request_id="c1", attempt=1, delay_s=1.0, reason="ECONNRESET", mid_stream=True))
    assert err.getvalue() == (
        "Attempt 2 failed with status 429. Retrying with backoff... (429 RESOURCE_EXHAUSTED; attempt 3 of 10 in 10.0s)\n"
    )
    assert out.getvalue() == ""
