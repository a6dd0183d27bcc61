"""The official ACP Python SDK as an editor that offers terminals, driving real
``agentbus acp --attach`` processes (the daemon started on demand): the daemon's shell
commands run in the editor's terminal (output, exit code), a cancel kills and releases
it, and an editor killed mid-command fails that call while the session goes on, its
next command run by the daemon for an editor without terminals. (asyncio: the SDK's.)"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from ._client import call_chunks, fake_responses, text_chunks
from .test_sdk_client import MODEL, TIMEOUT_S, Editor, _env

acp = pytest.importorskip("acp", reason="the ACP Python SDK is missing: pip install -e '.[test]'")
schema = pytest.importorskip("acp.schema")


class TerminalEditor(Editor):
    """An editor with terminals: real processes (no pty), every request logged."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []
        self.procs: dict[str, asyncio.subprocess.Process] = {}
        self.output: dict[str, bytearray] = {}
        self.readers: dict[str, asyncio.Future[None]] = {}
        self.waiting = asyncio.Event()
        self._ids = itertools.count(1)

    async def create_terminal(self, session_id: str, command: str, args: list[str] | None = None, env: Any = None,
                              cwd: str | None = None, **kwargs: Any) -> Any:  # fmt: skip
        self.calls.append("create")
        tid = f"term-{next(self._ids)}"
        variables = {**os.environ, **{v.name: v.value for v in env or []}}
        proc = await asyncio.create_subprocess_exec(
            command, *(args or []), cwd=cwd, env=variables, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        self.procs[tid], self.output[tid] = proc, bytearray()
        self.readers[tid] = asyncio.ensure_future(self._pump(tid, proc))
        return schema.CreateTerminalResponse(terminal_id=tid)

    async def _pump(self, tid: str, proc: asyncio.subprocess.Process) -> None:
        assert proc.stdout is not None
        while chunk := await proc.stdout.read(4096):
            self.output[tid] += chunk
        await proc.wait()

    def _status(self, tid: str) -> Any:
        rc = self.procs[tid].returncode
        if rc is None or not self.readers[tid].done():
            return None
        if rc < 0:
            return schema.TerminalExitStatus(exit_code=None, signal=signal.Signals(-rc).name)
        return schema.TerminalExitStatus(exit_code=rc, signal=None)

    async def terminal_output(self, session_id: str, terminal_id: str, **kwargs: Any) -> Any:
        text = self.output[terminal_id].decode("utf-8", "replace")
        return schema.TerminalOutputResponse(output=text, truncated=False, exit_status=self._status(terminal_id))

    async def wait_for_terminal_exit(self, session_id: str, terminal_id: str, **kwargs: Any) -> Any:
        self.calls.append("wait_for_exit")
        self.waiting.set()
        await self.readers[terminal_id]
        status = self._status(terminal_id)
        return schema.WaitForTerminalExitResponse(exit_code=status.exit_code, signal=status.signal)

    def _kill(self, tid: str) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.procs[tid].pid, signal.SIGKILL)

    async def kill_terminal(self, session_id: str, terminal_id: str, **kwargs: Any) -> Any:
        self.calls.append("kill")
        self._kill(terminal_id)
        return schema.KillTerminalResponse()

    async def release_terminal(self, session_id: str, terminal_id: str, **kwargs: Any) -> Any:
        self.calls.append("release")
        self._kill(terminal_id)
        await self.readers[terminal_id]
        return schema.ReleaseTerminalResponse()


def shell(command: str) -> list[dict[str, Any]]:
    return call_chunks(("run_shell_command", {"command": command, "description": "run it"}))


def test_an_sdk_editors_terminal_runs_the_daemons_commands(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    script = fake_responses(
        tmp_path / "terminal.jsonl",
        shell("echo out; exit 3"),
        text_chunks("Ran it."),
        shell("sleep 60"),  # cancelled: the turn asks the model nothing more
        shell("sleep 60"),
        text_chunks("It failed."),
        shell("echo in-the-daemon"),
        text_chunks("Done."),
    )
    env = {**_env(tmp_path), "AGENTBUS_RUNTIME_DIR": str(tmp_path / "run")}

    @contextlib.asynccontextmanager
    async def front_end(editor: Editor, *fake: str, terminal: bool = True) -> AsyncIterator[tuple[Any, Any]]:
        args = ["-m", "actors.frontends", "acp", "--attach", "-m", MODEL, "-y", *fake]
        async with acp.spawn_agent_process(editor, sys.executable, *args, env=env, cwd=tmp_path) as (conn, proc):
            caps = schema.ClientCapabilities(terminal=terminal)
            await conn.initialize(protocol_version=acp.PROTOCOL_VERSION, client_capabilities=caps)
            yield conn, proc

    def results(sid: str) -> list[dict[str, Any]]:
        lines = (tmp_path / "data" / "sessions" / f"{sid}.jsonl").read_text().splitlines()
        msgs = [json.loads(line).get("msg", {}) for line in lines]
        return [m["result"] for m in msgs if m.get("type") == "ToolFinished"]

    async def scenario() -> None:
        first = TerminalEditor()
        async with front_end(first, "--fake-responses", str(script)) as (conn, proc):
            sid = (await conn.new_session(cwd=str(ws), mcp_servers=[])).session_id
            answer = await conn.prompt(session_id=sid, prompt=[acp.text_block("run it")])
            assert answer.stop_reason == "end_turn"
            assert first.calls == ["create", "wait_for_exit", "release"]
            assert "Exit Code: 3" in json.dumps(results(sid)[0]["llm_content"])
            assert "out" in results(sid)[0]["return_display"]
            # Cancelled: killed and released in the editor.
            first.waiting.clear()
            turn = asyncio.ensure_future(conn.prompt(session_id=sid, prompt=[acp.text_block("wait")]))
            await first.waiting.wait()
            await conn.cancel(session_id=sid)
            assert (await turn).stop_reason == "cancelled"
            assert first.calls[-2:] == ["kill", "release"]
            # The editor goes away mid-command.
            first.waiting.clear()
            turn = asyncio.ensure_future(conn.prompt(session_id=sid, prompt=[acp.text_block("wait again")]))
            await first.waiting.wait()
            proc.kill()
            await proc.wait()
            turn.cancel()
            with contextlib.suppress(BaseException):
                await turn
            first._kill("term-3")
        second = Editor()
        async with front_end(second, terminal=False) as (conn, _):
            await conn.load_session(cwd=str(ws), session_id=sid, mcp_servers=[])
            await second.wait_for(lambda u: u.session_update == "agent_message_chunk" and u.content.text == "It failed.")
            answer = await conn.prompt(session_id=sid, prompt=[acp.text_block("again")])
            assert answer.stop_reason == "end_turn"
        ended = results(sid)
        assert ended[1]["cancelled"] is True
        assert "the editor running this command disconnected" in json.dumps(ended[2])
        assert "in-the-daemon" in json.dumps(ended[3]["llm_content"])

    try:
        asyncio.run(asyncio.wait_for(scenario(), TIMEOUT_S))
    finally:
        subprocess.run(
            [sys.executable, "-m", "actors.frontends", "daemon", "stop"], env=env, capture_output=True, timeout=30, check=False
        )
