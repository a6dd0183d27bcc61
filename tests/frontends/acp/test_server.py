"""``AcpServer`` in trio with in-memory streams: a scripted client drives real sessions
(the actors of ``supervise_session``, a fake-responses model, the real tools)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import trio

from actors.frontends.acp import _server
from actors.frontends.acp._session import AcpOptions

from ._client import Client, RpcFailure, call_chunks, connected, fake_responses, text_chunks

MODEL = "gemini-2.5-flash"


@pytest.fixture
def ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GEMINI_CLI_HOME", str(home))
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "hello.py").write_text("def add(a, b):\n    return a + b\n")
    (workspace / "notes.txt").write_text("notes line 1\n")
    return workspace.resolve()


def options(tmp_path: Path, script: Path | None = None, **kw: Any) -> AcpOptions:
    return AcpOptions(model=MODEL, fake_responses=str(script) if script else None, data_dir=tmp_path / "data", **kw)


async def new_session(client: Client, ws: Path) -> str:
    result = await client.call("session/new", {"cwd": str(ws), "mcpServers": []})
    sid: str = result["sessionId"]
    await client.wait_for(lambda f: f.get("params", {}).get("update", {}).get("sessionUpdate") == "available_commands_update")
    return sid


async def prompt(client: Client, sid: str, text: str) -> Any:
    return await client.call("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": text}]})


@contextlib.asynccontextmanager
async def undecided_session(tmp_path: Path, ws: Path, script: Path) -> AsyncIterator[tuple[Client, str]]:
    """A connected client whose user answers no permission request, and its new session."""
    async with connected(options(tmp_path, script)) as (client, _):
        await client.initialize()
        client.permission = lambda params: None  # the user has not decided yet
        sid = await new_session(client, ws)
        client.clear()
        yield client, sid


async def prompt_until(
    nursery: trio.Nursery, client: Client, sid: str, text: str, seen: Callable[[Any], bool]
) -> tuple[list[Any], Any]:
    """Start a prompt in ``nursery``; once the client sees a frame that is ``seen``: the
    list the prompt's result will be appended to, and that frame."""
    results: list[Any] = []

    async def run_prompt() -> None:
        results.append(await prompt(client, sid, text))

    nursery.start_soon(run_prompt)
    frame = await client.wait_for(seen)
    return results, frame


async def prompt_until_asked(nursery: trio.Nursery, client: Client, sid: str, text: str) -> tuple[list[Any], Any]:
    """``prompt_until`` it asks a permission."""
    return await prompt_until(nursery, client, sid, text, lambda f: f.get("method") == "session/request_permission")


async def cancel_once_a_call_shows(client: Client, sid: str, text: str) -> list[Any]:
    """Prompt ``text`` and cancel the turn once its tool call shows; the prompt's result."""
    async with trio.open_nursery() as nursery:
        results, _ = await prompt_until(
            nursery, client, sid, text, lambda f: f.get("params", {}).get("update", {}).get("sessionUpdate") == "tool_call"
        )
        with trio.fail_after(5):
            await client.notify("session/cancel", {"sessionId": sid})
    return results


async def test_bad_frames_get_errors_and_the_connection_carries_on(tmp_path: Path, ws: Path) -> None:
    async with connected(options(tmp_path)) as (client, _):
        init = await client.initialize()
        assert init["protocolVersion"] == 1
        assert init["agentCapabilities"]["loadSession"] is True
        assert init["agentCapabilities"]["sessionCapabilities"] == {"list": {}, "resume": {}, "close": {}, "delete": {}}
        await client.send_raw(b"{not json\n")
        await client.send_raw(b"[1, 2]\n")
        parse = await client.wait_for(lambda f: f.get("error", {}).get("code") == -32700)
        invalid = await client.wait_for(lambda f: f.get("error", {}).get("code") == -32600)
        assert parse["id"] is None and invalid["id"] is None
        with pytest.raises(RpcFailure) as unknown:
            await client.call("session/fork", {"sessionId": "x"})
        assert unknown.value.code == -32601 and unknown.value.error["data"]["method"] == "session/fork"
        for method, params in [
            ("session/new", {"cwd": "relative/path"}),
            ("session/new", {}),
            ("session/prompt", {"sessionId": "nope", "prompt": []}),
            ("authenticate", {"methodId": "no-such-method"}),
            ("initialize", {"protocolVersion": "one"}),
        ]:
            with pytest.raises(RpcFailure) as bad:
                await client.call(method, params)
            assert bad.value.code == -32602, (method, bad.value.error)
        # Notifications never get an answer, known or not.
        await client.notify("session/cancel", {"sessionId": "nope"})
        await client.notify("_vendor/whatever", {})
        assert await client.call("authenticate", {"methodId": "gemini-api-key"}) == {}
        assert (await client.initialize())["protocolVersion"] == 1


