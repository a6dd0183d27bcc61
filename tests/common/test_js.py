"""JavaScript semantics of the leaf helpers, pinned to what Node computes."""

from __future__ import annotations

import pytest

from actors.common import (
    js_json,
    js_number,
    js_parse_int,
    js_round,
    js_to_fixed,
    js_trim,
    js_trim_end,
    js_trim_start,
    utf16_len,
)


def test_js_json_matches_json_stringify() -> None:
    assert js_json({"a": 1.0, "b": [1.5, "é"], "c": None}) == '{"a":1,"b":[1.5,"é"],"c":null}'
    assert (
        js_json({"a": 1.0, "b": [0.5, float("nan")], "c": "é\u2028"})
        == '{"a":1,"b":[0.5,null],"c":"é\u2028"}'
    )
    assert js_json({"a": {}}, indent=2) == '{\n  "a": {}\n}'


def test_js_json_writes_nan_and_infinities_as_null() -> None:
    # JSON.stringify([NaN, Infinity, -Infinity]) === '[null,null,null]'; the loop
    # detector's and the turn's copies wrote NaN/Infinity, which is not JSON at all.
    assert js_json([float("nan"), float("inf"), float("-inf")]) == "[null,null,null]"
    assert js_json({"x": float("nan")}, indent=2) == '{\n  "x": null\n}'


def test_js_json_writes_numbers_as_javascript_does() -> None:
    # JSON.stringify(2 ** 60) === '1152921504606847000' (shortest digits, padded), and
    # JSON.stringify(1e-7) === '1e-7'; the copies wrote 1.152921504606847e+18 (hooks) or
    # 1152921504606846976 (loops, turn), and 1e-07 (all three).
    assert js_json(2.0**60) == "1152921504606847000"
    assert js_json(2**60) == "1152921504606847000"  # a JSON integer is a double in JS
    assert js_json([10**400, True, 3]) == "[null,true,3]"
    assert js_json(1e20) == "100000000000000000000"
    assert js_json(-0.0) == "0"
    assert js_json(1e21) == "1e+21"
    assert js_json({"a": [1e-7, 0.00001, "x"], "b": True}) == '{"a":[1e-7,0.00001,"x"],"b":true}'
    assert js_json({"a": [1e-7], "b": {}}, indent=2) == '{\n  "a": [\n    1e-7\n  ],\n  "b": {}\n}'


def test_utf16_len_counts_code_units() -> None:
    assert utf16_len("abc") == 3
    assert utf16_len("a\U0001f600b") == 4
    assert utf16_len("é") == 1
    assert utf16_len("\ud800") == 1  # a lone surrogate is one unit


def test_js_trim_uses_javascript_whitespace() -> None:
    # String.prototype.trim removes U+FEFF and keeps U+001C..U+001F, unlike str.strip.
    assert js_trim("\ufeff ls \u3000") == "ls"
    assert js_trim("\x1cls\x1f") == "\x1cls\x1f"
    assert js_trim_start("\u00a0a ") == "a "
    assert js_trim_end(" a\u2028") == " a"


def test_js_round_matches_math_round() -> None:
    assert [js_round(x) for x in (2.5, -2.5, 0.5, -0.5, 1.4, -1.6)] == [3, -2, 1, 0, 1, -2]
    # Math.round(0.49999999999999994) === 0, where floor(x + 0.5) gives 1.
    assert js_round(0.49999999999999994) == 0


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (5000.0, "5000"),
        (0.5, "0.5"),
        (1e-7, "1e-7"),  # Python writes 1e-07
        (1 / (1024 * 1024), "9.5367431640625e-7"),
        (0.000001, "0.000001"),
        (1.5e21, "1.5e+21"),
        (2.0**60, "1152921504606847000"),
        (-0.0, "0"),
        (float("nan"), "NaN"),
        (float("-inf"), "-Infinity"),
        (7, "7"),
    ],
)
def test_js_number_matches_string_of_a_number(value: float, text: str) -> None:
    # The hook runner's copy wrote Python's repr for non-integers (1e-07).
    assert js_number(value) == text


@pytest.mark.parametrize(
    ("value", "digits", "text"),
    [
        (0.25, 1, "0.3"),  # a true tie: away from zero
        (1.005, 2, "1.00"),  # 1.005 is stored as 1.00499...
        (2.5, 0, "3"),
        (-0.25, 1, "-0.3"),
        (-0.0, 1, "0.0"),
        (-0.04, 1, "-0.0"),
        (0.5, 1, "0.5"),
        (10.0, 2, "10.00"),
        (1e21, 2, "1e+21"),
    ],
)
def test_js_to_fixed_matches_number_to_fixed(value: float, digits: int, text: str) -> None:
    assert js_to_fixed(value, digits) == text


@pytest.mark.parametrize(
    ("text", "value"),
    [
        # parseInt(text, 10) in Node (null for NaN). The shell environment's and the
        # session list's copies read Unicode digits and Python's whitespace.
        ("  42abc", 42),
        (" +5 ", 5),
        ("\u00a012", 12),
        ("\ufeff-3", -3),
        ("1e3", 1),
        ("0x1f", 0),
        ("", None),
        ("x1", None),
        ("\u0661\u0662", None),
        ("\x1c7", None),
    ],
)
def test_js_parse_int_matches_parse_int(text: str, value: int | None) -> None:
    assert js_parse_int(text) == value
