"""The session registry on disk: changes in memory, whole-file writes from snapshots
(a worker thread in the daemon), never an older snapshot over a newer one."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import trio

from actors.frontends.daemon._registry import Registry, SessionEntry
from tests.frontends.daemon._helpers import (
    client_of,
    running_daemon,
    text_response,
    write_responses,
)


def entry(sid: str, mode: str = "default") -> SessionEntry:
    return SessionEntry(session_id=sid, workspace="/w", model="m", approval_mode=mode)


def on_disk(path: Path) -> list[tuple[str, str]]:
    return [(s["session_id"], s["approval_mode"]) for s in json.loads(path.read_text())["sessions"]]


def test_changes_are_written_from_snapshots_and_an_older_one_never_wins(tmp_path: Path) -> None:
    path = tmp_path / "daemon" / "sessions.json"
    reg = Registry(path)
    assert reg.problem is None and not reg.dirty
    assert reg.put(entry("a"))
    assert not reg.put(entry("a"))  # unchanged: nothing to write
    older = reg.snapshot()
    assert not reg.dirty
    assert reg.put(entry("a", "yolo")) and reg.put(entry("b"))
    newer = reg.snapshot()
    reg.write(newer)
    reg.write(older)  # a slow writer finishing late
    assert on_disk(path) == [("a", "yolo"), ("b", "default")]
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert reg.remove("b") and not reg.remove("b")
    reg.save()
    assert on_disk(path) == [("a", "yolo")]
    again = Registry(path)
    assert again.entries() == [entry("a", "yolo")]


def test_an_unreadable_registry_starts_empty(tmp_path: Path) -> None:
    path = tmp_path / "sessions.json"
    path.write_text('{"sessions": [{"session_id": 3}]}')
    reg = Registry(path)
    assert reg.problem is not None and reg.entries() == []


async def test_the_daemon_keeps_its_sessions_on_disk(home: Path) -> None:
    fake = write_responses(home / "f.responses", text_response("ok"))
    path = home / "data" / "daemon" / "sessions.json"
    with trio.fail_after(20):
        async with running_daemon(home), client_of(home) as client:
            sids = [
                (await client.create_session(str(home / "ws"), fake_responses=str(fake))).session_id for _ in range(3)
            ]
            await client.end_session(sids[1])
            await client.set_mode(sids[2], "yolo")
    # Written when the daemon stopped at the latest (in between, by a worker thread).
    assert sorted(on_disk(path)) == sorted([(sids[0], "default"), (sids[2], "yolo")])
