"""Every front end against the live backend: the real google-genai SDK over HTTP to the
fake Gemini server, real processes and sockets (issue 17).

Front ends: headless (``-o text``, ``json``, ``stream-json``), ``agentbus tool``,
``agentbus chat`` (on a pseudo-terminal), ``agentbus acp`` (sessions in its own
process), ``agentbus acp --attach`` and the native protocol (sessions in a daemon). Each
is put through one prompt whose model calls a tool, one call that needs an approval
(answered by the user where there is one to ask; headless has none: its approval mode
answers), and one cancel while the model's answer streams (or, for ``agentbus tool``,
while its tool runs).

One daemon serves the module (``agentbus daemon --detach``, started with no
credentials at all: every session uses those its client sends); each test runs its own
fake server, whose address reaches the daemon only as a client's credentials. What is
checked is what a user would see or find: the tool's effect on the workspace, the text,
the exit code, the function responses that went back to the model, and that a cancel
closed the HTTP stream.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import signal
import struct
import subprocess
import sys
import termios
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from actors.frontends.daemon.client import open_client
from actors.frontends.daemon.paths import DaemonPaths
from actors.gateway import FakeEntry
from bus import Envelope
from bus.messages import ApprovalRequested, BatchSettled, TextStreamed, TurnEnded
from tests.fakes.gemini_server import FakeGeminiServer, Fault, RecordedRequest
from tests.frontends.acp._client import Client as AcpClient
from tests.frontends.daemon._helpers import call_response, text_response
from tests.frontends.daemon._procs import env_for

ROOT = Path(__file__).resolve().parents[2]
MODEL = "gemini-2.5-flash"
KEY = "matrix-key-0123456789"
FACTS = "the answer is 42\n"
STEP_TIMEOUT_S = 30
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")

# -- the model's side ------------------------------------------------------------------------
READ = call_response("read_file", {"file_path": "facts.txt"})
READ_DONE = text_response("The file ", "says 42.")
WRITE = call_response("write_file", {"file_path": "out.txt", "content": "approved\n"})
WRITE_DONE = text_response("Wrote ", "out.txt.")
SLOW = text_response("Thinking ", "about it ", "for a long while.")


def script(*responses: dict[str, Any]) -> list[FakeEntry]:
    return [FakeEntry(r["method"], r["response"], i) for i, r in enumerate(responses)]


def function_responses(request: RecordedRequest) -> list[dict[str, Any]]:
    """The function responses the last content of a request carries."""
    parts = request.body["contents"][-1]["parts"]
    return [p["functionResponse"] for p in parts if "functionResponse" in p]


def check_tool_round_trip(requests: Sequence[RecordedRequest]) -> None:
    """read_file ran and its result went back to the model; so did write_file's."""
    (read,) = function_responses(requests[1])
    assert read["name"] == "read_file" and FACTS.strip() in json.dumps(read["response"])
    (write,) = function_responses(requests[3])
    assert write["name"] == "write_file" and "error" not in write["response"], write


@asynccontextmanager
async def fake_server(*responses: dict[str, Any], faults: Sequence[Fault | None] = ()) -> AsyncIterator[FakeGeminiServer]:
    server = FakeGeminiServer(script(*responses), faults=faults)
    async with trio.open_nursery() as nursery:
        await nursery.start(server.run)
        yield server
        nursery.cancel_scope.cancel()


async def first_chunk_sent(server: FakeGeminiServer, index: int) -> None:
    await server.wait_until(lambda s: len(s.requests) > index and s.requests[index].chunks_sent >= 1)


async def disconnected(server: FakeGeminiServer, index: int) -> None:
    """The client closed the stalled response: the cancel reached the HTTP stream."""
    await server.wait_until(lambda s: s.requests[index].disconnected_at is not None)


# -- processes ---------------------------------------------------------------------------------
def base_env(root: Path) -> dict[str, str]:
    return {**env_for(root), "LANG": "C.UTF-8"}


