"""Gemini CLI's head-and-tail rendering of long texts (``formatTruncatedToolOutput``)."""

from __future__ import annotations

from actors.common import format_count, format_truncated_output, utf16_head, utf16_len, utf16_tail

EMOJI = "\U0001f600"


def test_utf16_lengths_and_slices_count_code_units() -> None:
    assert utf16_len("abc") == 3
    assert utf16_len(f"a{EMOJI}b") == 4
    assert utf16_head(f"ab{EMOJI}c", 3) == "ab\ufffd"  # half a pair: U+FFFD, one unit
    assert utf16_head(f"ab{EMOJI}c", 4) == f"ab{EMOJI}"
    assert utf16_tail(f"a{EMOJI}bc", 3) == "\ufffdbc"
    assert utf16_tail(f"a{EMOJI}bc", 4) == f"{EMOJI}bc"
    assert utf16_tail("abc", 10) == "abc"


def test_numbers_are_grouped_like_en_us_to_locale_string() -> None:
    assert format_count(8000) == "8,000"
    assert format_count(1960074) == "1,960,074"
    assert format_count(145) == "145"


def test_short_content_is_returned_unchanged() -> None:
    assert format_truncated_output("x" * 50, "/f.txt", 50) == "x" * 50


def test_head_is_20_percent_and_tail_80_percent() -> None:
    content = "".join(chr(ord("a") + i % 26) for i in range(120))
    out = format_truncated_output(content, "/tmp/o.txt", 50)
    assert out == (
        "Output too large. Showing first 10 and last 40 characters. "
        "For full output see: /tmp/o.txt\n"
        + content[:10]
        + "\n\n... [70 characters omitted] ...\n\n"
        + content[-40:]
    )


def test_lengths_are_javascript_lengths() -> None:
    # Recorded from gemini 0.61: 100 x, 10 emoji, threshold 50 -> 145 omitted.
    content = (
        "<untrusted_context>\nOutput: "
        + "x" * 100
        + EMOJI * 10
        + "\nProcess Group PGID: 18096\n</untrusted_context>"
    )
    assert format_truncated_output(content, "/o.txt", 50) == (
        "Output too large. Showing first 10 and last 40 characters. For full output see: "
        "/o.txt\n<untrusted\n\n... [145 characters omitted] ...\n\n"
        "s Group PGID: 18096\n</untrusted_context>"
    )


def test_a_zero_budget_shows_the_whole_text_as_tail() -> None:
    # Gemini slices the tail with content.slice(-tailChars), and slice(-0) is the whole
    # string; the tools' copy showed no tail at all (the turn's copy had it right).
    assert format_truncated_output("abcdef", "/o.txt", 0) == (
        "Output too large. Showing first 0 and last 0 characters. For full output see: "
        "/o.txt\n\n\n... [6 characters omitted] ...\n\nabcdef"
    )
