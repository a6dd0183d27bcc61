"""The recorder: what it writes, when it syncs, how it fails, what it never writes, and
how a recording is read back (torn lines, bad lines)."""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from actors.gateway import FakeResponsesBackend, GatewayActor
from actors.host import runtime
from actors.recorder import RecorderActor
from actors.recording import (
    INTERNED,
    REDACTED,
    FileSink,
    RecorderError,
    RecordingError,
    Scrubber,
    load_recording,
    parse_recording,
    read_tail,
    recorder_error_in,
    secrets_from_env,
)
from bus import Bus
from bus.codec import encode_envelope
from bus.messages import (
    ApprovalRequested,
    CloseSession,
    OpenSession,
    SessionClosed,
    SubmitPrompt,
    TextStreamed,
    TurnEnded,
)
from tests.frontends.replay._session import (
    SID,
    ClientScript,
    calls_entry,
    run_session,
    session_config,
    text_entry,
)


async def test_recording_is_a_meta_line_then_every_delivered_message(tmp_path: Path) -> None:
    rec = tmp_path / "s.jsonl"
    cap, _ = await run_session(tmp_path, rec, [text_entry("hi", " there")], ClientScript())
    lines = rec.read_text().splitlines()
    meta = json.loads(lines[0])
    assert meta["kind"] == "meta" and meta["session_id"] == SID and meta["v"] == 1
    assert meta["workspace"] == str(tmp_path) and meta["first_seq"] == 1 and meta["resumed"] is False
    assert meta["tools"] == ["probe", "shell_probe", "ask_tool", "deny_tool"]
    loaded = load_recording(rec)
    assert loaded.envelopes == cap.envelopes
    assert all(r.wall and r.wall.endswith("Z") for r in loaded.lines)
    assert loaded.segments[0].closed


class CountingSink:
    """A sink that remembers, per fsync, how many lines were written before it."""

    def __init__(self, path: Path) -> None:
        self.inner = FileSink(path)
        self.lines: list[str] = []
        self.syncs: list[int] = []
        self.on_loop: list[bool] = []
        """Per fsync: whether it ran in the event loop's thread."""

    def write(self, data: bytes) -> None:
        self.inner.write(data)
        self.lines += data.decode().splitlines()

    def fsync(self) -> None:
        self.inner.fsync()
        self.syncs.append(len(self.lines))
        self.on_loop.append(threading.current_thread() is threading.main_thread())

    def close(self) -> None:
        self.inner.close()


@pytest.mark.parametrize("sync_inline", [False, True], ids=["in a thread", "inline"])
async def test_fsync_at_turn_end_approvals_and_close_before_any_observer_sees_them(tmp_path: Path, sync_inline: bool) -> None:
    # Inline: a process that serves one session (``agentbus -p``) fsyncs on its loop.
    rec = tmp_path / "s.jsonl"
    sinks: list[CountingSink] = []

    def open_sink(path: Path) -> CountingSink:
        sinks.append(CountingSink(path))
        return sinks[-1]

    bus = Bus()
    cfg = session_config(tmp_path, None)
    entries = [calls_entry(("ask_tool", {"outcome": "ok"})), text_entry("done")]
    seen_on_disk: list[tuple[str, bool]] = []
    async with trio.open_nursery() as nursery:
        await nursery.start(GatewayActor(bus, FakeResponsesBackend(entries)).run)
        await nursery.start(
            RecorderActor(bus, session_id=SID, path=rec, open_sink=open_sink, sync_inline=sync_inline).run
        )
        port = bus.connect("client:test")
        addrs = await nursery.start(runtime.supervise_session, bus, cfg)
        sub = bus.subscribe(SID, "client", capacity=1000)  # after the recorder
        await port.send(runtime.open_session_message(cfg), to=addrs.session)
        await port.send(SubmitPrompt(session_id=SID, prompt_id="p", parts=({"text": "go"},)), to=addrs.session)
        sink = sinks[0]
        async for env in sub:
            msg = env.message
            if isinstance(msg, ApprovalRequested | TurnEnded | SessionClosed):
                # The line is written and fsynced before this observer gets the message.
                last_synced = sink.syncs[-1]
                line = json.loads(sink.lines[last_synced - 1])
                seen_on_disk.append((type(msg).__name__, line["seq"] == env.seq))
            if isinstance(msg, ApprovalRequested):
                from bus.messages import ApprovalAnswered

                await port.send(
                    ApprovalAnswered(
                        session_id=SID, correlation_id=msg.correlation_id, outcome="proceed_once", answered_by="t"
                    ),
                    to=addrs.scheduler,
                )
            if isinstance(msg, TurnEnded):
                await port.send(CloseSession(session_id=SID, reason="done"), to=addrs.session)
            if isinstance(msg, SessionClosed):
                break
        bus.disconnect("gateway")
        nursery.cancel_scope.cancel()
    assert seen_on_disk == [("ApprovalRequested", True), ("TurnEnded", True), ("SessionClosed", True)]
    # The meta line is synced at once (on the loop); then exactly the three sync points.
    assert sinks[0].on_loop == [True, sync_inline, sync_inline, sync_inline]