def client_env(root: Path, server: FakeGeminiServer) -> dict[str, str]:
    return {**base_env(root), "GEMINI_API_KEY": KEY, "GOOGLE_GEMINI_BASE_URL": server.base_url}


def agentbus_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "actors.frontends", *args]


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A home with one daemon running (no credentials in its environment)."""
    root = tmp_path_factory.mktemp("matrix")
    (root / "home").mkdir()
    env = base_env(root)
    started = subprocess.run(
        agentbus_argv("daemon", "--detach"), env=env, cwd=root, capture_output=True, text=True, timeout=60, check=False
    )
    assert started.returncode == 0, started.stderr
    try:
        yield root
    finally:
        subprocess.run(agentbus_argv("daemon", "stop"), env=env, cwd=root, capture_output=True, timeout=60, check=False)
    log = (root / "run" / "daemon.log").read_text(errors="replace")
    assert "Traceback" not in log, log
    assert KEY not in log


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    (tmp_path / "facts.txt").write_text(FACTS)
    return tmp_path


class Output:
    """What a process wrote so far; ``shows`` waits for a text on its stdout."""

    def __init__(self) -> None:
        self.streams = {"stdout": b"", "stderr": b""}
        self.ended: set[str] = set()
        self._changed = trio.Event()

    async def read(self, stream: trio.abc.ReceiveStream, name: str) -> None:
        async with stream:
            while data := await stream.receive_some(65536):
                self.streams[name] += data
                self._changed.set()
                self._changed = trio.Event()
        self.ended.add(name)
        self._changed.set()

    async def shows(self, text: str) -> None:
        while text.encode() not in self.streams["stdout"]:
            assert "stdout" not in self.ended, f"stdout ended before {text!r}: {self.streams}"
            await self._changed.wait()


async def run_captured(
    argv: list[str], env: dict[str, str], cwd: Path, *, interrupt: Callable[[Output], Awaitable[None]] | None = None
) -> tuple[int, str, str]:
    """Run a process to its end: exit code, stdout, stderr. ``interrupt``: the process
    gets SIGINT (the user's Ctrl-C) when this returns."""
    proc = await trio.lowlevel.open_process(
        argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert proc.stdout is not None and proc.stderr is not None
    output = Output()
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(output.read, proc.stdout, "stdout")
            nursery.start_soon(output.read, proc.stderr, "stderr")
            if interrupt is not None:
                await interrupt(output)
                proc.send_signal(signal.SIGINT)
        code = await proc.wait()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    return code, output.streams["stdout"].decode(), output.streams["stderr"].decode()


# -- headless ----------------------------------------------------------------------------------
FORMATS = ("text", "json", "stream-json")


def headless_text(fmt: str, stdout: str) -> str:
    if fmt == "text":
        return stdout
    if fmt == "json":
        return str(json.loads(stdout)["response"])
    events = [json.loads(line) for line in stdout.splitlines() if line.strip()]
    return "".join(e["content"] for e in events if e.get("type") == "message" and e.get("role") == "assistant")


async def test_headless_runs_tools_approved_by_its_mode(root: Path, tmp_path: Path) -> None:
    """Each output format: read_file runs, write_file is approved by auto_edit."""

    async def one(fmt: str) -> None:
        ws = tmp_path / fmt
        ws.mkdir()
        (ws / "facts.txt").write_text(FACTS)
        async with fake_server(READ, WRITE, WRITE_DONE) as server:
            code, out, err = await run_captured(
                agentbus_argv("-p", "read facts.txt, then write out.txt", "-m", MODEL, "-o", fmt, "--approval-mode", "auto_edit"),
                client_env(root, server),
                ws,
            )
        assert code == 0, err
        assert headless_text(fmt, out).strip().endswith("Wrote out.txt.")
        assert (ws / "out.txt").read_text() == "approved\n"
        (read,) = function_responses(server.requests[1])
        assert FACTS.strip() in json.dumps(read["response"])
        (write,) = function_responses(server.requests[2])
        assert write["name"] == "write_file" and "error" not in write["response"]
        if fmt == "stream-json":
            events = [json.loads(line) for line in out.splitlines()]
            assert [e["tool_name"] for e in events if e["type"] == "tool_use"] == ["read_file", "write_file"]
            assert [e["status"] for e in events if e["type"] == "tool_result"] == ["success", "success"]

    with trio.fail_after(STEP_TIMEOUT_S * 2):
        async with trio.open_nursery() as nursery:
            for fmt in FORMATS:
                nursery.start_soon(one, fmt)


async def test_headless_ctrl_c_while_the_answer_streams(root: Path, tmp_path: Path) -> None:
    async def one(fmt: str) -> None:
        ws = tmp_path / fmt
        ws.mkdir()
        async with fake_server(SLOW, faults=[Fault.stall(after_chunks=1)]) as server:

            async def seen(output: Output) -> None:
                # What a user sees first: the text, or in json mode (which prints at the
                # end) the server having sent it.
                await first_chunk_sent(server, 0)
                if fmt != "json":
                    await output.shows("Thinking")

            code, out, err = await run_captured(
                agentbus_argv("-p", "think", "-m", MODEL, "-o", fmt), client_env(root, server), ws, interrupt=seen
            )
            assert server.requests[0].disconnected_at is not None
        assert code == 130, err
        if fmt == "text":
            assert out.startswith("Thinking ") and "[ERROR] Operation cancelled." in err
        elif fmt == "json":  # Gemini CLI writes its error document to stderr
            assert json.loads(err)["error"]["type"] == "FatalCancellationError"
        else:
            events = [json.loads(line) for line in out.splitlines()]
            assert [e.get("content") for e in events if e["type"] == "message" and e["role"] == "assistant"] == ["Thinking "]
            assert events[-1]["type"] == "result" and events[-1]["status"] == "error"

    with trio.fail_after(STEP_TIMEOUT_S * 2):
        async with trio.open_nursery() as nursery:
            for fmt in FORMATS:
                nursery.start_soon(one, fmt)


# -- agentbus tool -----------------------------------------------------------------------------
SEARCH_ANSWER = {
    "method": "generateContent",
    "response": {
        "candidates": [
            {"content": {"role": "model", "parts": [{"text": "Trio is a Python library for async I/O."}]}, "finishReason": "STOP"}
        ]
    },
}


async def test_agentbus_tool_searches_through_the_model_writes_and_is_cancelled(root: Path, ws: Path) -> None:
    with trio.fail_after(STEP_TIMEOUT_S * 2):
        async with fake_server(SEARCH_ANSWER) as server:
            env = client_env(root, server)

            async def search() -> None:
                code, out, err = await run_captured(
                    agentbus_argv("tool", "google_web_search", "--args", '{"query": "what is trio"}', "-m", MODEL), env, ws
                )
                assert code == 0, err
                assert "Trio is a Python library for async I/O." in out
                assert server.requests[0].method == "generateContent"

            async def write() -> None:
                # Would ask in the default mode; the user asked for the call: it runs.
                code, _, err = await run_captured(
                    agentbus_argv("tool", "write_file", "--args", '{"file_path": "out.txt", "content": "approved\\n"}'), env, ws
                )
                assert code == 0, err

            async def cancel() -> None:
                fifo = ws.parent / "sleeper.pid"
                os.mkfifo(fifo)
                sleeper: list[int] = []

                async def started(output: Output) -> None:
                    text = await trio.to_thread.run_sync(fifo.read_text)  # opens once the shell runs
                    sleeper.append(int(text))

                command = json.dumps({"command": f"echo $$ > {fifo}; exec sleep 30"})
                code, out, _ = await run_captured(
                    agentbus_argv("tool", "run_shell_command", "--args", command, "-y", "-o", "json"), env, ws, interrupt=started
                )
                assert code == 130
                assert json.loads(out)["status"] == "cancelled"
                with pytest.raises(ProcessLookupError):
                    os.kill(sleeper[0], 0)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(search)
                nursery.start_soon(write)
                nursery.start_soon(cancel)
        assert (ws / "out.txt").read_text() == "approved\n"


# -- sessions in prompts: chat, ACP, ACP attached, the native protocol -----------------------
SESSION_SCRIPT = (READ, READ_DONE, WRITE, WRITE_DONE, SLOW)
SESSION_FAULTS = (None, None, None, None, Fault.stall(after_chunks=1))


class Terminal:
    """A process on a pseudo-terminal that is its controlling terminal (so Ctrl-C is
    the terminal's), read and written from trio; ``screen`` is its output, ANSI stripped."""

    def __init__(self, proc: trio.Process, master: trio.lowlevel.FdStream) -> None:
        self.proc = proc
        self.master = master
        self.raw = b""
        self.seen = 0

    @classmethod
    @asynccontextmanager
    async def open(cls, argv: list[str], env: dict[str, str], cwd: Path) -> AsyncIterator[Terminal]:
        master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))

        def controlling_terminal() -> None:  # in the child, stdin is the pty's slave end
            os.setsid()
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

        proc = await trio.lowlevel.open_process(
            argv, stdin=slave, stdout=slave, stderr=slave, env=env, cwd=cwd, preexec_fn=controlling_terminal
        )
        os.close(slave)
        term = cls(proc, trio.lowlevel.FdStream(master))
        try:
            yield term
        finally:
            if proc.returncode is None:
                proc.kill()
            await proc.wait()
            await term.master.aclose()

    @property
    def screen(self) -> str:
        return ANSI.sub("", self.raw.decode("utf-8", "replace")).replace("\r", "")

    async def expect(self, text: str) -> None:
        """Wait until ``text`` shows after what earlier expects consumed."""
        while (at := self.screen.find(text, self.seen)) < 0:
            try:
                data = await self.master.receive_some(65536)
            except (OSError, trio.BrokenResourceError):
                data = b""
            assert data, f"the process ended before {text!r} showed:\n{self.screen}"
            self.raw += data
        self.seen = at + len(text)

    async def type(self, text: str) -> None:
        await self.master.send_all(text.encode())