async def test_an_oversized_frame_is_refused_and_skipped(
    tmp_path: Path, ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_server, "MAX_FRAME", 1000)
    async with connected(options(tmp_path)) as (client, _):
        await client.send_raw(b'{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"x": "' + b"y" * 5000)
        await client.send_raw(b'"}}\n')
        refused = await client.wait_for(lambda f: "error" in f)
        assert refused["error"]["code"] == -32600 and refused["error"]["data"] == {"details": "frame too large"}
        assert (await client.initialize())["protocolVersion"] == 1


async def test_a_text_turn_streams_chunks_and_ends_with_usage(tmp_path: Path, ws: Path) -> None:
    script = fake_responses(tmp_path / "text.jsonl", text_chunks("Hello! ", "I am fake.", prompt_tokens=100, output_tokens=8))
    async with connected(options(tmp_path, script)) as (client, _):
        await client.initialize()
        created = await client.call("session/new", {"cwd": str(ws), "mcpServers": []})
        assert created["modes"]["currentModeId"] == "default"
        assert [m["id"] for m in created["modes"]["availableModes"]] == ["default", "autoEdit", "yolo", "plan"]
        assert created["models"]["currentModelId"] == MODEL
        sid = created["sessionId"]
        await client.wait_for(lambda f: f.get("method") == "session/update")
        client.clear()
        result = await prompt(client, sid, "Say hello")
        assert result == {
            "stopReason": "end_turn",
            "_meta": {
                "quota": {
                    "token_count": {"input_tokens": 100, "output_tokens": 8},
                    "model_usage": [{"model": MODEL, "token_count": {"input_tokens": 100, "output_tokens": 8}}],
                }
            },
        }
        assert [u["content"]["text"] for u in client.updates()] == ["Hello! ", "I am fake."]
        # A local command: no model call, one message.
        about = await prompt(client, sid, "/about")
        assert about["stopReason"] == "end_turn"
        assert client.updates()[-1]["content"]["text"].startswith("agentbus Info:")


async def test_an_edit_through_the_clients_files_asks_first(tmp_path: Path, ws: Path) -> None:
    script = fake_responses(
        tmp_path / "write.jsonl",
        call_chunks(("write_file", {"file_path": "out.txt", "content": "new text\n"})),
        text_chunks("Wrote it."),
    )
    target = str(ws / "out.txt")
    async with connected(options(tmp_path, script)) as (client, _):
        await client.initialize(fs=True)
        sid = await new_session(client, ws)
        client.clear()
        result = await prompt(client, sid, "Create out.txt")
        assert result["stopReason"] == "end_turn"
        assert client.sequence() == [
            "fs/read_text_file",  # the original, for the diff
            "tool_call:pending:edit",
            "session/request_permission",
            "tool_call_update:in_progress",
            "fs/read_text_file",  # the tool, through the client
            "fs/write_text_file",
            "tool_call_update:completed:edit",
            "agent_message_chunk",
        ]
        announced = client.updates()[0]
        diff = {"type": "diff", "path": target, "oldText": "", "newText": "new text\n", "_meta": {"kind": "add"}}
        assert announced["content"] == [diff] and announced["locations"] == [{"path": target}]
        asked = next(f for f in client.log if f.get("method") == "session/request_permission")
        assert asked["params"]["toolCall"]["toolCallId"] == announced["toolCallId"]
        assert [o["kind"] for o in asked["params"]["options"]] == ["allow_always", "allow_once", "reject_once"]
        # The editor's buffer got the text; the disk did not (the client owns the file).
        assert client.files == {target: "new text\n"}
        assert not (ws / "out.txt").exists()


async def test_a_rejected_call_ends_failed_and_writes_nothing(tmp_path: Path, ws: Path) -> None:
    script = fake_responses(
        tmp_path / "write.jsonl",
        call_chunks(("write_file", {"file_path": "out.txt", "content": "x\n"})),
        text_chunks("Not written."),
    )
    async with connected(options(tmp_path, script)) as (client, _):
        await client.initialize()
        client.permission = "cancel"
        sid = await new_session(client, ws)
        client.clear()
        assert (await prompt(client, sid, "Create out.txt"))["stopReason"] == "end_turn"
        assert client.sequence() == [
            "tool_call:pending:edit",
            "session/request_permission",
            "tool_call_update:failed:edit",
            "agent_message_chunk",
        ]
        assert client.updates()[1]["content"][0]["content"]["text"] == "User denied execution."
        assert not (ws / "out.txt").exists()


