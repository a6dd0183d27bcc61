"""With ``agentbus acp --attach``, the daemon's shell commands run in the editor's
terminal when it offers one (``CreateSession.terminals``): output and exit code, a
cancel that kills and releases it, an editor that disconnects mid-command (the call
fails with a clear message, the session goes on and runs its next commands itself)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import attrs
import pytest
import trio

from actors.frontends.daemon.client import DaemonError, open_client
from actors.frontends.daemon.paths import DaemonPaths
from bus.messages import TerminalExited

from ._client import Client, call_chunks, connected, fake_responses, text_chunks
from .test_attach import attached, daemon, ws
from .test_attach_pending import says
from .test_server import new_session, prompt, prompt_until
from .test_terminal import call_updates, recorded, shell, terminal_methods

__all__ = ["ws"]


@asynccontextmanager
async def attached_editor(tmp_path: Path, script: Path, ws: Path) -> AsyncIterator[tuple[Client, str]]:
    """A daemon, and an editor offering terminals attached to it, in a new session."""
    with trio.fail_after(30):
        async with daemon(tmp_path):
            async with connected(attrs.evolve(attached(tmp_path, script), yolo=True)) as (client, _):
                await client.initialize(terminal=True)
                yield client, await new_session(client, ws)


async def test_an_attached_sessions_command_runs_in_the_editors_terminal(tmp_path: Path, ws: Path) -> None:
    script = fake_responses(tmp_path / "exit.jsonl", shell("echo out; echo err >&2; exit 3"), text_chunks("Done."))
    async with attached_editor(tmp_path, script, ws) as (client, sid):
        assert (await prompt(client, sid, "run it"))["stopReason"] == "end_turn"
        assert client.terminals is not None
        (created,) = [p for m, p in client.terminals.calls if m == "terminal/create"]
        assert "echo out; echo err >&2; exit 3" in created["args"][1]
        assert created["cwd"] == str(ws) and created["sessionId"] == sid
        assert terminal_methods(client) == ["terminal/create", "terminal/wait_for_exit", "terminal/release"]
        term = {"type": "terminal", "terminalId": "term-1"}
        updates = call_updates(client, sid)
        assert any(term in u.get("content", []) for u in updates[:-1])
        assert updates[-1]["status"] == "completed"
    (finished,) = recorded(tmp_path, sid, "ToolFinished")
    text = json.dumps(finished["result"]["llm_content"])
    assert "Output: out\\nerr" in text and "Exit Code: 3" in text


async def test_cancel_kills_and_releases_the_attached_editors_terminal(tmp_path: Path, ws: Path) -> None:
    script = fake_responses(tmp_path / "sleep.jsonl", shell("echo started; sleep 60"), text_chunks("never"))
    async with attached_editor(tmp_path, script, ws) as (client, sid):
        async with trio.open_nursery() as nursery:
            results, _ = await prompt_until(
                nursery, client, sid, "wait", lambda f: f.get("method") == "terminal/wait_for_exit"
            )
            await client.notify("session/cancel", {"sessionId": sid})
        assert results == [{"stopReason": "cancelled"}]
        assert terminal_methods(client)[-2:] == ["terminal/kill", "terminal/release"]
        assert client.terminals is not None and client.terminals.released == {"term-1"}
        await client.terminals.done["term-1"].wait()  # the killed process reaped
    (finished,) = recorded(tmp_path, sid, "ToolFinished")
    assert finished["result"]["cancelled"] is True


async def test_an_editor_leaving_mid_command_fails_the_call_and_the_daemon_runs_the_next(
    tmp_path: Path, ws: Path
) -> None:
    script = fake_responses(
        tmp_path / "leave.jsonl",
        shell("sleep 60"),
        text_chunks("It failed."),
        shell("echo ran-in-the-daemon"),
        text_chunks("Done here."),
    )
    with trio.fail_after(30):
        async with daemon(tmp_path):
            async with connected(attrs.evolve(attached(tmp_path, script), yolo=True)) as (first, _):
                await first.initialize(terminal=True)
                sid = await new_session(first, ws)
                async with trio.open_nursery() as nursery:
                    await prompt_until(nursery, first, sid, "wait", lambda f: f.get("method") == "terminal/wait_for_exit")
                    nursery.cancel_scope.cancel()
            # The editor went away, its terminal's command still running.
            assert first.terminals is not None
            first.terminals.kill("term-1")
            left = first.terminals.procs["term-1"]
            await left.wait()
            assert left.stdout is not None
            await left.stdout.aclose()
            second_options = attrs.evolve(attached(tmp_path, script), fake_responses=None, yolo=True)
            async with connected(second_options) as (second, _):
                await second.initialize()  # no terminals: the daemon runs the commands
                await second.call("session/load", {"sessionId": sid, "cwd": str(ws), "mcpServers": []})
                await second.wait_for(says("It failed."))
                assert (await prompt(second, sid, "again"))["stopReason"] == "end_turn"
    first_call, second_call = recorded(tmp_path, sid, "ToolFinished")
    assert "the editor running this command disconnected" in json.dumps(first_call["result"])
    assert "ran-in-the-daemon" in json.dumps(second_call["result"]["llm_content"])


async def test_an_answer_for_a_command_the_client_does_not_run_is_refused(tmp_path: Path, ws: Path) -> None:
    script = fake_responses(tmp_path / "none.jsonl", text_chunks("Hi."))
    with trio.fail_after(30):
        async with daemon(tmp_path):
            async with open_client(DaemonPaths(tmp_path / "run"), client="test", start=False) as client:
                ready = await client.create_session(str(ws), fake_responses=str(script), terminals=True)
                with pytest.raises(DaemonError) as refused:
                    await client.request(TerminalExited(session_id=ready.session_id, request_id="nope", exit_code=0))
                assert refused.value.code == "invalid" and "no command 'nope'" in refused.value.message
                assert (await client.prompt(ready.session_id, "still here")).prompt_id  # the connection goes on


async def test_a_subagents_command_runs_in_the_attached_editors_terminal(tmp_path: Path, ws: Path) -> None:
    script = fake_responses(
        tmp_path / "agent.jsonl",
        call_chunks(("invoke_agent", {"agent_name": "generalist", "prompt": "Run echo."})),
        shell("echo from-the-child"),
        call_chunks(("complete_task", {"result": {"response": "echoed"}})),
        text_chunks("The generalist ran it."),
    )
    async with attached_editor(tmp_path, script, ws) as (client, sid):
        assert (await prompt(client, sid, "delegate"))["stopReason"] == "end_turn"
        assert client.terminals is not None
        (created,) = [p for m, p in client.terminals.calls if m == "terminal/create"]
        assert "echo from-the-child" in created["args"][1] and created["sessionId"] == sid
        assert terminal_methods(client) == ["terminal/create", "terminal/wait_for_exit", "terminal/release"]
