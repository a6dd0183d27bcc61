"""Without credentials, ``session/new`` says so with ACP's "authentication required"
(-32000) whether the session would run here or in the daemon (``--attach``): the
daemon's ``auth_required`` reply keeps its meaning (issue 17)."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest
import trio

from ._client import RpcFailure, connected
from .test_attach import attached, daemon, ws
from .test_server import new_session

__all__ = ["ws"]

AUTH_REQUIRED = -32000


async def test_without_credentials_an_attached_session_needs_authentication_as_a_local_one(
    tmp_path: Path, ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_GENAI_USE_GCA"):
        monkeypatch.delenv(name, raising=False)
    live = attrs.evolve(attached(tmp_path, tmp_path / "unused.jsonl"), fake_responses=None)
    errors = {}
    with trio.fail_after(30):
        async with daemon(tmp_path):
            for options in (live, attrs.evolve(live, attach=False)):
                async with connected(options) as (client, _):
                    await client.initialize()
                    with pytest.raises(RpcFailure) as failed:
                        await new_session(client, ws)
                    errors[options.attach] = failed.value
    assert [e.code for e in errors.values()] == [AUTH_REQUIRED, AUTH_REQUIRED]
    assert errors[True].error["message"].startswith("agentbus daemon: Please set an Auth method")