async def test_cancel_while_a_permission_is_pending(tmp_path: Path, ws: Path) -> None:
    script = fake_responses(
        tmp_path / "sleep.jsonl",
        call_chunks(("run_shell_command", {"command": "sleep 30", "description": "wait"})),
        text_chunks("never"),
    )
    async with undecided_session(tmp_path, ws, script) as (client, sid):
        async with trio.open_nursery() as nursery:
            results, asked = await prompt_until_asked(nursery, client, sid, "Wait")
            await client.notify("session/cancel", {"sessionId": sid})
            # The spec's order: cancel first, then the pending permission is answered.
            await client.send({"jsonrpc": "2.0", "id": asked["id"], "result": {"outcome": {"outcome": "cancelled"}}})
        assert results == [{"stopReason": "cancelled"}]
        assert client.sequence() == ["tool_call:pending:execute", "session/request_permission", "tool_call_update:failed:execute"]


async def test_cancel_stops_a_running_shell_and_the_call_fails(tmp_path: Path, ws: Path) -> None:
    script = fake_responses(
        tmp_path / "sleep.jsonl",
        call_chunks(("run_shell_command", {"command": "sleep 30", "description": "wait"})),
        text_chunks("never"),
    )
    async with connected(options(tmp_path, script, yolo=True)) as (client, _):
        await client.initialize()
        sid = await new_session(client, ws)
        client.clear()
        results = await cancel_once_a_call_shows(client, sid, "Wait")
        assert results == [{"stopReason": "cancelled"}]
        last = client.updates()[-1]
        assert last["status"] == "failed"
        assert last["content"][0]["content"]["text"] == "Command cancelled by user."


async def test_parallel_calls_all_start_before_any_finishes(tmp_path: Path, ws: Path) -> None:
    script = fake_responses(
        tmp_path / "parallel.jsonl",
        call_chunks(("read_file", {"file_path": "hello.py"}), ("glob", {"pattern": "**/*.txt"})),
        text_chunks("done"),
    )
    async with connected(options(tmp_path, script)) as (client, _):
        await client.initialize()
        sid = await new_session(client, ws)
        client.clear()
        await prompt(client, sid, "both")
        labels = client.sequence()
        assert labels[:2] == ["tool_call:in_progress:read", "tool_call:in_progress:search"]
        assert sorted(labels[2:4]) == ["tool_call_update:completed:read", "tool_call_update:completed:search"]


async def test_set_mode_reports_the_mode_before_answering(tmp_path: Path, ws: Path) -> None:
    script = fake_responses(
        tmp_path / "write.jsonl",
        call_chunks(("write_file", {"file_path": "out.txt", "content": "yolo\n"})),
        text_chunks("Wrote it."),
    )
    async with connected(options(tmp_path, script)) as (client, _):
        await client.initialize()
        sid = await new_session(client, ws)
        client.clear()
        assert await client.call("session/set_mode", {"sessionId": sid, "modeId": "yolo"}) == {}
        assert client.log[0]["params"]["update"] == {"sessionUpdate": "current_mode_update", "currentModeId": "yolo"}
        with pytest.raises(RpcFailure):
            await client.call("session/set_mode", {"sessionId": sid, "modeId": "turbo"})
        client.clear()
        await prompt(client, sid, "Create out.txt")
        assert "session/request_permission" not in client.sequence()
        assert (ws / "out.txt").read_text() == "yolo\n"


async def test_write_todos_becomes_a_plan(tmp_path: Path, ws: Path) -> None:
    todos = [
        {"description": "Read the code", "status": "completed"},
        {"description": "Write the fix", "status": "in_progress"},
        {"description": "Ask for review", "status": "cancelled"},
    ]
    script = fake_responses(tmp_path / "todos.jsonl", call_chunks(("write_todos", {"todos": todos})), text_chunks("ok"))
    async with connected(options(tmp_path, script)) as (client, _):
        await client.initialize()
        sid = await new_session(client, ws)
        client.clear()
        await prompt(client, sid, "plan it")
        plan = next(u for u in client.updates() if u["sessionUpdate"] == "plan")
        assert plan["entries"] == [
            {"content": "Read the code", "priority": "medium", "status": "completed"},
            {"content": "Write the fix", "priority": "medium", "status": "in_progress"},
            {"content": "Ask for review", "priority": "medium", "status": "completed", "_meta": {"status": "cancelled"}},
        ]
        labels = client.sequence()
        assert labels.index("plan") == labels.index("tool_call_update:completed:other") + 1


