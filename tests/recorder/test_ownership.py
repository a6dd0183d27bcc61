"""One process owns a session (its recorder locks the recording); a recording deleted
under a running session is noticed; listing reads a recording's first and last lines."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from actors.frontends.daemon.client import DaemonError
from actors.host.sessions import scan_session
from actors.recorder import RecorderActor
from actors.recording import (
    RecorderError,
    SessionClaim,
    SessionInUseError,
    load_recording,
    recording_path,
    session_in_use,
)
from bus import Bus
from bus.messages import SessionClosed, SubscriptionEnded, TextStreamed, TurnEnded
from tests.frontends.daemon._helpers import (
    client_of,
    events_until,
    home,
    running_daemon,
    text_response,
    write_responses,
)
from tests.recorder.test_cli_sessions import headless, run

__all__ = ["home"]  # the daemon tests' fixture


async def test_a_second_recorder_of_the_same_session_is_refused_naming_the_owner(tmp_path: Path) -> None:
    rec = tmp_path / "s.jsonl"
    bus = Bus()
    async with trio.open_nursery() as nursery:
        await nursery.start(RecorderActor(bus, session_id="s", path=rec, meta={"pid": os.getpid()}).run)
        assert session_in_use(rec) is not None
        with pytest.raises(SessionInUseError, match=rf"session 's' is in use by another agentbus process \(pid {os.getpid()}\)"):
            await RecorderActor(Bus(), session_id="s", path=rec).run()
        await bus.connect("c").publish(SessionClosed(session_id="s", reason="done"))
    # The owner ended: the session is free, and its file was written by one process.
    assert session_in_use(rec) is None
    assert len(load_recording(rec).segments) == 1


async def test_a_recording_deleted_under_the_session_stops_it_at_the_next_sync_point(tmp_path: Path) -> None:
    rec = tmp_path / "s.jsonl"
    bus = Bus()
    port = bus.connect("c")
    with pytest.raises(BaseException) as info, trio.fail_after(60):  # noqa: B017 - the nursery's exception group
        async with trio.open_nursery() as nursery:
            await nursery.start(RecorderActor(bus, session_id="s", path=rec).run)
            await port.publish(TextStreamed(session_id="s", turn_id="t", text="a"))
            rec.unlink()
            await port.publish(TextStreamed(session_id="s", turn_id="t", text="b"))
            await port.publish(TurnEnded(session_id="s", turn_id="t", stop_reason="end_turn"))
    error = info.value if isinstance(info.value, RecorderError) else info.value.exceptions[0]  # type: ignore[attr-defined]
    assert isinstance(error, RecorderError)
    assert str(error).startswith(f"the recording {rec} was deleted while the session ran; the session stops")


async def test_a_recording_replaced_under_the_session_is_noticed(tmp_path: Path) -> None:
    rec = tmp_path / "s.jsonl"
    claim = SessionClaim(rec)
    try:
        assert claim.lost() is None
        rec.rename(tmp_path / "moved.jsonl")
        rec.write_text("")
        assert claim.lost() == "was replaced by another file"
    finally:
        claim.close()


def test_resume_of_a_session_another_process_holds_is_refused_with_exit_42(tmp_path: Path) -> None:
    project, data = tmp_path / "project", tmp_path / "data"
    project.mkdir()
    first = run(headless("hi", "-o", "stream-json"), project, data)
    assert first.returncode == 0, first.stderr
    sid = json.loads(first.stdout.splitlines()[0])["session_id"]
    path = recording_path(data, sid)
    before = path.read_bytes()
    # Another process holds the session (as a chat's daemon does while it runs).
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl,os,sys; fd=os.open(sys.argv[1], os.O_RDONLY);"
         " fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True); sys.stdin.read()", str(path)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        second = run(headless("again", "--resume", "1"), project, data)
        assert second.returncode == 42
        assert second.stderr.strip().splitlines() == [
            f"Error resuming session: session {sid!r} is in use by another agentbus process; "
            f"attach to it there or wait until it ends ({path})"
        ]
        assert path.read_bytes() == before  # nothing written by the refused run
        deleted = run(["--delete-session", "1"], project, data)
        assert "in use by another agentbus process" in deleted.stderr and path.exists()
    finally:
        assert holder.stdin is not None and holder.stdout is not None
        holder.stdin.close()
        holder.wait(timeout=30)
        holder.stdout.close()
    third = run(headless("again", "--resume", "1"), project, data)
    assert third.returncode == 0, third.stderr


async def test_the_daemon_refuses_a_session_held_elsewhere_and_one_whose_recording_is_gone(home: Path) -> None:
    fake = write_responses(home / "f.responses", text_response("Hello"), text_response("Again"))
    with trio.fail_after(60):
        async with running_daemon(home) as daemon, client_of(home) as client:
            ready = await client.create_session(str(home / "ws"), fake_responses=str(fake), model="gemini-2.5-flash")
            sid = ready.session_id
            await client.subscribe(sid, from_seq=1)
            await client.prompt(sid, "hi")
            await events_until(client)
            daemon.stop("test restart")
        path = recording_path(home / "data", sid)
        claim = SessionClaim(path)  # a headless run resuming it meanwhile
        try:
            async with running_daemon(home), client_of(home) as client:
                with pytest.raises(DaemonError, match="in use by another agentbus process") as busy:
                    await client.load_session(sid)
                assert busy.value.code == "in_use"
        finally:
            claim.close()
        path.unlink()
        async with running_daemon(home), client_of(home) as client:
            with pytest.raises(DaemonError, match=r"cannot resume session .*no such recording \(deleted\?\); its history is lost"):
                await client.load_session(sid)


def test_listing_reads_the_first_and_last_lines_only(tmp_path: Path) -> None:
    """A long recording is listed from its head and its tail: the middle is never read."""
    rec = tmp_path / "s.jsonl"
    trio.run(_short_session, rec)
    lines = rec.read_bytes().splitlines(keepends=True)
    middle = 64 << 20
    with rec.open("wb") as fh:
        fh.writelines(lines[:-1])
        fh.write(b"\n" * middle)  # stands for a long session's lines
        fh.write(lines[-1])
    read_before = _bytes_read()
    info = scan_session(rec)
    read = _bytes_read() - read_before
    assert info is not None and info.first_user_message == "hello there"
    assert info.last_updated == json.loads(lines[-1])["wall"]
    assert read < 1 << 20, read


async def _short_session(rec: Path) -> None:
    from tests.frontends.replay._session import ClientScript, run_session, text_entry

    await run_session(rec.parent, rec, [text_entry("hi")], ClientScript(prompts=("hello there",)))


def _bytes_read() -> int:
    """This process's bytes read by system calls so far (``rchar``)."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    pytest.skip("no /proc/self/io")


async def test_a_daemon_session_whose_recording_is_deleted_stops_and_says_so(
    home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    fake = write_responses(home / "f.responses", text_response("Hello"), text_response("Again"))
    with trio.fail_after(60):
        async with running_daemon(home), client_of(home) as client:
            ready = await client.create_session(str(home / "ws"), fake_responses=str(fake), model="gemini-2.5-flash")
            sid = ready.session_id
            await client.subscribe(sid, from_seq=1)
            await client.prompt(sid, "hi")
            await events_until(client)
            path = recording_path(home / "data", sid)
            path.unlink()
            await client.prompt(sid, "again")
            async for event in client.events:
                if isinstance(event, SubscriptionEnded):
                    break
    assert event.reason.startswith(f"failed: the recording {path} was deleted while the session ran")
    assert f"session {sid} failed: the recording {path} was deleted" in caplog.text
    assert not path.exists()  # nothing pretends to be the session's recording
