"""An approval outlives the editor that was asked (issue 17, defect 12), with ``agentbus
acp --attach``: the editor goes away while the daemon's turn waits on its answer; the
next editor that loads the session is asked, and its answer runs the call."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import trio

from ._client import call_chunks, connected, fake_responses, text_chunks
from .test_attach import attached, daemon, ws
from .test_server import new_session, prompt

__all__ = ["ws"]


def asks(frame: dict[str, Any]) -> bool:
    return frame.get("method") == "session/request_permission"


def says(text: str) -> Callable[[dict[str, Any]], bool]:
    def said(frame: dict[str, Any]) -> bool:
        update = frame.get("params", {}).get("update", {}) if frame.get("method") == "session/update" else {}
        return update.get("sessionUpdate") == "agent_message_chunk" and update["content"].get("text") == text

    return said


async def test_the_next_editor_to_load_the_session_is_asked_and_its_answer_runs_the_call(
    tmp_path: Path, ws: Path
) -> None:
    script = fake_responses(
        tmp_path / "write.jsonl",
        call_chunks(("write_file", {"file_path": "out.txt", "content": "approved later\n"})),
        text_chunks("Wrote it."),
    )
    with trio.fail_after(30):
        async with daemon(tmp_path):
            async with connected(attached(tmp_path, script)) as (first, _):
                await first.initialize()
                first.permission = lambda params: None  # asked, never answers
                sid = await new_session(first, ws)
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(prompt, first, sid, "Create out.txt")
                    await first.wait_for(asks)
                    nursery.cancel_scope.cancel()  # the editor goes away
            assert not (ws / "out.txt").exists()
            # Without a script of its own: the session keeps the one it runs on.
            async with connected(attrs.evolve(attached(tmp_path, script), fake_responses=None)) as (second, _):
                await second.initialize()
                await second.call("session/load", {"sessionId": sid, "cwd": str(ws), "mcpServers": []})
                question = await second.wait_for(asks)
                assert question["params"]["toolCall"]["title"]
                await second.wait_for(says("Wrote it."))
                assert second.sequence().count("session/request_permission") == 1
                # The call is shown once (in the replay of the session's history), then
                # asked about: not shown again before the question.
                call_id = question["params"]["toolCall"]["toolCallId"]
                shown = [u for u in second.updates(sid) if u["sessionUpdate"] == "tool_call"]
                assert [(u["toolCallId"], u["status"]) for u in shown] == [(call_id, "pending")]
                labels = second.sequence()
                assert labels.index("session/request_permission") > labels.index("tool_call:pending:edit")
    assert (ws / "out.txt").read_text() == "approved later\n"
