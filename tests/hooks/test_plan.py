"""Which hooks run: Gemini's matching, de-duplication, sequential flag and order."""

from __future__ import annotations

from typing import Any

import pytest

from actors.hooks import load_hook_config


def cmd(command: str, **extra: Any) -> dict[str, Any]:
    return {"type": "command", "command": command, **extra}


def commands(config: Any, event: str, target: str = "") -> list[str] | None:
    plan = config.plan(event, target)
    return None if plan is None else [h.command for h in plan.hooks]


@pytest.mark.parametrize(
    ("matcher", "tool", "runs"),
    [
        (None, "read_file", True),
        ("", "read_file", True),
        ("*", "read_file", True),
        ("  *  ", "read_file", True),
        ("write_file", "write_file", True),
        ("write_file", "read_file", False),
        ("file", "read_file", True),  # RegExp.test searches, not anchored
        ("^read", "read_file", True),
        ("^read$", "read_file", False),
        ("write_file|replace", "replace", True),
        ("mcp__.*__search", "mcp__srv__search", True),
        ("(", "(", True),  # not a regex: exact compare
        ("(", "x(", False),
        ("[a", "[a", True),
    ],
)
def test_tool_event_matchers(matcher: str | None, tool: str, runs: bool) -> None:
    definition: dict[str, Any] = {"hooks": [cmd("h")]}
    if matcher is not None:
        definition["matcher"] = matcher
    config = load_hook_config({"hooks": {"BeforeTool": [definition], "AfterTool": [definition]}})
    for event in ("BeforeTool", "AfterTool"):
        assert config.has_hooks(event, tool) is runs
        assert (config.plan(event, tool) is not None) is runs


def test_lifecycle_matchers_compare_exactly() -> None:
    config = load_hook_config(
        {
            "hooks": {
                "SessionStart": [{"matcher": "startup", "hooks": [cmd("s")]}],
                "SessionEnd": [{"matcher": "ex.t", "hooks": [cmd("e")]}],
                "PreCompress": [{"matcher": "auto", "hooks": [cmd("p")]}],
            }
        }
    )
    assert config.has_hooks("SessionStart", "startup")
    assert not config.has_hooks("SessionStart", "resume")
    assert not config.has_hooks("SessionEnd", "exit")  # no regex for lifecycle events
    assert config.has_hooks("PreCompress", "auto")
    assert not config.has_hooks("PreCompress", "manual")


def test_events_fired_without_context_ignore_matchers() -> None:
    config = load_hook_config(
        {
            "hooks": {
                event: [{"matcher": "never", "hooks": [cmd("h")]}]
                for event in ("BeforeAgent", "AfterAgent", "BeforeModel", "AfterModel", "BeforeToolSelection", "Notification")
            }
        }
    )
    assert set(config.definitions) == {"BeforeAgent", "AfterAgent", "BeforeModel", "AfterModel", "BeforeToolSelection", "Notification"}
    for event in config.definitions:
        assert config.has_hooks(event, "anything")
        assert config.has_hooks(event)


def test_empty_target_matches_every_definition() -> None:
    config = load_hook_config({"hooks": {"BeforeTool": [{"matcher": "x", "hooks": [cmd("h")]}]}})
    assert config.has_hooks("BeforeTool", "")


def test_order_dedup_and_sequential_flag() -> None:
    config = load_hook_config(
        {
            "hooks": {
                "BeforeTool": [
                    {"matcher": "write_file", "hooks": [cmd("a"), cmd("b", name="B")]},
                    {"matcher": "read_file", "sequential": True, "hooks": [cmd("c")]},
                    {"sequential": True, "hooks": [cmd("a"), cmd("b"), cmd("d")]},
                ]
            }
        }
    )
    # ``a`` is listed twice: the second copy (from a sequential definition) is dropped, and
    # ``b`` differs from ``B:b`` by name, so it stays.
    plan = config.plan("BeforeTool", "write_file")
    assert plan is not None
    assert [h.key for h in plan.hooks] == [":a", "B:b", ":b", ":d"]
    assert plan.sequential  # any remaining entry from a sequential definition
    plan = config.plan("BeforeTool", "grep")
    assert plan is not None and [h.command for h in plan.hooks] == ["a", "b", "d"]
    assert plan.sequential


def test_dedup_decides_the_sequential_flag_after_removing_copies() -> None:
    config = load_hook_config(
        {
            "hooks": {
                "BeforeAgent": [
                    {"hooks": [cmd("a")]},
                    {"sequential": True, "hooks": [cmd("a")]},
                ]
            }
        }
    )
    plan = config.plan("BeforeAgent")
    assert plan is not None and len(plan.hooks) == 1 and not plan.sequential


def test_user_and_project_copies_concatenated_run_once() -> None:
    # Gemini concatenates user and project arrays, then de-duplicates name:command.
    definition = {"sequential": True, "hooks": [cmd('node "/ws/seq1.cjs"', timeout=5000), cmd('node "/ws/seq2.cjs"', timeout=5000)]}
    config = load_hook_config({"hooks": {"BeforeAgent": [definition, definition]}})
    assert commands(config, "BeforeAgent") == ['node "/ws/seq1.cjs"', 'node "/ws/seq2.cjs"']


def test_unknown_event_has_no_plan() -> None:
    config = load_hook_config({"hooks": {"BeforeTool": [{"hooks": [cmd("a")]}]}})
    assert config.plan("Nope", "x") is None
    assert not config.has_hooks("AfterTool", "x")


def test_memo_does_not_change_answers() -> None:
    config = load_hook_config({"hooks": {"BeforeTool": [{"matcher": "^t", "hooks": [cmd("a")]}]}})
    for i in range(5000):  # past the memo's limit, which then starts over
        assert config.has_hooks("BeforeTool", f"t{i}")
        assert not config.has_hooks("BeforeTool", f"x{i}")
