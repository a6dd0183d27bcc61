"""A big ``session/prompt`` with ``agentbus acp --attach`` (issue 17): one of a megabyte
or more (a pasted file, as plain ``agentbus acp`` takes) is answered; one the daemon
cannot take is answered at once with an invalid-params error in user terms, and the
session goes on."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from actors.frontends.acp._rpc import INVALID_PARAMS
from actors.frontends.daemon import client as daemon_client

from ._client import RpcFailure, connected, fake_responses, text_chunks
from .test_attach import attached, daemon, ws
from .test_server import new_session, prompt

__all__ = ["ws"]


async def test_a_prompt_over_a_mebibyte_is_answered(tmp_path: Path, ws: Path) -> None:
    script = fake_responses(tmp_path / "big.jsonl", text_chunks("Read it all."))
    with trio.fail_after(30):
        async with daemon(tmp_path), connected(attached(tmp_path, script)) as (client, _):
            await client.initialize()
            sid = await new_session(client, ws)
            result = await prompt(client, sid, "x" * 1_200_000)  # over the old 1 MiB frame limit
            assert result["stopReason"] == "end_turn"


async def test_a_prompt_over_the_daemons_limit_is_refused_at_once_and_the_next_one_runs(
    tmp_path: Path, ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The client's limit lowered so the test need not build a 64 MiB prompt.
    monkeypatch.setattr(daemon_client, "MAX_FRAME", 1 << 20)
    script = fake_responses(tmp_path / "after.jsonl", text_chunks("Still here."))
    with trio.fail_after(30):
        async with daemon(tmp_path), connected(attached(tmp_path, script)) as (client, _):
            await client.initialize()
            sid = await new_session(client, ws)
            with pytest.raises(RpcFailure) as refused:
                await prompt(client, sid, "x" * 1_200_000)
            error = refused.value.error
            assert error["code"] == INVALID_PARAMS
            # The daemon expands the prompt: its text is sent once, not again as parts.
            assert error["message"] == "agentbus daemon: the prompt is 1.1 MiB; the daemon accepts prompts up to 1 MiB"
            result = await prompt(client, sid, "are you there?")
            assert result["stopReason"] == "end_turn"