async def test_chat_on_a_terminal(root: Path, ws: Path) -> None:
    async with fake_server(*SESSION_SCRIPT, faults=SESSION_FAULTS) as server:
        env = {**client_env(root, server), "TERM": "xterm-256color"}
        with trio.fail_after(STEP_TIMEOUT_S * 2):
            async with Terminal.open(agentbus_argv("chat", "-m", MODEL), env, ws) as term:
                await term.expect("> ")
                await term.type("What does facts.txt say?\n")
                await term.expect("The file says 42.")
                await term.expect("> ")
                await term.type("Write out.txt\n")
                await term.expect("Allow WriteFile out.txt?")
                await term.type("y\n")
                await term.expect("Wrote out.txt.")
                await term.expect("> ")
                await term.type("Think hard\n")
                await term.expect("Thinking")
                await term.type("\x03")  # Ctrl-C
                await term.expect("(cancelled)")
                await disconnected(server, 4)
                await term.type("\x03")
                await term.expect("press Ctrl-C again to exit")
                await term.type("\x03")
                assert await term.proc.wait() == 130
    check_tool_round_trip(server.requests)
    assert (ws / "out.txt").read_text() == "approved\n"


def shown(update: dict[str, Any]) -> str:
    """The text of an agent message chunk, else ""."""
    return str(update["content"]["text"]) if update["sessionUpdate"] == "agent_message_chunk" else ""


