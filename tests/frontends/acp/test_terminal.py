"""The shell's commands in the ACP client's terminal (``clientCapabilities.terminal``):
shown inside the call, exit codes and cancels as with our own shell, a terminal the
user kills, a client that cannot run it."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import trio

from ._client import Client, call_chunks, connected, fake_responses, text_chunks
from .test_server import new_session, options, prompt, prompt_until, ws

__all__ = ["ws"]


def shell(command: str) -> list[dict[str, Any]]:
    return call_chunks(("run_shell_command", {"command": command, "description": "run it"}))


def recorded(tmp_path: Path, sid: str, kind: str) -> list[dict[str, Any]]:
    lines = (tmp_path / "data" / "sessions" / f"{sid}.jsonl").read_text().splitlines()
    return [m for m in (json.loads(line).get("msg", {}) for line in lines) if m.get("type") == kind]


def call_updates(client: Client, sid: str) -> list[dict[str, Any]]:
    return [u for u in client.updates(sid) if u["sessionUpdate"].startswith("tool_call")]


def terminal_methods(client: Client) -> list[str]:
    assert client.terminals is not None
    return [m for m, _ in client.terminals.calls if m != "terminal/output"]


async def test_a_command_runs_in_the_editors_terminal_with_its_output_and_exit_code(tmp_path: Path, ws: Path) -> None:
    script = fake_responses(tmp_path / "exit.jsonl", shell("echo out; echo err >&2; exit 3"), text_chunks("Done."))
    async with connected(options(tmp_path, script, yolo=True)) as (client, _):
        await client.initialize(terminal=True)
        sid = await new_session(client, ws)
        assert (await prompt(client, sid, "run it"))["stopReason"] == "end_turn"
        assert client.terminals is not None
        (created,) = [p for m, p in client.terminals.calls if m == "terminal/create"]
        assert created["command"].endswith("bash") and created["args"][0] == "-c"
        assert "echo out; echo err >&2; exit 3" in created["args"][1]
        assert created["cwd"] == str(ws) and created["sessionId"] == sid
        assert {"name": "GEMINI_CLI", "value": "1"} in created["env"]
        assert terminal_methods(client) == ["terminal/create", "terminal/wait_for_exit", "terminal/release"]
        term = {"type": "terminal", "terminalId": "term-1"}
        updates = call_updates(client, sid)
        # Shown inside the call while it runs, and still there when it has ended.
        assert any(term in u.get("content", []) for u in updates[:-1])
        assert updates[-1]["status"] == "completed" and updates[-1]["content"][0] == term
    (finished,) = recorded(tmp_path, sid, "ToolFinished")
    text = json.dumps(finished["result"]["llm_content"])
    assert "Output: out\\nerr" in text and "Exit Code: 3" in text
    assert finished["result"]["return_display"] == "out\nerr"


async def test_cancel_kills_and_releases_the_editors_terminal(tmp_path: Path, ws: Path) -> None:
    script = fake_responses(tmp_path / "sleep.jsonl", shell("echo started; sleep 60"), text_chunks("never"))
    async with connected(options(tmp_path, script, yolo=True)) as (client, _):
        await client.initialize(terminal=True)
        sid = await new_session(client, ws)
        with trio.fail_after(20):
            async with trio.open_nursery() as nursery:
                results, _ = await prompt_until(
                    nursery, client, sid, "wait", lambda f: "terminal/create" in terminal_methods(client)
                )
                await client.wait_for(
                    lambda f: any(c.get("type") == "terminal" for c in f.get("params", {}).get("update", {}).get("content", []))
                )
                await client.notify("session/cancel", {"sessionId": sid})
        assert results == [{"stopReason": "cancelled"}]
        methods = terminal_methods(client)
        assert methods[-2:] == ["terminal/kill", "terminal/release"]
        assert client.terminals is not None and client.terminals.released == {"term-1"}
        await client.terminals.done["term-1"].wait()  # the killed process reaped
        last = call_updates(client, sid)[-1]
        assert last["status"] == "failed" and last["content"][0] == {"type": "terminal", "terminalId": "term-1"}
        # The agent stopped waiting for the exit: it withdrew that request.
        withdrawn = [f for f in client.log if f.get("method") == "$/cancel_request"]
        waits = [f["id"] for f in client.log if f.get("method") == "terminal/wait_for_exit"]
        assert [f["params"]["requestId"] for f in withdrawn] == waits
    (finished,) = recorded(tmp_path, sid, "ToolFinished")
    assert finished["result"]["cancelled"] is True


async def test_a_terminal_the_user_kills_ends_the_call_like_a_killed_command(tmp_path: Path, ws: Path) -> None:
    script = fake_responses(tmp_path / "sleep.jsonl", shell("sleep 60"), text_chunks("It was killed."))
    async with connected(options(tmp_path, script, yolo=True)) as (client, _):
        await client.initialize(terminal=True)
        sid = await new_session(client, ws)
        with trio.fail_after(20):
            async with trio.open_nursery() as nursery:
                results, _ = await prompt_until(
                    nursery, client, sid, "wait", lambda f: f.get("method") == "terminal/wait_for_exit"
                )
                assert client.terminals is not None
                os.killpg(client.terminals.procs["term-1"].pid, signal.SIGTERM)  # the user's stop button
        assert results[0]["stopReason"] == "end_turn"
        assert call_updates(client, sid)[-1]["status"] == "completed"
    (finished,) = recorded(tmp_path, sid, "ToolFinished")
    assert finished["result"]["return_display"] == "Command terminated by signal: 15"
    assert "Signal: 15" in json.dumps(finished["result"]["llm_content"])


async def test_an_editor_that_cannot_run_it_fails_the_call_and_the_session_goes_on(tmp_path: Path, ws: Path) -> None:
    script = fake_responses(
        tmp_path / "fail.jsonl", shell("echo hi"), text_chunks("It failed."), text_chunks("Still here.")
    )
    async with connected(options(tmp_path, script, yolo=True)) as (client, _):
        await client.initialize(terminal=True)
        assert client.terminals is not None

        async def refuse(params: dict[str, Any]) -> Any:
            raise KeyError("no shell in this editor")

        client.terminals.create = refuse  # type: ignore[method-assign]
        sid = await new_session(client, ws)
        assert (await prompt(client, sid, "run it"))["stopReason"] == "end_turn"
        last = call_updates(client, sid)[-1]
        assert last["status"] == "failed"
        assert "The editor could not run the command" in last["content"][0]["content"]["text"]
        assert (await prompt(client, sid, "again"))["stopReason"] == "end_turn"
