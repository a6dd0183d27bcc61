"""A call is validated in its batch's approval mode, not the session's first one: a
session started in plan mode that leaves it writes to the workspace again (write_file
and replace refused every workspace path as "plan path … must be within the designated
plans directory" for the rest of the session), and one that enters plan mode has its
writes checked as plan files."""

from __future__ import annotations

from pathlib import Path

import attrs

from actors.host import runtime
from actors.scheduler import ToolSpec
from actors.tools import EditTool, ToolEnv, WriteFileTool
from tests.system.test_text_turn import session_config

PLAN_REFUSAL = "Access denied: plan path"


def specs(tmp_path: Path, first_mode: str) -> dict[str, ToolSpec]:
    cfg = session_config(tmp_path)
    env: ToolEnv = attrs.evolve(cfg.env, session_id="s1", approval_mode=first_mode)
    tools = {"write_file": WriteFileTool(), "replace": EditTool()}
    cfg = attrs.evolve(cfg, env=env, approval_mode=first_mode, tools=tools)
    return runtime.tool_specs(cfg, runtime.addresses_for("s1", ["files"]))


def test_a_session_that_left_plan_mode_validates_workspace_writes(tmp_path: Path) -> None:
    checks = specs(tmp_path, "plan")
    outside_plans = str(tmp_path / "a.py")
    write = {"file_path": outside_plans, "content": "x"}
    edit = {"file_path": outside_plans, "old_string": "a", "new_string": "b"}
    assert PLAN_REFUSAL in (checks["write_file"].validate(write, "plan") or "")
    assert checks["write_file"].validate(write, "default") is None
    assert PLAN_REFUSAL not in (checks["replace"].validate(edit, "auto_edit") or "")


def test_a_session_that_entered_plan_mode_checks_writes_as_plan_files(tmp_path: Path) -> None:
    checks = specs(tmp_path, "default")
    write = {"file_path": str(tmp_path / "a.py"), "content": "x"}
    assert checks["write_file"].validate(write, "default") is None
    assert PLAN_REFUSAL in (checks["write_file"].validate(write, "plan") or "")
