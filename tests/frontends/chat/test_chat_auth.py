"""``agentbus chat`` without credentials ends as a headless run does: Gemini CLI's
authentication exit code (41) and its one line, the daemon's ``auth_required`` reply
carried through (issue 17)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from actors.host.errors import FatalAuthenticationError
from tests.frontends.daemon._procs import agentbus, env_for, piped_chat


def test_chat_without_an_api_key_exits_41_with_one_line(home: Path) -> None:
    try:
        done = piped_chat(home, "-m", "gemini-2.5-flash")
        headless = subprocess.run(
            [sys.executable, "-m", "actors.frontends", "-m", "gemini-2.5-flash", "-p", "hi"],
            env=env_for(home),
            cwd=home / "ws",
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    finally:
        agentbus(home, "daemon", "stop")
    assert headless.returncode == FatalAuthenticationError.exit_code == 41
    assert done.returncode == 41, done.stderr
    assert done.stderr.splitlines() == ["agentbus chat: " + headless.stderr.strip()]
    assert done.stderr.startswith("agentbus chat: Please set an Auth method")
