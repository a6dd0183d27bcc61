"""``agentbus web`` in a real browser: Debian's chromium, headless, driven by Playwright.

The daemon and ``agentbus web`` run as the commands a user runs; a session runs a
scripted model (a fake-responses file, its chunks 100 ms apart). The browser opens the
printed URL, finds the session in the list, opens it, sends a prompt, watches the text
stream in and a tool call ask for approval with what it would write, approves it, sees
the result and the call on the wave timeline, sends a second prompt whose call waits for
approval and cancels that turn. Skips, saying why, where chromium or Playwright cannot be
found — unless ``AGENTBUS_REQUIRE_BROWSER`` is set (``.ci/run`` sets it once chromium is
installed), when that fails the test instead. Playwright never downloads a browser here:
it is pointed at the system's.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import pytest
import trio

from actors.frontends.daemon.client import open_client
from actors.frontends.daemon.paths import DaemonPaths
from tests.frontends.daemon._helpers import write_responses
from tests.frontends.daemon._procs import env_for
from tests.frontends.daemon._procs import killed_mid_approval as killed_mid_approval_of
from tests.frontends.web._helpers import stream_response

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
TIMEOUT_MS = 15_000


@pytest.fixture
def chromium() -> str:
    """The browser's path (first: where there is none, nothing else is started)."""
    found = os.environ.get("AGENTBUS_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    why = ""
    if not found:
        why = "no chromium on PATH (Debian: apt-get install chromium; or set AGENTBUS_CHROMIUM)"
    elif not os.access(found, os.X_OK):
        why = f"AGENTBUS_CHROMIUM={found} is not an executable"
    else:
        try:
            import playwright.sync_api  # noqa: F401
        except ImportError:
            why = "the playwright package is not installed (pip install -e '.[test]')"
    if why:
        if os.environ.get("AGENTBUS_REQUIRE_BROWSER"):
            pytest.fail(f"AGENTBUS_REQUIRE_BROWSER is set but {why}")
        pytest.skip(why)
    assert found
    return found


@contextmanager
def _running(cmd: list[str], home: Path, stop: signal.Signals, *, cwd: Path | None = None) -> Iterator[subprocess.Popen[str]]:
    """A command of ours as its own process, stopped with ``stop`` (killed after 10 s)."""
    with subprocess.Popen(
        [sys.executable, "-m", "actors.frontends", *cmd],
        env=env_for(home),
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    ) as proc:
        try:
            yield proc
        finally:
            proc.send_signal(stop)
            try:
                proc.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()


def _read_until(stream: IO[str] | None, needle: str, what: str) -> str:
    assert stream is not None
    printed = ""
    while needle not in printed:
        line = stream.readline()
        assert line, f"{what} exited: {printed}"
        printed += line
    return printed


@pytest.fixture
def web_url(home: Path) -> Iterator[str]:
    """``agentbus daemon`` in the foreground and ``agentbus web`` run in the workspace,
    each its own process: the URL ``agentbus web`` printed."""
    with _running(["daemon"], home, signal.SIGTERM) as daemon:
        _read_until(daemon.stderr, "listening on", "the daemon")
        with _running(["web"], home, signal.SIGINT, cwd=home / "ws") as web:
            printed = _read_until(web.stdout, "?token=", "agentbus web")
            yield next(word for word in printed.split() if word.startswith("http://127.0.0.1:"))


def scripted_session(home: Path) -> str:
    """A session of the workspace whose model is scripted: a write needing approval,
    its answer; (second prompt) a shell command needing approval; (third) a subagent
    whose write needs approval."""
    fake = write_responses(
        home / "f.responses",
        stream_response("I will ", "write ", "the file ", "now.", call=("write_file", {"file_path": "out.txt", "content": "approved\n"})),
        stream_response("Written ", "out.txt."),
        stream_response("Running it.", call=("run_shell_command", {"command": "echo never > never.txt"})),
        stream_response(call=("invoke_agent", {"agent_name": "generalist", "prompt": "Write milk to notes.txt."})),
        stream_response(call=("write_file", {"file_path": "notes.txt", "content": "milk\n"})),
        stream_response(call=("complete_task", {"result": {"response": "notes.txt written"}})),
        stream_response("The generalist wrote it."),
    )

    async def create() -> str:
        async with open_client(DaemonPaths(home / "run"), client="test", start=False) as client:
            ready = await client.create_session(
                str(home / "ws"), fake_responses=str(fake), fake_chunk_delay_ms=100, model="gemini-2.5-flash"
            )
            return ready.session_id

    return trio.run(create)


@contextmanager
def plain_asyncio() -> Iterator[None]:
    """asyncio's own event loops for Playwright's sync API in this thread: once
    trio-asyncio is imported (the live backend, the cluster's NATS client: pytest imports
    their tests first), ``asyncio.new_event_loop()`` makes a trio-asyncio loop, which
    runs trio inside and cannot host Playwright's."""
    asyncio.set_event_loop_policy(asyncio.DefaultEventLoopPolicy())
    try:
        yield
    finally:
        asyncio.set_event_loop_policy(None)


SNAPSHOTS = """() => {
  window.__texts = [];
  new MutationObserver(() => {
    const all = [...document.querySelectorAll('#log .text')].map((e) => e.textContent).join('|');
    if (all && window.__texts[window.__texts.length - 1] !== all) window.__texts.push(all);
  }).observe(document.getElementById('log'), {subtree: true, childList: true, characterData: true});
}"""


def test_a_person_follows_approves_prompts_and_cancels_in_chromium(chromium: str, home: Path, web_url: str) -> None:
    from playwright.sync_api import expect, sync_playwright

    sid = scripted_session(home)
    problems: list[str] = []
    with plain_asyncio(), sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.set_default_timeout(TIMEOUT_MS)
            page.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
            page.on("console", lambda msg: problems.append(f"console: {msg.text}") if msg.type == "error" else None)

            # Without the token: 403 and nothing else.
            refused = page.goto(web_url.split("?", 1)[0])
            assert refused is not None and refused.status == 403
            assert "token" in page.inner_text("body") and page.locator("#sessions").count() == 0
            problems.clear()  # (the browser logs the 403 itself)

            page.goto(web_url)
            row = page.locator(f'.session-row[data-session-id="{sid}"]')
            expect(row).to_be_visible()
            row.click()
            expect(page.locator("#head")).to_contain_text(sid)
            page.evaluate(SNAPSHOTS)

            page.fill("#prompt", "write the file")
            page.click("#send")
            call = page.locator('.tool-call[data-status="awaiting_approval"]')
            expect(call.locator(".name")).to_have_text("write_file")
            expect(call.locator(".approval pre")).to_have_text("approved\n")  # what it would write
            expect(page.locator("#log .text").first).to_have_text("I will write the file now.")
            texts: list[Any] = page.evaluate("window.__texts")
            # Streamed: the text grew chunk by chunk on the page.
            assert texts[:4] == ["I will ", "I will write ", "I will write the file ", "I will write the file now."], texts
            expect(page.locator(".prompt").first).to_have_text("> write the file")
            assert not (home / "ws" / "out.txt").exists()

            call.locator('button[data-outcome="proceed_once"]').click()
            done = page.locator(".tool-call").first
            expect(done).to_have_attribute("data-status", "success")
            expect(done.locator(".answered")).to_have_text("allowed once · by this page")
            expect(done.locator("pre.output")).not_to_be_empty()
            expect(page.locator("#log .text").nth(1)).to_have_text("Written out.txt.")
            assert (home / "ws" / "out.txt").read_text() == "approved\n"
            bar = page.locator('#waves .wave[data-wave="0"] .bar.success')
            expect(bar).to_have_count(1)
            expect(bar).to_contain_text("write_file")
            assert "waiting for approval" in (bar.get_attribute("title") or "")
            expect(page.locator("#waves .bar .wait")).to_have_count(1)
            expect(page.locator("#cancel")).to_be_disabled()

            # A second prompt; the connection drops as the answer streams (the page
            # reconnects and resyncs from the sequence number after its last event:
            # nothing shown twice, nothing missed); its call waits for approval; the turn
            # is cancelled.
            expect(page.locator("#conn")).to_have_attribute("data-connects", "1")
            page.fill("#prompt", "run it")
            page.click("#send")
            expect(page.locator("#prompt")).to_have_value("")  # accepted
            page.evaluate("ws.close()")
            expect(page.locator("#conn")).to_have_attribute("data-connects", "2")
            waiting = page.locator('.tool-call[data-status="awaiting_approval"]')
            expect(waiting.locator(".approval pre")).to_contain_text("echo never > never.txt")
            expect(page.locator("#cancel")).to_be_enabled()
            page.click("#cancel")
            expect(page.locator(".notice", has_text="(cancelled)")).to_be_visible()
            expect(page.locator(".tool-call").nth(1)).to_have_attribute("data-status", "cancelled")
            expect(page.locator(".prompt")).to_have_text(["> write the file", "> run it"])
            expect(page.locator("#log .text")).to_have_text(["I will write the file now.", "Written out.txt.", "Running it."])
            expect(page.locator(".tool-call")).to_have_count(2)
            expect(page.locator(".approval")).to_have_count(0)
            expect(page.locator("#cancel")).to_be_disabled()
            assert not (home / "ws" / "never.txt").exists()

            # A subagent: its activity inside the call that started it, its question
            # asked and answered here like any other.
            page.fill("#prompt", "delegate")
            page.click("#send")
            child = page.locator('.tool-call[data-status="awaiting_approval"]')
            expect(child.locator(".approval pre")).to_have_text("milk\n")
            child.locator('button[data-outcome="proceed_once"]').click()
            expect(page.locator("#log .text").last).to_have_text("The generalist wrote it.")
            expect(page.locator('.tool-call[data-call-id^="write_file"]').last).to_have_attribute("data-status", "success")
            agent = page.locator('.tool-call[data-call-id^="invoke_agent"] pre.activity')
            expect(agent).to_contain_text("↳ [generalist] started")
            expect(agent).to_contain_text("↳ [generalist] write_file notes.txt")
            expect(agent).to_contain_text("↳ [generalist] finished: GOAL")
            assert (home / "ws" / "notes.txt").read_text() == "milk\n"
            expect(row).to_contain_text("write the file")  # the list's title: its first prompt
        finally:
            browser.close()
    assert problems == [], json.dumps(problems, indent=1)


@pytest.fixture
def killed_mid_approval(home: Path) -> str:
    """A session whose daemon was killed while a write waited for its approval (its
    recording ends in the middle of the turn), before the next daemon starts."""
    return trio.run(killed_mid_approval_of, home)


def test_a_page_opening_what_a_killed_daemon_left_mid_turn_shows_the_turn_and_its_call_ended(
    chromium: str, home: Path, killed_mid_approval: str, web_url: str
) -> None:
    from playwright.sync_api import expect, sync_playwright

    with plain_asyncio(), sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.set_default_timeout(TIMEOUT_MS)
            page.goto(web_url)
            page.locator(f'.session-row[data-session-id="{killed_mid_approval}"]').click()
            call = page.locator(".tool-call")
            expect(call).to_have_attribute("data-status", "error")
            expect(call.locator("pre.output")).to_have_text("The session was interrupted before the tool finished.")
            expect(page.locator(".approval")).to_have_count(0)  # nobody waits for its answer
            expect(page.locator(".notice", has_text="(interrupted: the process running this turn stopped)")).to_be_visible()
            expect(page.locator("#cancel")).to_be_disabled()
        finally:
            browser.close()
    assert not (home / "ws" / "notes.txt").exists()
