"""Unit tests of the policy engine (actors.scheduler._policy and its parts)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from actors.common import compile_js_regex
from actors.scheduler._policy import PolicyEngine
from actors.scheduler._policy_args import (
    build_args_patterns,
    escape_regex,
    is_safe_regexp,
    param_args_pattern,
    stable_stringify,
)
from actors.scheduler._policy_files import load_policy_file
from actors.scheduler._policy_messages import (
    confirmation_unsupported_message,
    policy_denial_message,
    tool_not_found_message,
)
from actors.scheduler._policy_rules import (
    BUILTIN_TOOL_NAMES,
    DEFAULT_POLICY_DIR,
    POLICY_DENIED_MESSAGE,
    PolicyFileError,
    PolicyVerdict,
    Rule,
    display_name,
    normalize_approval_mode,
)

SHELL = "run_shell_command"


def engine(
    mode: str = "default",
    *,
    interactive: bool = True,
    settings: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> PolicyEngine:
    built, warnings = PolicyEngine.build(
        approval_mode=mode, interactive=interactive, settings=settings or {}, **kwargs
    )
    assert warnings == []
    return built


def bare(rules: Sequence[Rule], **kwargs: Any) -> PolicyEngine:
    """An engine with only the given rules (no built-in policies)."""
    return PolicyEngine(rules, **kwargs)


def rule(tool: str, decision: Any, priority: float = 1.0, **kwargs: Any) -> Rule:
    pattern = kwargs.pop("pattern", None)
    prefix = kwargs.pop("prefix", None)
    if prefix is not None:
        pattern = build_args_patterns(None, prefix, None)[0]
    return Rule(
        tool_name=tool,
        decision=decision,
        priority=priority,
        args_pattern=compile_js_regex(pattern) if pattern else None,
        args_pattern_source=pattern,
        **kwargs,
    )


def sh(e: PolicyEngine, command: str, **kwargs: Any) -> str:
    return e.check(SHELL, {"command": command}, **kwargs).decision


def write_policy(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


# --------------------------------------------------------------------------- stringify


def test_stable_stringify_sorts_keys_and_wraps_top_level_pairs() -> None:
    assert stable_stringify({"b": 2, "a": {"d": 1, "c": [1, None]}}) == (
        '{\0"a":{"c":[1,null],"d":1}\0,\0"b":2\0}'
    )
    assert stable_stringify({}) == "{}"
    assert stable_stringify([{"a": 1}]) == '[{"a":1}]'
    assert stable_stringify({"a": True, "b": False, "c": None}) == (
        '{\0"a":true\0,\0"b":false\0,\0"c":null\0}'
    )
    # JavaScript sorts by UTF-16 code units: a character past U+FFFF (a surrogate pair,
    # D83D DE00) before U+FF01, which Python's code-point order puts after it.
    assert stable_stringify({"\uff01": 2, "\U0001f600": 1, "b": 3}) == (
        '{\0"b":3\0,\0"\U0001f600":1\0,\0"\uff01":2\0}'
    )


def test_stable_stringify_numbers_like_javascript() -> None:
    # Expected values produced by node's JSON.stringify.
    assert stable_stringify([1, 1.0, -0.0, 0.1, 1e21, 1e-7, 1.5e-6, 2**60, 1e20]) == (
        "[1,1,0,0.1,1e+21,1e-7,0.0000015,1152921504606847000,100000000000000000000]"
    )
    assert stable_stringify([float("nan"), float("inf"), -1.25e-10, 5e-324]) == (
        "[null,null,-1.25e-10,5e-324]"
    )


def test_stable_stringify_strings_like_javascript() -> None:
    value = 'a\x00b\x1f\x7f\u2028"\\\n\t\b\f/é😀'
    assert stable_stringify([value]) == (
        '["a\\u0000b\\u001f\x7f\u2028\\"\\\\\\n\\t\\b\\f/é😀"]'
    )
    assert stable_stringify(["\ud800"]) == '["\\ud800"]'


def test_stable_stringify_key_order_is_utf16() -> None:
    keys = ["b", "a", "B", "é", "😀", "\uffff", "_", "1", "10", "2"]
    text = stable_stringify({k: 0 for k in keys})
    order = [json.loads("{" + p.strip("\0") + "}").popitem()[0] for p in text[1:-1].split(",")]
    assert order == ["1", "10", "2", "B", "_", "a", "b", "é", "😀", "\uffff"]


def test_stable_stringify_circular() -> None:
    data: dict[str, Any] = {"a": 1}
    data["self"] = data
    assert stable_stringify(data) == '{\0"a":1\0,\0"self":"[Circular]"\0}'
    shared = {"x": 1}
    assert stable_stringify({"p": shared, "q": shared}) == '{\0"p":{"x":1}\0,\0"q":{"x":1}\0}'


# --------------------------------------------------------------------------- regexes


def test_command_prefix_pattern() -> None:
    [source] = build_args_patterns(None, "git status", None)
    assert source == '\\"command\\":\\"git\\ status(?:[\\s"]|\\\\")'
    pattern = compile_js_regex(source)
    assert pattern.search(stable_stringify({"command": "git status"}))
    assert pattern.search(stable_stringify({"command": "git status --short"}))
    assert not pattern.search(stable_stringify({"command": "git statusx"}))
    assert not pattern.search(stable_stringify({"command": "echo git status"}))
    quoted = compile_js_regex(build_args_patterns(None, 'echo "hi"', None)[0] or "")
    assert quoted.search(stable_stringify({"command": 'echo "hi" there'}))


def test_build_args_patterns_variants() -> None:
    assert build_args_patterns("x", None, None) == ["x"]
    assert build_args_patterns(None, None, "git (status|log)") == ['"command":"git (status|log)']
    assert build_args_patterns("x", [], None) == []  # an empty list is "given": no pattern
    assert len(build_args_patterns(None, ["a", "b"], None)) == 2
    assert build_args_patterns(None, "", None) == [None]


def test_escape_regex() -> None:
    assert escape_regex('a.b*"c" d-e') == 'a\\.b\\*\\"c\\"\\ d\\-e'


def test_is_safe_regexp() -> None:
    assert is_safe_regexp('"command":"ls')
    assert not is_safe_regexp("(a+)+")
    assert not is_safe_regexp("(")
    assert not is_safe_regexp("a" * 2049)


# --------------------------------------------------------------------------- TOML files


def test_load_policy_file_tiers_and_sources(tmp_path: Path) -> None:
    path = write_policy(
        tmp_path / "p.toml",
        """# comment
