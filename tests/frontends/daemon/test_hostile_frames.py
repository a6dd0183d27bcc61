"""Frames built to break a decoder: nesting deeper than the stack, integers longer than
Python converts, lone surrogates, bytes that are not UTF-8. Each gets one ``bad_frame``
reply (with the request id when the frame had a readable one), the connection goes on
serving, and nothing is logged as a failure (issue 17, defect 10)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
import trio

from actors.frontends.daemon import Daemon
from actors.frontends.daemon._protocol import ConnectionRules
from bus.codec import decode, encode
from bus.messages import (
    PROTOCOL_VERSION,
    CreateSession,
    DaemonStatus,
    Hello,
    ListSessions,
    LoadSession,
    Message,
    ProtocolError,
    SessionList,
    Subscribe,
    Welcome,
)
from tests.frontends.daemon._helpers import running_daemon


def frame(msg: Message) -> bytes:
    return (encode(msg) + "\n").encode()


def list_sessions_with(workspace_json: str, rid: str = "ls") -> bytes:
    """A ListSessions frame whose workspace is the given JSON text, written raw."""
    return b'{"type":"ListSessions","request_id":"%s","workspace":%s}\n' % (rid.encode(), workspace_json.encode())


HOSTILE: dict[str, tuple[bytes, str | None]] = {
    # name: (frame, the request id the reply must carry)
    "deep array": (b"[" * 100_000 + b"\n", None),
    "deep field": (list_sessions_with("[" * 50_000 + "]" * 50_000), None),
    "deep but parsable arguments": (
        b'{"type":"CallTool","session_id":"s","request_id":"c","name":"ls","args":{"a":'
        + b"[" * 700 + b"]" * 700 + b"}}\n",
        None,
    ),
    "huge integer": (b'{"type":"Subscribe","session_id":"s","request_id":"i","from_seq":' + b"9" * 5000 + b"}\n", None),
    "lone surrogate in a field": (list_sessions_with('"\\ud800"', "sur"), "sur"),
    "lone low surrogate in a field": (list_sessions_with('"x\\uDC00y"', "low"), "low"),
    "lone surrogate in the request id": (b'{"type":"ListSessions","request_id":"\\udbff","workspace":""}\n', None),
    "encoded surrogate bytes": (b'{"type":"ListSessions","request_id":"e","workspace":"\xed\xa0\x80"}\n', None),
    "not UTF-8": (b'{"type":"ListSessions","request_id":"u","workspace":"\xff\xfe"}\n', None),
    "truncated": (b'{"type":"ListSessions","request_id":"t","works\n', None),
}


async def read_reply(stream: trio.SocketStream, buf: bytearray) -> Message | None:
    while b"\n" not in buf:
        data = await stream.receive_some(1 << 16)
        if not data:
            return None
        buf += data
    nl = buf.index(b"\n")
    line = bytes(buf[:nl])
    del buf[: nl + 1]
    return decode(line)


async def said_hello(home: Path) -> tuple[trio.SocketStream, bytearray]:
    """A connection to the daemon past its hello, and its read buffer."""
    stream = await trio.open_unix_socket(str(home / "run" / "daemon.sock"))
    buf = bytearray()
    await stream.send_all(frame(Hello(request_id="h", protocol=PROTOCOL_VERSION)))
    assert isinstance(await read_reply(stream, buf), Welcome)
    return stream, buf


@pytest.mark.parametrize("name", list(HOSTILE))
async def test_a_hostile_frame_is_answered_bad_frame_and_the_connection_serves_on(
    home: Path, name: str, caplog: pytest.LogCaptureFixture
) -> None:
    data, rid = HOSTILE[name]
    with trio.fail_after(20):
        async with running_daemon(home):
            stream, buf = await said_hello(home)
            await stream.send_all(data + frame(ListSessions(request_id="after")))
            error = await read_reply(stream, buf)
            assert isinstance(error, ProtocolError), error
            assert (error.code, error.request_id, error.fatal) == ("bad_frame", rid, False)
            served = await read_reply(stream, buf)
            assert isinstance(served, SessionList) and served.request_id == "after"
            await stream.aclose()
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], "a connection failed"


async def test_surrogate_pairs_are_text_not_errors(home: Path) -> None:
    """JSON written with ``ensure_ascii`` escapes emoji as surrogate pairs: accepted."""
    with trio.fail_after(20):
        async with running_daemon(home):
            stream, buf = await said_hello(home)
            await stream.send_all(list_sessions_with(json.dumps("\N{GRINNING FACE} ws"), "pair"))
            served = await read_reply(stream, buf)
            assert isinstance(served, SessionList) and served.request_id == "pair"
            await stream.aclose()


def test_a_frame_that_does_not_decode_before_the_hello_closes_the_connection() -> None:
    """As any other error before the hello (found by the socket fuzz: it was answered and
    the connection left open, on the Unix socket)."""
    for data in (b"{not json", b"\xff", b"[" * 5000):
        rules = ConnectionRules()
        refused = rules.check(data)
        assert isinstance(refused, ProtocolError) and refused.code == "bad_frame" and refused.fatal


async def test_session_ids_that_name_no_file_are_invalid_not_looked_up(home: Path) -> None:
    """A traversal or a name too long for the file system is refused as a value; it
    reached the disk (``../`` outside the data directory; ENAMETOOLONG ended the
    connection)."""
    with trio.fail_after(20):
        async with running_daemon(home):
            stream, buf = await said_hello(home)
            for rid, msg in enumerate(
                [
                    LoadSession(session_id="../../etc/passwd", request_id="0"),
                    LoadSession(session_id="x" * 5000, request_id="1"),
                    Subscribe(session_id="a/b", request_id="2"),
                    CreateSession(workspace=str(home / "ws"), session_id="y" * 300, request_id="3"),
                ]
            ):
                await stream.send_all(frame(msg))
                error = await read_reply(stream, buf)
                assert isinstance(error, ProtocolError) and (error.code, error.request_id) == ("invalid", str(rid))
                assert "invalid session id" in error.message
            await stream.aclose()


async def test_a_request_the_daemon_fails_on_is_answered_and_the_connection_goes_on(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(self: Daemon) -> Any:
        raise OSError(36, "File name too long")

    monkeypatch.setattr(Daemon, "info", broken)
    with trio.fail_after(20):
        async with running_daemon(home):
            stream, buf = await said_hello(home)
            await stream.send_all(frame(DaemonStatus(request_id="st")) + frame(ListSessions(request_id="after")))
            error = await read_reply(stream, buf)
            assert isinstance(error, ProtocolError) and (error.code, error.request_id) == ("failed", "st")
            assert "File name too long" in error.message
            served = await read_reply(stream, buf)
            assert isinstance(served, SessionList) and served.request_id == "after"
            await stream.aclose()