async def acp_session(client: AcpClient, ws: Path, server: FakeGeminiServer) -> list[Any]:
    """The three prompts of an ACP session; their results."""
    await client.initialize()
    sid = (await client.call("session/new", {"cwd": str(ws), "mcpServers": []}))["sessionId"]

    async def prompt(text: str) -> Any:
        return await client.call("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": text}]})

    results = [await prompt("What does facts.txt say?"), await prompt("Write out.txt")]
    asked = [f["params"]["toolCall"] for f in client.log if f.get("method") == "session/request_permission"]
    assert [a["kind"] for a in asked] == ["edit"]  # write_file asked, answered proceed_once
    async with trio.open_nursery() as nursery:

        async def slow() -> None:
            results.append(await prompt("Think hard"))

        nursery.start_soon(slow)
        await client.wait_for(lambda f: f.get("method") == "session/update" and shown(f["params"]["update"]) == "Thinking ")
        await client.notify("session/cancel", {"sessionId": sid})
    await disconnected(server, 4)
    text = "".join(shown(u) for u in client.updates(sid))
    assert text.startswith("The file says 42.Wrote out.txt.Thinking")
    return [r["stopReason"] for r in results]


@pytest.mark.parametrize("attach", [False, True], ids=["in-process", "attached"])
async def test_acp(root: Path, ws: Path, attach: bool) -> None:
    async with fake_server(*SESSION_SCRIPT, faults=SESSION_FAULTS) as server:
        argv = agentbus_argv("acp", "-m", MODEL, *(["--attach"] if attach else []))
        with trio.fail_after(STEP_TIMEOUT_S * 2):
            proc = await trio.lowlevel.open_process(
                argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=client_env(root, server), cwd=ws
            )
            assert proc.stdin is not None and proc.stdout is not None
            client = AcpClient(trio.StapledStream(proc.stdin, proc.stdout))
            try:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(client.run)
                    stops = await acp_session(client, ws, server)
                    await proc.stdin.aclose()  # end of input: the agent exits
                    assert await proc.wait() == 0
            finally:
                if proc.returncode is None:
                    proc.kill()
                await proc.wait()
    assert stops == ["end_turn", "end_turn", "cancelled"]
    check_tool_round_trip(server.requests)
    assert (ws / "out.txt").read_text() == "approved\n"


