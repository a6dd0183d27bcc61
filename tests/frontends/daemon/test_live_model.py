"""Daemon sessions on the live backend: the real google-genai SDK over HTTP to the fake
Gemini server (issue 17, defects 1 and 2).

A session's model requests go out with the credentials its client sent (``auth_env``
of ``CreateSession``/``LoadSession``), not with the daemon's environment; keys are never
written to the recording, the registry or the log; a failed request is in the log and
reaches the client."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

from actors.frontends.daemon import Daemon, serve
from actors.frontends.daemon._backends import SessionBackends
from actors.frontends.daemon.client import DaemonError
from actors.gateway import Backend, BackendError, FakeEntry, live_backend
from bus.messages import GenerateRequest, ModelFailed, TextStreamed, TurnEnded
from tests.fakes.gemini_server import FakeGeminiServer, Fault
from tests.frontends.daemon._helpers import client_of, config_for, events_until, text_response

KEY_ONE = "key-one-0123456789"
KEY_TWO = "key-two-0123456789"
KEY_THREE = "key-three-0123456789"
MODEL = "gemini-2.5-flash"


def live(auth_env: Mapping[str, str], auth_type: str | None) -> Backend:
    return live_backend(auth_env, auth_type=auth_type)


def answers(*texts: str) -> list[FakeEntry]:
    return [FakeEntry("generateContentStream", text_response(t)["response"], i) for i, t in enumerate(texts)]


@asynccontextmanager
async def live_daemon(home: Path, server: FakeGeminiServer | None) -> AsyncIterator[Daemon]:
    """A daemon with the live backend (and ``server`` running, when given)."""
    async with trio.open_nursery() as nursery:
        if server is not None:
            await nursery.start(server.run)
        async with trio.open_nursery() as daemons:
            daemon: Daemon = await daemons.start(serve, attrs.evolve(config_for(home), live_backend=live))
            try:
                yield daemon
            finally:
                daemon.stop("test over")  # and wait for it to stop
        nursery.cancel_scope.cancel()


def creds(server: FakeGeminiServer, key: str) -> dict[str, str]:
    return {"GEMINI_API_KEY": key, "GOOGLE_GEMINI_BASE_URL": server.base_url}


async def turn_text(client: Any, sid: str, prompt: str) -> tuple[str, list[Any]]:
    await client.prompt(sid, prompt)
    msgs = [e.message for e in await events_until(client)]
    return "".join(m.text for m in msgs if isinstance(m, TextStreamed)), msgs


async def test_a_daemon_session_gets_its_answers_from_the_live_model(home: Path) -> None:
    server = FakeGeminiServer(answers("Hello from the live model", "And again"))
    with trio.fail_after(30):
        async with live_daemon(home, server), client_of(home) as client:
            ready = await client.create_session(str(home / "ws"), model=MODEL, auth_env=creds(server, KEY_ONE))
            await client.subscribe(ready.session_id)
            assert (await turn_text(client, ready.session_id, "hi"))[0] == "Hello from the live model"
            assert (await turn_text(client, ready.session_id, "more"))[0] == "And again"
    assert [r.method for r in server.requests] == ["generateContentStream"] * 2


async def test_each_session_uses_its_clients_credentials_and_no_key_is_written(home: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    server = FakeGeminiServer(answers("one", "two", "three", "four"))
    with trio.fail_after(30):
        async with live_daemon(home, server):
            async with client_of(home, "first") as first:
                s1 = (await first.create_session(str(home / "ws"), model=MODEL, auth_env=creds(server, KEY_ONE))).session_id
                await first.subscribe(s1)
                await turn_text(first, s1, "a")
            async with client_of(home, "second") as second:
                s2 = (await second.create_session(str(home / "ws"), model=MODEL, auth_env=creds(server, KEY_TWO))).session_id
                await second.subscribe(s2)
                await turn_text(second, s2, "b")
                # A client with no credentials at all cannot start a session on the live
                # model (as headless), whatever the other sessions use...
                with pytest.raises(DaemonError, match="Please set an Auth method"):
                    await second.create_session(str(home / "ws"), model=MODEL, auth_env={})
                # ...and attaching without any leaves a running session's credentials alone.
                await second.load_session(s1, auth_env={})
                await second.subscribe(s1)
                await turn_text(second, s1, "c")
            async with client_of(home, "third") as third:
                # The latest client's credentials are the user's current ones.
                await third.load_session(s1, auth_env=creds(server, KEY_THREE))
                await third.subscribe(s1)
                await turn_text(third, s1, "d")
    assert [r.headers.get("x-goog-api-key") for r in server.requests] == [KEY_ONE, KEY_TWO, KEY_ONE, KEY_THREE]
    written = "".join(p.read_text(errors="replace") for p in (home / "data").rglob("*") if p.is_file())
    assert "sessions.json" in {p.name for p in (home / "data").rglob("*")}
    logged = "\n".join(r.getMessage() for r in caplog.records)
    for key in (KEY_ONE, KEY_TWO, KEY_THREE):
        assert key not in written
        assert key not in logged


async def test_a_key_in_a_prompt_is_scrubbed_from_the_recording(home: Path) -> None:
    server = FakeGeminiServer(answers("noted"))
    with trio.fail_after(30):
        async with live_daemon(home, server), client_of(home) as client:
            sid = (await client.create_session(str(home / "ws"), model=MODEL, auth_env=creds(server, KEY_ONE))).session_id
            await client.subscribe(sid)
            await turn_text(client, sid, f"my key is {KEY_ONE}")
    assert KEY_ONE in server.requests[0].body["contents"][-1]["parts"][-1]["text"]  # the model saw it
    recording = (home / "data" / "sessions" / f"{sid}.jsonl").read_text()
    assert "my key is [REDACTED]" in recording and KEY_ONE not in recording


async def test_the_key_of_a_client_that_loads_a_running_session_is_scrubbed_too(home: Path) -> None:
    """The session's requests use the later client's key from then on, so its recording
    scrubs that key as well (found by review: the scrubber knew only the first client's)."""
    server = FakeGeminiServer(answers("one", "two"))
    with trio.fail_after(30):
        async with live_daemon(home, server):
            async with client_of(home, "first") as first:
                sid = (await first.create_session(str(home / "ws"), model=MODEL, auth_env=creds(server, KEY_ONE))).session_id
                await first.subscribe(sid)
                await turn_text(first, sid, "a")
            async with client_of(home, "third") as third:
                await third.load_session(sid, auth_env=creds(server, KEY_THREE))
                await third.subscribe(sid)
                await turn_text(third, sid, f"my key is {KEY_THREE}")
    assert server.requests[-1].headers.get("x-goog-api-key") == KEY_THREE
    recording = (home / "data" / "sessions" / f"{sid}.jsonl").read_text()
    assert "my key is [REDACTED]" in recording and KEY_THREE not in recording


async def test_unusable_credentials_are_refused_when_the_session_starts(home: Path) -> None:
    server = FakeGeminiServer([])
    with trio.fail_after(30):
        async with live_daemon(home, server), client_of(home) as client:
            bad = {"GEMINI_API_KEY": KEY_ONE, "GOOGLE_GEMINI_BASE_URL": "not a url"}
            with pytest.raises(DaemonError, match="Invalid custom base URL: not a url"):
                await client.create_session(str(home / "ws"), model=MODEL, auth_env=bad)
            with pytest.raises(DaemonError, match="auth_env must be an object"):
                await client.request(_create(home, auth_env=["GEMINI_API_KEY"]))


def _create(home: Path, **fields: Any) -> Any:
    from bus.messages import CreateSession, new_id

    return CreateSession(request_id=new_id(), workspace=str(home / "ws"), model=MODEL, **fields)


async def test_a_failed_model_request_reaches_the_client_and_the_log(home: Path, caplog: pytest.LogCaptureFixture) -> None:
    server = FakeGeminiServer([], faults=[Fault.http_error(400, "API key not valid. Please pass a valid API key.")])
    with trio.fail_after(30):
        async with live_daemon(home, server), client_of(home) as client:
            sid = (await client.create_session(str(home / "ws"), model=MODEL, auth_env=creds(server, KEY_ONE))).session_id
            await client.subscribe(sid)
            _, msgs = await turn_text(client, sid, "hi")
    failed = [m for m in msgs if isinstance(m, ModelFailed)]
    assert failed and "API key not valid" in failed[0].error.message
    end = msgs[-1]
    assert isinstance(end, TurnEnded) and end.stop_reason == "error"
    assert end.error is not None and "API key not valid" in end.error.message
    assert any(sid in r.getMessage() and "API key not valid" in r.getMessage() for r in caplog.records if r.name == "agentbus.daemon")


class _Broken:
    """A backend whose request fails with an error that is not the API's."""

    async def generate(self, request: GenerateRequest, emit: Any) -> str:
        try:
            raise AttributeError("'NoneType' object has no attribute 'trio_as_future'")
        except AttributeError as exc:
            raise BackendError(f"AttributeError: {exc}", type="AttributeError") from exc


async def test_an_error_of_ours_is_logged_with_its_traceback(caplog: pytest.LogCaptureFixture) -> None:
    backends = SessionBackends(lambda env, auth: _Broken())
    backends.use_live("s1", {"GEMINI_API_KEY": KEY_ONE}, "gemini-api-key")
    request = GenerateRequest(session_id="s1", request_id="r", reply_to="t", method="generateContentStream", model=MODEL)

    async def emit(chunk: Any) -> None:
        raise AssertionError("no chunk expected")

    async with backends.running():
        with pytest.raises(BackendError, match="trio_as_future"):
            await backends.generate(request, emit)
        # a subagent's session (<parent>.<agent>-<n>) goes where its parent goes
        with pytest.raises(BackendError, match="trio_as_future"):
            await backends.generate(attrs.evolve(request, session_id="s1.helper-1"), emit)
        backends.forget("s1")
        with pytest.raises(BackendError, match="has no model backend"):
            await backends.generate(request, emit)
    errors = [r for r in caplog.records if r.name == "agentbus.daemon" and r.levelno == logging.ERROR]
    assert errors and errors[0].exc_info is not None and errors[0].exc_info[0] is AttributeError


async def test_a_session_resumed_after_a_restart_uses_the_credentials_it_is_loaded_with(home: Path) -> None:
    server = FakeGeminiServer(answers("before", "after"))
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            await nursery.start(server.run)
            async with live_daemon(home, None), client_of(home) as client:
                sid = (await client.create_session(str(home / "ws"), model=MODEL, auth_env=creds(server, KEY_ONE))).session_id
                await client.subscribe(sid)
                await turn_text(client, sid, "a")
            async with live_daemon(home, None) as daemon, client_of(home) as client:
                assert daemon.core.sessions == {}  # dormant until a client touches it
                ready = await client.load_session(sid, auth_env=creds(server, KEY_TWO))
                assert ready.resumed
                await client.subscribe(sid)
                assert (await turn_text(client, sid, "b"))[0] == "after"
            nursery.cancel_scope.cancel()
    assert [r.headers.get("x-goog-api-key") for r in server.requests] == [KEY_ONE, KEY_TWO]


async def test_a_sessions_requests_are_retried_by_its_workspace_settings(home: Path) -> None:
    """As headless: ``general.maxAttempts`` of the session's settings (1: no retry)."""
    (home / "ws" / ".gemini").mkdir()
    (home / "ws" / ".gemini" / "settings.json").write_text('{"general": {"maxAttempts": 1}}')
    server = FakeGeminiServer([], faults=[Fault.http_error(503, "overloaded")])
    with trio.fail_after(30):
        async with live_daemon(home, server), client_of(home) as client:
            sid = (await client.create_session(str(home / "ws"), model=MODEL, auth_env=creds(server, KEY_ONE))).session_id
            await client.subscribe(sid)
            _, msgs = await turn_text(client, sid, "hi")
    assert len(server.requests) == 1  # Gemini CLI's default would retry after 5 s or so
    end = msgs[-1]
    assert isinstance(end, TurnEnded) and end.error is not None and "overloaded" in end.error.message
