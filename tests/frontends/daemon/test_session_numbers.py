"""One numbering of a workspace's sessions for every front end: the daemon lists them in
the order `agentbus --list-sessions` numbers them (Gemini CLI's: by start, the newest
last), whichever of them runs, so `N` and `latest` name the same session everywhere."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import trio

from tests.frontends.daemon._helpers import (  # noqa: F401
    client_of,
    home,
    running_daemon,
    text_response,
    write_responses,
)

ROOT = Path(__file__).resolve().parents[3]


def headless(root: Path, *args: str) -> str:
    env = {**os.environ, "AGENTBUS_DATA_DIR": str(root / "data"), "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "actors.frontends", *args],
        cwd=root / "ws", env=env, capture_output=True, text=True, timeout=60, check=True,
    )
    return done.stdout + done.stderr


async def test_the_daemon_numbers_sessions_as_the_command_line_does(home: Path) -> None:  # noqa: F811
    fake = write_responses(home / "f.responses", text_response("ok"))
    for prompt in ("first prompt", "second prompt"):
        headless(home, "-p", prompt, "-m", "gemini-2.5-flash", "--fake-responses", str(fake))
    listing = headless(home, "--list-sessions")
    assert listing.index("first prompt") < listing.index("second prompt"), listing
    with trio.fail_after(30):
        async with running_daemon(home), client_of(home) as client:
            listed = (await client.list_sessions(str(home / "ws"))).sessions
            older, newer = (s.session_id for s in listed)
            # The newer one running (a client resumed it) does not move it to the front.
            await client.load_session(newer, fake_responses=str(fake))
            listed = (await client.list_sessions(str(home / "ws"))).sessions
    assert [s.session_id for s in listed] == [older, newer]
    assert [s.title for s in listed] == ["first prompt", "second prompt"]
    assert listed[1].state == "running"
