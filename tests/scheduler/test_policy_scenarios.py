"""The policy outcome of every policy-tagged conformance scenario, reproduced.

Each scenario's recorded ``stream.jsonl`` shows, per tool call, what Gemini CLI did:
success (policy allowed), ``policy_violation`` (policy denied), ``tool_not_registered``
(the policy excluded the tool from the registry) or ``unhandled_exception`` "requires
user confirmation" (policy asked in a headless run). We rebuild the engine from the
scenario's configuration and check that it reaches the same outcome.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from actors.scheduler._policy import PolicyEngine
from actors.scheduler._policy_messages import (
    confirmation_unsupported_message,
    policy_denial_message,
)
from actors.scheduler._policy_rules import BUILTIN_TOOL_NAMES, display_name

SCENARIOS = Path(__file__).resolve().parents[2].parent / "shared" / "conformance" / "scenarios"

POLICY_SCENARIOS = [
    "policy-headless-readonly-default",
    "policy-headless-shell-allowed-policy",
    "policy-headless-shell-denied-default",
    "policy-headless-shell-prefix-allow",
    "policy-headless-shell-prefix-deny",
    "user-policy-absent-sanity",
    "user-policy-allowed-tools-toml",
    "parallel-waves-headless-default",
    "parallel-waves-headless-yolo",
    "parallel-waves-headless-yolo-core-only",
]


def _deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _write_files(root: Path, files: dict[str, str]) -> None:
    for rel, content in files.items():
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8")


def _engine_for(scenario: dict[str, Any], tmp_path: Path) -> PolicyEngine:
    home = tmp_path / "home"
    workspace = tmp_path / "workspace"
    home.mkdir()
    workspace.mkdir()
    _write_files(home, scenario["home_files"])
    _write_files(workspace, scenario["workspace_files"])
    args = [a.replace("{workspace}", str(workspace)) for a in scenario["steps"][0]["args"]]
    assert "-p" in args, "policy scenarios are headless"
    mode = "default"
    policies: list[Path] = []
    allowed: list[str] = []
    for flag, value in zip(args, [*args[1:], ""], strict=True):
        if flag == "--approval-mode":
            mode = value
        elif flag in ("--yolo", "-y"):
            mode = "yolo"
        elif flag == "--policy":
            policies += [Path(p) for p in value.split(",")]
        elif flag == "--allowed-tools":
            allowed += value.split(",")
    settings = _deep_merge(scenario["user_settings"], scenario["project_settings"])
    engine, warnings = PolicyEngine.build(
        approval_mode=mode,
        interactive=False,
        settings=settings,
        policy_paths=policies,
        user_policy_dir=home / ".gemini" / "policies",
        workspace_policy_dir=workspace / ".gemini" / "policies",
        allowed_tools=allowed,
    )
    assert warnings == []
    return engine


def _recorded_calls(scenario_dir: Path) -> list[dict[str, Any]]:
    uses: dict[str, dict[str, Any]] = {}
    calls = []
    for line in (scenario_dir / "expected" / "stream.jsonl").read_text().splitlines():
        event = json.loads(line)
        if event["type"] == "tool_use":
            uses[event["tool_id"]] = event
        elif event["type"] == "tool_result":
            use = uses[event["tool_id"]]
            calls.append(
                {"name": use["tool_name"], "args": use["parameters"], "result": event}
            )
    return calls


@pytest.mark.parametrize("name", POLICY_SCENARIOS)
def test_scenario_policy_outcome(name: str, tmp_path: Path) -> None:
    scenario_dir = SCENARIOS / name
    if not scenario_dir.is_dir():
        pytest.skip("../shared conformance corpus not present")
    scenario = json.loads((scenario_dir / "scenario.json").read_text())
    engine = _engine_for(scenario, tmp_path)
    calls = _recorded_calls(scenario_dir)
    assert calls, "scenario makes tool calls"
    names = sorted({*BUILTIN_TOOL_NAMES, *(c["name"] for c in calls)})
    excluded = engine.excluded_tools(names)
    for call in calls:
        result = call["result"]
        error = result.get("error")
        verdict = engine.check(call["name"], call["args"])
        if result["status"] == "success":
            assert call["name"] not in excluded
            assert verdict.decision == "allow"
        elif error["type"] == "tool_not_registered":
            assert call["name"] in excluded
            assert error["message"].startswith(f'Tool "{call["name"]}" not found.')
        elif error["type"] == "policy_violation":
            assert call["name"] not in excluded
            assert verdict.decision == "deny"
            assert policy_denial_message(verdict) == error["message"]
        elif error["type"] == "unhandled_exception":
            assert call["name"] not in excluded
            assert verdict.decision == "ask_user"
            assert confirmation_unsupported_message(display_name(call["name"])) == error[
                "message"
            ]
        else:  # pragma: no cover - a new kind of recorded outcome
            pytest.fail(f"unexpected recorded outcome {error}")
