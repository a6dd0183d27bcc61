"""``agentbus daemon --detach`` when a daemon runs already: it says so and exits 0; asked
for options the running daemon was not started with (a TCP listener, a data directory),
it says they are not applied and exits 1 (it exited 0, silently without them)."""

from __future__ import annotations

from pathlib import Path

from tests.frontends.daemon._procs import agentbus


def test_a_second_start_says_what_it_does_not_apply(home: Path) -> None:
    try:
        first = agentbus(home, "daemon", "--detach")
        assert first.returncode == 0, first.stderr
        again = agentbus(home, "daemon", "--detach")
        assert again.returncode == 0 and "already running" in again.stderr, again.stderr
        other = agentbus(home, "daemon", "--detach", "--data-dir", str(home / "elsewhere"))
        assert other.returncode == 1, other.stderr
        assert "already running" in other.stderr and "--data-dir not applied" in other.stderr, other.stderr
    finally:
        agentbus(home, "daemon", "stop")
