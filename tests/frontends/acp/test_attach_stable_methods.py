"""``agentbus acp --attach``: the schema's stable session methods when the daemon runs
the sessions — config options (the model is the daemon session's: offered alone),
``session/close``, ``session/resume`` and ``session/delete``."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from ._client import RpcFailure, connected, fake_responses, text_chunks
from .test_attach import attached, daemon, ws
from .test_server import MODEL, prompt

__all__ = ["ws"]


async def test_config_close_resume_and_delete_through_the_daemon(tmp_path: Path, ws: Path) -> None:
    script = fake_responses(tmp_path / "text.jsonl", text_chunks("One."), text_chunks("Two."))
    with trio.fail_after(30):
        async with daemon(tmp_path):
            async with connected(attached(tmp_path, script)) as (client, _):
                await client.initialize()
                created = await client.call("session/new", {"cwd": str(ws), "mcpServers": []})
                sid = created["sessionId"]
                (model,) = [o for o in created["configOptions"] if o["id"] == "model"]
                assert model["currentValue"] == MODEL and [o["value"] for o in model["options"]] == [MODEL]
                changed = await client.call(
                    "session/set_config_option", {"sessionId": sid, "configId": "mode", "value": "autoEdit"}
                )
                assert {o["id"]: o["currentValue"] for o in changed["configOptions"]} == {"mode": "autoEdit", "model": MODEL}
                with pytest.raises(RpcFailure) as refused:
                    await client.call(
                        "session/set_config_option", {"sessionId": sid, "configId": "model", "value": "gemini-2.5-pro"}
                    )
                assert refused.value.code == -32602
                assert (await prompt(client, sid, "one"))["stopReason"] == "end_turn"
                assert await client.call("session/close", {"sessionId": sid}) == {}
                with pytest.raises(RpcFailure):
                    await prompt(client, sid, "closed")
                client.clear()
                resumed = await client.call("session/resume", {"sessionId": sid, "cwd": str(ws), "mcpServers": []})
                assert resumed["modes"]["currentModeId"] == "autoEdit"
                answered = next(i for i, f in enumerate(client.log) if "result" in f)
                assert [f.get("method") for f in client.log[:answered]] == []  # nothing replayed
                assert (await prompt(client, sid, "two"))["stopReason"] == "end_turn"
                assert [s["sessionId"] for s in (await client.call("session/list", {"cwd": str(ws)}))["sessions"]] == [sid]
                assert await client.call("session/delete", {"sessionId": sid}) == {}
                assert (await client.call("session/list", {"cwd": str(ws)}))["sessions"] == []
                assert not (tmp_path / "data" / "sessions" / f"{sid}.jsonl").exists()
