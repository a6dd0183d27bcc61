"""Headless runs with MCP servers from settings.json, as a user runs them: the SDK's
``MCPServer`` (tests/fakes/mcp_server.py) as a stdio subprocess, the model scripted.

The runs whose MCP results reach the model go through both backends (``backend``): the scripted
one in-process, and the live one (the real google-genai SDK over HTTP to
tests/fakes/gemini_server.py, ``AGENTBUS_FAKE_RESPONSES_OVER_HTTP=1``)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from actors.recording import load_recording
from bus.messages import GenerateRequest
from tests.frontends.daemon._helpers import call_response, text_response, write_responses
from tests.frontends.daemon._procs import ends_within, env_for

AGENTBUS = str(Path(sys.executable).with_name("agentbus"))
SERVER = str(Path(__file__).resolve().parents[2] / "fakes" / "mcp_server.py")


@pytest.fixture(params=["in-process", "live"])
def backend(request: pytest.FixtureRequest) -> dict[str, str]:
    """The environment that picks the backend a run's model answers from."""
    return {"AGENTBUS_FAKE_RESPONSES_OVER_HTTP": "1"} if request.param == "live" else {}


def stdio_server(*extra: str, **config: Any) -> dict[str, Any]:
    return {"command": sys.executable, "args": [SERVER, *extra], **config}