[[rule]]
toolName = ["read_file", "glob"]
decision = "allow"
priority = 100

[[rule]]
toolName = "run_shell_command"
commandPrefix = ["git", "ls"]
decision = "deny"
priority = 5
deny_message = "no"
allow_redirection = true
modes = ["autoEdit", "yolo"]
interactive = false
""",
    )
    rules, warnings = load_policy_file(path, tier=4)
    assert warnings == []
    assert [(r.tool_name, r.priority) for r in rules] == [
        ("read_file", 4.1),
        ("glob", 4.1),
        (SHELL, 4.005),
        (SHELL, 4.005),
    ]
    assert rules[0].source == f"{path}:2"
    assert rules[2].source == f"{path}:7"
    assert rules[2].deny_message == "no"
    assert rules[2].allow_redirection is True
    assert rules[2].modes == ("autoEdit", "yolo")
    assert rules[2].interactive is False
    assert rules[2].args_pattern is not None
    assert rules[2].args_pattern.search(stable_stringify({"command": "git push"}))
    assert rules[3].args_pattern is not None
    assert rules[3].args_pattern.search(stable_stringify({"command": "ls -la"}))


def test_load_policy_file_mcp_and_annotations(tmp_path: Path) -> None:
    path = write_policy(
        tmp_path / "p.toml",
        """[[rule]]
toolName = "search"
mcpName = "github"
toolAnnotations = { readOnlyHint = true }
decision = "allow"
priority = 1
""",
    )
    [only], _ = load_policy_file(path, tier=1)
    assert only.tool_name == "mcp_github_search"
    assert only.mcp_name == "github"
    assert only.tool_annotations == (("readOnlyHint", True),)


def test_toml_syntax_error_names_file_and_line(tmp_path: Path) -> None:
    path = write_policy(tmp_path / "bad.toml", '[[rule]]\ntoolName = "x"\ndecision = \n')
    with pytest.raises(PolicyFileError) as info:
        load_policy_file(path)
    assert info.value.path == path
    assert info.value.line == 3
    assert str(info.value).startswith(f"{path}:3: TOML parsing failed")


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ('toolName = "x"\ndecision = "allow"', "priority is required"),
        ('toolName = "x"\ndecision = "maybe"\npriority = 1', "decision"),
        ('toolName = "x"\ndecision = "allow"\npriority = 1000', "must be <= 999"),
        ('toolName = "x"\ndecision = "allow"\npriority = -1', "must be >= 0"),
        ('toolName = "x"\ndecision = "allow"\npriority = 1.5', "must be an integer"),
        ('toolName = "x"\ndecision = "allow"\npriority = true', "must be a number"),
        ('toolName = "x"\ndecision = "allow"\npriority = 1\nmodes = ["auto_edit"]', "autoEdit"),
        ('decision = "allow"\npriority = 1', "toolName"),
        ('toolName = 3\ndecision = "allow"\npriority = 1', "toolName"),
        ('toolName = ""\ndecision = "allow"\npriority = 1', "cannot be empty"),
        ('toolName = "x"\ndecision = "allow"\npriority = 1\ninteractive = "yes"', "boolean"),
    ],
)
def test_schema_errors_name_the_offending_rule(tmp_path: Path, body: str, needle: str) -> None:
    text = '[[rule]]\ntoolName = "ok"\ndecision = "allow"\npriority = 1\n\n[[rule]]\n' + body
    path = write_policy(tmp_path / "p.toml", text)
    with pytest.raises(PolicyFileError) as info:
        load_policy_file(path)
    assert info.value.line == 6
    assert "rule #2" in str(info.value)
    assert needle in str(info.value)


def test_float_priority_with_integer_value_is_accepted(tmp_path: Path) -> None:
    path = write_policy(tmp_path / "p.toml", '[[rule]]\ntoolName="x"\ndecision="deny"\npriority=7.0')
    [only], _ = load_policy_file(path, tier=2)
    assert only.priority == 2.007


def test_warnings_for_typos_misuse_regexes_and_checkers(tmp_path: Path) -> None:
    path = write_policy(
        tmp_path / "p.toml",
        """[[rule]]
