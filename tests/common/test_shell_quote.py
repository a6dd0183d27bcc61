"""shell-quote's ``parse`` (1.8.3), the hand-written port Gemini CLI's word reading needs.
Expected values are the npm package's own answers (as Gemini CLI 0.61.0 bundles it)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from actors.common import (
    ShellComment,
    ShellEntry,
    ShellGlob,
    ShellOp,
    ShellQuoteError,
    shell_quote_parse,
    shell_words,
)


def dollar(key: str) -> str:
    return "$" + key


@pytest.mark.parametrize(
    ("text", "plain", "with_env"),
    [
        ("git  status", ["git", "status"], ["git", "status"]),
        ("a && b", ["a", ShellOp("&&"), "b"], ["a", ShellOp("&&"), "b"]),
        ("cat f |& wc", ["cat", "f", ShellOp("|&"), "wc"], ["cat", "f", ShellOp("|&"), "wc"]),
        ("x<(y)", ["x", ShellOp("<("), "y", ShellOp(")")], ["x", ShellOp("<("), "y", ShellOp(")")]),
        ("rm -rf *.txt", ["rm", "-rf", ShellGlob("*.txt")], ["rm", "-rf", ShellGlob("*.txt")]),
        ("a#b c", ["a", ShellComment("b c")], ["a", ShellComment("b c")]),
        (
            "echo $HOME/x \"$USER\" '$Q'",
            ["echo", "/x", "", "$Q"],
            ["echo", "$HOME/x", "$USER", "$Q"],
        ),
        ("ls $", ["ls", "$"], ["ls", "$"]),
        # $@ and its kin swallow the character after them (shell-quote's own slip).
        ("echo $@x", ["echo", ""], ["echo", "$@"]),
        ('echo "a\\" ;x"', ["echo", 'a" ;x'], ["echo", 'a" ;x']),
        ("\"a\"'b'c", ["abc"], ["abc"]),
    ],
)
def test_parse(text: str, plain: list[ShellEntry], with_env: list[ShellEntry]) -> None:
    assert shell_quote_parse(text) == plain
    assert shell_quote_parse(text, dollar) == with_env


@pytest.mark.parametrize(("text", "message"), [("ls ${}", "${}"), ('echo "${x"', 'x"')])
def test_bad_substitution(text: str, message: str) -> None:
    with pytest.raises(ShellQuoteError, match=f"^{re.escape('Bad substitution: ' + message)}$"):
        shell_quote_parse(text)
    assert shell_words(text, strict=False)[0] in ("ls", "echo")


def test_words_are_what_gemini_extracts() -> None:
    """Operators and glob patterns as their text, comments as ``""``."""
    assert shell_words("rm -rf *.txt && ls # x") == ["rm", "-rf", "*.txt", "&&", "ls", ""]


@given(st.text(alphabet=st.sampled_from(list("ab $()`'\"\\;&|<>{}#\n=!@*?_\t\ufeff")), max_size=30))
def test_never_fails_but_for_bad_substitutions(text: str) -> None:
    try:
        shell_quote_parse(text)
    except ShellQuoteError:
        shell_words(text, strict=False)
