"""JavaScript semantics of the leaf helpers, pinned to what Node computes."""

from __future__ import annotations

from actors.common import js_json, js_round, js_trim, js_trim_end, js_trim_start, utf16_len


def test_js_json_matches_json_stringify() -> None:
    assert js_json({"a": 1.0, "b": [1.5, "é"], "c": None}) == '{"a":1,"b":[1.5,"é"],"c":null}'
    assert js_json({"a": 1.0, "b": [0.5, float("nan")], "c": "é\u2028"}) == '{"a":1,"b":[0.5,null],"c":"é\u2028"}'
    assert js_json({"a": {}}, indent=2) == '{\n  "a": {}\n}'


def test_js_json_writes_nan_and_infinities_as_null() -> None:
    # JSON.stringify([NaN, Infinity, -Infinity]) === '[null,null,null]'; the loop
    # detector's and the turn's copies wrote NaN/Infinity, which is not JSON at all.
    assert js_json([float("nan"), float("inf"), float("-inf")]) == "[null,null,null]"
    assert js_json({"x": float("nan")}, indent=2) == '{\n  "x": null\n}'


def test_js_json_writes_integral_numbers_below_1e21_in_full() -> None:
    # JSON.stringify(2 ** 60) === '1152921504606846976' and JSON.stringify(-0) === '0';
    # the hooks' copy stopped at 2 ** 53 and wrote 1.152921504606847e+18.
    assert js_json(2.0**60) == "1152921504606846976"
    assert js_json(1e20) == "100000000000000000000"
    assert js_json(-0.0) == "0"
    assert js_json(1e21) == "1e+21"


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
