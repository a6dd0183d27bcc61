"""Shared set-up for the file tool tests: a workspace, a project temp dir, a call helper."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import jsonschema

from actors.tools._base import Tool, ToolEnv


def thaw(value: Any) -> Any:
    """Frozen JSON back to plain dicts and lists, for comparisons."""
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [thaw(v) for v in value]
    return value


@attrs.frozen
class Outcome:
    """What the scheduler would see: a validation error, or the tool's result."""

    invalid: str | None = None
    llm: Any = None
    display: Any = None
    error_type: str | None = None
    error: str | None = None


def make_env(tmp_path: Path, **settings: Any) -> ToolEnv:
    root = tmp_path.resolve()
    workspace = root / "ws"
    workspace.mkdir(exist_ok=True)
    temp = root / "home" / ".gemini" / "tmp" / "ws"
    temp.mkdir(parents=True, exist_ok=True)
    return ToolEnv(workspace=workspace, project_temp_dir=temp, settings=settings, model="")


async def call(tool: Tool, env: ToolEnv, **args: Any) -> Outcome:
    """Schema check, value check, then execute — the scheduler's order."""
    schema = tool.declaration(env.model)["parametersJsonSchema"]
    errors = list(jsonschema.Draft7Validator(schema).iter_errors(args))
    assert not errors, errors
    problem = tool.validate(args, env)
    if problem is not None:
        return Outcome(invalid=problem)
    result = await tool.execute(args, env)
    return Outcome(
        llm=thaw(result.llm_content),
        display=thaw(result.return_display),
        error_type=result.error_type,
        error=result.error_message,
    )


def outside_message(env: ToolEnv, path: str) -> str:
    return (
        f'Path not in workspace: Attempted path "{path}" resolves outside the allowed '
        f"workspace directories: {env.workspace} or the project temp directory: "
        f"{env.project_temp_dir}"
    )


def check_declaration(tool: Tool, properties: Mapping[str, str], required: list[str]) -> None:
    for model in ("", "gemini-2.5-flash", "gemini-3-flash-preview"):
        decl = tool.declaration(model)
        assert decl["name"] == tool.name
        assert isinstance(decl["description"], str) and decl["description"]
        schema = decl["parametersJsonSchema"]
        jsonschema.Draft7Validator.check_schema(schema)
        assert schema["type"] == "object"
        assert {k: v["type"] for k, v in schema["properties"].items()} == dict(properties)
        assert schema["required"] == required


def remove_tree(root: Path) -> None:
    """``shutil.rmtree`` without recursion: a call may have made a thousand nested
    directories (``write_file`` of ``a/a/.../x``), which pytest's own clean-up of
    ``tmp_path`` could not remove."""
    stack = [os.fsencode(root)]
    while stack:
        top = stack[-1]
        with os.scandir(top) as entries:
            listed = list(entries)
        subdirs = [e.path for e in listed if e.is_dir(follow_symlinks=False)]
        for entry in listed:
            if not entry.is_dir(follow_symlinks=False):
                os.unlink(entry.path)
        if subdirs:
            stack.extend(subdirs)
        else:
            os.rmdir(top)
            stack.pop()