async def test_native_protocol(root: Path, ws: Path) -> None:
    async with fake_server(*SESSION_SCRIPT, faults=SESSION_FAULTS) as server:
        with trio.fail_after(STEP_TIMEOUT_S * 2):
            async with open_client(DaemonPaths(root / "run"), client="matrix", start=False) as client:
                creds = {"GEMINI_API_KEY": KEY, "GOOGLE_GEMINI_BASE_URL": server.base_url}
                sid = (await client.create_session(str(ws), model=MODEL, auth_env=creds)).session_id
                await client.subscribe(sid)

                async def turn(prompt: str, on: Callable[[Any], Awaitable[None]]) -> list[Any]:
                    """The turn's events; ``on`` sees each as it comes."""
                    await client.prompt(sid, prompt)
                    msgs: list[Any] = []
                    async for event in client.events:
                        if isinstance(event, Envelope) and event.session_id == sid:
                            msgs.append(event.message)
                            await on(event.message)
                            if isinstance(event.message, TurnEnded):
                                return msgs
                    raise AssertionError("the connection closed")

                async def answer(msg: Any) -> None:
                    if isinstance(msg, ApprovalRequested):
                        await client.answer(sid, msg.correlation_id, "proceed_once")

                async def cancel_on_text(msg: Any) -> None:
                    if isinstance(msg, TextStreamed):
                        await client.cancel(sid)

                async def nothing(msg: Any) -> None:
                    pass

                first = await turn("What does facts.txt say?", nothing)
                second = await turn("Write out.txt", answer)
                third = await turn("Think hard", cancel_on_text)
                await disconnected(server, 4)
                await client.end_session(sid)
    texts = ["".join(m.text for m in msgs if isinstance(m, TextStreamed)) for msgs in (first, second)]
    assert texts == ["The file says 42.", "Wrote out.txt."]
    assert [[c.status for c in m.calls] for m in second if isinstance(m, BatchSettled)] == [["success"]]
    assert [m.stop_reason for m in (first[-1], second[-1], third[-1])] == ["end_turn", "end_turn", "cancelled"]
    check_tool_round_trip(server.requests)
    assert (ws / "out.txt").read_text() == "approved\n"
    recording = (root / "data" / "sessions" / f"{sid}.jsonl").read_text()
    assert "TurnEnded" in recording and KEY not in recording
