"""The protocol's pure rules: framing, admission, error escalation; and the recording
cursor that catch-up reads with."""

from __future__ import annotations

import json
from pathlib import Path

from actors.frontends.daemon._catchup import is_client_event
from actors.frontends.daemon._protocol import MAX_ERRORS, ConnectionRules, FrameSplitter, Oversized
from actors.recording import RecordingCursor
from bus import Envelope
from bus.codec import encode, encode_envelope
from bus.messages import (
    PROTOCOL_VERSION,
    Hello,
    ListSessions,
    ModelChunk,
    Prompt,
    ProtocolError,
    Subscribe,
    TextStreamed,
    TurnStarted,
)


def hello() -> bytes:
    return encode(Hello(request_id="h", protocol=PROTOCOL_VERSION)).encode()


def test_frames_split_across_reads_and_oversized_ones_are_dropped_to_their_newline() -> None:
    s = FrameSplitter(limit=10)
    assert s.feed(b'{"a"') == []
    assert s.feed(b':1}\n{"b":2}\n\n') == [b'{"a":1}', b'{"b":2}']
    assert s.feed(b"x" * 8) == []
    assert s.feed(b"y" * 8) == []  # over the limit: dropped, not buffered
    assert s.pending == 16
    out = s.feed(b"zz\nok\n")
    assert out == [Oversized(18, limit=10), b"ok"]
    assert s.pending == 0


def test_hello_comes_first_with_the_right_version() -> None:
    rules = ConnectionRules()
    refused = rules.check(encode(ListSessions(request_id="x")).encode())
    assert isinstance(refused, ProtocolError) and refused.code == "hello_required" and refused.fatal
    rules = ConnectionRules()
    wrong = rules.check(encode(Hello(request_id="h", protocol=99)).encode())
    assert isinstance(wrong, ProtocolError) and wrong.code == "bad_version" and wrong.fatal
    rules = ConnectionRules(token="secret")
    assert isinstance(rules.check(hello()), ProtocolError)


def test_sessions_must_be_opened_on_the_connection_first() -> None:
    rules = ConnectionRules()
    assert isinstance(rules.check(hello()), Hello)
    prompt = Prompt(session_id="s1", request_id="p", text="hi")
    refused = rules.admit(prompt)
    assert isinstance(refused, ProtocolError) and refused.code == "not_yours" and refused.request_id == "p"
    assert isinstance(rules.admit(Subscribe(session_id="s1", request_id="s")), Subscribe)  # subscribing opens
    rules.sessions.add("s1")
    assert rules.admit(prompt) == prompt


def test_garbage_unknown_types_and_server_messages_are_errors_and_too_many_close() -> None:
    rules = ConnectionRules()
    rules.check(hello())
    codes = [
        rules.check(b"{not json"),
        rules.check(json.dumps({"type": "NoSuch"}).encode()),
        rules.check(encode(TextStreamed(session_id="s", turn_id="t", text="x")).encode()),
        rules.check(Oversized(5 << 20)),
    ]
    assert [c.code for c in codes if isinstance(c, ProtocolError)] == [
        "bad_frame",
        "bad_frame",
        "not_a_request",
        "frame_too_large",
    ]
    last = rules.check(b"[]")
    assert isinstance(last, ProtocolError) and last.fatal and last.code == "too_many_errors"
    assert rules.errors == MAX_ERRORS


def line(seq: int, msg: object) -> str:
    env = Envelope(seq=seq, session_id="s", sender="a", recipient=None, message=msg)  # type: ignore[arg-type]
    return encode_envelope(env, wall="2026-01-01T00:00:00.000Z") + "\n"


def test_the_cursor_reads_ranges_forward_skipping_voids_meta_and_an_unfinished_line(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    text = json.dumps({"v": 1, "kind": "meta", "session_id": "s"}) + "\n"
    text += line(1, TurnStarted(session_id="s", turn_id="t", prompt_id="p"))
    text += line(2, ModelChunk(session_id="s", request_id="r", index=0))
    text += json.dumps({"v": 1, "kind": "void", "first": 3, "last": 4}) + "\n"
    text += line(5, TextStreamed(session_id="s", turn_id="t", text="a"))
    path.write_text(text + line(6, TextStreamed(session_id="s", turn_id="t", text="b"))[:-10])
    cursor = RecordingCursor(path)
    envs, nxt = cursor.read(2, None, is_client_event)
    assert [e.seq for e in envs] == [5] and nxt == 6  # the chunk is internal; 3-4 are void
    with path.open("a") as fh:
        fh.write(line(6, TextStreamed(session_id="s", turn_id="t", text="b"))[-10:])
        fh.write(line(7, TextStreamed(session_id="s", turn_id="t", text="c")))
    envs, nxt = cursor.read(6, 7)
    assert [e.seq for e in envs] == [6] and nxt == 7
    envs, nxt = cursor.read(7, None)
    assert [e.seq for e in envs] == [7] and nxt == 8
