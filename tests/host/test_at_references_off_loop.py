"""``@``-references are expanded in a worker thread by every front end that serves a
prompt from a trio task: a ``**`` walk of a large tree never stalls the event loop (the
daemon serves every session, and ACP every editor request, from one)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from actors.frontends.acp import AcpOptions
from actors.host import at_command
from tests.frontends.acp._client import connected
from tests.frontends.daemon._helpers import (  # noqa: F401
    client_of,
    events_until,
    home,
    running_daemon,
    text_response,
    write_responses,
)


def on_event_loop() -> bool:
    try:
        trio.lowlevel.current_task()
    except RuntimeError:
        return False
    return True


@pytest.fixture
def expansions(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Whether each expansion ran on the event loop's thread."""
    seen: list[bool] = []
    real = at_command.expand_at_references

    def watched(*args: Any, **kwargs: Any) -> list[dict[str, Any]]:
        seen.append(on_event_loop())
        return real(*args, **kwargs)

    monkeypatch.setattr(at_command, "expand_at_references", watched)
    return seen


async def test_the_daemon_expands_references_off_the_loop(home: Path, expansions: list[bool]) -> None:  # noqa: F811
    (home / "ws" / "notes.txt").write_text("hello\n")
    fake = write_responses(home / "f.responses", text_response("ok"))
    with trio.fail_after(30):
        async with running_daemon(home), client_of(home) as client:
            ready = await client.create_session(str(home / "ws"), fake_responses=str(fake), model="gemini-2.5-flash")
            await client.subscribe(ready.session_id, from_seq=1)
            await client.prompt(ready.session_id, "what is in @notes.txt")
            await events_until(client)
    assert expansions == [False]


async def test_acp_expands_references_off_the_loop(tmp_path: Path, expansions: list[bool]) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "notes.txt").write_text("hello\n")
    fake = write_responses(tmp_path / "f.responses", text_response("ok"))
    options = AcpOptions(model="gemini-2.5-flash", fake_responses=str(fake), data_dir=tmp_path / "data")
    with trio.fail_after(30):
        async with connected(options) as (client, _server):
            await client.initialize()
            sid = (await client.call("session/new", {"cwd": str(ws), "mcpServers": []}))["sessionId"]
            await client.call(
                "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "what is in @notes.txt"}]}
            )
    assert expansions == [False]
