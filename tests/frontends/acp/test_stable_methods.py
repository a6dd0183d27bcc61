"""The schema's stable methods beyond a prompt (schema v1.21): config options,
``session/resume``, ``session/close``, ``session/delete``, ``$/cancel_request`` both
ways, and what a client of a newer protocol version is told."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from ._client import Client, RpcFailure, call_chunks, connected, fake_responses, text_chunks
from .test_server import MODEL, new_session, options, prompt, prompt_until, prompt_until_asked, ws

__all__ = ["ws"]


def current(options: list[dict[str, Any]]) -> dict[str, Any]:
    return {o["id"]: o["currentValue"] for o in options}


def kinds(client: Client, sid: str) -> list[str]:
    return [u["sessionUpdate"] for u in client.updates(sid)]


def shows(kind: str) -> Any:
    return lambda f: f.get("params", {}).get("update", {}).get("sessionUpdate") == kind


async def test_config_options_change_mode_and_model_and_refuse_what_is_not_offered(tmp_path: Path, ws: Path) -> None:
    script = fake_responses(tmp_path / "text.jsonl", text_chunks("hi"))
    async with connected(options(tmp_path, script)) as (client, _):
        await client.initialize()
        created = await client.call("session/new", {"cwd": str(ws), "mcpServers": []})
        sid = created["sessionId"]
        assert current(created["configOptions"]) == {"mode": "default", "model": MODEL}
        assert [o["category"] for o in created["configOptions"]] == ["mode", "model"]
        assert created["modes"]["currentModeId"] == "default"  # older clients' view, in step
        await client.wait_for(shows("available_commands_update"))
        client.clear()
        changed = await client.call("session/set_config_option", {"sessionId": sid, "configId": "mode", "value": "yolo"})
        assert current(changed["configOptions"]) == {"mode": "yolo", "model": MODEL}
        assert kinds(client, sid) == ["current_mode_update", "config_option_update"]
        client.clear()
        changed = await client.call(
            "session/set_config_option", {"sessionId": sid, "configId": "model", "value": "gemini-2.5-pro"}
        )
        assert current(changed["configOptions"]) == {"mode": "yolo", "model": "gemini-2.5-pro"}
        assert kinds(client, sid) == ["config_option_update"]
        # The older selectors still work and keep the options in step.
        assert await client.call("session/set_model", {"sessionId": sid, "modelId": MODEL}) == {}
        assert await client.call("session/set_mode", {"sessionId": sid, "modeId": "plan"}) == {}
        assert current(client.updates(sid)[-1]["configOptions"]) == {"mode": "plan", "model": MODEL}
        for bad, field in [
            ({"configId": "temperature", "value": "hot"}, "temperature"),
            ({"configId": "mode", "value": "turbo"}, "turbo"),
            ({"configId": "model", "value": "gpt-9"}, "gpt-9"),
            ({"configId": "mode", "type": "boolean", "value": True}, "boolean"),
            ({"configId": "mode"}, "value"),
        ]:
            with pytest.raises(RpcFailure) as refused:
                await client.call("session/set_config_option", {"sessionId": sid, **bad})
            assert refused.value.code == -32602 and field in refused.value.error["message"]
        # Nothing changed by the refusals.
        again = await client.call("session/set_config_option", {"sessionId": sid, "configId": "mode", "value": "plan"})
        assert current(again["configOptions"]) == {"mode": "plan", "model": MODEL}


async def test_resume_goes_on_without_replaying_and_close_then_delete_forget_the_session(
    tmp_path: Path, ws: Path
) -> None:
    script = fake_responses(tmp_path / "two.jsonl", text_chunks("First answer."), text_chunks("Second answer."))
    async with connected(options(tmp_path, script)) as (client, _):
        await client.initialize()
        sid = await new_session(client, ws)
        await prompt(client, sid, "one")
        assert await client.call("session/close", {"sessionId": sid}) == {}
        with pytest.raises(RpcFailure) as gone:
            await prompt(client, sid, "after close")
        assert gone.value.code == -32602 and sid in gone.value.error["message"]
        with pytest.raises(RpcFailure) as unknown:
            await client.call("session/close", {"sessionId": sid})
        assert unknown.value.code == -32602
    async with connected(options(tmp_path, script)) as (client, _):
        await client.initialize()
        client.clear()
        resumed = await client.call("session/resume", {"sessionId": sid, "cwd": str(ws), "mcpServers": []})
        assert current(resumed["configOptions"])["mode"] == "default"
        # Nothing of the conversation is replayed (the spec: unlike session/load).
        answered = next(i for i, f in enumerate(client.log) if "result" in f)
        assert [f.get("method") for f in client.log[:answered]] == []
        await client.wait_for(shows("available_commands_update"))
        # (The fake model restarts at its first line in a new process.)
        assert (await prompt(client, sid, "two"))["stopReason"] == "end_turn"
        listed = await client.call("session/list", {"cwd": str(ws)})
        assert [s["sessionId"] for s in listed["sessions"]] == [sid]
        # Deleting the running session closes it, then it is gone from the list.
        assert await client.call("session/delete", {"sessionId": sid}) == {}
        assert (await client.call("session/list", {"cwd": str(ws)}))["sessions"] == []
        with pytest.raises(RpcFailure):
            await prompt(client, sid, "after delete")
        # Deleting what is not there succeeds (the spec); a malformed id does not.
        assert await client.call("session/delete", {"sessionId": sid}) == {}
        with pytest.raises(RpcFailure) as bad:
            await client.call("session/delete", {"sessionId": "../../etc/passwd"})
        assert bad.value.code == -32602
        with pytest.raises(RpcFailure) as missing:
            await client.call("session/resume", {"sessionId": sid, "cwd": str(ws), "mcpServers": []})
        assert missing.value.code == -32002


async def test_close_cancels_the_running_turn_first(tmp_path: Path, ws: Path) -> None:
    script = fake_responses(
        tmp_path / "sleep.jsonl",
        call_chunks(("run_shell_command", {"command": "sleep 60", "description": "wait"})),
        text_chunks("never"),
    )
    async with connected(options(tmp_path, script, yolo=True)) as (client, _):
        await client.initialize()
        sid = await new_session(client, ws)
        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                results, _ = await prompt_until(nursery, client, sid, "wait", shows("tool_call"))
                assert await client.call("session/close", {"sessionId": sid}) == {}
        assert [r["stopReason"] for r in results] == ["cancelled"]


async def test_cancel_request_ends_a_prompt_as_cancelled(tmp_path: Path, ws: Path) -> None:
    script = fake_responses(
        tmp_path / "sleep.jsonl",
        call_chunks(("run_shell_command", {"command": "sleep 60", "description": "wait"})),
        text_chunks("never"),
    )
    async with connected(options(tmp_path, script, yolo=True)) as (client, _):
        await client.initialize()
        sid = await new_session(client, ws)
        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                results, _ = await prompt_until(nursery, client, sid, "wait", shows("tool_call"))
                (prompt_id,) = client._waiting  # the prompt's request id: the one pending
                await client.notify("$/cancel_request", {"requestId": 12345})  # not pending: ignored
                await client.notify("$/cancel_request", {"requestId": prompt_id})
        assert results[0]["stopReason"] == "cancelled"


async def test_a_question_the_turn_no_longer_needs_is_withdrawn(tmp_path: Path, ws: Path) -> None:
    """The user switches to yolo while a permission request waits: the call runs, and
    the agent withdraws the question with ``$/cancel_request`` (the spec's cascade). A
    ``session/cancel`` does not withdraw: the client answers its questions itself then."""
    script = fake_responses(
        tmp_path / "write.jsonl",
        call_chunks(("write_file", {"file_path": "out.txt", "content": "x\n"})),
        text_chunks("Wrote it."),
    )
    async with connected(options(tmp_path, script)) as (client, _):
        await client.initialize()
        client.permission = lambda params: None
        sid = await new_session(client, ws)
        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                results, asked = await prompt_until_asked(nursery, client, sid, "Create out.txt")
                await client.call("session/set_mode", {"sessionId": sid, "modeId": "yolo"})
                withdrawn = await client.wait_for(lambda f: f.get("method") == "$/cancel_request")
        assert withdrawn["params"] == {"requestId": asked["id"]}
        assert results[0]["stopReason"] == "end_turn"
        assert (ws / "out.txt").read_text() == "x\n"


async def test_session_cancel_leaves_the_question_to_the_client(tmp_path: Path, ws: Path) -> None:
    script = fake_responses(
        tmp_path / "write.jsonl",
        call_chunks(("write_file", {"file_path": "out.txt", "content": "x\n"})),
        text_chunks("never"),
    )
    async with connected(options(tmp_path, script)) as (client, _):
        await client.initialize()
        client.permission = lambda params: None
        sid = await new_session(client, ws)
        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                results, asked = await prompt_until_asked(nursery, client, sid, "Create out.txt")
                await client.notify("session/cancel", {"sessionId": sid})
                await client.wait_for(lambda f: f.get("result", {}).get("stopReason") == "cancelled")
                # The spec's client answers the question "cancelled" after its cancel.
                await client.send({"jsonrpc": "2.0", "id": asked["id"], "result": {"outcome": {"outcome": "cancelled"}}})
        assert results == [{"stopReason": "cancelled"}]
        assert not [f for f in client.log if f.get("method") == "$/cancel_request"]
        assert not (ws / "out.txt").exists()


@pytest.mark.parametrize(
    ("method", "says"),
    [
        ("auth/login", "protocol version 2"),
        ("auth/logout", "protocol version 2"),
        ("session/fork", "not offered"),
        ("logout", "not offered"),
        ("nes/start", "not offered"),
    ],
)
async def test_methods_of_a_newer_or_unstable_protocol_are_not_found_and_say_why(
    tmp_path: Path, ws: Path, method: str, says: str
) -> None:
    script = fake_responses(tmp_path / "text.jsonl", text_chunks("hi"))
    async with connected(options(tmp_path, script)) as (client, _):
        init = await client.call("initialize", {"protocolVersion": 2, "clientCapabilities": {}})
        assert init["protocolVersion"] == 1  # the latest we speak (the client decides)
        with pytest.raises(RpcFailure) as refused:
            await client.call(method, {})
        assert refused.value.code == -32601
        assert refused.value.error["data"]["method"] == method and says in refused.value.error["data"]["details"]
        # A version-2 shape of a method we have (mcpServers left out, fields we do not
        # know): the method is served; a parameter of the wrong type is invalid params.
        created = await client.call("session/new", {"cwd": str(ws), "additionalDirectories": [], "_meta": {"x": 1}})
        assert created["sessionId"]
        with pytest.raises(RpcFailure) as invalid:
            await client.call("session/new", {"cwd": str(ws), "mcpServers": "none"})
        assert invalid.value.code == -32602


async def test_a_client_that_goes_away_mid_approval_loses_nothing(tmp_path: Path, ws: Path) -> None:
    """The editor closes while a permission request waits: the turn is cancelled and
    recorded, the file is not written; loading the session in a new connection shows
    the prompt and the call (ended, not waiting), and the session goes on."""
    script = fake_responses(
        tmp_path / "write.jsonl",
        call_chunks(("write_file", {"file_path": "out.txt", "content": "x\n"})),
        text_chunks("never"),
    )
    later = fake_responses(tmp_path / "later.jsonl", text_chunks("Here again."))
    async with connected(options(tmp_path, script)) as (client, _):
        await client.initialize()
        client.permission = lambda params: None  # asked, never answers
        sid = await new_session(client, ws)
        async with trio.open_nursery() as nursery:
            await prompt_until_asked(nursery, client, sid, "Create out.txt")
            nursery.cancel_scope.cancel()  # the editor goes away (end of input follows)
    assert not (ws / "out.txt").exists()
    async with connected(options(tmp_path, later)) as (client, _):
        await client.initialize()
        await client.call("session/load", {"sessionId": sid, "cwd": str(ws), "mcpServers": []})
        replay = client.updates(sid)
        assert replay[0] == {"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "Create out.txt"}}
        (call,) = [u for u in replay if u["sessionUpdate"] == "tool_call"]
        assert call["status"] == "failed"
        assert "session/request_permission" not in client.sequence()  # not asked again: it ended
        assert (await prompt(client, sid, "again"))["stopReason"] == "end_turn"


async def test_cancel_request_stops_any_other_request_with_32800(tmp_path: Path, ws: Path) -> None:
    script = fake_responses(tmp_path / "text.jsonl", text_chunks("hi"))
    async with connected(options(tmp_path, script)) as (client, server):
        await client.initialize()
        started = trio.Event()

        async def slow_listing(params: dict[str, Any]) -> Any:
            started.set()
            await trio.sleep_forever()  # a request that would not end by itself

        server._methods["session/list"] = slow_listing
        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                failures: list[RpcFailure] = []

                async def listing() -> None:
                    try:
                        await client.call("session/list", {})
                    except RpcFailure as exc:
                        failures.append(exc)

                nursery.start_soon(listing)
                await started.wait()
                (rid,) = client._waiting
                await client.notify("$/cancel_request", {"requestId": rid})
        assert [(f.code, f.error["message"]) for f in failures] == [(-32800, "Request cancelled")]
        # The connection goes on.
        assert (await client.call("session/new", {"cwd": str(ws), "mcpServers": []}))["sessionId"]


async def test_a_session_tells_its_title_and_how_full_its_context_is(tmp_path: Path, ws: Path) -> None:
    script = fake_responses(
        tmp_path / "text.jsonl",
        text_chunks("Hi.", prompt_tokens=30, output_tokens=4),
        text_chunks("Again.", prompt_tokens=40, output_tokens=5),
    )
    async with connected(options(tmp_path, script)) as (client, _):
        await client.initialize()
        sid = await new_session(client, ws)
        await prompt(client, sid, "Say\nhello")
        await prompt(client, sid, "again")
        info = [u for u in client.updates(sid, info=True) if u["sessionUpdate"] in ("session_info_update", "usage_update")]
        assert info == [
            {"sessionUpdate": "session_info_update", "title": "Say hello"},  # as session/list titles it, at the turn's end
            {"sessionUpdate": "usage_update", "used": 34, "size": 1_048_576},
            {"sessionUpdate": "usage_update", "used": 45, "size": 1_048_576},
        ]
        listed = await client.call("session/list", {"cwd": str(ws)})
        assert listed["sessions"][0]["title"] == "Say hello"
