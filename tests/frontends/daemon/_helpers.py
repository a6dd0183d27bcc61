"""Shared pieces of the daemon tests: a daemon on a real Unix socket in a tmp dir,
fake-responses files, and event readers."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from actors.frontends.daemon import Daemon, DaemonConfig, Limits, TcpListen, serve
from actors.frontends.daemon.client import DaemonClient, open_client
from actors.frontends.daemon.paths import DaemonPaths
from bus import Envelope
from bus.messages import Message, TurnEnded


def text_response(*chunks: str) -> dict[str, Any]:
    last = len(chunks) - 1
    return {
        "method": "generateContentStream",
        "response": [
            {
                "candidates": [
                    {"content": {"role": "model", "parts": [{"text": c}]}, **({"finishReason": "STOP"} if i == last else {})}
                ]
            }
            for i, c in enumerate(chunks)
        ],
    }


def call_response(name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {
        "method": "generateContentStream",
        "response": [
            {
                "candidates": [
                    {
                        "content": {"role": "model", "parts": [{"functionCall": {"name": name, "args": args}}]},
                        "finishReason": "STOP",
                    }
                ]
            }
        ],
    }


def write_responses(path: Path, *entries: dict[str, Any]) -> Path:
    path.write_text("".join(json.dumps(e) + "\n" for e in entries))
    return path


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An isolated home: no user settings, recordings in tmp, a workspace."""
    monkeypatch.setenv("GEMINI_CLI_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for name in ("GEMINI_MODEL", "GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI",
                 "GOOGLE_GENAI_USE_GCA", "GOOGLE_GEMINI_BASE_URL", "XDG_RUNTIME_DIR", "AGENTBUS_RUNTIME_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AGENTBUS_DATA_DIR", str(tmp_path / "data"))
    (tmp_path / "home").mkdir()
    (tmp_path / "ws").mkdir()
    return tmp_path


def config_for(root: Path, *, tcp: TcpListen | None = None, **limits: Any) -> DaemonConfig:
    return DaemonConfig(paths=DaemonPaths(root / "run"), data_dir=root / "data", limits=Limits(**limits), tcp=tcp)


@asynccontextmanager
async def running_daemon(root: Path, *, tcp: TcpListen | None = None, **limits: Any) -> AsyncIterator[Daemon]:
    async with trio.open_nursery() as nursery:
        daemon: Daemon = await nursery.start(serve, config_for(root, tcp=tcp, **limits))
        try:
            yield daemon
        finally:
            daemon.stop("test over")


@asynccontextmanager
async def client_of(root: Path, name: str = "test") -> AsyncIterator[DaemonClient]:
    async with open_client(DaemonPaths(root / "run"), client=name, start=False) as client:
        yield client


async def events_until(
    client: DaemonClient, done: Callable[[Message], bool] = lambda m: isinstance(m, TurnEnded)
) -> list[Envelope]:
    """Session events up to and including the first one ``done`` accepts."""
    out: list[Envelope] = []
    async for event in client.events:
        if isinstance(event, Envelope):
            out.append(event)
            if done(event.message):
                return out
    raise AssertionError(f"the connection closed after {len(out)} events")


def types(envs: list[Envelope]) -> list[str]:
    return [type(e.message).__name__ for e in envs]


def alive(pid: int) -> bool:
    """Whether process ``pid`` exists (a zombie counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
