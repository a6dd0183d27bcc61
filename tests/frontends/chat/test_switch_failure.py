"""A switch (``/resume``, ``/new``) whose subscription the daemon refuses (the session
stopped between loading and subscribing) leaves the chat usable: no history is awaited
(it waited for a ``CaughtUp`` that never comes, and every line after hung)."""

from __future__ import annotations

import io
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from actors.frontends.chat._app import ChatApp, ChatOptions
from actors.frontends.daemon.client import DaemonError
from bus.messages import SessionReady, SessionSummary


class RefusingClient:
    address = "client:1"

    async def list_mcp_servers(self, session_id: str) -> Any:
        return SimpleNamespace(servers=())

    async def subscribe(self, session_id: str, from_seq: int | None = None) -> Any:
        raise DaemonError("unknown_session", f"session {session_id!r} stopped")


async def test_a_refused_subscription_does_not_leave_the_chat_waiting_for_history(tmp_path: Path) -> None:
    app = ChatApp(RefusingClient(), io.StringIO(), ChatOptions(workspace=tmp_path, interactive=False), SimpleNamespace())  # type: ignore[arg-type]
    ready = SessionReady(session_id="s", request_id="r", summary=SessionSummary(session_id="s", state="running"))
    with pytest.raises(DaemonError):
        await app._switch(ready, resuming=True)
    assert app.caught_up.is_set() and not app.render.catching_up
