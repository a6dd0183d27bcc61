"""JavaScript regexes on Python's ``re``: expectations are what node's ``RegExp`` does.

The policy engine and grep had a translator each; each got some of these wrong (the
policy's took ``(?i)`` and ``[\\8]`` as Python reads them and answered errors in
Python's words; grep's let ``$`` match before a final newline, ``.`` match ``\\r``,
``\\s`` miss U+FEFF and ``\\d`` match Arabic digits).
"""

from __future__ import annotations

import re

import pytest

from actors.common import JsRegexError, compile_js_regex


@pytest.mark.parametrize(
    ("source", "text", "expected"),
    [
        ("^abc$", "abc\n", False),  # JS $ is end of input only
        ("a.c", "a\rc", False),  # JS . excludes \r
        ("a.c", "a\u2028c", False),  # ... and the other line terminators
        ("a\\sb", "a\u00a0b", True),  # JS \s is Unicode
        ("a\\sb", "a\ufeffb", True),
        ("a\\sb", "a\x1cb", False),
        ("a[\\s]b", "a\ufeffb", True),
        ("a\\Sb", "a\ufeffb", False),
        ("\\Aa", "Aa", True),  # identity escape in JS
        ("x{,2}", "x{,2}", True),  # not a quantifier in JS
        ("(?<n>a)\\k<n>", "aa", True),
        ("[^]", "\n", True),
        ("x[]", "x", False),
        ("\\d+", "١٢", False),  # JS \d is ASCII
        ("[\\d]", "١", False),
        ("\\w", "é", False),
        ("[\\w]", "é", False),
        ("a\\b", "aé", True),  # JS \b is ASCII too: é is not a word character
        ("a\\B", "aé", False),
        ("[[a]", "[", True),
        ("\\/x", "/x", True),
        ("\\q\\/", "q/", True),
        ("\\cJ", "\n", True),
        ("[\\8]", "8", True),  # Annex B: \8 in a class is 8
        ("[\\b]", "\b", True),
    ],
)
def test_javascript_regex_semantics(source: str, text: str, expected: bool) -> None:
    assert (compile_js_regex(source).search(text) is not None) is expected


def test_ignore_case_folds_as_javascript_does() -> None:
    assert compile_js_regex("ABC", ignore_case=True).fullmatch("abc")
    assert compile_js_regex("é", ignore_case=True).fullmatch("É")


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("a)", "Invalid regular expression: /a)/: Unmatched ')'"),
        ("(", "Invalid regular expression: /(/: Unterminated group"),
        ("[a", "Invalid regular expression: /[a/: Unterminated character class"),
        ("(?i)a", "Invalid regular expression: /(?i)a/: Invalid group"),
        ("(?P<n>a)", "Invalid regular expression: /(?P<n>a)/: Invalid group"),
        ("*", "Invalid regular expression: /*/: Nothing to repeat"),
    ],
)
def test_patterns_v8_refuses_are_refused_in_its_words(source: str, message: str) -> None:
    with pytest.raises(JsRegexError, match=re.escape(message)):
        compile_js_regex(source)


def test_the_error_is_a_re_error() -> None:
    # The policy engine reports any re.error as an ignored rule.
    with pytest.raises(re.error):
        compile_js_regex("(")
