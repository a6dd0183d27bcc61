"""Lines built to break a decoder, on ``agentbus acp``'s stdin: nesting deeper than the
stack, integers longer than Python converts, lone surrogates, bytes that are not UTF-8.
Each gets one JSON-RPC error and the editor's sessions go on (issue 17, defect 10)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from actors.frontends.acp._rpc import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    PARSE_ERROR,
    Invalid,
    Request,
    parse_frame,
)

from ._client import fake_responses, text_chunks
from .test_stdio import _read_until, _send, _spawn


def request(rid: int, method: str, params: dict[str, Any]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}).encode() + b"\n"


def raw_request(rid: int, params_json: bytes) -> bytes:
    return b'{"jsonrpc":"2.0","id":%d,"method":"session/list","params":%s}\n' % (rid, params_json)


HOSTILE: dict[str, tuple[bytes, int, int | None]] = {
    # name: (line, error code, the id the answer carries)
    "deep array": (b"[" * 100_000, PARSE_ERROR, None),
    "deep params": (raw_request(7, b'{"cwd":' + b"[" * 50_000 + b"]" * 50_000 + b"}"), PARSE_ERROR, None),
    # Still JSON: the request is answered as itself (its id), not as a parse error.
    "huge integer": (raw_request(7, b'{"cwd":' + b"9" * 5000 + b"}"), INVALID_PARAMS, 7),
    "huge negative integer id": (b'{"jsonrpc":"2.0","id":-' + b"9" * 5000 + b',"method":"session/list"}', INVALID_PARAMS, None),
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


def test_a_huge_integer_is_said_in_a_users_words() -> None:
    frame = parse_frame(raw_request(7, b'{"cwd":' + b"9" * 5000 + b"}"))
    assert isinstance(frame, Invalid)
    assert frame.error.data == {"details": "an integer of 5,000 digits (at most 4,300 are read)"}


def test_surrogate_pairs_are_text() -> None:
    frame = parse_frame(request(1, "session/list", {"cwd": "\N{GRINNING FACE}"}))
    assert isinstance(frame, Request) and frame.params == {"cwd": "\N{GRINNING FACE}"}


def test_the_agent_answers_each_hostile_line_and_its_session_goes_on(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    script = fake_responses(tmp_path / "fake.jsonl", text_chunks("first answer"), text_chunks("second answer"))

    def answered(rid: int) -> Callable[[dict[str, Any]], bool]:
        return lambda frame: frame.get("id") == rid and "method" not in frame

    with _spawn(tmp_path, "--fake-responses", str(script)) as proc:
        # The first line is one of them too: it is read before the server starts.
        _send(proc, HOSTILE["deep array"][0] + b"\n")
        _send(proc, request(1, "initialize", {"protocolVersion": 1}))
        _send(proc, request(2, "session/new", {"cwd": str(ws), "mcpServers": []}))
        first = _read_until(proc, answered(2))
        assert [f["error"]["code"] for f in first if "error" in f] == [PARSE_ERROR]
        sid = first[-1]["result"]["sessionId"]

        def prompt(rid: int, text: str) -> bytes:
            return request(rid, "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": text}]})

        _send(proc, prompt(3, "one"))
        assert _read_until(proc, answered(3))[-1]["result"]["stopReason"] == "end_turn"
        # Between the session's turns: every kind, and a cancel whose session id is a
        # deep array (parsable, but no id to look up).
        for name, (line, _, _) in HOSTILE.items():
            if name != "deep array":
                _send(proc, line + b"\n")
        deep_id = b'{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":' + b"[" * 900 + b"]" * 900 + b"}}\n"
        _send(proc, deep_id + prompt(4, "two"))
        second = _read_until(proc, answered(4))
        assert [(f["error"]["code"], f["id"]) for f in second if "error" in f] == [
            (code, rid) for name, (_, code, rid) in HOSTILE.items() if name != "deep array"
        ]
        assert second[-1]["result"]["stopReason"] == "end_turn"
        assert proc.stdin is not None
        proc.stdin.close()
        assert proc.wait(timeout=10) == 0
