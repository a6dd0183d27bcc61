"""``agentbus --delete-session`` of a session the daemon holds (issue 17): it is not
deleted, says why on stderr, and exits 1 (a deletion that fails exits 1)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import trio

from actors.recording import recording_path
from tests.frontends.daemon._helpers import (
    client_of,
    events_until,
    home,
    running_daemon,
    text_response,
    write_responses,
)
from tests.frontends.daemon._procs import env_for

__all__ = ["home"]


async def test_deleting_a_session_the_daemon_holds_fails_with_exit_1(home: Path) -> None:
    fake = write_responses(home / "f.responses", text_response("Hello"))
    with trio.fail_after(60):
        async with running_daemon(home), client_of(home) as client:
            sid = (await client.create_session(str(home / "ws"), fake_responses=str(fake), model="gemini-2.5-flash")).session_id
            await client.subscribe(sid, from_seq=1)
            await client.prompt(sid, "hi")
            await events_until(client)
            deleted = await trio.run_process(
                [sys.executable, "-m", "actors.frontends", "--delete-session", sid],
                env=env_for(home),
                cwd=home / "ws",
                stdin=subprocess.DEVNULL,
                capture_stdout=True,
                capture_stderr=True,
                check=False,
            )
    stderr = deleted.stderr.decode()
    assert deleted.returncode == 1, stderr
    assert stderr.strip().startswith("Failed to delete session: ") and "in use by another agentbus process" in stderr
    assert recording_path(home / "data", sid).exists()
