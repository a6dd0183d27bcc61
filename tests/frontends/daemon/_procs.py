"""A daemon in its own process (the command line), for signal and restart tests."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import trio

ROOT = Path(__file__).resolve().parents[3]


def env_for(home: Path) -> dict[str, str]:
    return {
        "PATH": os.environ["PATH"],
        "HOME": str(home / "home"),
        "GEMINI_CLI_HOME": str(home / "home"),
        "AGENTBUS_RUNTIME_DIR": str(home / "run"),
        "AGENTBUS_DATA_DIR": str(home / "data"),
        "PYTHONPATH": str(ROOT),
    }


def agentbus(
    home: Path, *args: str, timeout: float = 30, stdin: str | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "actors.frontends", *args],
        input=stdin,
        env=env_for(home) if env is None else env,
        cwd=home / "ws",
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def piped_chat(home: Path, *args: str, typed: str = "hi\n", extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``agentbus chat ARGS`` with ``typed`` piped in (no terminal): what it did."""
    return agentbus(home, "chat", *args, stdin=typed, env={**env_for(home), "TERM": "xterm", **(extra_env or {})})


def ends_within(pid: int, timeout_s: float) -> bool:
    """Whether process ``pid`` ends (or has ended) within ``timeout_s``: its pidfd turns
    readable when it exits, zombie or not."""
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        ready, _, _ = select.select([pidfd], [], [], timeout_s)
        return bool(ready)
    finally:
        os.close(pidfd)


class DaemonProcess:
    def __init__(self, proc: trio.Process) -> None:
        self.proc = proc
        self.log = b""

    async def wait_ready(self) -> None:
        assert self.proc.stderr is not None
        while b"listening on" not in self.log:
            data = await self.proc.stderr.receive_some(4096)
            assert data, f"the daemon exited: {self.log.decode(errors='replace')}"
            self.log += data

    async def drain(self) -> None:
        assert self.proc.stderr is not None
        while data := await self.proc.stderr.receive_some(4096):
            self.log += data


@asynccontextmanager
async def daemon_process(home: Path, *args: str) -> AsyncIterator[DaemonProcess]:
    proc = await trio.lowlevel.open_process(
        [sys.executable, "-m", "actors.frontends", "daemon", *args],
        env=env_for(home),
        cwd=home / "ws",
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    daemon = DaemonProcess(proc)
    try:
        with trio.fail_after(20):
            await daemon.wait_ready()
        yield daemon
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGKILL)
        await proc.wait()
        if proc.stderr is not None:
            await proc.stderr.aclose()


async def killed_mid_approval(home: Path) -> str:
    """A session of a daemon (a process of its own) killed with SIGKILL while the
    model's ``write_file`` of notes.txt waited for its approval: the session's id. Its
    recording ends in the middle of the turn."""
    from actors.frontends.daemon.client import open_client
    from actors.frontends.daemon.paths import DaemonPaths
    from bus.messages import ApprovalRequested
    from tests.frontends.daemon._helpers import (
        call_response,
        events_until,
        text_response,
        write_responses,
    )

    fake = write_responses(
        home / "approve.responses",
        call_response("write_file", {"file_path": "notes.txt", "content": "milk\n"}),
        text_response("never"),
    )
    async with daemon_process(home) as daemon:
        async with open_client(DaemonPaths(home / "run"), start=False) as client:
            ready = await client.create_session(str(home / "ws"), fake_responses=str(fake), model="gemini-2.5-flash")
            await client.subscribe(ready.session_id, from_seq=1)
            await client.prompt(ready.session_id, "Write my note to notes.txt.")
            await events_until(client, lambda m: isinstance(m, ApprovalRequested))
            daemon.proc.send_signal(signal.SIGKILL)  # mid-turn: the call waits for its approval
            await daemon.proc.wait()
    return ready.session_id