toolName = "read_fil"
decision = "allow"
priority = 1

[[rule]]
toolName = "some_dynamic_agent_tool_name"
decision = "allow"
priority = 1

[[rule]]
toolName = "read_file"
commandPrefix = "ls"
decision = "allow"
priority = 1

[[rule]]
toolName = "glob"
argsPattern = "(unclosed"
decision = "allow"
priority = 1

[[rule]]
toolName = "glob"
argsPattern = "(a+)+"
decision = "allow"
priority = 1

[[safety_checker]]
toolName = "*"
priority = 1
[safety_checker.checker]
type = "in-process"
name = "conseca"
""",
    )
    rules, warnings = load_policy_file(path)
    assert [r.tool_name for r in rules] == ["read_fil", "some_dynamic_agent_tool_name", "read_file"]
    assert len(warnings) == 5
    assert f"{path}:1:" in warnings[0] and 'Did you mean one of: "read_file"' in warnings[0]
    assert f"{path}:11:" in warnings[1] and "commandPrefix" in warnings[1]
    assert "invalid regex" in warnings[2] and "unsafe regex" in warnings[3]
    assert "safety checkers are not supported" in warnings[4]


def test_known_tools_silence_typo_warnings(tmp_path: Path) -> None:
    path = write_policy(tmp_path / "p.toml", '[[rule]]\ntoolName="read_fil"\ndecision="deny"\npriority=1')
    _, warnings = load_policy_file(path, known_tools={"read_fil"})
    assert warnings == []


def test_empty_command_prefix_list_yields_no_rule(tmp_path: Path) -> None:
    path = write_policy(
        tmp_path / "p.toml",
        '[[rule]]\ntoolName="run_shell_command"\ncommandPrefix=[]\ndecision="allow"\npriority=1',
    )
    rules, _ = load_policy_file(path)
    assert rules == []


# --------------------------------------------------------------------------- build()


def test_builtin_policies_load_cleanly() -> None:
    built, warnings = PolicyEngine.build(approval_mode="default", interactive=True, settings={})
    assert warnings == []
    assert len(built.rules) == 73
    assert {Path(r.source.rsplit(":", 1)[0]).parent for r in built.rules} == {DEFAULT_POLICY_DIR}
    assert all(1 <= r.priority < 2 for r in built.rules)


def test_user_dir_and_policy_paths(tmp_path: Path) -> None:
    user = tmp_path / "home" / ".gemini" / "policies"
    write_policy(user / "a.toml", '[[rule]]\ntoolName="write_file"\ndecision="allow"\npriority=1')
    e = engine(interactive=False, user_policy_dir=user)
    verdict = e.check("write_file", {"file_path": "a", "content": ""})
    assert verdict.decision == "allow"
    assert verdict.rule is not None and verdict.rule.priority == 4.001
    # --policy replaces the user directory (file or directory; tier 4 as well).
    other = write_policy(tmp_path / "x.toml", '[[rule]]\ntoolName="glob"\ndecision="deny"\npriority=0')
    e = engine(interactive=False, user_policy_dir=user, policy_paths=[other])
    assert e.check("write_file", {}).decision == "deny"
    assert e.check("glob", {}).decision == "deny"
    # settings.policyPaths are used when no --policy is given.
    e = engine(interactive=False, user_policy_dir=user, settings={"policyPaths": [str(other)]})
    assert e.check("glob", {}).decision == "deny"
    # Missing paths and non-TOML files are ignored.
    e = engine(policy_paths=[tmp_path / "missing", tmp_path / "x.txt"])
    assert e.check("glob", {}).decision == "allow"


def test_workspace_policies_are_off_like_gemini(tmp_path: Path) -> None:
    ws = tmp_path / ".gemini" / "policies"
    write_policy(ws / "w.toml", '[[rule]]\ntoolName="read_file"\ndecision="deny"\npriority=1')
    assert engine(workspace_policy_dir=ws).check("read_file", {}).decision == "allow"
    enabled = engine(workspace_policy_dir=ws, workspace_policies_enabled=True)
    verdict = enabled.check("read_file", {})
    assert verdict.decision == "deny" and verdict.rule is not None
    assert verdict.rule.priority == 3.001
    untrusted, _ = PolicyEngine.build(
        approval_mode="default",
        interactive=True,
        settings={},
        workspace_policy_dir=ws,
        workspace_policies_enabled=True,
        trusted_folder=False,
    )
    assert untrusted.check("read_file", {}).decision == "allow"


def test_admin_tier_and_system_dir(tmp_path: Path) -> None:
    admin = write_policy(tmp_path / "admin.toml", '[[rule]]\ntoolName="glob"\ndecision="deny"\npriority=0')
    user = tmp_path / "user"
    write_policy(user / "u.toml", '[[rule]]\ntoolName="glob"\ndecision="allow"\npriority=999')
    e = engine(user_policy_dir=user, admin_policy_paths=[admin])
    verdict = e.check("glob", {})
    assert verdict.decision == "deny" and verdict.rule is not None and verdict.rule.priority == 5.0
    system = tmp_path / "system"
    write_policy(system / "s.toml", '[[rule]]\ntoolName="grep_search"\ndecision="deny"\npriority=0')
    e, warnings = PolicyEngine.build(
        approval_mode="default",
        interactive=True,
        settings={},
        user_policy_dir=user,
        admin_policy_paths=[admin],
        system_policy_dir=system,
    )
    assert any("Ignoring --admin-policy" in w for w in warnings)
    assert e.check("glob", {}).decision == "allow"
    assert e.check("grep_search", {}).decision == "deny"


def test_broken_file_is_skipped_with_a_warning(tmp_path: Path) -> None:
    user = tmp_path / "user"
    write_policy(user / "a.toml", '[[rule]]\ntoolName="glob"\ndecision="deny"\npriority=1')
    write_policy(user / "b.toml", '[[rule]]\ntoolName="read_file"\ndecision="deny"')
    e, warnings = PolicyEngine.build(
        approval_mode="default", interactive=True, settings={}, user_policy_dir=user
    )
    assert len(warnings) == 1
    assert warnings[0].startswith(f"[USER] {user / 'b.toml'}:1: rule #1")
    assert e.check("glob", {}).decision == "deny"
    assert e.check("read_file", {}).decision == "allow"


def test_approval_mode_spellings_and_overrides() -> None:
    assert normalize_approval_mode("auto_edit") == "autoEdit"
    assert normalize_approval_mode("autoEdit") == "autoEdit"
    with pytest.raises(ValueError, match="Invalid approval mode: nope"):
        normalize_approval_mode("nope")
    assert engine("auto_edit").approval_mode == "autoEdit"
    e, warnings = PolicyEngine.build(
        approval_mode="yolo", interactive=True, settings={}, trusted_folder=False
    )
    assert e.approval_mode == "default" and "not trusted" in warnings[0]
    e, warnings = PolicyEngine.build(
        approval_mode="plan",
        interactive=True,
        settings={"general": {"plan": {"enabled": False}}},
    )
    assert e.approval_mode == "default" and "disabled" in warnings[0]


# --------------------------------------------------------------------------- decisions


def test_defaults_interactive_and_headless() -> None:
    inter = engine()
    head = engine(interactive=False)
    for tool in ("read_file", "glob", "grep_search", "list_directory", "google_web_search"):
        assert inter.check(tool, {}).decision == "allow"
        assert head.check(tool, {}).decision == "allow"
    for tool in ("write_file", "replace", "web_fetch", "activate_skill"):
        assert inter.check(tool, {}).decision == "ask_user"
        assert head.check(tool, {}).decision == "deny"
    # No rule at all: the default decision.
    assert inter.check("write_todos", {}).decision == "ask_user"
    assert head.check("write_todos", {}).decision == "deny"
    assert head.default_decision == "deny" and inter.default_decision == "ask_user"
    assert head.check("ask_user", {}).decision == "deny"
    assert inter.check("ask_user", {}).decision == "ask_user"


def test_auto_edit_and_yolo() -> None:
    e = engine("auto_edit")
    assert e.check("write_file", {}).decision == "allow"
    assert e.check("replace", {}).decision == "allow"
    assert e.check("web_fetch", {}).decision == "allow"
    assert e.check("activate_skill", {}).decision == "ask_user"
    assert sh(e, "make build") == "ask_user"
    y = engine("yolo")
    assert y.check("write_file", {}).decision == "allow"
    assert y.check("ask_user", {}).decision == "ask_user"
    assert y.check("enter_plan_mode", {}).decision == "deny"
    assert y.check("some_mcp_less_tool", {}).decision == "allow"
    headless_yolo = engine("yolo", interactive=False)
    assert headless_yolo.check("ask_user", {}).decision == "deny"
    assert headless_yolo.check("enter_plan_mode", {}).decision == "allow"
    # Per-call mode override.
    assert engine().check("write_file", {}, approval_mode="yolo").decision == "allow"
    # No rule matched in YOLO: allow.
    assert bare([], approval_mode="yolo").check("x", {}).decision == "allow"


def test_plan_mode() -> None:
    e = engine("plan")
    assert e.check("read_file", {"file_path": "a"}).decision == "allow"
    denied = e.check(SHELL, {"command": "ls"})
    assert denied.decision == "deny"
    assert policy_denial_message(denied) == (
        "Tool execution denied by policy. You are in Plan Mode with access to read-only "
        "tools. Execution of scripts (including those from skills) is blocked."
    )
    assert e.check("write_file", {"file_path": "plan.md", "content": ""}).decision == "allow"
    assert e.check("replace", {"file_path": "plans/x-1.md"}).decision == "allow"
    assert e.check(
        "write_file", {"file_path": "/h/.gemini/tmp/proj/sess/plans/p.md", "content": "x"}
    ).decision == "allow"
    src = e.check("write_file", {"file_path": "src/main.py", "content": ""})
    assert src.decision == "deny"
    assert src.deny_message is not None and src.deny_message.startswith("You are in Plan Mode and")
    assert e.check("write_file", {"file_path": "../evil.md", "content": ""}).decision == "deny"
    assert e.check("enter_plan_mode", {}).deny_message == "You are already in Plan Mode."
    assert e.check("exit_plan_mode", {"plan_filename": "p.md"}).decision == "ask_user"
    assert engine().check("exit_plan_mode", {}).deny_message == (
        "You are not currently in Plan Mode. Use enter_plan_mode first to design a plan."
    )
    agent = e.check("invoke_agent", {"agent_name": "codebase_investigator", "prompt": "x"})
    assert agent.decision == "allow"
    assert e.check("invoke_agent", {"agent_name": "other", "prompt": "x"}).decision == "deny"
    assert e.check("web_fetch", {"prompt": "x"}).decision == "ask_user"
    assert engine("plan", interactive=False).check("web_fetch", {}).decision == "deny"


def test_priority_and_tie_order() -> None:
    e = bare([rule("t", "allow", 1.5), rule("t", "deny", 1.5), rule("t", "ask_user", 2.0)])
    assert e.check("t", {}).decision == "ask_user"
    e = bare([rule("t", "allow", 1.5), rule("t", "deny", 1.5)])
    assert e.check("t", {}).decision == "allow"
    e.add_rule(rule("t", "deny", 1.5))
    assert e.check("t", {}).decision == "allow"


def test_wildcards_aliases_and_subagents() -> None:
    e = bare([rule("grep_search", "deny")])
    assert e.check("search_file_content", {}).decision == "deny"
    e = bare([rule("search_file_content", "deny")])
    assert e.check("grep_search", {}).decision == "deny"
    e = bare([rule("codebase_investigator", "deny")])
    assert e.check("invoke_agent", {"agent_name": "codebase_investigator"}).decision == "deny"
    e = bare([rule("*", "deny", subagent="helper")], approval_mode="yolo")
    assert e.check("glob", {}, subagent="helper").decision == "deny"
    assert e.check("glob", {}).decision == "allow"
    e = bare([rule("discovered_tool_*", "deny")], approval_mode="yolo")
    assert e.check("discovered_tool_x", {}).decision == "allow"  # not a recognised wildcard form


def test_interactive_flag_and_modes() -> None:
    rules = [rule("t", "deny", 2, interactive=False), rule("t", "ask_user", 2, interactive=True)]
    assert bare(rules, interactive=False).check("t", {}).decision == "deny"
    assert bare(rules, interactive=True).check("t", {}).decision == "ask_user"
    e = bare([rule("t", "allow", modes=("autoEdit",))])
    assert e.check("t", {}).decision == "ask_user"
    assert e.check("t", {}, approval_mode="auto_edit").decision == "allow"


def test_mcp_matching() -> None:
    e = bare([rule("mcp_github_*", "allow", mcp_name="github")], interactive=False)
    assert e.check("mcp_github_search", {}).decision == "allow"
    assert e.check("mcp_other_search", {}).decision == "deny"
    # A short name with a server matches a fully-qualified rule (not a wildcard one).
    assert e.check("search", {}, server_name="github").decision == "deny"
    e = bare([rule("mcp_github_search", "allow")], interactive=False)
    assert e.check("search", {}, server_name="github").decision == "allow"
    e = bare([rule("search", "allow", mcp_name="github")], interactive=False)
    assert e.check("mcp_github_search", {}, server_name="github").decision == "allow"
    # A spoofed server name does not satisfy a server wildcard.
    e = bare([rule("mcp_github_*", "allow", mcp_name="github")], interactive=False)
    assert e.check("mcp_github_x", {}, server_name="evil").decision == "deny"
    e = bare([rule("mcp_*", "deny")], interactive=True)
    assert e.check("mcp_a_b", {}).decision == "deny"
    assert e.check("read_file", {}).decision == "ask_user"
    e = bare([rule("*", "allow", mcp_name="*", tool_annotations=(("readOnlyHint", True),))])
    assert e.check("mcp_s_t", {}, tool_annotations={"readOnlyHint": True}).decision == "allow"
    assert e.check("mcp_s_t", {}, tool_annotations={"readOnlyHint": False}).decision == "ask_user"


def test_args_pattern_uses_stable_stringify() -> None:
    e = bare([rule("read_file", "deny", pattern='\\x00"file_path":"secret\\.txt"\\x00')])
    assert e.check("read_file", {"z": 1, "file_path": "secret.txt"}).decision == "deny"
    assert e.check("read_file", {"file_path": "secret.txt.bak"}).decision == "ask_user"
    assert e.check("read_file", {"x": {"file_path": "secret.txt"}}).decision == "ask_user"


# --------------------------------------------------------------------------- settings rules


def test_tools_exclude_and_confirmation_required() -> None:
    e = engine("yolo", interactive=False, settings={"tools": {"exclude": ["glob"]}})
    assert e.check("glob", {}).decision == "deny"
    settings = {"tools": {"allowed": ["write_file"], "confirmationRequired": ["write_file"]}}
    e = engine("yolo", interactive=False, settings=settings)
    verdict = e.check("write_file", {})
    assert verdict.decision == "ask_user"
    assert verdict.rule is not None and verdict.rule.priority == 4.35
    assert verdict.rule.source == "settings: tools.confirmationRequired"
    e = engine(settings={"tools": {"confirmationRequired": ["ShellTool"]}}, interactive=False)
    assert sh(e, "make") == "ask_user"
    # Known read-only commands still skip the question (shell heuristics), as in Gemini.
    assert sh(e, "ls") == "allow"


def test_allowed_tools_with_shell_prefixes() -> None:
    e = engine(interactive=True, allowed_tools=["run_shell_command(git status)", "glob(x)"])
    assert sh(e, "git status") == "allow"
    assert sh(e, "git status --short") == "allow"
    narrowing = e.check(SHELL, {"command": "git push"})
    assert narrowing.decision == "deny"  # narrowing enforcement, even interactively
    assert narrowing.rule is not None and narrowing.rule.priority == pytest.approx(4.29)
    assert e.check("glob", {}).decision == "allow"
    # Plain names, shell aliases, and CLI flag replacing the settings list.
    e = engine(interactive=False, settings={"tools": {"allowed": ["ShellTool"]}})
    assert sh(e, "make") == "allow"
    e = engine(interactive=False, settings={"tools": {"allowed": ["ShellTool"]}}, allowed_tools=["glob"])
    assert sh(e, "make") == "deny"


def test_tools_core_allowlist() -> None:
    settings = {"tools": {"core": ["read_file", "run_shell_command(ls)"]}}
    e = engine("yolo", interactive=False, settings=settings)
    assert e.check("read_file", {}).decision == "allow"
    assert e.check("glob", {}).decision == "deny"
    assert sh(e, "ls -la") == "allow"
    assert sh(e, "rm x") == "deny"
    plan = engine("plan", settings=settings)
    assert plan.check("glob", {}).decision == "allow"  # the allowlist does not apply in plan mode
    empty = engine("yolo", settings={"tools": {"core": []}})
    assert empty.check("read_file", {}).decision == "deny"


def test_mcp_settings_rules() -> None:
    settings = {
        "mcp": {"excluded": ["bad"], "allowed": ["ok"], "autoAllowInHeadless": True},
        "mcpServers": {"trusted": {"trust": True}, "plain": {}, "ok": {}, "bad": {}},
    }
    e = engine(interactive=False, settings=settings)
    assert e.check("mcp_bad_x", {}).decision == "deny"
    assert e.check("mcp_ok_x", {}).decision == "allow"
    assert e.check("mcp_trusted_x", {}).decision == "allow"
    assert e.check("mcp_plain_x", {}).decision == "allow"  # headless auto-allow
    assert engine(interactive=True, settings=settings).check("mcp_plain_x", {}).decision == "ask_user"


# --------------------------------------------------------------------------- shell


def test_shell_compound_commands() -> None:
    rules = [
        rule(SHELL, "deny", 1.02, prefix="rm"),
        rule(SHELL, "allow", 1.02, prefix="echo"),
        rule(SHELL, "ask_user", 1.01),
    ]
    e = bare(rules)
    assert sh(e, "echo hello && rm -rf /") == "deny"
    assert sh(e, "echo a; echo b | echo c || echo d") == "allow"
    assert sh(e, "echo a && make") == "ask_user"
    assert sh(e, "echo $(rm x)") == "deny"
    assert sh(e, "echo `rm x`") == "deny"
    assert sh(e, "echo <(rm x)") == "deny"
    assert sh(e, "(rm x)") == "deny"
    assert sh(e, "if true; then rm x; fi") == "deny"
    assert sh(e, 'bash -c "rm -rf /"') == "deny"
    # An explicit rule on the whole compound command still wins.
    e = bare([rule(SHELL, "deny", 2, pattern='"command":"git status && ls"'), *rules])
    assert sh(e, "git status && ls") == "deny"


def test_shell_sub_command_verdict_blames_sub_rule() -> None:
    deny_rm = rule(SHELL, "deny", 1.02, prefix="rm", deny_message="no rm")
    e = bare([deny_rm, rule(SHELL, "allow", 1.01)])
    verdict = e.check(SHELL, {"command": "ls && rm x"})
    assert verdict.decision == "deny" and verdict.rule == deny_rm
    assert policy_denial_message(verdict) == f"{POLICY_DENIED_MESSAGE} no rm"


def test_shell_redirection() -> None:
    e = bare([rule(SHELL, "allow", prefix="echo")])
    assert sh(e, 'echo "hello"') == "allow"
    assert sh(e, 'echo "hello" > file.txt') == "ask_user"
    assert sh(e, 'echo "-> arrow"') == "allow"
    assert sh(e, "echo hi 2>&1") == "ask_user"
    assert sh(e, "echo hi <<< x") == "ask_user"
    assert sh(e, 'echo "hello" > file.txt', approval_mode="autoEdit") == "allow"
    assert sh(e, 'echo "hello" > file.txt', approval_mode="yolo") == "allow"
    assert sh(e, 'echo a && echo "hello" > f') == "ask_user"
    e = bare([rule(SHELL, "allow", prefix="echo", allow_redirection=True)])
    assert sh(e, 'echo "hello" > file.txt') == "allow"
    e = bare([rule(SHELL, "allow", allow_redirection=True)], interactive=False)
    assert sh(e, "ls > out.txt") == "allow"
    # Headless: the downgraded ask is the caller's "requires user confirmation" error.
    e = bare([rule(SHELL, "allow", prefix="ls")], interactive=False)
    assert sh(e, "ls > out.txt") == "ask_user"


def test_shell_unparsable_commands() -> None:
    allow_echo = rule(SHELL, "allow", prefix="echo")
    assert sh(bare([allow_echo]), "echo 'unterminated") == "ask_user"
    assert sh(bare([allow_echo], interactive=False), "echo 'unterminated") == "deny"
    assert sh(bare([allow_echo]), "echo hi &&") == "ask_user"
    assert sh(bare([allow_echo]), "echo ${x@P}") == "ask_user"
    # YOLO allows, unless the matched rule restricts arguments.
    assert sh(bare([], approval_mode="yolo"), "echo 'unterminated") == "allow"
    assert sh(bare([allow_echo], approval_mode="yolo"), "echo 'unterminated") == "deny"
    assert sh(bare([rule(SHELL, "deny")], approval_mode="yolo"), "echo (") == "deny"
    # Only assignments: no command node, treated as unparsable.
    assert sh(bare([rule(SHELL, "allow")], interactive=False), "FOO=bar") == "deny"


def test_shell_heuristics() -> None:
    e = engine()
    assert sh(e, "ls -la") == "allow"  # known read-only: no question
    assert sh(e, "git status") == "allow"
    assert sh(e, "sed -n 5,10p f") == "allow"
    assert sh(e, "git push") == "ask_user"
    assert sh(e, "ls -la && pwd") == "ask_user"  # sub-commands skip the heuristics
    allow_all = bare([rule(SHELL, "allow")])
    assert sh(allow_all, "rm -rf build") == "ask_user"  # dangerous
    assert sh(allow_all, "sudo rm -f x") == "ask_user"
    assert sh(allow_all, "find . -delete") == "ask_user"
    assert sh(allow_all, "git -c core.pager=x log") == "ask_user"
    assert sh(allow_all, "rm -rf build", approval_mode="yolo") == "allow"
    assert sh(engine("yolo"), "rm -rf build") == "allow"
    # Rules with argument patterns skip the heuristics.
    assert sh(bare([rule(SHELL, "allow", prefix="rm")]), "rm -rf build") == "allow"
    untrusted = bare([], trusted_folder=False)
    assert sh(untrusted, "git status") == "ask_user"
    assert sh(untrusted, 'echo "hello" && git status') == "ask_user"
    assert sh(untrusted, "VAR=val git status") == "ask_user"
    assert sh(untrusted, "echo git") == "allow"
    trusted = bare([])
    assert sh(trusted, "git status") == "allow"
    deny_git = bare([rule(SHELL, "deny", pattern='"command":"git status"')], trusted_folder=False)
    assert sh(deny_git, "git status") == "deny"


def test_shell_sub_checks_keep_dir_path() -> None:
    rules = [
        rule(SHELL, "allow", 2, pattern='"command":"echo hello".*"dir_path":"/safe/path"'),
        rule(SHELL, "ask_user", 1),
    ]
    e = bare(rules)
    args = {"command": "echo hello && pwd", "dir_path": "/safe/path"}
    assert e.check(SHELL, args).decision == "ask_user"  # pwd falls to the ask rule
    rules[1] = rule(SHELL, "allow", 1)
    assert bare(rules).check(SHELL, args).decision == "allow"


def test_additional_permissions_outside_workspace(tmp_path: Path) -> None:
    e = bare([rule(SHELL, "allow")], workspace_dir=tmp_path)
    inside = {"fileSystem": {"read": [str(tmp_path / "a")], "write": ["rel/b"]}}
    outside = {"fileSystem": {"write": ["/etc/passwd"]}}
    assert e.check(SHELL, {"command": "make", "additional_permissions": inside}).decision == "allow"
    assert e.check(SHELL, {"command": "make", "additional_permissions": outside}).decision == "ask_user"


# --------------------------------------------------------------------------- session rules


def test_add_session_rule() -> None:
    e = engine()
    e.add_session_rule(SHELL, command_prefix="git")
    verdict = e.check(SHELL, {"command": "git push"})
    assert verdict.decision == "allow"
    assert verdict.rule is not None and verdict.rule.priority == 3.95
    assert sh(e, "gitx") == "ask_user"
    e.add_session_rule(SHELL)  # shell approvals must be narrowed: ignored
    assert sh(e, "make") == "ask_user"
    e.add_session_rule("write_file", args_pattern='\\x00"file_path":"a\\.txt"\\x00')
    assert e.check("write_file", {"file_path": "a.txt", "content": ""}).decision == "allow"
    assert e.check("write_file", {"file_path": "b.txt", "content": ""}).decision == "ask_user"
    e.add_session_rule("activate_skill", modes=["auto_edit", "yolo"])
    assert e.check("activate_skill", {}).decision == "ask_user"
    assert e.check("activate_skill", {}, approval_mode="autoEdit").decision == "allow"
    e.add_session_rule("web_fetch", persist_scope="user")
    web = e.check("web_fetch", {})
    assert web.rule is not None and web.rule.priority == 4.95
    with pytest.raises(ValueError, match="unsafe"):
        e.add_session_rule("glob", args_pattern="(a+)+")


def test_file_path_session_pattern_is_gemini_exact() -> None:
    # Same source text as Gemini's buildFilePathArgsPattern (checked with node): the
    # delimiters are a literal backslash-zero, so it never matches a real call.
    pattern = param_args_pattern("file_path", "a.txt")
    assert pattern == '\\\\0\\"file_path\\":\\"a\\.txt\\"\\\\0'
    e = engine()
    e.add_session_rule("write_file", args_pattern=pattern)
    assert e.check("write_file", {"file_path": "a.txt", "content": ""}).decision == "ask_user"
    assert compile_js_regex(pattern).search('{\\0"file_path":"a.txt"\\0}')


def test_disable_always_allow() -> None:
    settings = {"security": {"disableAlwaysAllow": True}}
    e = engine(settings=settings)
    e.add_session_rule("web_fetch")
    assert e.check("web_fetch", {}).decision == "ask_user"


# --------------------------------------------------------------------------- exclusions


def test_excluded_tools_headless_default() -> None:
    e = engine(interactive=False)
    excluded = e.excluded_tools(BUILTIN_TOOL_NAMES)
    assert excluded == {
        "activate_skill",
        "ask_user",
        "exit_plan_mode",
        "read_many_files",
        "replace",
        "run_shell_command",
        "web_fetch",
        "write_file",
        "write_todos",
    }
    assert engine().excluded_tools(BUILTIN_TOOL_NAMES) == {"exit_plan_mode"}
    yolo = engine("yolo").excluded_tools(BUILTIN_TOOL_NAMES)
    assert yolo == {"enter_plan_mode", "exit_plan_mode"}
    plan = engine("plan", interactive=False).excluded_tools(BUILTIN_TOOL_NAMES)
    assert "run_shell_command" in plan and "write_file" not in plan and "invoke_agent" not in plan
    assert engine().excluded_tools(["write_file"], approval_mode="plan") == set()


def test_excluded_tools_respects_argument_rules(tmp_path: Path) -> None:
    # A denying rule with an args pattern only denies some calls: keep looking.
    e = bare([rule(SHELL, "deny", 2, prefix="rm"), rule(SHELL, "deny", 1)], interactive=False)
    assert e.excluded_tools([SHELL]) == {SHELL}
    # An allowing / asking rule with an args pattern keeps the tool registered.
    e = bare([rule(SHELL, "deny", 3, prefix="echo"), rule(SHELL, "allow", 2, prefix="node")])
    assert e.excluded_tools([SHELL]) == set()
    # ask_user never excludes, even headless.
    e = bare([rule("write_file", "ask_user")], interactive=False)
    assert e.excluded_tools(["write_file", "other"]) == {"other"}


def test_excluded_tools_settings() -> None:
    settings = {"tools": {"exclude": ["search_file_content"], "core": ["read_file", "write_file"]}}
    e = engine("yolo", interactive=False, settings=settings)
    excluded = e.excluded_tools(BUILTIN_TOOL_NAMES)
    assert "grep_search" in excluded  # legacy alias of an excluded name
    assert "read_file" not in excluded and "write_file" not in excluded
    assert "glob" in excluded and "run_shell_command" in excluded
    # tools.exclude removes a tool even when a higher rule would allow it.
    admin_allow = Rule(tool_name="glob", decision="allow", priority=5.5)
    e = bare([admin_allow], static_excludes=["glob"])
    assert e.excluded_tools(["glob"]) == {"glob"}


# --------------------------------------------------------------------------- messages


def test_messages() -> None:
    assert policy_denial_message(PolicyVerdict(decision="deny")) == "Tool execution denied by policy."
    assert confirmation_unsupported_message(display_name("write_file")) == (
        'Tool execution for "WriteFile" requires user confirmation, which is not supported '
        "in non-interactive mode."
    )
    assert display_name("run_shell_command") == "Shell"
    assert display_name("mcp_x_y") == "mcp_x_y"
    names = ["update_topic", "list_directory", "read_file", "grep_search", "glob", "invoke_agent"]
    assert tool_not_found_message("run_shell_command", names).startswith(
        'Tool "run_shell_command" not found. Did you mean one of: '
    )
    assert tool_not_found_message("x", []) == 'Tool "x" not found.'
    assert tool_not_found_message("globb", ["glob"]) == 'Tool "globb" not found. Did you mean "glob"?'