class SlowSyncSink(CountingSink):
    """A sink whose fsync takes until the test lets it go (10 s at most: a bound against
    hangs, not a timing)."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.go = threading.Event()
        self.let_go_in_time: list[bool] = []

    def fsync(self) -> None:
        if self.syncs:  # not the meta line's, at the start
            self.let_go_in_time.append(self.go.wait(10))
        super().fsync()


async def test_a_turn_ends_sync_runs_off_the_event_loop_and_nobody_sees_the_turn_end_before(tmp_path: Path) -> None:
    # A daemon with many sessions must not stop while one recording syncs (a real clock
    # here: under trio's MockClock the fsync stays inline, see actors/recorder.py).
    sinks: list[SlowSyncSink] = []

    def open_sink(path: Path) -> SlowSyncSink:
        sinks.append(SlowSyncSink(path))
        return sinks[-1]

    bus = Bus()
    async with trio.open_nursery() as nursery:
        await nursery.start(RecorderActor(bus, session_id=SID, path=tmp_path / "s.jsonl", open_sink=open_sink).run)
        observer = bus.subscribe(SID, "client", capacity=10)
        port = bus.connect("turn")
        ended = trio.Event()

        async def end_turn() -> None:
            await port.publish(TurnEnded(session_id=SID, turn_id="t", stop_reason="end_turn"))
            ended.set()

        nursery.start_soon(end_turn)
        await trio.testing.wait_all_tasks_blocked()
        # The loop runs on while the sync waits; the turn's end is held for it.
        assert sinks[0].lines and not sinks[0].let_go_in_time
        with pytest.raises(trio.WouldBlock):
            observer.receive.receive_nowait()
        sinks[0].go.set()
        await ended.wait()
        env = observer.receive.receive_nowait()
        assert isinstance(env.message, TurnEnded)
        assert sinks[0].let_go_in_time == [True]
        assert json.loads(sinks[0].lines[sinks[0].syncs[-1] - 1])["seq"] == env.seq
        nursery.cancel_scope.cancel()


class FailingSyncSink(CountingSink):
    """A disk whose fsync fails from the ``ok``-th on (EIO)."""

    def __init__(self, path: Path, ok: int) -> None:
        super().__init__(path)
        self.ok = ok

    def fsync(self) -> None:
        if len(self.syncs) >= self.ok:
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        super().fsync()


@pytest.mark.parametrize("sync_inline", [False, True], ids=["in a thread", "inline"])
async def test_a_turn_end_whose_fsync_failed_reaches_no_observer(tmp_path: Path, sync_inline: bool) -> None:
    rec = tmp_path / "s.jsonl"
    bus = Bus()
    seen: list[str] = []
    with pytest.raises(BaseException) as info:  # noqa: B017 - an exception group is expected
        async with trio.open_nursery() as nursery:
            await nursery.start(
                RecorderActor(
                    bus, session_id=SID, path=rec, open_sink=lambda p: FailingSyncSink(p, ok=1), sync_inline=sync_inline
                ).run
            )
            observer = bus.subscribe(SID, "client", capacity=10)
            port = bus.connect("turn")

            async def watch() -> None:
                async for env in observer:
                    seen.append(type(env.message).__name__)

            nursery.start_soon(watch)
            await port.publish(TextStreamed(session_id=SID, turn_id="t", text="a"))
            await port.publish(TurnEnded(session_id=SID, turn_id="t", stop_reason="end_turn"))
            await trio.sleep_forever()
    failure = recorder_error_in(info.value)
    assert failure is not None and "Input/output error" in str(failure)
    # The text was written (no fsync due) and shown; the turn's end, not on disk, never.
    assert seen == ["TextStreamed"]


class FailingSink:
    """Disk full after ``ok`` lines."""

    def __init__(self, path: Path, ok: int) -> None:
        self.inner = FileSink(path)
        self.left = ok

    def write(self, data: bytes) -> None:
        if self.left <= 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self.left -= 1
        self.inner.write(data)

    def fsync(self) -> None:
        self.inner.fsync()

    def close(self) -> None:
        self.inner.close()


async def test_a_write_failure_stops_the_session_with_a_clear_error(tmp_path: Path) -> None:
    rec = tmp_path / "s.jsonl"
    bus = Bus()
    cfg = session_config(tmp_path, None)
    with pytest.raises(BaseException) as info:  # noqa: B017 - an exception group is expected
        async with trio.open_nursery() as nursery:
            await nursery.start(GatewayActor(bus, FakeResponsesBackend([text_entry("a", "b", "c")])).run)
            await nursery.start(
                RecorderActor(bus, session_id=SID, path=rec, open_sink=lambda p: FailingSink(p, ok=4)).run
            )
            port = bus.connect("client:test")
            addrs = await nursery.start(runtime.supervise_session, bus, cfg)
            await port.send(runtime.open_session_message(cfg), to=addrs.session)
            await port.send(SubmitPrompt(session_id=SID, prompt_id="p", parts=({"text": "go"},)), to=addrs.session)
            await trio.sleep_forever()
    failure = recorder_error_in(info.value)
    assert failure is not None
    assert str(failure) == f"cannot write recording {rec}: No space left on device"
    # Nothing after the failure was silently dropped-and-continued: the file ends there.
    assert len(rec.read_text().splitlines()) == 4


class BrokenSink(FailingSink):
    """A recorder's own bug after ``ok`` lines (not a disk's failure)."""

    def write(self, data: bytes) -> None:
        if self.left <= 0:
            raise ValueError("a bug in the recorder")
        super().write(data)


async def test_what_the_recorder_cannot_do_fails_in_its_own_task_not_the_senders(tmp_path: Path) -> None:
    # The bus calls the recorder (a tap) in the sender's task; a failure there stops the
    # recorder, as when it ran in its own task, and the sender goes on until the
    # session is stopped.
    bus = Bus()
    sender = bus.connect("turn:x")
    sent: list[int] = []
    sender_failed: list[BaseException] = []
    with pytest.raises(BaseException) as info:  # noqa: B017 - an exception group is expected
        async with trio.open_nursery() as nursery:
            await nursery.start(
                RecorderActor(bus, session_id=SID, path=tmp_path / "s.jsonl", open_sink=lambda p: BrokenSink(p, ok=2)).run
            )
            try:
                for i in range(3):  # the second one's line fails; the recorder then stops the rest
                    sent.append((await sender.publish(TextStreamed(session_id=SID, turn_id="t", text=str(i)))).seq)
            except Exception as exc:
                sender_failed.append(exc)
                raise
            await trio.sleep_forever()
    assert info.group_contains(ValueError, match="a bug in the recorder")
    assert sender_failed == [] and sent[:2] == [1, 2]
    assert len((tmp_path / "s.jsonl").read_text().splitlines()) == 2  # the meta line and the first


async def test_a_data_dir_that_cannot_be_created_fails_before_the_session_starts(tmp_path: Path) -> None:
    blocker = tmp_path / "data"
    blocker.write_text("a file where the data directory should be")
    with pytest.raises(RecorderError, match=r"cannot open recording .*data/sessions/s\.jsonl: (Not a directory|File exists)"):
        await RecorderActor(Bus(), session_id="s", path=blocker / "sessions" / "s.jsonl").run()


OPEN_IN_A_CHILD = """
import sys
import threading
from pathlib import Path
import trio
from actors.recorder import RecorderActor
from actors.recording import RecorderError
from bus import Bus
try:
    trio.run(RecorderActor(Bus(), session_id="s", path=Path(sys.argv[1])).run)
