"""Shell parsing used by the policy engine, plus property tests of the engine."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from actors.common import compile_js_regex
from actors.scheduler._policy import (
    PolicyEngine,
    Rule,
    build_args_patterns,
    has_redirection,
    is_dangerous_command,
    is_known_safe_command,
    parse_shell_command,
    split_commands,
    stable_stringify,
)

SHELL = "run_shell_command"


def roots(command: str) -> list[str]:
    parsed = parse_shell_command(command)
    if parsed is None or parsed.has_error:
        return []
    return [d.name for d in parsed.details if not d.name.startswith(("redir", "here"))]


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("ls -l", ["ls"]),
        ("/usr/local/bin/node script.js", ["/usr/local/bin/node"]),
        ("", []),
        ("a;b|c&&d||e&f", ["a", "b", "c", "d", "e", "f"]),
        ('echo "hello" && git commit -m "feat"', ["echo", "git"]),
        ("echo $(badCommand --danger)", ["echo", "command substitution", "badCommand"]),
        ("echo `badCommand --danger`", ["echo", "backtick substitution", "badCommand"]),
        ('echo "${var1=aa\\140 env| ls -l\\140}${var1@P}"', []),
        ("echo ${foo@P}", []),
        ("cat < input.txt", ["cat"]),
        ("exec 3<&0", ["exec"]),
        ("f() { ls; }", ["ls"]),
        ("for f in *.txt; do cat \"$f\"; done", ["cat"]),
        ("case $x in a) ls;; b|c) pwd;; esac", ["ls", "pwd"]),
        ("while read l; do echo $l; done < f", ["read", "echo"]),
        ("! grep -q x f || echo missing", ["grep", "echo"]),
        ("'my cmd' arg", ["my cmd"]),
        ("ls # comment && rm", ["ls"]),
    ],
)
def test_command_roots(command: str, expected: list[str]) -> None:
    assert roots(command) == expected


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
        "ls ;; ls",
        "echo (",
        "ls )",
        "if true; then ls",
        "echo $(ls",
        "echo `ls",
        "fi",
        "FOO=bar",
        "{ }",
        "( )",
    ],
)
def test_syntax_errors(command: str) -> None:
    parsed = parse_shell_command(command)
    assert parsed is not None and parsed.has_error


def test_blank_command_does_not_parse() -> None:
    assert parse_shell_command("   ") is None


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
    ],
)
def test_has_redirection(command: str, expected: bool) -> None:
    assert has_redirection(command) is expected


@pytest.mark.parametrize(
    ("args", "safe", "dangerous"),
    [
        (["ls", "-la"], True, False),
        (["git", "status"], True, False),
        (["git", "branch"], True, False),
        (["git", "branch", "-D", "x"], False, True),
        (["git", "log", "--output=x"], False, True),
        (["git", "push"], False, False),
        (["git", "-c", "a=b", "status"], False, True),
        (["rm", "-rf", "x"], False, True),
        (["rm", "x"], False, False),
        (["sudo", "rm", "-f", "x"], False, True),
        (["find", ".", "-name", "x"], True, False),
        (["find", ".", "-exec", "rm", "{}"], False, True),
        (["sed", "-n", "10p", "f"], True, False),
        (["sed", "-i", "s/a/b/", "f"], False, False),
        (["base64", "-o", "out"], False, True),
        (["rg", "x"], False, False),
        (["/usr/bin/rg", "x"], True, False),
        (["rg", "--pre", "cat", "x"], False, True),
        (["bash", "-c", "ls && pwd"], True, False),
        (["bash", "-c", "ls > x"], False, False),
        (["zsh", "-lc", "cat f"], True, False),
    ],
)
def test_command_safety(args: list[str], safe: bool, dangerous: bool) -> None:
    assert is_known_safe_command(args) is safe
    assert is_dangerous_command(args) is dangerous


# --------------------------------------------------------------------------- properties

TOOLS = ["alpha", "beta", "gamma"]
DECISIONS = ["allow", "deny", "ask_user"]


@st.composite
def rule_sets(draw: st.DrawFn) -> list[Rule]:
    count = draw(st.integers(min_value=0, max_value=8))
    rules = []
    for _ in range(count):
        rules.append(
            Rule(
                tool_name=draw(st.sampled_from([*TOOLS, "*"])),
                decision=draw(st.sampled_from(DECISIONS)),
                priority=draw(st.integers(min_value=1, max_value=5)) + draw(st.integers(0, 999)) / 1000,
                modes=draw(st.sampled_from([None, ("default",), ("yolo",)])),
                interactive=draw(st.sampled_from([None, True, False])),
            )
        )
    return rules


@given(rules=rule_sets(), tool=st.sampled_from(TOOLS), interactive=st.booleans())
def test_highest_priority_matching_rule_wins(rules: list[Rule], tool: str, interactive: bool) -> None:
    engine = PolicyEngine(rules, interactive=interactive)
    verdict = engine.check(tool, {"x": 1})
    matching = [
        r
        for r in rules
        if r.tool_name in (tool, "*")
        and (r.modes is None or "default" in r.modes)
        and (r.interactive is None or r.interactive == interactive)
    ]
    if not matching:
        assert verdict.rule is None
        assert verdict.decision == ("ask_user" if interactive else "deny")
        return
    best = max(r.priority for r in matching)
    winner = next(r for r in matching if r.priority == best)  # ties: first loaded wins
    assert verdict.rule is winner
    assert verdict.decision == winner.decision


WORDS = ["ls", "echo hi", "cat f", "rm -rf x", "git status", "make", "pwd"]
OPERATORS = [" && ", " || ", "; ", " | ", "\n"]


@given(
    parts=st.lists(st.sampled_from(WORDS), min_size=1, max_size=5),
    ops=st.lists(st.sampled_from(OPERATORS), min_size=4, max_size=4),
    interactive=st.booleans(),
    denied=st.sampled_from(WORDS),
)
def test_deny_in_any_sub_command_denies(
    parts: list[str], ops: list[str], interactive: bool, denied: str
) -> None:
    command = parts[0]
    for op, part in zip(ops, parts[1:], strict=False):
        command += op + part
    root = denied.split()[0]
    rules = [
        Rule(
            tool_name=SHELL,
            decision="deny",
            priority=2.0,
            args_pattern=compile_js_regex(build_args_patterns(None, root, None)[0] or ""),
        ),
        Rule(tool_name=SHELL, decision="allow", priority=1.0),
    ]
    verdict = PolicyEngine(rules, interactive=interactive).check(SHELL, {"command": command})
    if any(p.split()[0] == root for p in parts):
        assert verdict.decision == "deny"
    else:
        assert verdict.decision != "deny"


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=5), children, max_size=4),
    max_leaves=12,
)


@given(st.dictionaries(st.text(max_size=6), json_values, max_size=5))
def test_stable_stringify_is_json_with_sorted_keys(args: dict[str, Any]) -> None:
    text = stable_stringify(args)
    assert json.loads(text.replace("\0", "")) == args
    # Every top-level pair is NUL-delimited; NULs inside values are escaped.
    if args:
        assert text.count("\0") == 2 * len(args)
    shuffled = dict(reversed(list(args.items())))
    assert stable_stringify(shuffled) == text


@given(st.text(alphabet=st.sampled_from(list("ab $()`'\"\\;&|<>{}[]#\n=!")), max_size=30))
def test_parser_never_crashes(command: str) -> None:
    parsed = parse_shell_command(command)
    if parsed is not None and not parsed.has_error:
        for detail in parsed.details:
            assert detail.text.strip() == detail.text
            assert detail.text in command or "\\\n" in command
    has_redirection(command)
    split_commands(command)
