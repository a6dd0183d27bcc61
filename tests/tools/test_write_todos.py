"""write_todos: schema, Gemini's validation texts, the result text and the list as data."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import pytest

from actors.scheduler import with_wait_for_previous
from actors.tools._write_todos import WriteTodosTool, registered_for

from ._file_env import thaw
from ._web_env import web_env

TOOL = WriteTodosTool()


def schema_errors(args: Any) -> list[str]:
    schema = with_wait_for_previous(TOOL.declaration("gemini-2.5-pro")["parametersJsonSchema"])
    return [e.validator for e in jsonschema.Draft202012Validator(schema).iter_errors(args)]


def test_schema() -> None:
    assert (TOOL.name, TOOL.display_name, TOOL.kind) == ("write_todos", "WriteTodos", "other")
    assert schema_errors({"todos": [{"description": "a", "status": "pending"}]}) == []
    assert schema_errors({"todos": [{"description": "a", "status": "done"}]}) == ["enum"]
    assert schema_errors({"todos": [{"description": "a", "status": "blocked", "x": 1}]}) == [
        "additionalProperties"
    ]
    assert schema_errors({"todos": [], "extra": True}) == ["additionalProperties"]
    assert schema_errors({}) == ["required"]


@pytest.mark.parametrize(
    ("todos", "message"),
    [
        ("nope", "`todos` parameter must be an array"),
        (["x"], "Each todo item must be an object"),
        (
            [{"description": "  ", "status": "pending"}],
            "Each todo must have a non-empty description string",
        ),
        (
            [{"description": "a", "status": "done"}],
            "Each todo must have a valid status (pending, in_progress, completed, cancelled, blocked)",
        ),
        (
            [
                {"description": "a", "status": "in_progress"},
                {"description": "b", "status": "in_progress"},
            ],
            'Invalid parameters: Only one task can be "in_progress" at a time.',
        ),
    ],
)
def test_validation(tmp_path: Path, todos: Any, message: str) -> None:
    assert TOOL.validate({"todos": todos}, web_env(tmp_path, None)) == message


async def test_result_and_data(tmp_path: Path) -> None:
    env = web_env(tmp_path, None)
    todos = [
        {"description": "Read the code", "status": "completed"},
        {"description": "Fix the bug", "status": "in_progress"},
        {"description": "Ship", "status": "pending"},
    ]
    assert TOOL.validate({"todos": todos}, env) is None
    assert TOOL.describe({"todos": todos}, env) == "Set 3 todo(s)"
    result = await TOOL.execute({"todos": todos}, env)
    assert result.llm_content == (
        "Successfully updated the todo list. The current list is now:\n"
        "1. [completed] Read the code\n2. [in_progress] Fix the bug\n3. [pending] Ship"
    )
    assert thaw(result.data) == {"todos": todos}
    assert thaw(result.return_display) == {"todos": todos}


async def test_clearing(tmp_path: Path) -> None:
    env = web_env(tmp_path, None)
    assert TOOL.describe({"todos": []}, env) == "Cleared todo list"
    result = await TOOL.execute({"todos": []}, env)
    assert result.llm_content == "Successfully cleared the todo list."
    assert thaw(result.data) == {"todos": []}


@pytest.mark.parametrize(
    ("model", "registered"),
    [
        ("gemini-2.5-pro", True),
        ("gemini-2.5-flash", True),
        ("gemini-2", True),
        ("gemini-3-flash-preview", False),
        ("gemini-3.1-pro-preview", False),
        ("auto", False),
        ("gemini-20", False),
        ("", False),
    ],
)
def test_registered_only_for_gemini_2(model: str, registered: bool) -> None:
    assert registered_for(model) is registered
    assert registered_for(model, tracker_enabled=True) is False
