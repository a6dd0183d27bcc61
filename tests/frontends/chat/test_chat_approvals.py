"""An approval in the chat shows what it approves, as a person sees it in a terminal
(issue 21): an edit's diff (coloured), a new file's content cut after some lines with
``v`` to see them all, a long command whole and wrapped to the terminal's width; and a
single key answers, without Enter. Without a terminal, answers are lines as before."""

from __future__ import annotations

import fcntl
import struct
import termios
from pathlib import Path

from actors.frontends.chat._render import Renderer
from actors.recording import load_recording
from bus.messages import ApprovalRequested, SubmitPrompt
from tests.frontends.daemon._helpers import call_response, write_responses
from tests.frontends.daemon._procs import agentbus

from .test_chat_terminal import chat_on_fake

WIDTH = 60
LONG_COMMAND = "mkdir -p " + " ".join(f"build/part{i}" for i in range(20)) + " build/END-OF-COMMAND"


def test_approvals_show_the_diff_the_content_and_the_whole_command_and_take_one_key(home: Path) -> None:
    (home / "ws" / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    note = "".join(f"note line {i}\n" for i in range(1, 41))
    fake = write_responses(
        home / "chat.responses",
        call_response(
            "replace",
            {"file_path": "calc.py", "instruction": "add", "old_string": "a - b", "new_string": "a + b"},
        ),
        call_response("write_file", {"file_path": "notes.txt", "content": note}),
        call_response("run_shell_command", {"command": LONG_COMMAND}),
    )
    term = chat_on_fake(home, fake)
    fcntl.ioctl(term.fd, termios.TIOCSWINSZ, struct.pack("HHHH", 24, WIDTH, 0, 0))
    try:
        term.expect("> ")
        term.type("fix calc.py\n")
        term.expect("Allow Edit calc.py?")
        term.expect("@@ -1,2 +1,2 @@")
        term.expect("-    return a - b")
        term.expect("+    return a + b")
        term.expect("[y]es once / [a]lways / [n]o: ")
        assert "\x1b[32m+    return a + b" in term.raw.decode()  # green, as added lines are
        term.wait_for_key_mode()
        term.type("y")  # no Enter
        term.expect("yes, once")
        term.expect("✓ replace calc.py success")
        term.expect("Allow WriteFile notes.txt?")
        screen = term.expect("… 20 more lines (press v to view all)")
        assert "note line 20" in screen and "note line 21" not in screen
        term.wait_for_key_mode()
        term.type("v")
        screen = term.expect("note line 40")
        assert screen.count("note line 21") == 1
        term.expect("[y]es once / [a]lways / [n]o: ")
        term.wait_for_key_mode()
        term.type("a")
        term.expect("yes, always")
        term.expect("✓ write_file notes.txt success")
        term.expect("Allow Shell this command?")
        screen = term.expect("[y]es once / [a]lways / [n]o: ")
        block = screen[screen.rindex("Allow Shell this command?") :].split("\n")[1:-1]
        assert all(len(row) <= WIDTH for row in block), block
        assert " ".join(row.strip() for row in block) == LONG_COMMAND  # whole, every word
        term.wait_for_key_mode()
        term.type("n")
        term.expect("no")
        term.expect("⊘ run_shell_command")
        term.expect("> ")
        term.type("o\n")  # "no" typed on out of habit: not a prompt
        term.type("/quit\n")
        assert term.wait_exit() == 0
    finally:
        term.close()
        agentbus(home, "daemon", "stop")
    [recording] = (home / "data" / "sessions").glob("*.jsonl")
    prompts = [e.message.display_text for e in load_recording(recording).envelopes if isinstance(e.message, SubmitPrompt)]
    assert prompts == ["fix calc.py"]
    assert (home / "ws" / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"
    assert (home / "ws" / "notes.txt").read_text() == note


def test_plain_text_shows_a_cut_content_and_v_all_of_it() -> None:
    """Without colour (a pipe, a log) the same blocks, in plain text; what the message
    itself had to leave out is said."""
    note = "".join(f"note line {i}\n" for i in range(1, 41))
    render = Renderer(colour=False)
    details = {"type": "edit", "title": "WriteFile", "isNewFile": True, "newContent": note, "newContentOmittedLines": 7}
    render.message(
        ApprovalRequested(
            session_id="s", batch_id="b", call_id="c", correlation_id="q", name="write_file",
            args={"file_path": "notes.txt", "content": note}, details=details,
        )
    )
    asked = render.approval_prompt()
    assert asked.startswith("? Allow WriteFile notes.txt?\n  │ note line 1\n")
    assert "note line 20\n  … 20 more lines (press v to view all)\n  [y]es once" in asked
    assert "note line 21" not in asked and "\x1b[" not in asked
    seen = render.approval_view()
    assert "note line 40\n  … 7 more lines not shown (too long)\n" in seen
    assert render.approval_prompt(full=False) == "? Allow WriteFile notes.txt?\n  [y]es once / [a]lways / [n]o: "
