"""Hook configuration: parsing, every problem with its key path, disabling, planning."""

from __future__ import annotations

from typing import Any

import pytest

from actors.hooks import (
    DEFAULT_TIMEOUT_MS,
    HOOK_EVENTS,
    CommandHook,
    HookConfig,
    HookConfigError,
    load_hook_config,
)


def cmd(command: str, **extra: Any) -> dict[str, Any]:
    return {"type": "command", "command": command, **extra}


def settings(**events: Any) -> dict[str, Any]:
    return {"hooks": events}


# ---------------------------------------------------------------------------- parsing


def test_corpus_shaped_configuration_parses() -> None:
    config = load_hook_config(
        {
            "hooksConfig": {"enabled": True, "disabled": ["b"]},
            "hooks": {
                "BeforeTool": [
                    {
                        "matcher": "write_file",
                        "sequential": True,
                        "hooks": [cmd('node "/ws/a.cjs"', timeout=5000, name="a", env={"X": "1"})],
                    }
                ],
                "AfterAgent": [{"hooks": [cmd("echo hi")]}],
            },
        }
    )
    (definition,) = config.definitions["BeforeTool"]
    assert definition.matcher == "write_file" and definition.sequential
    assert definition.hooks == (
        CommandHook(command='node "/ws/a.cjs"', name="a", timeout_ms=5000, env={"X": "1"}),
    )
    assert config.definitions["AfterAgent"][0].hooks[0].timeout_ms == DEFAULT_TIMEOUT_MS
    assert config.disabled == frozenset({"b"})
    assert config.hook_count == 2


def test_empty_and_missing_settings_mean_no_hooks() -> None:
    for s in ({}, {"hooks": {}}, {"hooksConfig": {}}):
        config = load_hook_config(s)
        assert config.enabled and config.hook_count == 0
        assert not any(config.has_hooks(e) for e in HOOK_EVENTS)


def test_reserved_keys_inside_hooks_are_not_events() -> None:
    config = load_hook_config(
        settings(enabled=True, disabled=["x"], notifications=False, BeforeAgent=[{"hooks": [cmd("true")]}])
    )
    assert set(config.definitions) == {"BeforeAgent"}


def test_every_problem_is_reported_with_its_key_path() -> None:
    bad = {
        "hooksConfig": {"enabled": "yes", "disabled": ["ok", 3]},
        "hooks": {
            "BeforeTool": [
                {
                    "matcher": 5,
                    "sequential": "true",
                    "hooks": [
                        cmd("ok"),
                        cmd("x", timeout="5s"),
                        {"type": "command"},
                        {"type": "runtime", "name": "r"},
                        cmd("y", env={"A": 1}, name=7),
                        "not an object",
                    ],
                },
                {"matcher": "x"},
                {"hooks": "nope"},
            ],
            "BeforeTools": [],
            "AfterTool": {"hooks": []},
            "SessionEnd": [{"hooks": [cmd("z", timeout=-1)]}],
        },
    }
    with pytest.raises(HookConfigError) as caught:
        load_hook_config(bad, source="/home/u/.gemini/settings.json")
    err = caught.value
    assert err.source == "/home/u/.gemini/settings.json"
    assert list(err.problems) == [
        "hooksConfig.enabled: expected a boolean, got a string",
        "hooksConfig.disabled[1]: expected a string, got a number",
        "hooks.BeforeTool[0].matcher: expected a string, got a number",
        "hooks.BeforeTool[0].sequential: expected a boolean, got a string",
        "hooks.BeforeTool[0].hooks[1].timeout: expected a number, got a string",
        "hooks.BeforeTool[0].hooks[2].command: missing",
        "hooks.BeforeTool[0].hooks[3].type: expected \"command\", got 'runtime'",
        "hooks.BeforeTool[0].hooks[3].command: missing",
        "hooks.BeforeTool[0].hooks[4].name: expected a string, got a number",
        "hooks.BeforeTool[0].hooks[4].env.A: expected a string, got a number",
        "hooks.BeforeTool[0].hooks[5]: expected an object, got a string",
        "hooks.BeforeTool[1].hooks: missing",
        "hooks.BeforeTool[2].hooks: expected an array, got a string",
        "hooks.BeforeTools: unknown hook event (expected one of " + ", ".join(HOOK_EVENTS) + ")",
        "hooks.AfterTool: expected an array, got an object",
        "hooks.SessionEnd[0].hooks[0].timeout: expected a positive number of milliseconds, got -1",
    ]
    text = str(err)
    assert text.startswith("Invalid hook configuration in /home/u/.gemini/settings.json:\n")
    assert "  hooks.BeforeTool[0].hooks[1].timeout: expected a number" in text


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ([], "hooks: expected an object, got an array"),
        ({"Before Tool": []}, "hooks['Before Tool']: unknown hook event"),
        ({"BeforeTool": [{"hooks": [cmd("  ")]}]}, "hooks.BeforeTool[0].hooks[0].command: expected a non-empty string"),
        ({"BeforeTool": [{"hooks": [cmd("x", timeout=True)]}]}, "hooks.BeforeTool[0].hooks[0].timeout: expected a number, got a boolean"),
    ],
)
def test_single_problems(value: Any, expected: str) -> None:
    with pytest.raises(HookConfigError) as caught:
        load_hook_config({"hooks": value})
    assert caught.value.problems[0].startswith(expected)


def test_disabled_hooks_system_ignores_the_hooks_section() -> None:
    config = load_hook_config({"hooksConfig": {"enabled": False}, "hooks": {"Nope": 1}})
    assert not config.enabled
    assert not config.has_hooks("BeforeTool", "x")


def test_disabled_list_matches_names_and_commands() -> None:
    config = load_hook_config(
        {
            "hooksConfig": {"disabled": ["named", "echo b"]},
            "hooks": {
                "BeforeTool": [
                    {"hooks": [cmd("echo a", name="named"), cmd("echo b"), cmd("echo c")]}
                ]
            },
        }
    )
    plan = config.plan("BeforeTool", "t")
    assert plan is not None
    assert [h.command for h in plan.hooks] == ["echo c"]


def test_frozen_settings_are_accepted() -> None:
    from bus.json_values import freeze

    config = load_hook_config(freeze(settings(BeforeAgent=[{"hooks": [cmd("true", env={"A": "b"})]}])))
    assert config.has_hooks("BeforeAgent")


def test_config_is_immutable_and_comparable() -> None:
    a = load_hook_config(settings(BeforeAgent=[{"hooks": [cmd("true")]}]))
    b = load_hook_config(settings(BeforeAgent=[{"hooks": [cmd("true")]}]))
    assert a == b
    assert a != load_hook_config(settings(BeforeAgent=[{"hooks": [cmd("false")]}]))
    assert a != HookConfig()
    with pytest.raises(AttributeError):
        a.enabled = False  # type: ignore[misc]
