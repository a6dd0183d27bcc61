"""Bash command lines read through tree-sitter-bash, as Gemini CLI's ``shell-utils`` reads
them (``parseBashCommandDetails``, ``splitCommands``, ``getCommandRoots``,
``hasRedirection``). Expected values are Gemini CLI 0.61.0's own answers."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from actors.common import (
    REDIRECTION_NAMES,
    command_roots,
    has_redirection,
    parse_command_details,
    split_commands,
)


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("ls -l", ["ls"]),
        ("/usr/local/bin/node script.js", ["/usr/local/bin/node"]),
        ("", []),
        ("a;b|c&&d||e&f", ["a", "b", "c", "d", "e", "f"]),
        ('echo "hello" && git commit -m "feat"', ["echo", "git"]),
        ("echo $(badCommand --danger)", ["echo", "badCommand"]),
        ("echo `badCommand --danger`", ["echo", "badCommand"]),
        ('echo "${var1=aa\\140 env| ls -l\\140}${var1@P}"', []),
        ("echo ${foo@P}", []),
        ("cat < input.txt", ["cat"]),
        ("exec 3<&0", ["exec"]),
        ("f() { ls; }", ["ls"]),
        ('for f in *.txt; do cat "$f"; done', ["cat"]),
        ("case $x in a) ls;; b|c) pwd;; esac", ["ls", "pwd"]),
        ("while read l; do echo $l; done < f", ["read", "echo"]),
        ("! grep -q x f || echo missing", ["grep", "echo"]),
        ("'my cmd' arg", ["my cmd"]),
        ("ls # comment && rm", ["ls"]),
        ("declare -x A=1 && unset A", ["declare", "unset"]),
        ("[ -f y ] && [[ -d z ]]", ["[", "[["]),
        # Gemini's grammar names an arithmetic command after its first token.
        ("((i++))", ["(("]),
        ("ls && ((i++))", ["ls", "(("]),
    ],
)
def test_command_roots(command: str, expected: list[str]) -> None:
    assert command_roots(command) == expected


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("ls -l && git status", ["ls -l", "git status"]),
        ('echo "hello" > file.txt', ['echo "hello"']),
        ('printf "test" >> log.txt', ['printf "test"']),
        ("cat < input.txt", ["cat"]),
        ("cat << EOF\nhello\nEOF", ["cat"]),
        ('grep "foo" <<< "foobar"', ['grep "foo" <<< "foobar"']),
        ('echo "foo" > >(cat)', ['echo "foo"', "cat"]),
        ("cat <<EOF\n$(rm -rf x)\nEOF\necho done", ["cat", "rm -rf x", "echo done"]),
        ("cat <<'EOF'\n$(rm -rf x)\nEOF", ["cat"]),
        ("x=1 y=$(id) env", ["x=1 y=$(id) env", "id"]),
        ("ls \\\n  -la", ["ls \\\n  -la"]),
        ("echo `id`", ["echo `id`", "id"]),
        # Lines the hand-written parser refused and Gemini's grammar reads as commands.
        ("ls ;; ls", ["ls", "ls"]),
        ("fi", ["fi"]),
        ("}", ["}"]),
        ("git (status|log)", ["git (status|log)", "status", "log"]),
    ],
)
def test_split_commands(command: str, expected: list[str]) -> None:
    assert split_commands(command) == expected


@pytest.mark.parametrize(
    "command",
    [
        "echo 'x",
        'echo "x',
        "ls &&",
        "| ls",
        "echo (",
        "ls )",
        "if true; then ls",
        "echo $(ls",
        "echo `ls",
        "FOO=bar",
        "{ }",
        "( )",
        # Lines the hand-written parser read as a command and Gemini's grammar refuses.
        "{}",
        "--output=x",
        "[[rule]]",
        "\0",
    ],
)
def test_syntax_errors(command: str) -> None:
    parsed = parse_command_details(command)
    assert parsed is not None and parsed.has_error
    assert split_commands(command) == []


def test_backticks_are_command_substitutions() -> None:
    """The grammar has no backtick node: Gemini's "backtick substitution" never occurs."""
    parsed = parse_command_details("echo `id`")
    assert parsed is not None
    assert [d.name for d in parsed.details] == ["echo", "command substitution", "id"]
    assert [d.start for d in parsed.details] == [0, 5, 6]


def test_details_are_in_source_order_outer_first() -> None:
    parsed = parse_command_details("(cd x && ls) > out")
    assert parsed is not None and not parsed.has_error
    assert [(d.name, d.text) for d in parsed.details] == [
        ("subshell", "(cd x && ls)"),
        ("cd", "cd x"),
        ("ls", "ls"),
        ("redirection (>)", "> out"),
    ]


def test_positions_count_characters() -> None:
    parsed = parse_command_details("echo é && ls")
    assert parsed is not None
    assert [(d.name, d.start) for d in parsed.details] == [("echo", 0), ("ls", 10)]
    parsed = parse_command_details("echo 😀 日本 && ls")
    assert parsed is not None
    assert [(d.name, d.start, d.text) for d in parsed.details] == [
        ("echo", 0, "echo 😀 日本"),
        ("ls", 13, "ls"),
    ]


def test_blank_command_does_not_parse() -> None:
    assert parse_command_details("   ") is None
    assert parse_command_details("\ufeff") is None  # JavaScript's trim removes U+FEFF


def test_a_parse_past_the_timeout_is_no_parse() -> None:
    """Gemini gives up after a second and trusts no partial tree."""
    command = "echo a; " * 5000
    assert parse_command_details(command, timeout_s=0.0) is None
    assert parse_command_details(command) is not None


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("echo hello > world", True),
        ("cat < input", True),
        ("ls 2> error.log", True),
        ("exec 3<&0", True),
        ("echo hello >> world", True),
        ("cat <<EOF\nhello\nEOF", True),
        ('cat <<< "hello"', True),
        ("ls &> all.log", True),
        ("echo $(cat < f)", True),
        ("ls -la", False),
        ("echo hello | cat", False),
        ('echo "a > b"', False),
        ("echo 'a < b'", False),
        ("diff <(ls) <(ls -a)", False),
        # A broken line is judged by its tree (the engine refuses it anyway: it does not
        # parse): a dangling ">" is an error node, not a redirection.
        ("echo hi > ", False),
        ("ab $()`'\"\\;&|<>{}[]#\n=!", False),
    ],
)
def test_has_redirection(command: str, expected: bool) -> None:
    assert has_redirection(command) is expected


def test_the_grammar_loads_on_first_use() -> None:
    """Importing the leaf helpers (every actor does) must not load tree-sitter."""
    code = (
        "import sys, actors.common, actors.scheduler\n"
        "assert 'tree_sitter' not in sys.modules\n"
        "actors.common.split_commands('ls')\n"
        "assert 'tree_sitter_bash' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


@given(st.text(alphabet=st.sampled_from(list("ab $()`'\"\\;&|<>{}[]#\n=!@P")), max_size=30))
def test_parser_never_crashes(command: str) -> None:
    parsed = parse_command_details(command)
    if parsed is not None:
        starts = [d.start for d in parsed.details]
        assert starts == sorted(starts)
        for detail in parsed.details:
            assert detail.text.strip() == detail.text
            assert detail.text in command
    assert all(name not in REDIRECTION_NAMES for name in command_roots(command))
    has_redirection(command)
    split_commands(command)
