"""The corpus' own hook scripts, fed the inputs Gemini recorded, answer as recorded.

For every hook call in ``expected/hook_calls.json`` (stream-json run) of the scenarios
tagged ``hooks`` / ``agent-flow-*``: write the scenario's workspace files, load its
settings with ``load_hook_config``, plan the event, run the recorded command with the
recorded input, and compare exit code, stdout and the parsed output. The scripts are
Node programs: skipped when ``node`` is not on PATH.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from actors.hooks import load_hook_config, run_command_hook
from tests.conftest import SHARED

SCENARIOS = SHARED / "conformance" / "scenarios"
NAMES = sorted(
    p.name
    for p in (SCENARIOS.iterdir() if SCENARIOS.is_dir() else [])
    if (p.name.startswith("hooks-") or p.name.startswith("agent-flow-"))
    and (p / "expected" / "hook_calls.json").is_file()
)

pytestmark = [
    pytest.mark.skipif(not SCENARIOS.is_dir(), reason=f"conformance corpus not present at {SCENARIOS}"),
    pytest.mark.skipif(shutil.which("node") is None, reason="node is not on PATH (corpus hooks are Node programs)"),
]


def substitute(value: Any, mapping: dict[str, str]) -> Any:
    if isinstance(value, str):
        for k, v in mapping.items():
            value = value.replace(k, v)
        return value
    if isinstance(value, dict):
        return {k: substitute(v, mapping) for k, v in value.items()}
    if isinstance(value, list):
        return [substitute(v, mapping) for v in value]
    return value


@pytest.mark.parametrize("name", NAMES)
async def test_recorded_hook_calls_replay(name: str, tmp_path: Path) -> None:
    scenario = json.loads((SCENARIOS / name / "scenario.json").read_text())
    workspace, home, tmpdir = tmp_path / "ws", tmp_path / "home", tmp_path / "tmp"
    project_tmp = home / ".gemini" / "tmp" / "ws"
    for d in (workspace, home, tmpdir, project_tmp):
        d.mkdir(parents=True, exist_ok=True)
    there = {"{workspace}": str(workspace), "{project_tmp}": str(project_tmp), "{home}": str(home), "{tmpdir}": str(tmpdir)}
    back = {v: k for k, v in there.items()}
    for rel, text in scenario.get("workspace_files", {}).items():
        path = workspace / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(substitute(text, there))
    config = load_hook_config(substitute(scenario.get("project_settings", {}), there))
    env = {**os.environ, **substitute({k: v for k, v in scenario.get("env", {}).items() if k in ("HOME", "TMPDIR", "GEMINI_CLI_HOME")}, there)}
    calls = json.loads((SCENARIOS / name / "expected" / "hook_calls.json").read_text())["stream-json"]
    for call in calls:
        hook_input = substitute(json.loads(call["hook_input"]), there)
        event = call["hook_event_name"]
        plan = config.plan(event, hook_input.get("tool_name") or hook_input.get("source") or hook_input.get("trigger") or hook_input.get("reason") or "")
        assert plan is not None, (event, call["hook_name"])
        (hook,) = [h for h in plan.hooks if h.display_name == substitute(call["hook_name"], there)]
        result = await run_command_hook(hook, hook_input, base_env=env)
        recorded = call["hook_output"]
        recorded = json.loads(recorded) if isinstance(recorded, str) else recorded
        assert result.exit_code == call["exit_code"], call["hook_name"]
        assert result.success == call["success"]
        assert substitute(result.stdout, back) == call["stdout"]
        assert substitute(result.output if result.output is not None else {}, back) == recorded
