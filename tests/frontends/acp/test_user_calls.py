"""The user's own tool calls over ACP: ``/tool NAME {json}``, ``/shell COMMAND`` and
their ``!`` forms that add the result to the conversation (issue 11)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import trio

from actors.frontends.acp._protocol import available_commands
from actors.recording import load_recording
from bus.json_values import thaw
from bus.messages import ContextAdded, GenerateRequest, ScheduleBatch

from ._client import connected, fake_responses, text_chunks
from .test_attach import attached, daemon
from .test_attach import ws as attach_ws
from .test_server import cancel_once_a_call_shows, new_session, options, prompt, ws

__all__ = ["attach_ws", "ws"]


def model_request_contents(tmp_path: Path, sid: str) -> list[Any]:
    recording = load_recording(tmp_path / "data" / "sessions" / f"{sid}.jsonl")
    return [
        thaw(e.message.contents)
        for e in recording.envelopes
        if isinstance(e.message, GenerateRequest) and e.message.role == "main"
    ]


def model_requests(tmp_path: Path, sid: str) -> list[str]:
    return [json.dumps(contents) for contents in model_request_contents(tmp_path, sid)]


def unused(tmp_path: Path) -> Path:
    """A model that is never asked (a session still needs one)."""
    return fake_responses(tmp_path / "unused.jsonl", text_chunks("unused"))


def texts_of(contents: list[Any]) -> list[str]:
    return [str(p["text"]) for c in contents for p in c.get("parts") or [] if isinstance(p, dict) and "text" in p]


async def test_the_commands_are_listed_with_what_they_take(tmp_path: Path, ws: Path) -> None:
    async with connected(options(tmp_path, unused(tmp_path))) as (client, _):
        await client.initialize()
        await new_session(client, ws)
        listed = next(u for u in client.updates() if u["sessionUpdate"] == "available_commands_update")
        commands = {c["name"]: c for c in listed["availableCommands"]}
        assert listed["availableCommands"] == available_commands()
        assert set(commands) == {"about", "help", "tool", "tool!", "shell", "shell!"}
        assert commands["tool"]["input"] == {"hint": 'NAME {"arg": "value"}'}
        assert commands["shell!"]["input"] == {"hint": "COMMAND"}
        assert "input" not in commands["about"]


async def test_a_users_call_is_shown_to_the_client_and_never_reaches_the_model(tmp_path: Path, ws: Path) -> None:
    script = fake_responses(tmp_path / "one.jsonl", text_chunks("Hello."))
    async with connected(options(tmp_path, script)) as (client, _):
        await client.initialize()
        sid = await new_session(client, ws)
        client.clear()
        result = await prompt(client, sid, "/shell echo private-output")
        assert result["stopReason"] == "end_turn"
        assert client.sequence() == ["tool_call:in_progress:execute", "tool_call_update:completed:execute"]
        done = client.updates()[-1]
        assert done["content"] == [{"type": "content", "content": {"type": "text", "text": "private-output"}}]
        client.clear()
        await prompt(client, sid, '/tool read_file {"file_path": "notes.txt"}')
        assert client.updates()[-1]["content"][0]["content"]["text"] == "notes line 1\n"
        # The model's next request carries neither (the fake file has one answer only:
        # a model call for the commands would have used it up).
        assert (await prompt(client, sid, "hi"))["stopReason"] == "end_turn"
    [request] = model_requests(tmp_path, sid)
    assert "private-output" not in request and "notes line 1" not in request
    batches = [
        e.message for e in load_recording(tmp_path / "data" / "sessions" / f"{sid}.jsonl").envelopes
        if isinstance(e.message, ScheduleBatch)
    ]
    assert [c.client_initiated for b in batches for c in b.calls] == [True, True]


async def test_the_bang_forms_add_the_result_to_the_next_prompt_once(tmp_path: Path, ws: Path) -> None:
    script = fake_responses(tmp_path / "two.jsonl", text_chunks("Seen."), text_chunks("Still."))
    async with connected(options(tmp_path, script)) as (client, _):
        await client.initialize()
        sid = await new_session(client, ws)
        await prompt(client, sid, "/shell echo kept-private")
        client.clear()
        assert (await prompt(client, sid, "/shell! echo shared-output"))["stopReason"] == "end_turn"
        assert client.updates()[-1]["content"]["text"] == (
            "The result was added to the conversation: your next prompt carries it."
        )
        await prompt(client, sid, '/tool! read_file {"file_path": "notes.txt"}')
        await prompt(client, sid, "what did I run?")
        await prompt(client, sid, "and again?")
    shell = (
        "I ran the following shell command:\n```sh\necho shared-output\n```\n\n"
        "This produced the following result:\n```\nshared-output\n```"
    )
    read = 'I ran the tool read_file with these arguments:\n```json\n{"file_path": "notes.txt"}\n```\n\n'
    first, second = (texts_of(request) for request in model_request_contents(tmp_path, sid))
    for texts in (first, second):
        assert texts.count(shell) == 1, texts
        assert [t.startswith(read) and "notes line 1" in t for t in texts].count(True) == 1
        assert not any("kept-private" in t for t in texts)
    assert first.index(shell) < first.index(next(t for t in first if t.startswith(read))) < first.index("what did I run?")
    added = [
        e.message for e in load_recording(tmp_path / "data" / "sessions" / f"{sid}.jsonl").envelopes
        if isinstance(e.message, ContextAdded)
    ]
    assert len(added) == 2 and all(m.requested_by == f"client:acp:{sid}" for m in added)


async def test_bad_input_is_one_line_and_the_session_goes_on(tmp_path: Path, ws: Path) -> None:
    script = fake_responses(tmp_path / "one.jsonl", text_chunks("Fine."))
    async with connected(options(tmp_path, script)) as (client, _):
        await client.initialize()
        sid = await new_session(client, ws)
        client.clear()
        assert (await prompt(client, sid, "/tool read_file {oops"))["stopReason"] == "end_turn"
        assert (await prompt(client, sid, "/tool"))["stopReason"] == "end_turn"
        assert (await prompt(client, sid, "/shell!"))["stopReason"] == "end_turn"
        texts = [u["content"]["text"] for u in client.updates()]
        assert texts == [
            "/tool: the arguments are not valid JSON: Expecting property name enclosed in double quotes (line 1, column 2)",
            '/tool: name the tool: NAME {"arg": "value"}',
            "/shell!: name the command: COMMAND",
        ]
        client.clear()
        assert (await prompt(client, sid, "/tool! read_fil {}"))["stopReason"] == "end_turn"
        failed, said = client.updates()
        assert failed["sessionUpdate"] == "tool_call" and failed["status"] == "failed"
        assert failed["content"][0]["content"]["text"].startswith('Tool "read_fil" not found. Did you mean')
        assert said["content"]["text"] == "Nothing was added to the conversation: the call did not run."
        outside = await prompt(client, sid, '/tool read_file {"file_path": "/etc/hostname"}')
        assert outside["stopReason"] == "end_turn"
        assert "Path not in workspace" in client.updates()[-1]["content"][0]["content"]["text"]
        assert (await prompt(client, sid, "hello"))["stopReason"] == "end_turn"
    [request] = model_requests(tmp_path, sid)
    assert "read_fil" not in request and "oops" not in request


async def test_cancel_stops_a_users_shell_command(tmp_path: Path, ws: Path) -> None:
    async with connected(options(tmp_path, unused(tmp_path))) as (client, _):
        await client.initialize()
        sid = await new_session(client, ws)
        client.clear()
        results = await cancel_once_a_call_shows(client, sid, "/shell sleep 30")
        assert results == [{"stopReason": "cancelled"}]
        last = client.updates()[-1]
        assert last["status"] == "failed"
        assert last["content"][0]["content"]["text"] == "Command cancelled by user."


async def test_help_lists_the_user_call_commands(tmp_path: Path, ws: Path) -> None:
    async with connected(options(tmp_path, unused(tmp_path))) as (client, _):
        await client.initialize()
        sid = await new_session(client, ws)
        client.clear()
        await prompt(client, sid, "/help")
        text = client.updates()[-1]["content"]["text"]
        assert '  /tool NAME {"arg": "value"} - Run a tool yourself (the model does not see the result)' in text
        assert "  /shell! COMMAND - Run a shell command yourself and add its output to the conversation" in text


async def test_an_attached_session_runs_the_users_calls_in_the_daemon(tmp_path: Path, attach_ws: Path) -> None:
    """``--attach``: the same commands become the daemon's ``CallTool`` (with
    ``add_to_context`` for the ``!`` forms); ``session/cancel`` cancels the call."""
    script = fake_responses(tmp_path / "one.jsonl", text_chunks("Seen."))
    async with daemon(tmp_path), connected(attached(tmp_path, script)) as (client, _):
        await client.initialize()
        sid = await new_session(client, attach_ws)
        client.clear()
        assert (await prompt(client, sid, "/shell echo private-output"))["stopReason"] == "end_turn"
        assert client.sequence() == ["tool_call:in_progress:execute", "tool_call_update:completed:execute"]
        assert client.updates()[-1]["content"][0]["content"]["text"] == "private-output"
        await prompt(client, sid, "/shell! echo shared-output")
        assert client.updates()[-1]["content"]["text"].startswith("The result was added to the conversation")
        results: list[Any] = []
        async with trio.open_nursery() as nursery:

            async def run() -> None:
                results.append(await prompt(client, sid, "/shell sleep 30"))

            nursery.start_soon(run)
            await client.wait_for(
                lambda f: f.get("params", {}).get("update", {}).get("sessionUpdate") == "tool_call"
                and "sleep" in str(f["params"]["update"].get("title"))
            )
            with trio.fail_after(5):
                await client.notify("session/cancel", {"sessionId": sid})
        assert results == [{"stopReason": "cancelled"}]
        assert (await prompt(client, sid, "what did I run?"))["stopReason"] == "end_turn"
    [texts] = [texts_of(c) for c in model_request_contents(tmp_path, sid)]
    assert sum("echo shared-output" in t for t in texts) == 1
    assert not any("private-output" in t for t in texts)
