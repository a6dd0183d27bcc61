"""The daemon as a process: one per user, private socket, status/stop, SIGTERM mid-tool
(exit 0 within 2 s, the tool's process killed, the recording flushed), and a restart
mid-turn after which the session reloads with a valid history."""

from __future__ import annotations

import json
import os
import signal
import stat
import time
from pathlib import Path

import trio

from actors.frontends.daemon.client import open_client
from actors.frontends.daemon.paths import DaemonPaths
from actors.host.sessions import history_problems
from bus import Envelope
from bus.json_values import thaw
from bus.messages import GenerateRequest, ToolCallUpdated, TurnEnded
from tests.frontends.daemon._helpers import (
    alive,
    call_response,
    events_until,
    text_response,
    write_responses,
)
from tests.frontends.daemon._procs import agentbus, daemon_process, killed_mid_approval


async def test_one_daemon_per_user_private_socket_status_and_stop(home: Path) -> None:
    async with daemon_process(home) as daemon:
        run = home / "run"
        assert stat.S_IMODE(run.stat().st_mode) == 0o700
        assert stat.S_IMODE((run / "daemon.sock").stat().st_mode) == 0o600
        second = await trio.to_thread.run_sync(lambda: agentbus(home, "daemon"))
        assert second.returncode == 1
        assert f"already running (pid {daemon.proc.pid})" in second.stderr
        assert "Traceback" not in second.stderr
        status = await trio.to_thread.run_sync(lambda: agentbus(home, "daemon", "status"))
        assert status.returncode == 0 and f"pid {daemon.proc.pid}" in status.stdout
        stop = await trio.to_thread.run_sync(lambda: agentbus(home, "daemon", "stop"))
        assert stop.returncode == 0, stop.stderr
        with trio.fail_after(5):
            assert await daemon.proc.wait() == 0
    gone = await trio.to_thread.run_sync(lambda: agentbus(home, "daemon", "status"))
    assert gone.returncode == 1 and "not running" in gone.stdout
    assert not (home / "run" / "daemon.sock").exists()


async def model_request_after_restart(home: Path, sid: str) -> list[object]:
    """Restart, load the session, prompt: the contents of the model request."""
    fake = write_responses(home / "after.responses", text_response("Back again."))
    async with daemon_process(home) as daemon, open_client(DaemonPaths(home / "run"), start=False) as client:
        ready = await client.load_session(sid, fake_responses=str(fake))
        assert ready.resumed
        await client.subscribe(sid, full=True)
        await client.prompt(sid, "are you there?")
        envs = await events_until(client)
        ended = envs[-1].message
        assert isinstance(ended, TurnEnded) and ended.stop_reason == "end_turn"
        request = next(e.message for e in envs if isinstance(e.message, GenerateRequest))
        assert isinstance(request, GenerateRequest)
        daemon.proc.send_signal(signal.SIGTERM)
        assert await daemon.proc.wait() == 0
        return list(thaw(request.contents))


async def test_sigterm_mid_tool_cancels_with_acknowledgement_and_the_session_resumes(home: Path) -> None:
    fifo = home / "tool.pid"
    os.mkfifo(fifo)
    fake = write_responses(
        home / "sleep.responses",
        call_response("run_shell_command", {"command": f"echo $$ > {fifo}; exec sleep 30"}),
        text_response("never"),
    )
    with trio.fail_after(40):
        async with daemon_process(home) as daemon:
            async with open_client(DaemonPaths(home / "run"), start=False) as client:
                ready = await client.create_session(
                    str(home / "ws"), fake_responses=str(fake), approval_mode="yolo", model="gemini-2.5-flash"
                )
                sid = ready.session_id
                await client.subscribe(sid, from_seq=1)
                await client.prompt(sid, "sleep")
                tool_pid = int(await trio.to_thread.run_sync(fifo.read_text))
                sent = time.monotonic()
                daemon.proc.send_signal(signal.SIGTERM)
                # Connected clients see the turn end cancelled before the daemon goes.
                envs = await events_until(client)
                assert envs[-1].message.stop_reason == "cancelled"  # type: ignore[attr-defined]
                assert await daemon.proc.wait() == 0
                took = time.monotonic() - sent
            assert took < 2.0, took
            assert not alive(tool_pid)
        lines = [json.loads(line) for line in (home / "data" / "sessions" / f"{sid}.jsonl").read_text().splitlines()]
        kinds = [line["msg"]["type"] for line in lines if "msg" in line]
        assert "TurnCancelAcknowledged" in kinds and kinds[-1] == "SessionClosed"
        contents = await model_request_after_restart(home, sid)
    assert history_problems(contents) == []
    responses = [p["functionResponse"] for c in contents for p in c.get("parts", []) if "functionResponse" in p]
    assert [r["name"] for r in responses] == ["run_shell_command"]


async def test_a_killed_daemon_restarts_and_the_session_reloads_with_a_valid_history(home: Path) -> None:
    with trio.fail_after(40):
        sid = await killed_mid_approval(home)
        contents = await model_request_after_restart(home, sid)
    assert history_problems(contents) == []
    calls = [p["functionCall"]["name"] for c in contents for p in c.get("parts", []) if "functionCall" in p]
    responses = [p["functionResponse"] for c in contents for p in c.get("parts", []) if "functionResponse" in p]
    assert calls == ["write_file"] and [r["name"] for r in responses] == ["write_file"]
    assert not (home / "ws" / "notes.txt").exists()


def _unused(e: Envelope, u: ToolCallUpdated) -> None:
    del e, u


async def test_data_dir_flag_puts_the_sessions_recordings_there(home: Path) -> None:
    elsewhere = home / "elsewhere"
    fake = write_responses(home / "f.responses", text_response("Hello"))
    async with (
        daemon_process(home, "--data-dir", str(elsewhere)),
        open_client(DaemonPaths(home / "run"), start=False) as client,
    ):
        ready = await client.create_session(str(home / "ws"), fake_responses=str(fake), model="gemini-2.5-flash")
        await client.subscribe(ready.session_id, from_seq=1)
        await client.prompt(ready.session_id, "hi")
        await events_until(client)
        assert (elsewhere / "sessions" / f"{ready.session_id}.jsonl").is_file()
        assert not (home / "data" / "sessions" / f"{ready.session_id}.jsonl").exists()
