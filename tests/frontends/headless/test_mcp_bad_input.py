"""Bad input from an MCP server or from the model, in headless runs as a user has them
(tests/fakes/mcp_bad_server.py over stdio): each is one clear error to the model or the
user and the session goes on."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from tests.frontends.daemon._helpers import call_response, text_response
from tests.frontends.headless.test_mcp import model_requests, run

BAD = str(Path(__file__).resolve().parents[2] / "fakes" / "mcp_bad_server.py")


def bad_server(**config: Any) -> dict[str, Any]:
    return {"command": sys.executable, "args": [BAD], "trust": True, **config}


def function_responses(tmp_path: Path) -> list[dict[str, Any]]:
    last = model_requests(tmp_path)[-1]
    return [p["functionResponse"] for p in last.contents[-1]["parts"] if "functionResponse" in p]


def test_arguments_that_fail_the_tools_schema_are_the_models_error_and_the_server_is_not_called(tmp_path: Path) -> None:
    done = run(
        tmp_path,
        {"bad": bad_server()},
        call_response("mcp_bad_strict", {"n": "three"}),
        text_response("I passed a string."),
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["response"] == "I passed a string."
    [response] = function_responses(tmp_path)
    assert response["response"] == {"error": "params/n must be integer"}



def test_a_tool_whose_schema_is_not_json_schema_is_skipped_in_one_line_and_the_others_are_declared(
    tmp_path: Path,
) -> None:
    """Declared, the schema would fail every request of the session (the API rejects
    it): the tool is not offered, the user is told why, the session goes on."""
    done = run(
        tmp_path,
        {"bad": bad_server()},
        call_response("mcp_bad_bad_schema", {"x": 1}),
        text_response("No such tool."),
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[0] == (
        "MCP server 'bad': skipped tool 'bad_schema': its input schema is not valid JSON Schema "
        "('frobnicate' is not valid under any of the given schemas at /properties/x/type)"
    )
    first = model_requests(tmp_path)[0]
    declared = [d["name"] for d in first.config["tools"][0]["functionDeclarations"]]
    assert [n for n in declared if n.startswith("mcp_")] == ["mcp_bad_strict", "mcp_bad_huge", "mcp_bad_echo"]
    [response] = function_responses(tmp_path)
    assert str(response["response"]["error"]).startswith('Tool "mcp_bad_bad_schema" not found.')


def test_a_result_of_50_mb_gives_the_model_its_head_and_tail_and_the_whole_is_saved(tmp_path: Path) -> None:
    """As Gemini CLI cuts an MCP tool's long text (``tools.truncateToolOutputThreshold``);
    the SDK's stdio reader, quadratic in a line's length, took 20 s of the session's event
    loop for it (actors/mcp/_stdio_lines.py)."""
    done = run(
        tmp_path,
        {"bad": bad_server()},
        call_response("mcp_bad_huge", {"megabytes": 50}),
        text_response("That was long."),
        output="stream-json",
    )
    assert done.returncode == 0, done.stderr
    [response] = function_responses(tmp_path)
    output = response["response"]["output"]
    assert output.startswith("Output too large. Showing first 8,000 and last 32,000 characters. For full output see: ")
    saved = Path(output.splitlines()[0].rsplit(": ", 1)[1])
    assert len(output) < 41_000
    assert saved.stat().st_size == 50 * 1024 * 1024 + len("<untrusted_context>\n\n</untrusted_context>")
    events = [json.loads(line) for line in done.stdout.splitlines()]
    [result] = [e for e in events if e["type"] == "tool_result"]
    assert result["status"] == "success"
    assert len(json.dumps(result)) < 50_000
