"""Contents by reference: a recording holds each distinct content once per process."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st

from actors.frontends.daemon import is_client_event
from actors.recording import (
    REFS_VERSION,
    ContentRefs,
    ContentTable,
    RecordingCursor,
    RecordingError,
    Scrubber,
    encode_line,
    everything,
    load_recording,
    parse_recording,
)
from bus import Envelope
from bus.codec import encode_envelope
from bus.messages import GenerateRequest, StartTurn
from tests.frontends.replay._session import ClientScript, calls_entry, run_session, text_entry

SCENARIO = Path(__file__).resolve().parents[2] / "scenarios" / "recorded"


def _tool_session(tmp_path: Path, rec: Path, prompts: int) -> list[Envelope]:
    """A session of ``prompts`` turns, each one tool call then an answer; returns
    the envelopes delivered."""
    entries = []
    for i in range(prompts):
        entries += [calls_entry(("probe", {"i": i})), text_entry(f"answer {i}")]
    script = ClientScript(prompts=tuple(f"prompt {i}" for i in range(prompts)))
    cap, _ = trio.run(run_session, tmp_path, rec, entries, script, clock=trio.testing.MockClock(autojump_threshold=0))
    return list(cap.envelopes)


def test_history_and_requests_are_written_by_reference_and_read_back_whole(tmp_path: Path) -> None:
    rec = tmp_path / "s.jsonl"
    delivered = _tool_session(tmp_path, rec, 3)
    lines = [json.loads(line) for line in rec.read_text().splitlines()]
    starts = [d for d in lines if d.get("msg", {}).get("type") == "StartTurn"]
    # The third turn's history holds the first two turns' contents, all defined before.
    assert starts[2]["v"] == REFS_VERSION and "history" not in starts[2]["msg"]
    assert "defs" in starts[2] and len(starts[2]["defs"]) < 4
    # Each content is written once: no content appears in two lines' defs.
    defined = [json.dumps(v, sort_keys=True) for d in lines for v in d.get("defs", {}).values()]
    assert len(defined) == len(set(defined))
    loaded = load_recording(rec)
    assert loaded.envelopes == delivered
    histories = [e.message.history for e in loaded.envelopes if isinstance(e.message, StartTurn)]
    assert [len(h) for h in histories] == [0, 4, 8]
    assert histories[2][:4] == histories[1]
    requests = [e.message for e in loaded.envelopes if isinstance(e.message, GenerateRequest)]
    assert all(r.config == {"systemInstruction": "test"} for r in requests)


def test_old_recordings_without_references_still_load(tmp_path: Path) -> None:
    """Version 1 files (every line whole) load as before: the recorded scenarios, and
    a session written out the old way."""
    rec = tmp_path / "s.jsonl"
    delivered = _tool_session(tmp_path, rec, 2)
    meta = rec.read_text().splitlines()[0]
    old = tmp_path / "old.jsonl"
    old.write_text("".join(line + "\n" for line in [meta, *(encode_line(e, "w", Scrubber()) for e in delivered)]))
    assert '"refs"' not in old.read_text() and '"v":2' not in old.read_text()
    assert load_recording(old).envelopes == delivered
    for path in sorted(SCENARIO.glob("*/recording.jsonl")):
        lines = [json.loads(line) for line in path.read_text().splitlines()]
        if all(d["v"] == 1 for d in lines):
            assert len(load_recording(path).envelopes) == sum(1 for d in lines if "seq" in d)


contents = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=6,
)


@given(st.lists(st.lists(st.sampled_from(range(6)), max_size=12), min_size=1, max_size=6), st.lists(contents, min_size=6, max_size=6))
def test_any_sequence_of_histories_reads_back_as_written(histories: list[list[int]], pool: list[Any]) -> None:
    table, refs = ContentTable(), ContentRefs()
    for seq, picks in enumerate(histories, start=1):
        msg = StartTurn(session_id="s", turn_id="t", prompt_id="p", model="m", approval_mode="default",
                        history=tuple(pool[i] for i in picks))
        env = Envelope(seq=seq, session_id="s", sender="a", recipient="b", message=msg)
        line = encode_line(env, "w", Scrubber(), table)
        back = parse_line(line, refs)
        assert back == env
        # As JSON too: ``1 == 1.0 == True`` in Python, so equality alone would let a
        # content taken for another equal one through.
        assert encode_envelope(back) == encode_envelope(env)


@given(
    st.lists(
        st.tuples(st.sampled_from(["main", "loop_detector"]), st.lists(st.sampled_from(range(6)), max_size=12)),
        min_size=1,
        max_size=8,
    ),
    st.lists(contents, min_size=6, max_size=6),
)
def test_model_requests_of_several_roles_read_back_as_written(
    requests: list[tuple[str, list[int]]], pool: list[Any]
) -> None:
    """The writer knows contents by identity per role; the reader's ``same`` counts
    against the last request of any role: both agree whatever the interleaving."""
    table, refs = ContentTable(), ContentRefs()
    for seq, (role, picks) in enumerate(requests, start=1):
        msg = GenerateRequest(session_id="s", request_id=f"r{seq}", reply_to="t", method="generateContent",
                              model="m", contents=tuple(pool[i] for i in picks), role=role)  # type: ignore[arg-type]
        env = Envelope(seq=seq, session_id="s", sender="a", recipient="b", message=msg)
        back = parse_line(encode_line(env, "w", Scrubber(), table), refs)
        assert encode_envelope(back) == encode_envelope(env)


class _CountingTable(ContentTable):
    dumped = 0

    def intern(self, value: Any, defs: dict[str, Any]) -> int:
        self.dumped += 1
        return super().intern(value, defs)


def test_a_request_after_another_roles_dumps_only_its_new_contents() -> None:
    """A long session's main request costs what it adds, even when the loop detector's
    request (other contents) was written between two of them."""
    table = _CountingTable()
    history = tuple({"role": "user", "parts": [{"text": f"t{i}"}]} for i in range(200))
    frozen = GenerateRequest(session_id="s", request_id="r", reply_to="t", method="generateContent",
                             model="m", contents=history).contents

    def write(seq: int, contents: tuple[Any, ...], role: str) -> None:
        msg = GenerateRequest(session_id="s", request_id=f"r{seq}", reply_to="t", method="generateContent",
                              model="m", contents=contents, config={}, role=role)  # type: ignore[arg-type]
        encode_line(Envelope(seq=seq, session_id="s", sender="a", recipient="b", message=msg), "w", Scrubber(), table)

    write(1, frozen[:100], "main")
    write(2, frozen[80:100], "loop_detector")
    table.dumped = 0
    write(3, frozen[:102], "main")
    assert table.dumped == 2  # the two new contents (an empty config is one shared object)


def parse_line(line: str, refs: ContentRefs) -> Envelope:
    from actors.recording import decode_line

    return decode_line(json.loads(line), refs)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d.pop("defs"), r"r\.jsonl:\d+: content \d+ is defined by no earlier line of this process"),
        (lambda d: d["refs"].update(history=[[1, 10**9]]), r"the run of references \[1, 1000000000\] is not within"),
        (lambda d: d["refs"].update(history={"same": 99, "then": []}), r"'same' must count contents of the last StartTurn"),
        (lambda d: d["refs"].update(history=["x"]), r"a reference must be a number, got 'x'"),
    ],
    ids=["undefined", "run-too-long", "same-too-many", "not-a-number"],
)
def test_bad_references_are_errors_naming_file_and_line(tmp_path: Path, edit: Any, message: str) -> None:
    rec = tmp_path / "s.jsonl"
    _tool_session(tmp_path, rec, 2)
    lines = rec.read_text().splitlines()
    n = next(i for i, line in enumerate(lines) if '"StartTurn"}}' in line and '"defs"' in line and i > 5)
    data = json.loads(lines[n])
    edit(data)
    lines[n] = json.dumps(data)
    with pytest.raises(RecordingError, match=message):
        parse_recording(tmp_path / "r.jsonl", ("\n".join(lines) + "\n").encode())


def test_a_resumed_process_numbers_its_contents_anew(tmp_path: Path) -> None:
    rec = tmp_path / "s.jsonl"
    _tool_session(tmp_path, rec, 2)
    _tool_session(tmp_path, rec, 2)
    loaded = load_recording(rec)
    assert len(loaded.segments) == 2
    second_part = [json.loads(line) for line in rec.read_text().splitlines()[loaded.segments[1].meta_line :]]
    assert "1" in next(d for d in second_part if "defs" in d)["defs"]
    first, second = ([len(e.message.history) for e in seg.envelopes if isinstance(e.message, StartTurn)] for seg in loaded.segments)
    assert first == second == [0, 4]


def test_a_full_catch_up_from_the_middle_resolves_references(tmp_path: Path) -> None:
    rec = tmp_path / "s.jsonl"
    _tool_session(tmp_path, rec, 3)
    _tool_session(tmp_path, rec, 1)  # a second process's part, numbered anew
    loaded = load_recording(rec)
    middle = loaded.envelopes[len(loaded.envelopes) // 2].seq
    envs, nxt = RecordingCursor(rec).read(middle, None, everything)
    assert envs == [e for e in loaded.envelopes if e.seq >= middle]
    assert nxt == loaded.last_seq + 1
    # Read in pieces, as a follower does.
    cursor = RecordingCursor(rec)
    got: list[Envelope] = []
    for first in range(1, loaded.last_seq + 1, 37):
        part, _ = cursor.read(first, first + 37, everything)
        got += part
    assert got == loaded.envelopes
    # A client follower gets the client events only and keeps no contents.
    client = RecordingCursor(rec)
    events, _ = client.read(1, None, is_client_event)
    assert events == [e for e in loaded.envelopes if is_client_event(type(e.message).__name__)]
    assert client.refs.expand({"msg": {}}) == {} and not client.refs._contents


def test_a_catch_up_stops_before_the_message_the_recorder_is_syncing(tmp_path: Path) -> None:
    # Written but not yet synced (the bus holds it: ``Bus.held``): nobody reads it yet,
    # and the cursor reads it at its next call, once it is let go.
    rec = tmp_path / "s.jsonl"
    _tool_session(tmp_path, rec, 1)
    loaded = load_recording(rec)
    syncing = loaded.envelopes[-3].seq
    cursor = RecordingCursor(rec)
    envs, nxt = cursor.read(1, None, everything, lambda: syncing)
    assert envs == [e for e in loaded.envelopes if e.seq < syncing] and nxt == syncing
    rest, nxt = cursor.read(nxt, None, everything, lambda: None)
    assert envs + rest == loaded.envelopes and nxt == loaded.last_seq + 1


def test_a_catch_up_counts_only_what_it_read_when_a_message_is_held_after_the_read(tmp_path: Path) -> None:
    """The session went on between the cursor's read of the file and its question to the
    bus (a turn's messages written, its end held for the fsync): the cursor must not
    count the messages it did not read as read (a follower then skipped a whole turn's
    events: found by CI, the daemon's smoke test)."""
    rec = tmp_path / "s.jsonl"
    _tool_session(tmp_path, rec, 1)
    whole = rec.read_bytes()
    loaded = load_recording(rec)
    lines = whole.splitlines(keepends=True)
    rec.write_bytes(b"".join(lines[:3]))  # what the file held when the cursor read it
    read_before = load_recording(rec).last_seq
    syncing = loaded.envelopes[-1].seq

    def held_after_the_turn() -> int:
        rec.write_bytes(whole)  # the rest of the turn, written meanwhile
        return syncing

    cursor = RecordingCursor(rec)
    envs, nxt = cursor.read(1, None, everything, held_after_the_turn)
    assert nxt == read_before + 1 and all(e.seq <= read_before for e in envs)
    rest, nxt = cursor.read(nxt, None, everything, lambda: syncing)
    assert envs + rest == [e for e in loaded.envelopes if e.seq < syncing] and nxt == syncing



def test_the_recordings_of_a_process_define_a_shared_config_with_one_dump(monkeypatch: pytest.MonkeyPatch) -> None:
    """A daemon's sessions send one frozen request config: each recording still defines
    it, from the dump and digest made for the first."""
    from actors.recording import _refs
    from bus.json_values import freeze

    config = freeze({"tools": [{"functionDeclarations": [{"name": f"tool{i}"} for i in range(20)]}]})
    dumped: list[Any] = []
    real = _refs.dumps
    monkeypatch.setattr(_refs, "dumps", lambda value: dumped.append(value) or real(value))
    for sid in ("a", "b"):
        msg = GenerateRequest(session_id=sid, request_id="r", reply_to="t", method="generateContent",
                              model="m", contents=(), config=config)
        line = encode_line(Envelope(seq=1, session_id=sid, sender="x", recipient="y", message=msg), "w", Scrubber(),
                           ContentTable())
        assert json.loads(line)["defs"] == {"1": json.loads(json.dumps(config))}
        assert parse_line(line, ContentRefs()).message.config == config
    assert sum(value is config for value in dumped) == 1
