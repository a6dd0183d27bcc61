"""Lines built to break a decoder, on ``agentbus acp``'s stdin: nesting deeper than the
stack, integers longer than Python converts, lone surrogates, bytes that are not UTF-8.
Each gets one JSON-RPC error and the editor's sessions go on (issue 17, defect 10)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from actors.acp._rpc import INVALID_REQUEST, PARSE_ERROR, Invalid, Request, parse_frame

from ._client import fake_responses, text_chunks


def request(rid: int, method: str, params: dict[str, Any]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}).encode() + b"\n"


def raw_request(rid: int, params_json: bytes) -> bytes:
    return b'{"jsonrpc":"2.0","id":%d,"method":"session/list","params":%s}\n' % (rid, params_json)


HOSTILE: dict[str, tuple[bytes, int, int | None]] = {
    # name: (line, error code, the id the answer carries)
    "deep array": (b"[" * 100_000, PARSE_ERROR, None),
    "deep params": (raw_request(7, b'{"cwd":' + b"[" * 50_000 + b"]" * 50_000 + b"}"), PARSE_ERROR, None),
    "huge integer": (raw_request(7, b'{"cwd":' + b"9" * 5000 + b"}"), PARSE_ERROR, None),
    "lone surrogate": (raw_request(8, b'{"cwd":"\\ud800"}'), INVALID_REQUEST, 8),
    "lone surrogate id": (b'{"jsonrpc":"2.0","id":"\\udfff","method":"session/list"}', INVALID_REQUEST, None),
    "encoded surrogate bytes": (raw_request(9, b'{"cwd":"\xed\xa0\x80"}'), PARSE_ERROR, None),
    "not UTF-8": (raw_request(9, b'{"cwd":"\xff"}'), PARSE_ERROR, None),
    "truncated": (b'{"jsonrpc":"2.0","id":3,"meth', PARSE_ERROR, None),
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_a_hostile_line_parses_to_its_error(name: str) -> None:
    line, code, rid = HOSTILE[name]
    frame = parse_frame(line)
    assert isinstance(frame, Invalid)
    assert (frame.error.code, frame.id) == (code, rid)


def test_surrogate_pairs_are_text() -> None:
    frame = parse_frame(request(1, "session/list", {"cwd": "\N{GRINNING FACE}"}))
    assert isinstance(frame, Request) and frame.params == {"cwd": "\N{GRINNING FACE}"}


def test_the_agent_answers_each_hostile_line_and_its_session_goes_on(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    script = fake_responses(tmp_path / "fake.jsonl", text_chunks("first answer"), text_chunks("second answer"))
    env = {**os.environ, "HOME": str(tmp_path), "GEMINI_CLI_HOME": str(tmp_path), "AGENTBUS_DATA_DIR": str(tmp_path / "data")}
    # The first line is one of them too: it is read before the server starts.
    lines = [HOSTILE["deep array"][0] + b"\n", request(1, "initialize", {"protocolVersion": 1})]
    lines.append(request(2, "session/new", {"cwd": str(ws), "mcpServers": []}))
    with subprocess.Popen(
        [sys.executable, "-m", "actors.cli", "acp", "-m", "gemini-2.5-flash", "--fake-responses", str(script)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
        env=env,
    ) as proc:
        assert proc.stdin is not None and proc.stdout is not None

        def send(data: bytes) -> None:
            assert proc.stdin is not None
            proc.stdin.write(data)
            proc.stdin.flush()

        def until(rid: int) -> list[dict[str, Any]]:
            assert proc.stdout is not None
            frames = []
            while True:
                line = proc.stdout.readline()
                assert line, f"the agent closed its output after {frames}"
                frames.append(json.loads(line))
                if frames[-1].get("id") == rid and "method" not in frames[-1]:
                    return frames

        send(b"".join(lines))
        first = until(2)
        errors = [f for f in first if "error" in f]
        assert [e["error"]["code"] for e in errors] == [PARSE_ERROR]
        sid = first[-1]["result"]["sessionId"]

        def prompt(rid: int, text: str) -> bytes:
            return request(rid, "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": text}]})

        send(prompt(3, "one"))
        assert until(3)[-1]["result"]["stopReason"] == "end_turn"
        # Between the session's turns: every kind, and a cancel whose session id is a
        # deep array (parsable, but no id to look up).
        for name, (line, _, _) in HOSTILE.items():
            if name != "deep array":
                send(line + b"\n")
        deep_id = b'{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":' + b"[" * 900 + b"]" * 900 + b"}}\n"
        send(deep_id + prompt(4, "two"))
        second = until(4)
        answers = [f for f in second if "error" in f]
        assert len(answers) == len(HOSTILE) - 1
        assert [(a["error"]["code"], a["id"]) for a in answers] == [
            (code, rid) for name, (_, code, rid) in HOSTILE.items() if name != "deep array"
        ]
        assert second[-1]["result"]["stopReason"] == "end_turn"
        proc.stdin.close()
        assert proc.wait(timeout=10) == 0
        assert proc.stderr is not None
        assert b"Traceback" not in proc.stderr.read()
