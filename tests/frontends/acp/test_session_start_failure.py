"""A session of ``agentbus acp`` that cannot start (its recording cannot be opened or
written) is the answer to its ``session/new`` or ``session/load``: one JSON-RPC error in
the cause's words, no traceback; the process and the editor's other sessions go on
(issue 17: no session dies of another's input)."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ._client import call_chunks, fake_responses, text_chunks
from .test_stdio import _read_until, _send

INTERNAL_ERROR = -32603


def spawn(tmp_path: Path, script: Path | None = None, *, file_size_limit: int | None = None) -> subprocess.Popen[bytes]:
    env = {**os.environ, "HOME": str(tmp_path), "GEMINI_CLI_HOME": str(tmp_path), "AGENTBUS_DATA_DIR": str(tmp_path / "data")}

    def limit() -> None:
        if file_size_limit is not None:
            # Python ignores SIGXFSZ: a write past the limit fails with EFBIG.
            resource.setrlimit(resource.RLIMIT_FSIZE, (file_size_limit, resource.RLIM_INFINITY))

    return subprocess.Popen(
        [sys.executable, "-m", "actors.frontends", "acp", "-m", "gemini-2.5-flash"]
        + (["--fake-responses", str(script)] if script is not None else []),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
        env=env,
        preexec_fn=limit,
    )


def answered(rid: int) -> Callable[[dict[str, Any]], bool]:
    return lambda frame: frame.get("id") == rid and "method" not in frame


def request(rid: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}


def prompt(rid: int, sid: str, text: str) -> dict[str, Any]:
    return request(rid, "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": text}]})


def finish(proc: subprocess.Popen[bytes]) -> str:
    """End of input: the process exits 0; its stderr."""
    assert proc.stdin is not None and proc.stderr is not None
    proc.stdin.close()
    assert proc.wait(timeout=20) == 0
    return proc.stderr.read().decode()


def one_line_error(frame: dict[str, Any]) -> str:
    assert frame["error"]["code"] == INTERNAL_ERROR
    message = frame["error"]["message"]
    assert isinstance(message, str) and "\n" not in message
    assert "Exceptions from Trio nursery" not in message
    return message


def test_a_data_dir_that_is_a_file_is_the_answer_to_session_new_and_the_agent_goes_on(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    data = tmp_path / "data"
    data.write_text("not a directory")
    script = fake_responses(tmp_path / "fake.jsonl", text_chunks("answered"))
    with spawn(tmp_path, script) as proc:
        _send(proc, request(0, "initialize", {"protocolVersion": 1}))
        _send(proc, request(1, "session/new", {"cwd": str(ws), "mcpServers": []}))
        message = one_line_error(_read_until(proc, answered(1))[-1])
        assert "cannot open recording" in message and str(data / "sessions") in message
        assert "Not a directory" in message
        _send(proc, request(9, "session/list", {}))
        listed = one_line_error(_read_until(proc, answered(9))[-1])
        assert listed == f"Cannot list sessions: Not a directory: {data / 'sessions'}"
        # The user mends it; the same process serves the next session.
        data.unlink()
        _send(proc, request(2, "session/new", {"cwd": str(ws), "mcpServers": []}))
        sid = _read_until(proc, answered(2))[-1]["result"]["sessionId"]
        _send(proc, prompt(3, sid, "hello"))
        assert _read_until(proc, answered(3))[-1]["result"]["stopReason"] == "end_turn"
        stderr = finish(proc)
    assert "Traceback" not in stderr


def test_a_recording_that_cannot_be_written_fails_its_load_alone(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    script = fake_responses(tmp_path / "fake.jsonl", text_chunks("first"), text_chunks("second"))
    # A session with a long prompt, recorded by an earlier process.
    with spawn(tmp_path, script) as proc:
        _send(proc, request(0, "initialize", {"protocolVersion": 1}))
        _send(proc, request(1, "session/new", {"cwd": str(ws), "mcpServers": []}))
        big = _read_until(proc, answered(1))[-1]["result"]["sessionId"]
        _send(proc, prompt(2, big, "x" * 200_000))
        assert _read_until(proc, answered(2))[-1]["result"]["stopReason"] == "end_turn"
        finish(proc)
    recording = tmp_path / "data" / "sessions" / f"{big}.jsonl"
    size = recording.stat().st_size
    # Files may not grow past that size now: the long session cannot be written to,
    # a new one can.
    with spawn(tmp_path, script, file_size_limit=size) as proc:
        _send(proc, request(0, "initialize", {"protocolVersion": 1}))
        _send(proc, request(1, "session/new", {"cwd": str(ws), "mcpServers": []}))
        small = _read_until(proc, answered(1))[-1]["result"]["sessionId"]
        load = {"sessionId": big, "cwd": str(ws), "mcpServers": []}
        for rid in (2, 3):  # asked again, it says the same: nothing of the first try is left
            _send(proc, request(rid, "session/load", load))
            message = one_line_error(_read_until(proc, answered(rid))[-1])
            assert message == f"The session could not start: cannot write recording {recording}: File too large"
        _send(proc, prompt(4, small, "still here?"))
        assert _read_until(proc, answered(4))[-1]["result"]["stopReason"] == "end_turn"
        stderr = finish(proc)
    assert "Traceback" not in stderr
    assert recording.stat().st_size == size
    lines = [json.loads(line) for line in (tmp_path / "data" / "sessions" / f"{small}.jsonl").read_text().splitlines()]
    assert [m["msg"]["type"] for m in lines if m.get("msg", {}).get("type") == "TurnEnded"] == ["TurnEnded"]


def test_sessions_whose_recording_goes_away_stop_alone_and_say_why(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    # A call that waits on an approval nobody gives: the turn can only end by the
    # session's failure (the recording is synced when the question is asked).
    script = fake_responses(tmp_path / "fake.jsonl", call_chunks(("write_file", {"file_path": "a.txt", "content": "a"})))
    sessions = tmp_path / "data" / "sessions"
    with spawn(tmp_path, script) as proc:
        _send(proc, request(0, "initialize", {"protocolVersion": 1}))
        sids = []
        for rid in (1, 2):
            _send(proc, request(rid, "session/new", {"cwd": str(ws), "mcpServers": []}))
            sids.append(_read_until(proc, answered(rid))[-1]["result"]["sessionId"])
        busy, idle = sids
        # The recordings' folder is moved away; a file takes its name.
        sessions.rename(tmp_path / "data" / "moved")
        sessions.write_text("not a directory")
        _send(proc, prompt(3, busy, "hello"))
        message = one_line_error(_read_until(proc, answered(3))[-1])
        assert message == f"the session stopped: cannot write recording {sessions / busy}.jsonl: Not a directory"
        _send(proc, request(4, "session/new", {"cwd": str(ws), "mcpServers": []}))
        assert "cannot open recording" in one_line_error(_read_until(proc, answered(4))[-1])
        # The other session stops at the end of input, when its end cannot be written
        # either: the process still ends as it should.
        stderr = finish(proc)
    assert "Traceback" not in stderr
    assert "the session was stopped" not in stderr
    stopped = [line for line in stderr.splitlines() if " stopped: " in line]
    assert [line.split()[3] for line in stopped] == [busy, idle]
