"""write_file and replace in plan mode: the path is a plan file, resolved as Gemini CLI's
``resolveAndValidatePlanPath`` does (an absolute path or one relative to the project
inside the plans directory, else relative to the plans directory, which it must not
leave). The plans directory is ``<project temp>/<session id>/plans``; nothing is
written in the workspace."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest

from actors.tools import plans_dir
from actors.tools._base import ToolEnv
from actors.tools._replace import EditTool
from actors.tools._write_file import WriteFileTool

from ._file_env import call, make_env

WRITE = WriteFileTool()
EDIT = EditTool()


def plan_env(tmp_path: Path) -> ToolEnv:
    return attrs.evolve(make_env(tmp_path), session_id="s1", approval_mode="plan")


async def test_write_file_in_plan_mode_writes_into_the_plans_directory(tmp_path: Path) -> None:
    env = plan_env(tmp_path)
    plans = Path(plans_dir(env))
    assert plans == env.project_temp_dir / "s1" / "plans"
    out = await call(WRITE, env, file_path="plan.md", content="# Plan\n")
    assert out.invalid is None and out.error is None, out
    assert (plans / "plan.md").read_text() == "# Plan\n"
    assert not (env.workspace / "plan.md").exists()
    # An absolute path inside the plans directory is taken as it is.
    out = await call(WRITE, env, file_path=str(plans / "other.md"), content="x")
    assert out.error is None and (plans / "other.md").read_text() == "x"


async def test_a_plan_path_may_not_leave_the_plans_directory(tmp_path: Path) -> None:
    env = plan_env(tmp_path)
    out = await call(WRITE, env, file_path="../escape.md", content="x")
    assert out.invalid == (
        "Access denied: plan path (../escape.md) must be within the designated plans "
        f"directory ({plans_dir(env)})."
    )
    out = await call(WRITE, env, file_path="   ", content="x")
    assert out.invalid == "Plan file path must be non-empty."


async def test_replace_in_plan_mode_edits_the_plan(tmp_path: Path) -> None:
    env = plan_env(tmp_path)
    (env.workspace / "plan.md").write_text("workspace copy\n")
    await call(WRITE, env, file_path="plan.md", content="step one\n")
    out = await call(EDIT, env, file_path="plan.md", old_string="one", new_string="two", instruction="i")
    assert out.error is None, out
    assert (Path(plans_dir(env)) / "plan.md").read_text() == "step two\n"
    assert (env.workspace / "plan.md").read_text() == "workspace copy\n"


async def test_outside_plan_mode_paths_are_the_workspaces(tmp_path: Path) -> None:
    env = attrs.evolve(make_env(tmp_path), session_id="s1", approval_mode="default")
    out = await call(WRITE, env, file_path="plan.md", content="x")
    assert out.error is None and (env.workspace / "plan.md").read_text() == "x"


def test_the_session_setup_gives_tools_the_sessions_mode(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from actors.host.setup import session_setup

    monkeypatch.setenv("GEMINI_CLI_HOME", str(tmp_path))

    def mode(approval: str, settings: dict[str, object]) -> str:
        setup = session_setup(
            workspace=tmp_path, settings=settings, session_id="s", model="m", approval_mode=approval, interactive=False
        )
        return setup.env.approval_mode

    assert mode("plan", {}) == "plan"
    assert mode("plan", {"general": {"plan": {"enabled": False}}}) == "default"  # Gemini's fallback


def test_plan_mode_declarations_say_where_plans_go(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from actors.host.setup import agent_wiring, session_setup

    monkeypatch.setenv("GEMINI_CLI_HOME", str(tmp_path))

    def descriptions(approval: str) -> tuple[str, dict[str, str]]:
        setup = session_setup(
            workspace=tmp_path, settings={}, session_id="s", model="m", approval_mode=approval, interactive=True
        )
        config = agent_wiring(setup)["request_config"]("m")
        decls = config["tools"][0]["functionDeclarations"]
        return plans_dir(setup.env), {d["name"]: d["description"] for d in decls}

    (where, plan), (_, default) = descriptions("plan"), descriptions("default")
    assert where.endswith("/s/plans")
    for name in ("write_file", "replace"):
        assert plan[name].startswith("PLANS ONLY: ") and f"{where}/" in plan[name]
        assert not default[name].startswith("PLANS ONLY")
