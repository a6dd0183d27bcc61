"""The recording format's light readers: what a line's two ends say, lines a block at a
time, a file's end and last stamp, the owner named by its meta line."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actors.recording import (
    ContentTable,
    Scrubber,
    SessionClaim,
    encode_line,
    in_use_message,
    last_stamp,
    line_seq,
    line_type,
    lines_backward,
    lines_forward,
    meta_line,
    parse_recording,
    read_tail,
    session_in_use,
    void_line,
)
from bus import Envelope
from bus.messages import ALL_MESSAGES, SessionClosed, TextStreamed, ToolCallRequested
from tests.bus.test_codec import json_values  # noqa: F401  (registers the JsonValue strategy)

SID = "s"
WALL = "2026-01-01T00:00:00.000Z"


def env(seq: int, message: object) -> Envelope:
    return Envelope(seq=seq, session_id=SID, sender="turn:t", recipient=None, message=message)  # type: ignore[arg-type]


def meta(**extra: object) -> str:
    return meta_line(
        SID, WALL, extra, first_seq=1, resumed=False, torn_tail=False, scrubber=Scrubber()
    )


@pytest.mark.parametrize("cls", ALL_MESSAGES, ids=lambda c: c.__name__)
@settings(max_examples=3)
@given(data=st.data(), seq=st.integers(1, 10**12), by_reference=st.booleans())
def test_every_envelope_line_starts_with_its_seq_and_ends_with_its_type(
    cls: type, data: st.DataObject, seq: int, by_reference: bool
) -> None:
    line = encode_line(
        env(seq, data.draw(st.from_type(cls))),
        WALL,
        Scrubber(),
        ContentTable() if by_reference else None,
    )
    raw = line.encode("utf-8", "surrogatepass")
    assert (line_seq(raw), line_type(raw)) == (seq, cls.__name__)


def test_meta_void_and_torn_lines_tell_no_type() -> None:
    whole = encode_line(
        env(3, TextStreamed(session_id=SID, turn_id="t", text="hi")), WALL, Scrubber()
    ).encode()
    for raw in (
        meta(pid=1).encode(),
        void_line(1, 2).encode(),
        whole[:-1],
        whole[: len(whole) // 2],
    ):
        assert line_type(raw) is None
    assert line_seq(meta().encode()) is None and line_seq(void_line(1, 2).encode()) is None


def test_the_type_is_read_from_the_line_end_only() -> None:
    """Text that looks like a line's end inside a message is escaped, so it is never taken
    for the message's type; whitespace after the line's last brace is (``\r\n`` ends)."""
    text = 'x"type":"TurnEnded"}}'
    raw = encode_line(env(4, TextStreamed(session_id=SID, turn_id="t", text=text)), WALL, Scrubber()).encode()
    assert line_type(raw) == "TextStreamed"
    assert line_type(raw + b"\r") == line_type(raw + b"  ") == "TextStreamed"
    cut = raw[: raw.index(b"TurnEnded") + len(b'TurnEnded')]
    assert line_type(cut) is None


texts = st.lists(st.sampled_from([b"a", b"bc", b"\n"]), max_size=30).map(b"".join)


@given(data=texts, block=st.integers(1, 8))
def test_lines_forward_are_the_split_lines(data: bytes, block: int) -> None:
    expected = data.split(b"\n")
    if expected[-1] == b"":
        expected.pop()  # a newline ends a line; it does not start one
    assert list(lines_forward(io.BytesIO(data), block)) == expected


@given(data=texts, block=st.integers(1, 8), limit=st.none() | st.integers(0, 40))
def test_lines_backward_are_the_split_lines_from_the_end(
    data: bytes, block: int, limit: int | None
) -> None:
    floor = 0 if limit is None else max(0, len(data) - limit)
    starts, pos = [], 0
    for line in data.split(b"\n"):
        starts.append((pos, line))
        pos += len(line) + 1
    # Within a window that does not reach the start, the first (cut) line is left out.
    expected = [line for start, line in reversed(starts) if floor == 0 or start > floor]
    assert list(lines_backward(io.BytesIO(data), len(data), block=block, limit=limit)) == expected


def test_the_tail_is_found_behind_lines_longer_than_a_block(tmp_path: Path) -> None:
    long = TextStreamed(session_id=SID, turn_id="t", text="x" * 500)
    lines = [meta(), *(encode_line(env(i, long), WALL, Scrubber()) for i in (1, 2))]
    rec = tmp_path / "s.jsonl"
    rec.write_bytes(("\n".join(lines) + "\n").encode() + b'{"v":1,"seq":3,"sess')
    tail = read_tail(rec, block=16)
    assert (tail.last_seq, tail.needs_newline, tail.torn) == (2, True, True)
    rec.write_bytes(("\n".join(lines) + "\n").encode())
    assert read_tail(rec, block=16) == type(tail)(last_seq=2)


def test_the_last_stamp_is_the_loaded_recordings_last_wall(tmp_path: Path) -> None:
    first = encode_line(
        env(1, TextStreamed(session_id=SID, turn_id="t", text="hi")),
        "2026-01-01T00:00:01.000Z",
        Scrubber(),
    )
    closed = encode_line(
        env(2, SessionClosed(session_id=SID, reason="closed")),
        "2026-01-01T00:00:02.000Z",
        Scrubber(),
    )
    later = meta_line(
        SID,
        "2026-01-02T00:00:00.000Z",
        {},
        first_seq=3,
        resumed=True,
        torn_tail=False,
        scrubber=Scrubber(),
    )
    for lines, wall in (
        ([meta(), first, closed], "2026-01-01T00:00:02.000Z"),
        ([meta(), first, closed, later], "2026-01-02T00:00:00.000Z"),
    ):
        raw = ("\n".join(lines) + "\n").encode()
        rec = tmp_path / "s.jsonl"
        rec.write_bytes(raw)
        with rec.open("rb") as fh:
            assert last_stamp(fh, len(raw)) == parse_recording(rec, raw).last_wall == wall


def test_the_owner_is_named_when_a_later_message_holds_kind_meta(tmp_path: Path) -> None:
    """A message whose JSON holds ``"kind":"meta"`` (here a tool call's arguments) is not
    the owner's meta line: the owner's pid is still named (it used to be left out)."""
    rec = tmp_path / "s.jsonl"
    call = ToolCallRequested(
        session_id=SID, turn_id="t", call_id="c", name="x", args={"kind": "meta"}
    )
    lines = [meta(pid=os.getpid()), encode_line(env(1, call), WALL, Scrubber())]
    rec.write_text("\n".join(lines) + "\n", encoding="utf-8")
    claim = SessionClaim(rec)
    try:
        assert f"(pid {os.getpid()})" in in_use_message(rec)
        assert f"(pid {os.getpid()})" in (session_in_use(rec) or "")
    finally:
        claim.close()
    assert session_in_use(rec) is None
