"""``agentbus -p`` (a real process) on the live backend against the fake Gemini server:
bad input ends the run with Gemini CLI's outputs and exit codes, and
``--record-responses`` writes a file that replays to the same transcript."""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

from tests.fakes.gemini_server import FakeGeminiServer, Fault, error_info, google_error_body

ROOT = Path(__file__).resolve().parents[2]
AGENTBUS = Path(sys.executable).parent / "agentbus"
DEMO = ROOT / "scenarios" / "demo-fix-mean"

pytestmark = pytest.mark.skipif(not AGENTBUS.exists(), reason="agentbus is not installed in this environment")


@attrs.frozen
class Run:
    code: int
    stdout: str
    stderr: str

    def events(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.stdout.splitlines() if line.strip()]


async def agentbus(tmp: Path, *args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> Run:
    home = tmp / "home"
    home.mkdir(exist_ok=True)
    base = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "GEMINI_CLI_HOME": str(home),
        "AGENTBUS_DATA_DIR": str(tmp / "data"),
        "LANG": "C.UTF-8",
    }
    proc = await trio.run_process(
        [str(AGENTBUS), *args],
        stdin=b"",
        capture_stdout=True,
        capture_stderr=True,
        check=False,
        cwd=str(cwd or home),
        env={**base, **(env or {})},
    )
    return Run(proc.returncode, proc.stdout.decode(), proc.stderr.decode())


async def against(tmp: Path, server: FakeGeminiServer, fmt: str, *extra: str, model: str = "gemini-2.5-flash") -> Run:
    env = {"GEMINI_API_KEY": "not-a-key", "GOOGLE_GEMINI_BASE_URL": server.base_url}
    return await agentbus(tmp, "-p", "hi", "-m", model, "-o", fmt, *extra, env=env)


async def with_server(fault: Fault, fn: Any) -> Any:
    server = FakeGeminiServer([], faults=[fault])
    async with trio.open_nursery() as nursery:
        await nursery.start(server.run)
        result = await fn(server)
        nursery.cancel_scope.cancel()
    return result


KEY_INVALID = google_error_body(
    400,
    "API key not valid. Please pass a valid API key.",
    details=[error_info("API_KEY_INVALID", service="generativelanguage.googleapis.com")],
)


async def test_wrong_api_key_stream_json(tmp_path: Path) -> None:
    run = await with_server(Fault.http_error(400, body=KEY_INVALID), lambda s: against(tmp_path, s, "stream-json"))
    result = run.events()[-1]
    assert result["type"] == "result" and result["status"] == "error"
    assert result["error"] == {"type": "unknown", "message": f"[API Error: {json.dumps(KEY_INVALID, separators=(',', ':'))}]"}
    assert run.code == 400 & 0xFF  # Gemini CLI exits with the numeric status


async def test_wrong_api_key_json_and_the_session_recording(tmp_path: Path) -> None:
    run = await with_server(Fault.http_error(400, body=KEY_INVALID), lambda s: against(tmp_path, s, "json"))
    doc = json.loads(run.stderr[run.stderr.index("{") :])
    assert doc["error"]["code"] == 400 and doc["error"]["type"] == "Error"
    assert json.loads(doc["error"]["message"])["error"]["message"] == "API key not valid. Please pass a valid API key."
    assert run.code == 144
    # the session's recording says what happened
    [recording] = (tmp_path / "data" / "sessions").glob("*.jsonl")
    failed = [json.loads(line) for line in recording.read_text().splitlines() if '"ModelFailed"' in line]
    assert failed, "the recording has the ModelFailed message"
    error = failed[0]["msg"]["error"]
    assert error["http_status"] == 400 and error["reason"] == "API_KEY_INVALID"


async def test_unknown_model(tmp_path: Path) -> None:
    msg = "models/gemini-nope is not found for API version v1beta, or is not supported for generateContent."
    run = await with_server(Fault.http_error(404, msg), lambda s: against(tmp_path, s, "stream-json", model="gemini-nope"))
    assert run.events()[-1]["error"]["message"] == f"[API Error: {msg}]"
    assert run.code == 1  # ModelNotFoundError carries no status


async def test_non_json_chunk(tmp_path: Path) -> None:
    run = await with_server(Fault.malformed(after_chunks=0, text="<html>oops</html>"), lambda s: against(tmp_path, s, "stream-json"))
    message = run.events()[-1]["error"]["message"]
    assert message.startswith("[API Error: exception parsing stream chunk <html>oops</html>. SyntaxError: ")
    assert run.code == 1


async def test_text_mode_reports_on_stderr(tmp_path: Path) -> None:
    run = await with_server(Fault.http_error(400, body=KEY_INVALID), lambda s: against(tmp_path, s, "text"))
    assert "Error when talking to Gemini API" in run.stderr and "API key not valid" in run.stderr
    assert run.code == 1


def normalised(run: Run) -> list[dict[str, Any]]:
    out = []
    for event in run.events():
        event = {k: v for k, v in event.items() if k not in ("timestamp", "session_id")}
        if event.get("type") == "result":
            event["stats"] = {k: v for k, v in event["stats"].items() if k != "duration_ms"}
        out.append(json.loads(re.sub(r"_\d{10,}_", "_T_", json.dumps(event))))
    return out


async def test_recorded_responses_replay_to_the_same_transcript(tmp_path: Path) -> None:
    """Live calls (the fake server through the real SDK) recorded with
    ``--record-responses``, then replayed with ``--fake-responses``."""
    args = json.loads((DEMO / "scenario.json").read_text())["args"]
    prompt = json.loads((DEMO / "scenario.json").read_text())["prompt"]
    recorded = tmp_path / "recorded.responses"
    runs = []
    for name, extra, env in (
        ("live", ["--fake-responses", str(DEMO / "fake.responses"), "--record-responses", str(recorded)], {"AGENTBUS_FAKE_RESPONSES_OVER_HTTP": "1"}),
        ("replay", ["--fake-responses", str(recorded)], {}),
    ):
        work = tmp_path / name / "workspace"
        shutil.copytree(DEMO / "workspace", work)
        runs.append(await agentbus(tmp_path / name, "-p", prompt, *args, "-o", "stream-json", *extra, env=env, cwd=work))
    live, replay = runs
    assert live.code == 0 and replay.code == 0, live.stderr + replay.stderr
    lines = [json.loads(line) for line in recorded.read_text().splitlines()]
    original = [json.loads(line) for line in (DEMO / "fake.responses").read_text().splitlines()]
    assert [entry["method"] for entry in lines] == [entry["method"] for entry in original]
    for entry in lines:  # only candidates and usageMetadata are kept
        assert all(set(chunk) <= {"candidates", "usageMetadata"} for chunk in entry["response"])
    assert normalised(live) == normalised(replay)
    assert (tmp_path / "live" / "workspace" / "calc.py").read_text() == (tmp_path / "replay" / "workspace" / "calc.py").read_text()
