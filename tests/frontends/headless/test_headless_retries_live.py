"""``agentbus -p`` (a real process) on the live backend against the fake Gemini server,
through retries: a retried stream error after "Alpha " shows the response once in each
output mode (a reset there fails the run, as in Gemini CLI); a retry that says something else is announced before its text; connection-layer
retries are announced on stderr, one line each."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import trio

from actors.gateway import FakeEntry
from tests.fakes.gemini_server import FakeGeminiServer, Fault, error_info, retry_info
from tests.gateway.test_headless_live import AGENTBUS, Run, agentbus
from tests.gateway.test_live_faults import stream

pytestmark = pytest.mark.skipif(not AGENTBUS.exists(), reason="agentbus is not installed in this environment")

MODES = ("text", "json", "stream-json")


async def run_against(
    tmp: Path, entries: list[FakeEntry], faults: list[Fault | None], fmt: str, settings: dict[str, Any] | None = None
) -> tuple[Run, FakeGeminiServer]:
    server = FakeGeminiServer(entries, faults=faults)
    if settings is not None:
        (tmp / "home" / ".gemini").mkdir(parents=True, exist_ok=True)
        (tmp / "home" / ".gemini" / "settings.json").write_text(json.dumps(settings))
    async with trio.open_nursery() as nursery:
        await nursery.start(server.run)
        env = {"GEMINI_API_KEY": "not-a-key", "GOOGLE_GEMINI_BASE_URL": server.base_url}
        run = await agentbus(tmp, "-p", "hi", "-m", "gemini-2.5-flash", "-o", fmt, env=env)
        nursery.cancel_scope.cancel()
    return run, server


def response_of(run: Run, fmt: str) -> str:
    if fmt == "text":
        return run.stdout
    if fmt == "json":
        return str(json.loads(run.stdout)["response"])
    return "".join(e["content"] for e in run.events() if e["type"] == "message" and e["role"] == "assistant")


async def in_each_mode(tmp: Path, entries: list[FakeEntry], faults: list[Fault | None]) -> dict[str, tuple[Run, FakeGeminiServer]]:
    """The same run in the three output modes, side by side (a server each)."""
    runs: dict[str, tuple[Run, FakeGeminiServer]] = {}

    async def one(fmt: str) -> None:
        (tmp / fmt).mkdir()
        runs[fmt] = await run_against(tmp / fmt, entries, list(faults), fmt)

    async with trio.open_nursery() as nursery:
        for fmt in MODES:
            nursery.start_soon(one, fmt)
    return runs


async def test_a_stream_reset_after_alpha_fails_the_run_as_gemini_cli_does(tmp_path: Path) -> None:
    # Gemini CLI 0.61 on this server: "Alpha " shown, ``TypeError: terminated`` (its
    # cause, UND_ERR_SOCKET, is not retried), exit 1.
    answer = stream("Alpha ", "Beta ", "Gamma.")
    for fmt, (run, server) in (await in_each_mode(tmp_path, [answer, answer], [Fault.reset(after_chunks=1)])).items():
        assert run.code == 1, (fmt, run.stderr)
        assert len(server.requests) == 1, fmt  # not retried
        assert "terminated" in run.stderr + run.stdout, (fmt, run.stderr, run.stdout)
        if fmt == "text":
            assert run.stdout.startswith("Alpha ")


async def test_a_retried_stream_error_after_alpha_shows_the_response_once(tmp_path: Path) -> None:
    answer = stream("Alpha ", "Beta ", "Gamma.")
    for fmt, (run, server) in (await in_each_mode(tmp_path, [answer, answer], [Fault.error_chunk(503, after_chunks=1)])).items():
        assert run.code == 0, run.stderr
        assert server.requests[0].chunks_sent == 1 and len(server.requests) == 2  # retried mid-stream
        assert response_of(run, fmt) == "Alpha Beta Gamma." + ("\n" if fmt == "text" else ""), fmt
        if fmt == "stream-json":
            assert not [e for e in run.events() if e["type"] == "error"]
        assert "WARNING" not in run.stderr and "Attempt" not in run.stderr  # a mid-stream retry: nothing to say


async def test_a_retry_that_says_something_else_is_announced_before_its_text(tmp_path: Path) -> None:
    entries = [stream("Alpha ", "Beta."), stream("Gamma ", "Delta.")]
    runs = await in_each_mode(tmp_path, entries, [Fault.error_chunk(503, after_chunks=1)])
    for run, _ in runs.values():
        assert run.code == 0, run.stderr
    # -o json: the successful attempt's text only
    assert response_of(runs["json"][0], "json") == "Gamma Delta."
    # -o text: what was streamed stays; a warning on stderr, then the new attempt's text
    text = runs["text"][0]
    assert text.stdout == "Alpha \nGamma Delta.\n"
    [warning] = [line for line in text.stderr.splitlines() if line.startswith("[WARNING]")]
    assert "503 UNAVAILABLE" in warning and "discarded" in warning
    # -o stream-json: Gemini CLI's error event (severity warning) before the new text
    events = runs["stream-json"][0].events()
    shown = [(e["type"], e.get("content") or e.get("severity")) for e in events if e["type"] in ("message", "error")]
    assert shown == [("message", "hi"), ("message", "Alpha "), ("error", "warning"), ("message", "Gamma "), ("message", "Delta.")]
    [event] = [e for e in events if e["type"] == "error"]
    assert set(event) == {"type", "timestamp", "severity", "message"} and event["message"] == warning.removeprefix("[WARNING] ")


async def test_connection_retries_are_announced_on_stderr_one_line_each(tmp_path: Path) -> None:
    busy = Fault.http_error(
        429,
        "The model is overloaded.",
        details=[error_info("MODEL_CAPACITY_EXHAUSTED"), retry_info("0.05s")],
    )
    entries = [stream("Alpha ", "Beta.")]
    run, server = await run_against(tmp_path, entries, [busy, busy], "text", settings={"general": {"maxAttempts": 3}})
    assert run.code == 0, run.stderr
    assert run.stdout == "Alpha Beta.\n" and len(server.requests) == 3
    lines = [line for line in run.stderr.splitlines() if line.startswith("Attempt ")]
    assert len(lines) == 2
    for k, line in enumerate(lines, start=1):
        assert re.fullmatch(
            rf"Attempt {k} failed with status 429\. Retrying with backoff\.\.\. "
            rf"\(429 RESOURCE_EXHAUSTED; attempt {k + 1} of 3 in 0\.\ds\)",
            line,
        ), line
