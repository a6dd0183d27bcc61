"""``session/load`` checks its session id by the daemon's rule (``bus.session_ids``): an
id names a recording file, so one that could name anything else is invalid params, said
in one line, before anything is looked up (issue 17)."""

from __future__ import annotations

from pathlib import Path

from .test_session_start_failure import answered, finish, request, spawn
from .test_stdio import _read_until, _send

INVALID_PARAMS = -32602
RESOURCE_NOT_FOUND = -32002


def test_session_load_refuses_an_id_that_is_not_one(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "passwd.jsonl").write_text("")  # what a traversal would reach
    bad = {
        "../../etc/passwd": "'../../etc/passwd'",
        "a" * 10_000: repr("a" * 128),
        "a" * 129: repr("a" * 128),
        "x y": "'x y'",
        "abc\n": "'abc\\n'",
    }
    with spawn(tmp_path) as proc:
        _send(proc, request(0, "initialize", {"protocolVersion": 1}))
        for rid, (sid, shown) in enumerate(bad.items(), start=1):
            _send(proc, request(rid, "session/load", {"sessionId": sid, "cwd": str(ws), "mcpServers": []}))
            error = _read_until(proc, answered(rid))[-1]["error"]
            assert error["code"] == INVALID_PARAMS
            assert error["message"] == (
                f"Invalid params: invalid session id {shown} (letters, digits, - and _, at most 128)"
            )
            assert len(error["data"]["sessionId"]) <= 128
        # The longest valid id is looked up, and is not there.
        _send(proc, request(9, "session/load", {"sessionId": "a" * 128, "cwd": str(ws), "mcpServers": []}))
        assert _read_until(proc, answered(9))[-1]["error"]["code"] == RESOURCE_NOT_FOUND
        stderr = finish(proc)
    assert "Traceback" not in stderr
