"""Gemini CLI's ``stripShellWrapper`` and ``escapeShellArg`` (``shell-utils.ts``), shared
by the policy, the shell tool and the hook runner."""

from __future__ import annotations

import subprocess

import pytest
from hypothesis import given
from hypothesis import strategies as st

from actors.common import escape_shell_arg, strip_shell_wrapper


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ('sh -c "ls -l"', "ls -l"),
        ('  bash  -c  "ls -l"  ', "ls -l"),
        ("zsh -c ls -l", "ls -l"),
        ('cmd.exe /c "dir"', "dir"),
        ('powershell.exe -NoProfile -Command "Get-ChildItem"', "Get-ChildItem"),
        ('pwsh -Command "Get-ChildItem"', "Get-ChildItem"),
        ("ls -l", "ls -l"),
        ('bash -c "hg commit -m \\"title\n\nbody\\""', 'hg commit -m "title\n\nbody"'),
        ("/bin/bash -c 'rm x'", "rm x"),
        ('bash -c "echo hi && echo \\"q\\""', 'echo hi && echo "q"'),
        ("sh -c 'echo $0'", "echo $0"),
        ("/bin/zsh -c   ls  ", "ls"),
        ('bash -c "a" "b"', 'a" "b'),
        ('bash -c "echo ${HOME}"', "echo $HOME"),
        ("  ls -la  ", "ls -la"),
        ("bashful -c x", "bashful -c x"),
    ],
)
def test_strip_shell_wrapper(command: str, expected: str) -> None:
    assert strip_shell_wrapper(command) == expected


def test_strip_shell_wrapper_trims_as_javascript_does() -> None:
    # Gemini trims with String.prototype.trim: U+FEFF goes, U+001C..U+001F stay. The
    # policy's copy used str.strip, so a rule could see a different command than ran.
    assert strip_shell_wrapper("ls\ufeff") == "ls"
    assert strip_shell_wrapper('bash -c "ls"\ufeff') == "ls"
    assert strip_shell_wrapper("\x1cls -l\x1f") == "\x1cls -l\x1f"
    assert strip_shell_wrapper("bash -c ls\x1f") == "ls\x1f"
    # and its pattern's \s is JavaScript's
    assert strip_shell_wrapper("bash -c\ufeffls") == "ls"
    assert strip_shell_wrapper("bash\x1c-c ls") == "bash\x1c-c ls"


def test_strip_shell_wrapper_keeps_the_quotes_text_when_shell_quote_refuses_it() -> None:
    # shell-quote's parse throws "Bad substitution" on ${}; Gemini then drops only the
    # outer quotes. The policy's copy turned ${} into $.
    assert strip_shell_wrapper('bash -c "echo ${}"') == "echo ${}"
    assert strip_shell_wrapper('bash -c "echo ${x"') == "echo ${x"


@pytest.mark.parametrize(
    ("arg", "expected"),
    [
        # Outputs of escapeShellArg(arg, 'bash') in Gemini CLI 0.61.0 (shell-quote's
        # quote as bundled there), checked with node on its bundle.
        ("", ""),
        ("plain-word_1.txt", "plain-word_1.txt"),
        ("/tmp/plans dir", "'/tmp/plans dir'"),
        ('say "hi"', "'say \"hi\"'"),
        ("C:\\x", "'C:\\x'"),
        ("a:b", "a\\:b"),
        ("$HOME", "\\$HOME"),
        ("it's", '"it\'s"'),
        ("it's $x `y`", '"it\'s \\$x \\`y\\`"'),
        # Where the hook runner's copy differed: it single-quoted a value holding both
        # ' and ! (Gemini escapes the ! in double quotes) and escaped ~ (Gemini does not).
        ("it's!", '"it\'s\\!"'),
        ("~x", "~x"),
        # Where the shell tool's copy differed: Python's \s is not JavaScript's.
        ("\ufeff", "'\ufeff'"),
        ("a\x1cb", "a\x1cb"),
    ],
)
def test_escape_shell_arg_is_geminis(arg: str, expected: str) -> None:
    assert escape_shell_arg(arg) == expected


_ARGS = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
    min_size=1,
).filter(lambda v: not ("'" in v and "!" in v) and not v.startswith("~"))


@given(st.lists(_ARGS, min_size=1, max_size=20))
def test_escape_shell_arg_round_trips_through_bash(values: list[str]) -> None:
    # Gemini's two faults aside (a ! next to a ', a leading ~), bash reads back the value.
    script = "printf '%s\\0' " + " ".join(escape_shell_arg(v) for v in values)
    out = subprocess.run(["bash", "-c", script], capture_output=True, check=True).stdout
    assert out.decode("utf-8", "surrogateescape").split("\0")[:-1] == values


def test_escape_shell_arg_keeps_geminis_faults_in_bash() -> None:
    script = "printf '%s\\0' " + escape_shell_arg("it's!") + " " + escape_shell_arg("~")
    out = subprocess.run(
        ["bash", "-c", script], capture_output=True, check=True, env={"HOME": "/home/h"}
    ).stdout
    assert out.split(b"\0")[:-1] == [b"it's\\!", b"/home/h"]


def test_a_variable_name_of_one_symbol_swallows_the_next_character() -> None:
    """shell-quote's ``$@`` reading, which ``stripShellWrapper`` inherits (Gemini CLI 0.61.0
    gives ``echo $@``)."""
    assert strip_shell_wrapper('bash -c "echo $@x"') == "echo $@"
