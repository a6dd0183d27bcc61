"""One way to open a session: the same prompt through each front end puts the same
messages on the bus.

Each front end opens its session with ``actors.host.opening.open_session``. The test
runs one prompt (the model reads a file with ``read_file``, then answers) through
headless (a real ``agentbus -p`` process), ACP (the server behind a JSON-RPC client)
and the daemon (a client over its socket); each session records every message on its
bus. From ``OpenSession`` to the first ``TurnEnded`` the recordings must hold the same
messages, in the same order (``SessionOpened`` aside: a headless run does not wait for
it before its prompt), equal but for the values each run draws anew (ids, times, the
session's own id, its client's addresses) and for whether a user is there to ask
(``interactive``). A replay of the headless recording then re-runs the same messages. (``agentbus chat`` is a daemon client: its sessions
are the daemon's; ``agentbus tool`` runs one call, not a prompt.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from actors.frontends.acp import AcpOptions
from actors.recording import load_recording, recording_path
from bus.codec import to_plain
from tests.frontends.acp._client import connected
from tests.frontends.daemon._helpers import client_of, events_until, home, running_daemon  # noqa: F401

MODEL = "gemini-2.5-flash"
ROOT = Path(__file__).resolve().parents[2]

VOLATILE = {"timestamp", "turn_id", "request_id", "batch_id", "call_id", "id", "duration_ms", "reply_to",
            "requested_by", "wall_ms", "started_at", "elapsed_ms", "prompt_id", "session_id", "latency_ms",
            "delay_s",
            # Whether a user is there to ask: headless no, the daemon's and ACP's sessions yes.
            "interactive"}


def responses(path: Path) -> Path:
    call = {"candidates": [{"content": {"role": "model", "parts": [
        {"functionCall": {"name": "read_file", "args": {"file_path": "notes.txt"}}}]}, "finishReason": "STOP"}],
        "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 2, "totalTokenCount": 12}}
    answer = {"candidates": [{"content": {"role": "model", "parts": [{"text": "The notes say hello."}]},
                              "finishReason": "STOP"}],
              "usageMetadata": {"promptTokenCount": 20, "candidatesTokenCount": 5, "totalTokenCount": 25}}
    path.write_text("".join(json.dumps({"method": "generateContentStream", "response": [r]}) + "\n"
                            for r in (call, answer)))
    return path


def normalised(value: Any, session_id: str) -> Any:
    if isinstance(value, dict):
        return {k: normalised(v, session_id) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list | tuple):
        return [normalised(v, session_id) for v in value]
    if isinstance(value, str):
        return value.replace(session_id, "<session>")
    return value


def first_turn(path: Path) -> list[Any]:
    """The recorded messages from ``OpenSession`` to the first ``TurnEnded``, normalised."""
    rec = load_recording(path)
    out: list[Any] = []
    opened = False
    for env in rec.envelopes:
        name = type(env.message).__name__
        opened = opened or name == "OpenSession"
        if not opened:
            continue
        data = to_plain(env.message)
        if name == "OpenSession":
            data.pop("history", None)  # the environment context names the run's temp dir
        if name != "SessionOpened":  # answers OpenSession whenever; headless does not wait
            out.append((name, normalised(data, env.session_id)))
        if name == "TurnEnded":
            return out
    raise AssertionError(f"{path}: no TurnEnded")


def workspace(root: Path) -> Path:
    ws = root / "ws"
    ws.mkdir(exist_ok=True)
    (ws / "notes.txt").write_text("hello\n")
    return ws


def run_headless(root: Path, fake: Path) -> Path:
    env = {**os.environ, "AGENTBUS_DATA_DIR": str(root / "data-headless")}
    done = subprocess.run(
        [sys.executable, "-m", "actors.frontends", "-p", "what do my notes say?", "-m", MODEL,
         "--approval-mode", "yolo", "--fake-responses", str(fake), "-o", "json"],
        cwd=workspace(root), env=env, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    session_id = json.loads(done.stdout)["session_id"]
    return recording_path(root / "data-headless", session_id)


async def run_acp(root: Path, fake: Path) -> Path:
    options = AcpOptions(model=MODEL, fake_responses=str(fake), data_dir=root / "data-acp", approval_mode="yolo")
    with trio.fail_after(60):
        async with connected(options) as (client, _server):
            await client.initialize()
            sid = (await client.call("session/new", {"cwd": str(workspace(root)), "mcpServers": []}))["sessionId"]
            result = await client.call(
                "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "what do my notes say?"}]}
            )
            assert result["stopReason"] == "end_turn"
    return recording_path(root / "data-acp", sid)


async def run_daemon(root: Path, fake: Path) -> Path:
    with trio.fail_after(60):
        async with running_daemon(root), client_of(root) as client:
            ready = await client.create_session(
                str(workspace(root)), fake_responses=str(fake), model=MODEL, approval_mode="yolo"
            )
            await client.subscribe(ready.session_id, from_seq=1)
            await client.prompt(ready.session_id, "what do my notes say?")
            await events_until(client)
    return recording_path(root / "data", ready.session_id)


@pytest.mark.slow
async def test_one_prompt_puts_the_same_messages_on_the_bus_through_every_front_end(
    home: Path,  # noqa: F811
) -> None:
    fake = responses(home / "f.responses")
    headless = first_turn(await trio.to_thread.run_sync(run_headless, home, fake))
    names = [name for name, _ in headless]
    assert names[:2] == ["OpenSession", "SubmitPrompt"] and "ToolCallRequested" in names, names
    acp = first_turn(await run_acp(home, fake))
    daemon = first_turn(await run_daemon(home, fake))
    for label, other in (("acp", acp), ("daemon", daemon)):
        assert [n for n, _ in other] == names, f"{label}: {[n for n, _ in other]}"
        for (name, mine), (_, theirs) in zip(headless, other, strict=True):
            if name in ("OpenSession", "SubmitPrompt"):
                continue  # the front end's own words: its prompt id, display text, interactivity
            assert theirs == mine, f"{label}: {name} differs"


def test_a_replay_of_the_headless_recording_re_runs_its_messages(tmp_path: Path) -> None:
    fake = responses(tmp_path / "f.responses")
    (tmp_path / "home").mkdir()
    env_home = {"HOME": str(tmp_path / "home"), "GEMINI_CLI_HOME": str(tmp_path / "home")}
    saved = {k: os.environ.get(k) for k in env_home}
    os.environ.update(env_home)
    try:
        path = run_headless(tmp_path, fake)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    done = subprocess.run(
        [sys.executable, "-m", "actors.frontends", "replay", str(path)],
        cwd=ROOT, capture_output=True, text=True, timeout=120, env={**os.environ, **env_home},
    )
    assert done.returncode == 0, done.stdout + done.stderr