async def test_a_model_error_is_a_jsonrpc_error_and_the_session_goes_on(tmp_path: Path, ws: Path) -> None:
    script = fake_responses(tmp_path / "one.jsonl", text_chunks("only answer"))
    async with connected(options(tmp_path, script)) as (client, _):
        await client.initialize()
        sid = await new_session(client, ws)
        assert (await prompt(client, sid, "one"))["stopReason"] == "end_turn"
        with pytest.raises(RpcFailure) as failed:
            await prompt(client, sid, "two")
        assert failed.value.code == 500 and "No more mock responses" in failed.value.error["message"]
        with pytest.raises(RpcFailure):
            await prompt(client, sid, "three")


async def test_max_session_turns_ends_with_max_turn_requests(tmp_path: Path, ws: Path) -> None:
    (ws / ".gemini").mkdir()
    (ws / ".gemini" / "settings.json").write_text(json.dumps({"model": {"maxSessionTurns": 1}}))
    script = fake_responses(
        tmp_path / "two.jsonl", call_chunks(("read_file", {"file_path": "hello.py"})), text_chunks("never")
    )
    async with connected(options(tmp_path, script)) as (client, _):
        await client.initialize()
        sid = await new_session(client, ws)
        assert (await prompt(client, sid, "read"))["stopReason"] == "max_turn_requests"


async def test_load_replays_the_recorded_session_then_answers(tmp_path: Path, ws: Path) -> None:
    script = fake_responses(
        tmp_path / "read.jsonl",
        call_chunks(("read_file", {"file_path": "hello.py"}), text="Let me read it."),
        text_chunks("It adds."),
        text_chunks("Again."),
    )
    async with connected(options(tmp_path, script)) as (client, _):
        await client.initialize()
        sid = await new_session(client, ws)
        await prompt(client, sid, "What does hello.py do?")
    async with connected(options(tmp_path, script)) as (client, _):
        await client.initialize()
        listed = await client.call("session/list", {"cwd": str(ws)})
        assert [(s["sessionId"], s["title"]) for s in listed["sessions"]] == [(sid, "What does hello.py do?")]
        loaded = await client.call("session/load", {"sessionId": sid, "cwd": str(ws), "mcpServers": []})
        assert loaded["modes"]["currentModeId"] == "default"
        response_at = next(i for i, f in enumerate(client.log) if f.get("result") is loaded)
        replay = [f["params"]["update"] for f in client.log[:response_at] if f.get("method") == "session/update"]
        assert [u["sessionUpdate"] for u in replay] == [
            "user_message_chunk",
            "agent_message_chunk",
            "tool_call",
            "agent_message_chunk",
        ]
        assert replay[0]["content"]["text"] == "What does hello.py do?"
        assert replay[2]["status"] == "completed" and replay[2]["title"] == "hello.py"
        # The session goes on from its history (the fake model is at its first line again).
        assert (await prompt(client, sid, "again"))["stopReason"] == "end_turn"
        with pytest.raises(RpcFailure) as missing:
            await client.call("session/load", {"sessionId": "no-such-id", "cwd": str(ws), "mcpServers": []})
        assert missing.value.code == -32002


async def test_a_mode_change_during_a_turn_applies_to_its_waiting_and_later_calls(tmp_path: Path, ws: Path) -> None:
    """As Gemini CLI: switching to auto-edit while an edit waits for permission lets it
    run (the client's late answer changes nothing), and the turn's next edit is not
    asked about."""
    script = fake_responses(
        tmp_path / "edits.jsonl",
        call_chunks(("write_file", {"file_path": "a.txt", "content": "a\n"})),
        call_chunks(("write_file", {"file_path": "b.txt", "content": "b\n"})),
        text_chunks("Both written."),
    )
    async with undecided_session(tmp_path, ws, script) as (client, sid):
        async with trio.open_nursery() as nursery:
            results, asked = await prompt_until_asked(nursery, client, sid, "Write both")
            assert await client.call("session/set_mode", {"sessionId": sid, "modeId": "autoEdit"}) == {}
            with trio.fail_after(10):
                await client.wait_for(
                    lambda f: f.get("params", {}).get("update", {}).get("status") == "completed"
                    and "b.txt" in json.dumps(f)
                )
            # the permission asked before the change, answered late: nothing more happens
            await client.send({"jsonrpc": "2.0", "id": asked["id"], "result": {"outcome": {"outcome": "selected", "optionId": "cancel"}}})
        assert [r["stopReason"] for r in results] == ["end_turn"]
        assert (ws / "a.txt").read_text() == "a\n" and (ws / "b.txt").read_text() == "b\n"
        assert [f for f in client.log if f.get("method") == "session/request_permission"] == [asked]
