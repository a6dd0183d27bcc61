"""``agentbus chat`` as a person uses it, through a pseudo-terminal: type a prompt,
approve, Ctrl-C a running tool, ``!ls``, ``/tool read_file``, Ctrl-C twice to leave.
And plain output when piped."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import sys
import time
from pathlib import Path

from tests.frontends.daemon._helpers import call_response, text_response, write_responses
from tests.frontends.daemon._procs import agentbus, env_for, piped_chat

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
EXPECT_TIMEOUT_S = 15


class Terminal:
    """A child process on a pty, and what its screen shows (ANSI stripped)."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path) -> None:
        pid, fd = pty.fork()
        if pid == 0:  # pragma: no cover - the child
            os.chdir(cwd)
            os.execve(argv[0], argv, env)
        self.pid, self.fd = pid, fd
        self.raw = b""
        self.seen = 0
        self.exit_code: int | None = None

    @property
    def screen(self) -> str:
        return ANSI.sub("", self.raw.decode("utf-8", "replace")).replace("\r", "")

    def expect(self, text: str) -> str:
        """Wait (bounded) until ``text`` shows after what earlier expects consumed."""
        deadline = time.monotonic() + EXPECT_TIMEOUT_S
        while True:
            at = self.screen.find(text, self.seen)
            if at >= 0:
                self.seen = at + len(text)
                return self.screen
            left = deadline - time.monotonic()
            assert left > 0, f"{text!r} never showed; the screen:\n{self.screen}"
            ready, _, _ = select.select([self.fd], [], [], left)
            if ready:
                try:
                    data = os.read(self.fd, 65536)
                except OSError:
                    data = b""
                assert data, f"the chat exited before {text!r} showed:\n{self.screen}"
                self.raw += data

    def type(self, text: str) -> None:
        os.write(self.fd, text.encode())

    def wait_for_key_mode(self) -> None:
        """Wait (bounded) until the chat reads single keys: the terminal without echo and
        line buffering (a key typed before is echoed and waits in the line, as it would
        for a person who types before the question is asked)."""
        import termios

        deadline = time.monotonic() + EXPECT_TIMEOUT_S
        while termios.tcgetattr(self.fd)[3] & (termios.ECHO | termios.ICANON):
            left = deadline - time.monotonic()
            assert left > 0, f"the chat never waited for a key; the screen:\n{self.screen}"
            ready, _, _ = select.select([self.fd], [], [], min(left, 0.01))
            if ready:
                try:
                    self.raw += os.read(self.fd, 65536)
                except OSError:
                    pass

    def close(self) -> None:
        if self.exit_code is None:
            os.kill(self.pid, 9)
            os.waitpid(self.pid, 0)
        os.close(self.fd)

    def wait_exit(self) -> int:
        deadline = time.monotonic() + EXPECT_TIMEOUT_S
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.fd], [], [], 0.2)
            if ready:
                try:
                    data = os.read(self.fd, 65536)
                except OSError:
                    data = b""
                self.raw += data
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.exit_code = os.waitstatus_to_exitcode(status)
                return self.exit_code
        raise AssertionError(f"the chat did not exit:\n{self.screen}")


def chat_on_fake(home: Path, fake: Path) -> Terminal:
    """``agentbus chat`` in a terminal, in ``home``'s workspace, its model ``fake``."""
    env = {**env_for(home), "TERM": "xterm-256color"}
    argv = [sys.executable, "-m", "actors.frontends", "chat", "--fake-responses", str(fake), "-m", "gemini-2.5-flash"]
    return Terminal(argv, env, home / "ws")


