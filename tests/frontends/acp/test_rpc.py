"""JSON-RPC framing (``actors.frontends.acp._rpc``) and the pre-trio ``initialize`` answer."""

from __future__ import annotations

import json
import os
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from actors.frontends.acp import _main, _protocol
from actors.frontends.acp._rpc import (
    Invalid,
    Notification,
    Request,
    Response,
    RpcError,
    encode,
    error_frame,
    parse_frame,
    request_frame,
    result_frame,
)


def test_frames_by_kind() -> None:
    assert parse_frame(b'{"jsonrpc":"2.0","id":3,"method":"session/new","params":{"cwd":"/"}}') == Request(
        3, "session/new", {"cwd": "/"}
    )
    assert parse_frame('{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}}') == Notification(
        "session/cancel", {"sessionId": "s"}
    )
    assert parse_frame(b'{"jsonrpc":"2.0","id":"a","result":{"content":""}}') == Response("a", {"content": ""}, None)
    failed = parse_frame(b'{"jsonrpc":"2.0","id":0,"error":{"code":-32002,"message":"Resource not found"}}')
    assert isinstance(failed, Response) and failed.error is not None and failed.error.code == -32002


def test_bad_frames_say_why() -> None:
    cases = {
        b"{oops": -32700,
        b"\xff\xfe": -32700,
        b"[]": -32600,
        b'{"id":1,"method":"x"}': -32600,  # no jsonrpc member
        b'{"jsonrpc":"2.0","id":1,"method":7}': -32600,
        b'{"jsonrpc":"2.0","id":true,"method":"x"}': -32600,
        b'{"jsonrpc":"2.0","id":1,"method":"x","params":"text"}': -32602,
        b'{"jsonrpc":"2.0","id":1}': -32600,
    }
    for line, code in cases.items():
        frame = parse_frame(line)
        assert isinstance(frame, Invalid), line
        assert frame.error.code == code, line
    keeps_id = parse_frame(b'{"jsonrpc":"2.0","id":5,"method":9}')
    assert isinstance(keeps_id, Invalid) and keeps_id.id == 5


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)


@given(st.binary(max_size=200))
def test_any_bytes_parse_to_a_frame_without_raising(data: bytes) -> None:
    parse_frame(data)


@given(
    rid=st.integers(min_value=-(2**53), max_value=2**53) | st.text(),
    method=st.text(min_size=1),
    params=st.dictionaries(st.text(), json_values, max_size=4),
)
def test_requests_round_trip_through_the_wire_format(rid: Any, method: str, params: dict[str, Any]) -> None:
    line = encode(request_frame(rid, method, params))
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert parse_frame(line[:-1]) == Request(rid, method, params)
    assert parse_frame(encode(result_frame(rid, params))[:-1]) == Response(rid, params, None)
    err = RpcError(-32602, "bad", {"k": 1})
    back = parse_frame(encode(error_frame(rid, err))[:-1])
    assert isinstance(back, Response) and back.error is not None and back.error.to_json() == err.to_json()


def _pipe_with(data: bytes) -> int:
    read, write = os.pipe()
    os.write(write, data)
    os.close(write)
    return read


def test_initialize_is_answered_before_trio_loads(tmp_path: Any) -> None:
    request = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": True}}}}
    stdin = _pipe_with(json.dumps(request).encode() + b'\n{"jsonrpc":"2.0","id":1,"method":"session/new"}\n')
    out_path = tmp_path / "out"
    with open(out_path, "wb") as out:
        caps, rest = _main.answer_initialize(stdin, out.fileno())
    os.close(stdin)
    assert caps == _protocol.ClientCapabilities(read_text_file=True)
    assert rest == b'{"jsonrpc":"2.0","id":1,"method":"session/new"}\n'
    answer = json.loads(out_path.read_bytes())
    assert answer["id"] == 0 and answer["result"]["agentInfo"]["name"] == "agentbus"


def test_a_first_frame_that_is_not_initialize_is_left_to_the_server(tmp_path: Any) -> None:
    data = b'{"jsonrpc":"2.0","id":1,"method":"session/list"}\n'
    stdin = _pipe_with(data)
    with open(tmp_path / "out", "wb") as out:
        assert _main.answer_initialize(stdin, out.fileno()) == (None, data)
    os.close(stdin)
    assert (tmp_path / "out").read_bytes() == b""