def run(
    tmp_path: Path,
    servers: dict[str, Any],
    *responses: dict[str, Any],
    output: str = "json",
    flags: tuple[str, ...] = (),
    settings: dict[str, Any] | None = None,
    backend: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    (tmp_path / "home" / ".gemini").mkdir(parents=True, exist_ok=True)
    (tmp_path / "home" / ".gemini" / "settings.json").write_text(json.dumps({"mcpServers": servers, **(settings or {})}))
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    script = write_responses(tmp_path / "model.responses", *responses)
    return subprocess.run(
        [AGENTBUS, "-p", "go", "-m", "gemini-2.5-flash", "--fake-responses", str(script), "-o", output, *flags],
        cwd=ws,
        env={**env_for(tmp_path), **(backend or {})},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def model_requests(tmp_path: Path) -> list[GenerateRequest]:
    [recording] = (tmp_path / "data" / "sessions").glob("*.jsonl")
    return [e.message for e in load_recording(recording).envelopes if isinstance(e.message, GenerateRequest)]


def test_the_model_calls_a_trusted_servers_tool_and_reads_its_result(tmp_path: Path, backend: dict[str, str]) -> None:
    done = run(
        tmp_path,
        {"fake": stdio_server(trust=True)},
        call_response("mcp_fake_echo", {"text": "hello"}),
        text_response("The server said hello."),
        backend=backend,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    out = json.loads(done.stdout)
    assert out["response"] == "The server said hello."
    assert out["stats"]["tools"]["byName"]["mcp_fake_echo"]["success"] == 1
    first, second = model_requests(tmp_path)
    declared = [d["name"] for d in first.config["tools"][0]["functionDeclarations"]]
    assert declared[-7:] == [f"mcp_fake_{t}" for t in ("echo", "picture", "both", "fail", "wait", "pid", "crash")]
    [response] = [p["functionResponse"] for p in second.contents[-1]["parts"]]
    assert response["name"] == "mcp_fake_echo"
    assert response["response"] == {"output": "<untrusted_context>\necho: hello\n</untrusted_context>"}


def test_an_error_result_reaches_the_model_and_the_stream_as_a_tool_error(tmp_path: Path, backend: dict[str, str]) -> None:
    done = run(
        tmp_path,
        {"fake": stdio_server(trust=True)},
        call_response("mcp_fake_fail", {"reason": "no"}),
        text_response("It failed."),
        output="stream-json",
        backend=backend,
    )
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    [result] = [e for e in events if e["type"] == "tool_result"]
    assert result["status"] == "error"
    assert result["error"]["type"] == "mcp_tool_error"
    assert result["error"]["message"].startswith("MCP tool 'fail' reported tool error for function call:")


def test_a_hung_and_a_missing_server_are_reported_and_the_session_goes_on(tmp_path: Path) -> None:
    done = run(
        tmp_path,
        {
            "fake": stdio_server(trust=True),
            "hung": stdio_server("--hang", timeout=500),
            "missing": {"command": str(tmp_path / "no-such-server")},
        },
        call_response("mcp_fake_echo", {"text": "hi"}),
        text_response("Done."),
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == [
        f"MCP server 'hung' did not answer within 0.5s ({sys.executable} {SERVER} --hang)",
        f"MCP server 'missing' could not be started: command not found: {tmp_path / 'no-such-server'}",
    ]
    assert json.loads(done.stdout)["stats"]["tools"]["byName"]["mcp_fake_echo"]["success"] == 1


def test_an_untrusted_servers_tools_are_not_offered_to_a_headless_model(tmp_path: Path) -> None:
    done = run(
        tmp_path,
        {"fake": stdio_server()},
        call_response("mcp_fake_echo", {"text": "hi"}),
        text_response("Done."),
    )
    assert done.returncode == 0, done.stderr
    [first, _] = model_requests(tmp_path)
    declared = [d["name"] for d in first.config["tools"][0]["functionDeclarations"]]
    assert not [n for n in declared if n.startswith("mcp_")]
    assert json.loads(done.stdout)["stats"]["tools"]["byName"]["mcp_fake_echo"]["fail"] == 1


def test_a_trusted_server_whose_name_has_an_underscore_runs_its_tools(tmp_path: Path) -> None:
    """Its trust rule names the server ``my_srv``; the tool's name alone reads as server
    ``my`` (``mcp_my_srv_echo``): the policy must be told the server (it denied the call)."""
    done = run(
        tmp_path,
        {"my_srv": stdio_server(trust=True)},
        call_response("mcp_my_srv_echo", {"text": "hi"}),
        text_response("Done."),
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["stats"]["tools"]["byName"]["mcp_my_srv_echo"]["success"] == 1


def test_a_recorded_mcp_call_replays_without_the_server(tmp_path: Path) -> None:
    done = run(
        tmp_path,
        {"fake": stdio_server(trust=True)},
        call_response("mcp_fake_echo", {"text": "hello"}),
        text_response("Done."),
    )
    assert done.returncode == 0, done.stderr
    (tmp_path / "home" / ".gemini" / "settings.json").write_text("{}")
    [recording] = (tmp_path / "data" / "sessions").glob("*.jsonl")
    replayed = subprocess.run(
        [AGENTBUS, "replay", "--check", "-o", "none", str(recording)],
        cwd=tmp_path / "ws",
        env=env_for(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert replayed.returncode == 0, replayed.stderr
    assert "check OK" in replayed.stderr


def test_tools_whose_names_another_server_has_are_skipped_in_one_line(tmp_path: Path) -> None:
    """``a b`` and ``a_b`` both register ``mcp_a_b_<tool>`` (Gemini's character
    sanitising): the first server by name keeps them."""
    done = run(
        tmp_path,
        {"a_b": stdio_server(), "a b": stdio_server()},
        call_response("mcp_a_b_echo", {"text": "hi"}),
        text_response("Done."),
        flags=("--yolo",),
    )
    assert done.returncode == 0, done.stderr
    names = ", ".join(f"mcp_a_b_{t}" for t in ("echo", "picture", "both", "fail", "wait", "pid", "crash"))
    assert done.stderr.splitlines() == [
        f"MCP server 'a_b': skipped 7 tool(s) whose names another server's or a built-in tool has: {names}"
    ]
    assert json.loads(done.stdout)["stats"]["tools"]["byName"]["mcp_a_b_echo"]["success"] == 1


def test_a_tool_another_server_would_shadow_but_may_not_offer_is_the_offered_servers(tmp_path: Path) -> None:
    """``a b`` sorts first, but headless its untrusted tools are not offered: the trusted
    ``a_b``'s tools of the same names are the ones offered, without a line (they were
    skipped for ``a b``'s, which were then dropped: no ``mcp_a_b_echo`` at all)."""
    done = run(
        tmp_path,
        {"a_b": stdio_server(trust=True), "a b": stdio_server()},
        call_response("mcp_a_b_echo", {"text": "hi"}),
        text_response("Done."),
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert json.loads(done.stdout)["stats"]["tools"]["byName"]["mcp_a_b_echo"]["success"] == 1


def test_skip_trust_is_passed_on_to_the_servers_environment_as_gemini_cli_does(tmp_path: Path) -> None:
    """``--skip-trust`` sets ``GEMINI_CLI_TRUST_WORKSPACE=true`` for the run's processes."""
    names = {"command": sys.executable, "args": [str(Path(SERVER).with_name("mcp_names_server.py"))], "trust": True}
    done = run(
        tmp_path,
        {"names": names},
        call_response("mcp_names_variable", {"name": "GEMINI_CLI_TRUST_WORKSPACE"}),
        text_response("Done."),
        flags=("--skip-trust",),
    )
    assert done.returncode == 0, done.stderr
    [response] = [p["functionResponse"] for p in model_requests(tmp_path)[1].contents[-1]["parts"]]
    assert response["response"] == {"output": "<untrusted_context>\nGEMINI_CLI_TRUST_WORKSPACE=true\n</untrusted_context>"}


def test_ctrl_c_during_a_call_cancels_it_and_the_servers_process_ends_with_the_run(
    tmp_path: Path, backend: dict[str, str]
) -> None:
    marker = tmp_path / "marker"
    (tmp_path / "home" / ".gemini").mkdir(parents=True)
    (tmp_path / "home" / ".gemini" / "settings.json").write_text(json.dumps({"mcpServers": {"fake": stdio_server(trust=True)}}))
    (tmp_path / "ws").mkdir()
    script = write_responses(
        tmp_path / "model.responses", call_response("mcp_fake_wait", {"marker": str(marker)}), text_response("Done.")
    )
    proc = subprocess.Popen(
        [AGENTBUS, "-p", "go", "-m", "gemini-2.5-flash", "--fake-responses", str(script), "-o", "json"],
        cwd=tmp_path / "ws",
        env={**env_for(tmp_path), **backend},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        eventually(lambda: marker.exists() and marker.read_text() == "started")
        server = int((tmp_path / "marker.pid").read_text())
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert marker.read_text() == "cancelled"
    assert ends_within(server, 30), "the server outlived the run"


def eventually(check: Callable[[], bool], bound_s: float = 30.0) -> None:
    """Wait for what another process brings about (polled; bounded against hangs)."""
    deadline = time.monotonic() + bound_s
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)




def test_tools_exclude_names_an_mcp_tool_by_its_name_on_the_server(tmp_path: Path) -> None:
    done = run(
        tmp_path,
        {"fake": stdio_server(trust=True)},
        text_response("Done."),
        settings={"tools": {"exclude": ["echo", "mcp_fake_pid"]}},
    )
    assert done.returncode == 0, done.stderr
    [first] = model_requests(tmp_path)
    declared = [d["name"] for d in first.config["tools"][0]["functionDeclarations"] if d["name"].startswith("mcp_")]
    assert declared == [f"mcp_fake_{t}" for t in ("picture", "both", "fail", "wait", "crash")]


def test_before_and_after_tool_hooks_get_the_calls_mcp_context(tmp_path: Path) -> None:
    seen = tmp_path / "hook-input"
    hook = {"matcher": "mcp_fake_echo", "hooks": [{"type": "command", "command": f"cat >> {seen}; echo >> {seen}"}]}
    done = run(
        tmp_path,
        {"fake": stdio_server(trust=True)},
        call_response("mcp_fake_echo", {"text": "hi"}),
        text_response("Done."),
        settings={"hooks": {"BeforeTool": [hook], "AfterTool": [hook]}},
    )
    assert done.returncode == 0, done.stderr
    inputs = [json.loads(line) for line in seen.read_text().splitlines() if line.strip()]
    assert [i["hook_event_name"] for i in inputs] == ["BeforeTool", "AfterTool"]
    for i in inputs:
        assert i["mcp_context"] == {"server_name": "fake", "tool_name": "echo", "command": sys.executable, "args": [SERVER]}


def test_an_image_result_is_counted_by_the_count_tokens_api_which_is_no_request_in_the_stats(
    tmp_path: Path, backend: dict[str, str]
) -> None:
    """A function response holding media has its tokens counted by ``countTokens``
    before it is sent, as Gemini CLI does; Gemini's stats do not count that call (its
    logging content generator does not log ``countTokens``): two requests, both main."""
    done = run(
        tmp_path,
        {"fake": stdio_server(trust=True)},
        call_response("mcp_fake_picture", {}),
        {"method": "countTokens", "response": {"totalTokens": 7}},
        text_response("A picture."),
        backend=backend,
    )
    assert done.returncode == 0, done.stderr
    [model] = json.loads(done.stdout)["stats"]["models"].values()
    assert model["api"]["totalRequests"] == 2
    assert list(model["roles"]) == ["main"]
    assert model["roles"]["main"]["totalRequests"] == 2
    _, _, last = model_requests(tmp_path)
    assert [list(p) for p in last.contents[-1]["parts"]] == [["functionResponse"], ["inlineData"]]