except RecorderError as error:
    print(error)
"""


def test_an_unwritable_directory_fails_before_the_session_starts(tmp_path: Path) -> None:
    """In a child process: as root, one without the capabilities that let root write into
    any directory (``setpriv``), so the check runs for every user, root included."""
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    drop: list[str] = []
    if os.access(locked, os.W_OK):
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("running as root without setpriv (util-linux) to drop CAP_DAC_OVERRIDE")
        drop = [setpriv, "--bounding-set=-dac_override,-dac_read_search"]
    try:
        child = subprocess.run(
            [*drop, sys.executable, "-c", OPEN_IN_A_CHILD, str(locked / "sessions" / "s.jsonl")],
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        locked.chmod(0o700)
    assert child.returncode == 0, child.stderr
    assert re.fullmatch(r"cannot open recording .*locked/sessions/s\.jsonl: Permission denied\n", child.stdout)
    assert not (locked / "sessions").exists()


async def test_secrets_never_reach_the_recording(tmp_path: Path) -> None:
    key = "k3y-" + "Z" * 30
    google = "AIza" + "B" * 35
    scrubber = Scrubber.from_env({"GEMINI_API_KEY": key, "GOOGLE_API_KEY": "short", "OTHER_API_KEY": "x" * 12})
    assert scrubber.secrets == (key, "x" * 12)
    rec = tmp_path / "s.jsonl"
    bus = Bus()
    texts = [
        f"my key is {key}!",
        f"google {google}",
        "Authorization: Bearer abcdefgh12345678",
        "ordinary text with the word fake",
    ]
    async with trio.open_nursery() as nursery:
        await nursery.start(RecorderActor(bus, session_id="s", path=rec, scrubber=scrubber).run)
        port = bus.connect("c")
        await port.publish(
            OpenSession(
                session_id="s",
                model="m",
                approval_mode="default",
                workspace="/w",
                history=({"role": "user", "parts": [{"text": "x"}], "headers": {"x-goog-api-key": "hdr-value-1", "Authorization": "hdr-value-2"}},),
            )
        )
        for t in texts:
            await port.publish(TextStreamed(session_id="s", turn_id="t", text=t))
        await port.publish(SessionClosed(session_id="s", reason="done"))
    raw = rec.read_text()
    for secret in (key, google, "abcdefgh12345678", "hdr-value-1", "hdr-value-2", "x" * 12):
        assert secret not in raw
    assert raw.count(REDACTED) == 5
    assert "ordinary text with the word fake" in raw
    loaded = load_recording(rec)  # still decodes
    assert [e.message.text for e in loaded.envelopes if isinstance(e.message, TextStreamed)][0] == f"my key is {REDACTED}!"
    assert secrets_from_env({"GEMINI_API_KEY": "fake"}) == ()


async def test_a_secret_added_while_the_session_runs_is_scrubbed_from_the_next_line(tmp_path: Path) -> None:
    # The daemon adds a client's keys to a running session's scrubber (``Scrubber.add``);
    # the recorder, which has written lines with the secrets it had, must use the new ones.
    late = 'l4te-"key"-' + "Q" * 20  # written inside JSON strings with its quotes escaped
    scrubber = Scrubber.from_env({})
    rec = tmp_path / "s.jsonl"
    bus = Bus()
    async with trio.open_nursery() as nursery:
        await nursery.start(RecorderActor(bus, session_id="s", path=rec, scrubber=scrubber).run)
        port = bus.connect("c")
        await port.publish(TextStreamed(session_id="s", turn_id="t", text="before"))
        scrubber.add([late])
        await port.publish(TextStreamed(session_id="s", turn_id="t", text=f"after {late}"))
        await port.publish(SessionClosed(session_id="s", reason="done"))
    raw = rec.read_text()
    assert "Q" * 20 not in raw
    texts = [e.message.text for e in load_recording(rec).envelopes if isinstance(e.message, TextStreamed)]
    assert texts == ["before", f"after {REDACTED}"]


def _envelope_lines(tmp_path: Path) -> list[str]:
    rec = tmp_path / "good.jsonl"
    trio.run(run_session, tmp_path, rec, [text_entry("hi")], ClientScript())
    return rec.read_text().splitlines()


def test_a_torn_last_line_is_reported_and_ignored(tmp_path: Path) -> None:
    lines = _envelope_lines(tmp_path)
    raw = ("\n".join(lines) + "\n" + lines[3][:40]).encode()
    torn: list[Any] = []
    rec = parse_recording(tmp_path / "r.jsonl", raw, on_torn=torn.append)
    assert len(rec.envelopes) == len(lines) - 1
    assert [t.line for t in torn] == [len(lines) + 1]
    tail = (tmp_path / "r.jsonl")
    tail.write_bytes(raw)
    info = read_tail(tail)
    assert info.torn and info.needs_newline and info.last_seq == len(lines) - 1


def test_a_torn_line_closed_by_a_resuming_process_is_ignored(tmp_path: Path) -> None:
    lines = _envelope_lines(tmp_path)
    meta = json.loads(lines[0])
    resumed = json.dumps({**meta, "resumed": True, "torn_tail": True, "first_seq": len(lines)})
    raw = ("\n".join(lines) + "\n" + lines[3][:40] + "\n" + resumed + "\n").encode()
    torn: list[Any] = []
    rec = parse_recording(tmp_path / "r.jsonl", raw, on_torn=torn.append)
    assert [t.line for t in torn] == [len(lines) + 1]
    assert len(rec.segments) == 2


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda ls: [*ls[:3], ls[3][:40], *ls[4:]], r"r\.jsonl:4: malformed JSON"),
        (lambda ls: [*ls[:3], ls[3].replace('"type":"', '"type":"Bogus'), *ls[4:]], r"r\.jsonl:4: unknown message type 'Bogus"),
        (lambda ls: [ls[0].replace('"v":1', '"v":7'), *ls[1:]], r"r\.jsonl:1: format version 7 is newer than this agentbus reads \(2\)"),
        (lambda ls: [*ls[:3], ls[3].replace('"v":1', '"v":3'), *ls[4:]], r"r\.jsonl:4: format version 3 is newer"),
        (lambda ls: [*ls[:3], *ls[4:]], r"r\.jsonl:4: sequence gap: expected seq 3, found 4"),
        (lambda ls: [*ls[:3], "[1, 2]", *ls[3:]], r"r\.jsonl:4: a recording line must be a JSON object"),
    ],
    ids=["corrupted-middle-line", "unknown-tag", "newer-meta", "newer-envelope", "gap", "not-an-object"],
)
def test_bad_lines_are_errors_naming_file_and_line(tmp_path: Path, mutate: Any, message: str) -> None:
    lines = _envelope_lines(tmp_path)
    with pytest.raises(RecordingError, match=message):
        parse_recording(tmp_path / "r.jsonl", ("\n".join(mutate(lines)) + "\n").encode())


async def test_a_resumed_recording_continues_the_numbering_and_the_file(tmp_path: Path) -> None:
    rec = tmp_path / "s.jsonl"
    await run_session(tmp_path, rec, [text_entry("one")], ClientScript())
    first = load_recording(rec)
    # A crash left half a line behind.
    with rec.open("a") as fh:
        fh.write('{"v":1,"seq":99,"sess')
    before = rec.read_bytes()
    await run_session(tmp_path, rec, [text_entry("two")], ClientScript())
    torn: list[Any] = []
    both = load_recording(rec, on_torn=torn.append)
    assert len(torn) == 1
    assert [len(s.lines) for s in both.segments] == [len(first.envelopes), len(first.envelopes)]
    assert both.segments[1].meta["first_seq"] == first.last_seq + 1
    assert both.segments[1].meta["resumed"] is True and both.segments[1].meta["torn_tail"] is True
    assert [e.seq for e in both.envelopes] == list(range(1, 2 * len(first.envelopes) + 1))
    # Nothing before the new part was rewritten, not even the torn line.
    assert rec.read_bytes().startswith(before + b"\n")


def test_encode_envelope_and_the_recorder_line_agree_without_secrets(tmp_path: Path) -> None:
    lines = _envelope_lines(tmp_path)
    rec = parse_recording(tmp_path / "r.jsonl", ("\n".join(lines) + "\n").encode())
    # A message no field of which is written by reference is its envelope, plus the wall time.
    first = next(r for r in rec.lines if type(r.env.message) not in INTERNED)
    assert json.loads(lines[first.line - 1]) == {**json.loads(encode_envelope(first.env, wall=first.wall))}
