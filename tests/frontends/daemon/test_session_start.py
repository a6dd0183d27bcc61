"""SessionStart hooks' ``additionalContext`` in every kind of session (reference §7.1).

Interactive sessions (the daemon's, ACP's in this process) get it as Gemini CLI's
interactive mode adds it: a ``<hook_context>`` user turn at the end of the history they
open with, escaped; a resumed or restarted session drops the old turn and gets its
``resume`` hooks' context. A headless run puts it in front of its prompt."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

import trio

from actors.frontends.acp import AcpOptions
from actors.recording import load_recording, recording_path
from bus.json_values import thaw
from bus.messages import GenerateRequest
from tests.frontends.acp._client import connected, fake_responses, text_chunks
from tests.frontends.acp.test_server import new_session, prompt
from tests.frontends.daemon._helpers import (
    client_of,
    events_until,
    running_daemon,
    text_response,
    write_responses,
)
from tests.frontends.daemon._procs import agentbus

HOOK = (
    "import json, sys\n"
    "event = json.load(sys.stdin)\n"
    "print(json.dumps({'hookSpecificOutput': {'hookEventName': 'SessionStart',"
    " 'additionalContext': '<b>' + event['source'] + '</b> context'}}))\n"
)


def with_session_start_hook(workspace: Path) -> None:
    script = workspace / "session_start.py"
    script.write_text(HOOK)
    command = f"{shlex.quote(sys.executable)} {shlex.quote(str(script))}"
    settings = {
        "hooksConfig": {"enabled": True},
        "hooks": {"SessionStart": [{"hooks": [{"type": "command", "command": command, "timeout": 10000}]}]},
    }
    (workspace / ".gemini").mkdir(exist_ok=True)
    (workspace / ".gemini" / "settings.json").write_text(json.dumps(settings))


def context(source: str) -> str:
    return f"<hook_context>&lt;b&gt;{source}&lt;/b&gt; context</hook_context>"


def texts(request: GenerateRequest) -> list[str]:
    """The text parts of a model request, in order (the turn coalesces consecutive user
    turns into one content, as Gemini CLI does)."""
    return [str(p["text"]) for c in thaw(request.contents) for p in c.get("parts", []) if "text" in p]


def main_requests(messages: list[Any]) -> list[GenerateRequest]:
    return [m for m in messages if isinstance(m, GenerateRequest) and m.role == "main"]


async def test_a_daemon_session_opens_with_the_hooks_context_and_a_restart_renews_it(home: Path) -> None:
    ws = home / "ws"
    with_session_start_hook(ws)
    fake = write_responses(home / "f.responses", text_response("one"), text_response("two"))
    with trio.fail_after(30):
        async with running_daemon(home), client_of(home) as client:
            ready = await client.create_session(str(ws), fake_responses=str(fake), model="gemini-2.5-flash")
            sid = ready.session_id
            await client.subscribe(sid, from_seq=1, full=True)
            await client.prompt(sid, "hi")
            [first] = main_requests([e.message for e in await events_until(client)])
            shown = texts(first)
            assert shown[0].startswith("<session_context>")
            assert shown[1:] == [context("startup"), "hi"]

            # A mode change restarts the session from its recording (source resume).
            await client.set_mode(sid, "yolo")
            await client.prompt(sid, "again")
            [second] = main_requests([e.message for e in await events_until(client)])
            shown = texts(second)
            assert shown[0].startswith("<session_context>")
            assert [t for t in shown if t.startswith("<hook_context>")] == [context("resume")]
            assert shown[1:] == ["hi", "one", context("resume"), "again"]


async def test_an_acp_session_in_this_process_opens_with_the_hooks_context(home: Path) -> None:
    ws = (home / "ws").resolve()
    with_session_start_hook(ws)
    script = fake_responses(home / "acp.jsonl", text_chunks("Hello."))
    options = AcpOptions(model="gemini-2.5-flash", fake_responses=str(script), data_dir=home / "data")
    with trio.fail_after(30):
        async with connected(options) as (client, _):
            await client.initialize()
            sid = await new_session(client, ws)
            assert (await prompt(client, sid, "hi"))["stopReason"] == "end_turn"
    recording = load_recording(recording_path(home / "data", sid))
    [request] = main_requests([e.message for e in recording.envelopes])
    shown = texts(request)
    assert shown[0].startswith("<session_context>")
    assert shown[1:] == [context("startup"), "hi"]


def test_a_headless_run_puts_the_hooks_context_in_front_of_its_prompt(home: Path) -> None:
    ws = home / "ws"
    with_session_start_hook(ws)
    fake = write_responses(home / "f.responses", text_response("ok"))
    done = agentbus(home, "-p", "hi", "-m", "gemini-2.5-flash", "--fake-responses", str(fake))
    assert done.returncode == 0, done.stderr
    [path] = (home / "data").rglob("*.jsonl")
    [request] = main_requests([e.message for e in load_recording(path).envelopes])
    assert texts(request)[-1] == f"{context('startup')}\n\nhi"
