"""Invariant 7 for the daemon: closing it leaves no child process, whatever its sessions
were running (a foreground shell command, a background one), with real processes."""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path

import pytest
import trio

from bus.planted import planting
from tests.frontends.daemon._helpers import (
    alive,
    call_response,
    client_of,
    events_until,
    running_daemon,
    text_response,
    write_responses,
)


@pytest.mark.parametrize("plant", [False, True], ids=["as-is", "executor.skip_close-planted"])
async def test_stopping_the_daemon_leaves_no_child_process(home: Path, plant: bool) -> None:
    sessions = [("foreground", False), ("background", True), ("foreground-2", False)]
    fifos = {name: home / f"{name}.pid" for name, _ in sessions}
    for fifo in fifos.values():
        os.mkfifo(fifo)
    pids: list[int] = []
    with trio.fail_after(30), planting("executor.skip_close") if plant else contextlib.nullcontext():
        async with running_daemon(home), client_of(home) as client:
            for name, background in sessions:
                command = f"echo $$ > {fifos[name]}; exec sleep 300"
                fake = write_responses(
                    home / f"{name}.responses",
                    call_response("run_shell_command", {"command": command, "is_background": background}),
                    text_response("started"),
                )
                ready = await client.create_session(
                    str(home / "ws"), fake_responses=str(fake), approval_mode="yolo", model="gemini-2.5-flash"
                )
                await client.subscribe(ready.session_id, from_seq=1)
                await client.prompt(ready.session_id, "start it")
                pids.append(int(await trio.to_thread.run_sync(fifos[name].read_text)))
                if background:
                    # The call returned with its process still running; the turn ends.
                    envs = await events_until(client)
                    assert envs[-1].message.stop_reason == "end_turn"  # type: ignore[attr-defined]
            assert all(alive(pid) for pid in pids)
        # The daemon has stopped (its nursery is done): nothing it started is left.
    left = [pid for pid in pids if alive(pid)]
    for pid in left:
        os.killpg(pid, signal.SIGKILL)
    # With the planted bug the background process survives: the test can fail.
    assert left == ([pids[1]] if plant else [])