def test_chat_in_a_terminal_streams_asks_cancels_and_runs_user_tools(home: Path) -> None:
    fake = write_responses(
        home / "chat.responses",
        call_response("write_file", {"file_path": "notes.txt", "content": "remember the milk\n"}),
        text_response("Saved ", "notes.txt."),
        call_response("run_shell_command", {"command": "sleep 30"}),
    )
    term = chat_on_fake(home, fake)
    try:
        term.expect("> ")
        term.type("Write my note to notes.txt\n")
        term.expect("Allow WriteFile notes.txt?")
        term.expect("[y]es once / [a]lways / [n]o")
        term.type("y\n")
        term.expect("✓ write_file notes.txt success")
        term.expect("Saved notes.txt.")
        term.expect("> ")
        term.type("run something\n")
        term.expect("Allow Shell sleep 30?")
        term.type("y\n")
        term.expect("run_shell_command sleep 30 running")
        term.type("\x03")  # Ctrl-C
        term.expect("cancelling")
        term.expect("⊘ run_shell_command sleep 30 cancelled")
        term.expect("(cancelled)")
        term.expect("> ")
        term.type("!ls\n")
        term.expect("│ notes.txt")
        term.expect("✓ run_shell_command ls success")
        term.type('/tool read_file {"file_path": "notes.txt"}\n')
        term.expect("remember the milk")
        term.type("/tool read_file {oops\n")
        term.expect("error: the arguments are not valid JSON")
        term.type("/tool no_such_tool {}\n")
        term.expect("✗ no_such_tool error")
        term.type("/sessions\n")
        term.expect("1. Write my note to notes.txt")
        term.type("\x03")
        term.expect("press Ctrl-C again to exit")
        term.type("\x03")
        term.expect("exiting")
        assert term.wait_exit() == 130
        assert "\x1b[" in term.raw.decode("utf-8", "replace")  # colour on a terminal
        assert (home / "ws" / "notes.txt").read_text() == "remember the milk\n"
    finally:
        term.close()
        agentbus(home, "daemon", "stop")


def test_chat_piped_prints_plain_text_and_exits_when_input_ends(home: Path) -> None:
    fake = write_responses(home / "hi.responses", text_response("Hello ", "from the daemon."))
    try:
        done = piped_chat(home, "--fake-responses", str(fake), "-m", "gemini-2.5-flash")
        assert done.returncode == 0, done.stderr
        assert "Hello from the daemon." in done.stdout
        assert "\x1b[" not in done.stdout
        assert "> " not in done.stdout
    finally:
        agentbus(home, "daemon", "stop")


def test_tab_completion_and_a_shared_result_as_a_person_types_them(home: Path) -> None:
    """Tab completes a tool name, a path in a shell command and an ``@path``;
    ``!!command`` adds its output to the conversation: the next model request carries
    it once, while a plain ``!command``'s output never reaches the model."""
    from actors.recording import load_recording
    from bus.json_values import thaw
    from bus.messages import GenerateRequest

    (home / "ws" / "notes.txt").write_text("remember the milk\n")
    fake = write_responses(home / "c.responses", text_response("Milk, noted."), text_response("Still milk."))
    term = chat_on_fake(home, fake)
    try:
        term.expect("> ")
        term.type("/tool read_f\t")
        term.expect("read_file ")  # readline completed the name (and the space)
        term.type('{"file_path": "notes.txt"}\n')
        term.expect("remember the milk")
        term.type("!echo private-output no\t")
        term.expect("notes.txt ")
        term.type("\n")
        term.expect("private-output notes.txt")
        term.expect("✓ run_shell_command")
        term.type("!!wc -c notes.txt\n")
        term.expect("↳ added to the conversation: your next prompt carries it")
        term.type("what did I write in @no\t")
        term.expect("@notes.txt ")
        term.type("?\n")
        term.expect("Milk, noted.")
        term.expect("> ")
        term.type("and now?\n")
        term.expect("Still milk.")
        term.type("/quit\n")
        assert term.wait_exit() == 0
    finally:
        term.close()
        agentbus(home, "daemon", "stop")
    [recording] = (home / "data" / "sessions").glob("*.jsonl")
    requests = [
        json.dumps(thaw(e.message.contents))
        for e in load_recording(recording).envelopes
        if isinstance(e.message, GenerateRequest) and e.message.role == "main"
    ]
    assert len(requests) == 2
    shared = "I ran the following shell command:\\n```sh\\nwc -c notes.txt\\n```"
    assert [r.count(shared) for r in requests] == [1, 1]  # in the history from then on, once
    assert requests[0].index(shared) < requests[0].index("what did I write in")
    assert "18 notes.txt" in requests[0]
    assert not any("private-output" in r for r in requests)
