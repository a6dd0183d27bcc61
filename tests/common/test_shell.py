"""Gemini CLI's ``stripShellWrapper`` (``shell-utils.ts``), shared by the policy and the shell tool."""

from __future__ import annotations

import pytest

from actors.common import strip_shell_wrapper


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
