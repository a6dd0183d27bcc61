"""The policy engine on shell commands: command heuristics, sub-commands as Gemini CLI's
bash grammar splits them, plus property tests of the engine. (The parsing itself:
``tests/common/test_bash.py``.)"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from actors.common import compile_js_regex
from actors.scheduler._command_safety import is_dangerous_command, is_known_safe_command
from actors.scheduler._policy import PolicyEngine
from actors.scheduler._policy_args import build_args_patterns, stable_stringify
from actors.scheduler._policy_rules import Rule

SHELL = "run_shell_command"


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
        (["bash", "-c", "ls ${}"], False, False),  # shell-quote cannot read it
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


def _prefix_rules(*prefixes: str) -> list[Rule]:
    rules = []
    for prefix in prefixes:
        source = build_args_patterns(None, prefix, None)[0] or ""
        rules.append(
            Rule(
                tool_name=SHELL,
                decision="allow",
                priority=4.3,
                args_pattern=compile_js_regex(source),
                args_pattern_source=source,
            )
        )
    return rules


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        # Gemini's grammar names an arithmetic command "((": a sub-command no rule allows.
        ("ls && ((i++))", "deny"),
        ("ls; ((x=1)) && echo ok", "deny"),
        ("ls ;; ls", "allow"),
        ("ls && echo $((1+2))", "allow"),
        ("git (status|log)", "deny"),
    ],
)
def test_sub_commands_as_gemini_splits_them(command: str, expected: str) -> None:
    """Decisions of Gemini CLI 0.61.0 with ``ls``, ``echo`` and ``git`` allowed by prefix,
    headless: every sub-command the bash grammar finds is checked on its own."""
    engine = PolicyEngine(_prefix_rules("ls", "echo", "git"), interactive=False)
    assert engine.check(SHELL, {"command": command}).decision == expected


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("fi", "allow"),
        ("}", "allow"),
        ("{}", "ask_user"),
        ("--output=x", "ask_user"),
        ("[[rule]]", "ask_user"),
    ],
)
def test_what_does_not_parse_falls_back_to_the_default(command: str, expected: str) -> None:
    """A shell allowed outright (interactive): Gemini CLI 0.61.0 asks exactly when its bash
    grammar finds a syntax error (``{}``), and runs what it reads as a command (``fi``)."""
    engine = PolicyEngine([Rule(tool_name=SHELL, decision="allow", priority=1.5)])
    assert engine.check(SHELL, {"command": command}).decision == expected


@pytest.mark.parametrize("command", ["cat f ${}", "ls ${}", "sed -n 5p ${}"])
def test_unreadable_words_are_not_known_safe(command: str) -> None:
    """shell-quote refuses ``${}``: Gemini CLI 0.61.0 skips its heuristics, so a read-only
    command is not let through without the question it would otherwise skip."""
    assert PolicyEngine().check(SHELL, {"command": command}).decision == "ask_user"


@pytest.mark.parametrize("command", ["rm -rf x; echo ${}", 'rm -rf "${}" x'])
def test_unreadable_words_still_ask_for_dangerous_commands(command: str) -> None:
    """Deliberate difference (docs/differences.md): Gemini skips the dangerous-command check
    too and allows these under a shell-wide allow; bash runs the ``rm`` before it fails
    on ``${}``."""
    engine = PolicyEngine([Rule(tool_name=SHELL, decision="allow", priority=1.5)])
    assert engine.check(SHELL, {"command": command}).decision == "ask_user"
