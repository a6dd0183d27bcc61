"""``agentbus web`` as a command: what it says when it cannot serve (one line each, and
no daemon started for nothing)."""

from __future__ import annotations

import socket
from pathlib import Path

from tests.frontends.daemon._procs import agentbus


def test_a_taken_port_is_one_line_and_starts_no_daemon(home: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = agentbus(home, "web", "--port", str(port))
    assert done.returncode == 1
    assert done.stderr == f"agentbus web: cannot listen on 127.0.0.1:{port}: Address already in use\n"
    assert done.stdout == ""
    assert not (home / "run" / "daemon.sock").exists()


def test_a_port_out_of_range_is_a_usage_error(home: Path) -> None:
    done = agentbus(home, "web", "--port", "70000")
    assert done.returncode == 2
    assert done.stderr == "agentbus web: --port 70000 is not a port (0..65535)\n"


def test_a_daemon_that_cannot_start_is_said_in_one_line(home: Path) -> None:
    from tests.frontends.daemon._procs import env_for

    (home / "a-file").write_text("")
    done = agentbus(home, "web", env={**env_for(home), "AGENTBUS_RUNTIME_DIR": str(home / "a-file")})
    assert done.returncode == 1
    assert done.stderr.startswith("agentbus web: ") and done.stderr.count("\n") == 1, done.stderr
    assert "?token=" not in done.stdout
