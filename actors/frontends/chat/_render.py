"""What ``agentbus chat`` shows: session events in, terminal text out. No I/O.

``Renderer.on(event)`` returns the text to write for one event and keeps the little
state the screen needs: whether the cursor is mid-line, which tool call owns the
current line (a terminal rewrites it in place as the call's status changes), the
approvals waiting for an answer, whether a turn runs. With ``colour`` off the output is
plain text, one line per status change, fit for a pipe or a log.

Attaching to a session (``chat --resume``, ``/resume``, a second client) shows the
conversation so far: the events before the daemon's ``CaughtUp`` (``catching_up``) come
from the recording and are shown as history — each prompt, the text, every call with its
status and output, approvals with the answer they got; an approval still waiting then
is asked (``approval_prompt``) once the history is shown.

A stream that fails mid-way is retried and its text comes again from the start: text
on screen stays, so when a retry (``StreamRetried``) follows text of the failed attempt,
a line says that the text above is discarded, and the new attempt's text follows in
full.
"""

from __future__ import annotations

import json
import textwrap
from collections import deque
from typing import Any

import attrs

from actors.host.sessions import INTERRUPTED_TOOL_REASON
from actors.host.user_calls import shown_text
from bus import Envelope
from bus.json_values import thaw
from bus.messages import (
    ApprovalRequested,
    ApprovalSettled,
    BatchSettled,
    CompletedCall,
    ContextAdded,
    DaemonStopping,
    Message,
    ModelRetrying,
    ObserverLagged,
    PromptQueued,
    ProtocolError,
    ScheduleBatch,
    SessionClosed,
    SessionOpened,
    SessionSummary,
    StreamRetried,
    SubagentActivity,
    SubmitPrompt,
    SubscriptionEnded,
    TextStreamed,
    ThoughtStreamed,
    ToolCallRequested,
    ToolCallUpdated,
    ToolOutputStreamed,
    TurnEnded,
    TurnNotice,
    TurnStarted,
)

RESET = "\x1b[0m"
STYLES = {
    "dim": "\x1b[2m",
    "bold": "\x1b[1m",
    "red": "\x1b[31m",
    "green": "\x1b[32m",
    "yellow": "\x1b[33m",
    "blue": "\x1b[34m",
    "magenta": "\x1b[35m",
    "cyan": "\x1b[36m",
}
CLEAR_LINE = "\r\x1b[K"
ANSWERS = {
    "y": "proceed_once",
    "yes": "proceed_once",
    "1": "proceed_once",
    "a": "proceed_always",
    "always": "proceed_always",
    "2": "proceed_always",
    "n": "cancel",
    "no": "cancel",
    "3": "cancel",
}
APPROVAL_HINT = "[y]es once / [a]lways / [n]o"
ANSWER_WORDS = {"proceed_once": "yes, once", "proceed_always": "yes, always", "cancel": "no"}
"""What the chat writes after a single-key answer (the key itself is not echoed)."""
VIEW_KEY = "v"
"""Shows all of what an approval shows only in part."""
APPROVAL_LINES = 20
"""Lines of a diff or of new content an approval shows before ``v`` shows them all."""
EXCERPT = 30
"""Characters of discarded text quoted when a retry discards it."""
SYMBOLS = {"success": "✓", "error": "✗", "cancelled": "⊘", "executing": "⏺"}


@attrs.define
class _Call:
    call_id: str
    name: str
    args: Any = None
    status: str = ""
    started: float | None = None
    streamed: bool = False
    user: bool = False
    detail_shown: str = ""
    """The first line of its error as its status line showed it."""


@attrs.define
class Renderer:
    colour: bool = False
    me: str = ""
    """This client's address (its own prompts are not echoed, answers attributed)."""
    mid_line: bool = False
    line_owner: str | None = None
    """Call id whose status line is the current, unfinished line (colour mode)."""
    calls: dict[str, _Call] = attrs.field(factory=dict)
    pending: deque[ApprovalRequested] = attrs.field(factory=deque)
    busy: bool = False
    finished: set[str] = attrs.field(factory=set)
    """Calls whose terminal status was shown."""
    attempt_text: str = ""
    """The start of the text the current model attempt showed (a retry discards it)."""
    retry_note: ModelRetrying | None = None
    """A mid-stream retry the gateway announced, shown with the turn's ``StreamRetried``
    (which comes after the failed attempt's last text)."""
    width: int = 80
    """The terminal's width (a long command is wrapped to it)."""
    catching_up: bool = False
    """The session events coming are the conversation before we attached."""
    history: bool = False
    """The event being shown is history (``catching_up``)."""
    prompts_before: dict[str, str] = attrs.field(factory=dict)
    """Prompts seen in the history by id, shown when their turn starts (one sent
    while another turn ran waited for it)."""

    # -- styling -------------------------------------------------------------------------------------
    def style(self, text: str, *names: str) -> str:
        if not self.colour or not names:
            return text
        return "".join(STYLES[n] for n in names) + text + RESET

    def _line(self, text: str) -> str:
        """A whole line, after finishing whatever line is open."""
        return self._break() + text + "\n"

    def _break(self) -> str:
        out = "\n" if self.mid_line else ""
        self.mid_line = False
        self.line_owner = None
        return out

    def ensure_line_start(self) -> str:
        return self._break()

    # -- events ----------------------------------------------------------------------------------------
    def on(self, event: Any, now: float = 0.0) -> str:
        if isinstance(event, Envelope):
            self.history = self.catching_up
            try:
                return self.message(event.message, sender=event.sender, now=now)
            finally:
                self.history = False
        match event:
            case ObserverLagged():
                return self._line(self.style("(fell behind; caught up from the recording)", "dim"))
            case SubscriptionEnded():
                self.pending.clear()  # nobody can answer them through this subscription
                return self._line(self.style(f"(session {event.session_id[:8]} ended: {event.reason})", "yellow"))
            case DaemonStopping():
                return self._line(self.style(f"(the daemon is stopping: {event.reason})", "yellow"))
            case ProtocolError():
                return self._line(self.style(f"error: {event.message}", "red"))
            case _:
                return ""

    def message(self, msg: Message, *, sender: str = "", now: float = 0.0) -> str:
        match msg:
            case TurnStarted():
                self.busy = True
                self.attempt_text = ""
                if (typed := self.prompts_before.pop(msg.prompt_id, None)) is not None:
                    return self._line(self.style("> ", "bold", "blue") + typed)
                return ""
            case SubmitPrompt() if self.history:
                self.prompts_before[msg.prompt_id] = msg.display_text
                return ""
            case PromptQueued() | SessionClosed() if self.history:
                return ""
            case SubmitPrompt():
                if sender and sender != self.me and not sender.startswith("daemon:"):
                    return self._line(self.style(f"» {msg.display_text}", "magenta"))
                return ""
            case TextStreamed():
                if not msg.text:
                    return ""
                if len(self.attempt_text) < EXCERPT:
                    self.attempt_text += msg.text
                out = self._break() if self.line_owner is not None else ""
                self.mid_line = not msg.text.endswith("\n")
                return out + msg.text
            case ThoughtStreamed():
                subject = msg.subject or msg.description.split("\n", 1)[0]
                return self._line(self.style(f"✦ {subject}", "dim"))
            case ToolCallRequested():
                self.calls[msg.call_id] = _Call(msg.call_id, msg.name, thaw(msg.args))
                return ""
            case ScheduleBatch():
                self.attempt_text = ""
                for req in msg.calls:  # a user's own calls have no ToolCallRequested
                    if req.call_id not in self.calls:
                        self.calls[req.call_id] = _Call(req.call_id, req.name, thaw(req.args), user=req.client_initiated)
                return ""
            case ToolCallUpdated():
                return self._tool_update(msg, now)
            case BatchSettled():
                self.attempt_text = ""
                out = "".join(self.todos(thaw(c.result_display)) for c in msg.calls if c.status == "success")
                if self.history:  # a user's own calls: their output came only to the caller
                    out += "".join(self.tool_result(c) for c in msg.calls if (k := self.calls.get(c.call_id)) is not None and k.user)
                return out
            case ToolOutputStreamed():
                call = self.calls.get(msg.call_id)
                if call is not None:
                    call.streamed = True
                text = "".join(f"  │ {line}\n" for line in msg.text.rstrip("\n").split("\n")) if msg.text.strip() else ""
                return self._break() + self.style(text, "dim") if text else ""
            case ApprovalRequested():
                call = self.calls.setdefault(msg.call_id, _Call(msg.call_id, msg.name, thaw(msg.args)))
                call.status = "awaiting_approval"
                self.pending.append(msg)
                if self.history:  # asked once the history is shown, if it still waits
                    return self._line(self.style(f"? Allow {_title(msg)}{_args_summary(msg.name, thaw(msg.args))}?", "dim"))
                return self.approval_prompt() if len(self.pending) == 1 else ""
            case ApprovalSettled():
                waiting = next((p for p in self.pending if p.correlation_id == msg.correlation_id), None)
                if waiting is None or not msg.outcome:
                    return ""
                self.pending.remove(waiting)
                out = ""
                if self.history:
                    return self._line(self.style(f"  → {ANSWER_WORDS.get(msg.outcome, msg.outcome)}", "dim"))
                if msg.answered_by != self.me:
                    out = self._line(self.style(f"(answered by another client: {msg.outcome})", "dim"))
                if self.pending:
                    out += self.approval_prompt()
                return out
            case PromptQueued():
                return self._line(self.style(f"(queued, position {msg.position})", "dim"))
            case ModelRetrying():
                if msg.mid_stream:
                    self.retry_note = msg
                    return ""
                return self._line(self.style(f"(retrying in {msg.delay_s:g}s: {msg.reason})", "dim"))
            case StreamRetried():
                return self._stream_retried(msg)
            case TurnNotice():
                colour = "red" if msg.severity == "error" else "yellow"
                return self._line(self.style(f"⚠ {msg.message}", colour))
            case TurnEnded():
                self.busy = False
                self.pending.clear()
                self.attempt_text, self.retry_note = "", None
                out = self._break()
                if msg.stop_reason == "cancelled":
                    out += self.style("(cancelled)", "yellow") + "\n"
                elif msg.error is not None:
                    out += self.style(f"Error: {msg.error.message.splitlines()[0] if msg.error.message else msg.error.type}", "red") + "\n"
                elif msg.stop_reason != "end_turn":
                    out += self.style(f"(stopped: {msg.stop_reason})", "yellow") + "\n"
                return out
            case ContextAdded():
                # Our own is announced with the call's result (ChatApp._run_tool).
                if msg.requested_by == self.me:
                    return ""
                return self._line(self.style("(another client added a tool result to the conversation)", "dim"))
            case SessionClosed():
                self.pending.clear()
                return self._line(self.style(f"(session closed: {msg.reason})", "yellow"))
            case SessionOpened():
                return self._interrupted(msg, now)
            case SubagentActivity():
                return self.subagent(msg)
            case _:
                return ""

    def _interrupted(self, msg: SessionOpened, now: float) -> str:
        """The session's actors (re)started (``SessionOpened``): a turn, call or question
        left open before ended with the process that ran it (killed mid-turn), and
        nothing answers it any more."""
        out = "".join(
            self._tool_update(
                ToolCallUpdated(
                    session_id=msg.session_id, batch_id="", call_id=call.call_id, name=call.name,
                    status="error", detail=INTERRUPTED_TOOL_REASON,
                ),
                now,
            )
            for call in list(self.calls.values())
            if call.status and call.call_id not in self.finished
        )
        if self.busy:
            out += self._line(self.style("(interrupted: the process running this turn stopped)", "yellow"))
        self.busy = False
        self.pending.clear()
        self.attempt_text, self.retry_note = "", None
        return out

    def _stream_retried(self, msg: StreamRetried) -> str:
        note, self.retry_note = self.retry_note, None
        when = f" in {note.delay_s:g}s" if note is not None else ""
        shown, self.attempt_text = self.attempt_text.strip(), ""
        if shown:
            excerpt = shown.split("\n", 1)[0][:EXCERPT]
            excerpt += "…" if len(excerpt) < len(shown) else ""
            return self._line(
                self.style(f"↺ the stream failed ({msg.reason}): the text above from “{excerpt}” is discarded; retrying{when}", "yellow")
            )
        if note is not None:
            return self._line(self.style(f"(retrying{when}: {msg.reason})", "dim"))
        return ""  # a connection-layer retry: its ModelRetrying said it

    def subagent(self, msg: SubagentActivity) -> str:
        """A subagent's activity, indented under the call that started it (deeper
        agents further in)."""
        pad = "  " * (msg.depth + 1) + "↳ "
        who = f"[{msg.agent_name}]"
        match msg.kind:
            case "started":
                return self._line(self.style(f"{pad}{who} started", "cyan"))
            case "thought":
                return self._line(self.style(f"{pad}{who} ✦ {msg.text.splitlines()[0] if msg.text else ''}", "dim"))
            case "tool_call":
                return self._line(f"{pad}{who} {msg.tool_name}{_args_summary(msg.tool_name, thaw(msg.args))}")
            case "tool_update" if msg.status != "success":
                colour = "yellow" if msg.status == "cancelled" else "red"
                return self._line(self.style(f"{pad}{who} {msg.tool_name}: {msg.status}", colour))
            case "error":
                return self._line(self.style(f"{pad}{who} {msg.text}", "red"))
            case "finished":
                colour = "green" if msg.status == "GOAL" else "yellow"
                return self._line(self.style(f"{pad}{who} finished: {msg.status}", colour))
            case _:
                return ""

    def todos(self, display: Any) -> str:
        """``write_todos``' list as a block (its display is ``{"todos": [...]}``)."""
        if not isinstance(display, dict) or not isinstance(display.get("todos"), list):
            return ""
        out = self._break() + self.style("  Todos", "bold") + "\n"
        for item in display["todos"]:
            if not isinstance(item, dict):
                continue
            status = str(item.get("status", "pending"))
            mark = TODO_MARKS.get(status, "[ ]")
            line = f"  {mark} {item.get('description', '')}"
            colour = {"completed": "dim", "in_progress": "cyan", "blocked": "red", "cancelled": "dim"}.get(status, "")
            out += (self.style(line, colour) if colour else line) + "\n"
        return out

    def _tool_update(self, msg: ToolCallUpdated, now: float) -> str:
        call = self.calls.setdefault(msg.call_id, _Call(msg.call_id, msg.name))
        call.status = msg.status
        if msg.status in ("validating", "scheduled", "awaiting_approval"):
            return ""
        if msg.status == "executing":
            call.started = None if self.history else now  # how long it ran is not known
            line = f"{SYMBOLS['executing']} {self.describe(call)} " + self.style("running…", "dim")
            if self.colour:
                out = self._break() + line
                self.mid_line, self.line_owner = True, call.call_id
                return out
            return self._line(line)
        self.finished.add(call.call_id)
        stale = [p for p in self.pending if p.call_id == call.call_id]
        for p in stale:  # cancelled while it waited: nobody needs to answer any more
            self.pending.remove(p)
        symbol = SYMBOLS.get(msg.status, "•")
        colour = {"success": "green", "error": "red", "cancelled": "yellow"}.get(msg.status, "")
        took = f" ({_ms(now - call.started)})" if call.started is not None else ""
        detail = ""
        if msg.status != "success" and msg.detail:
            call.detail_shown = msg.detail.strip().splitlines()[0][:200]
            detail = ": " + call.detail_shown
        line = self.style(f"{symbol} {self.describe(call)} {msg.status}{took}", colour) + detail
        if self.colour and self.line_owner == call.call_id:
            self.mid_line, self.line_owner = False, None
            out = CLEAR_LINE + line + "\n"
        else:
            out = self._line(line)
        return out + (self.approval_prompt() if stale and self.pending and not self.history else "")

    def progress(self, now: float) -> str:
        """Colour mode: the running call's line again, with its elapsed time."""
        call = self.calls.get(self.line_owner) if self.line_owner else None
        if call is None or call.status != "executing" or call.started is None:
            return ""
        return CLEAR_LINE + f"{SYMBOLS['executing']} {self.describe(call)} " + self.style(f"running… {now - call.started:.0f}s", "dim")

    def describe(self, call: _Call) -> str:
        return self.style(call.name, "bold") + _args_summary(call.name, call.args)

    def approval_prompt(self, *, full: bool = True) -> str:
        """The first waiting approval: its question, what it approves (a diff, the new
        content, the whole command; ``full``: not when only the question is asked
        again), and the answers."""
        if not self.pending:
            return ""
        req = self.pending[0]
        details = thaw(req.details)
        details = details if isinstance(details, dict) else {}
        title = _title(req)
        summary = _args_summary(req.name, thaw(req.args))
        command = details.get("command")
        block = ""
        if isinstance(command, str) and command and (
            "\n" in command or len(f"? Allow {title} {command}?") > self.width or summary != f" {command}"
        ):
            summary = " this command"
            block = self._command_block(command, details.get("dirPath"))
        elif full:
            block = self._edit_block(details, limit=APPROVAL_LINES)
        question = self._line(self.style("? ", "yellow", "bold") + f"Allow {title}{summary}?")
        return question + (block if full or command else "") + self.style(f"  {APPROVAL_HINT}: ", "yellow")

    def approval_view(self) -> str:
        """All that the first waiting approval carries of its diff or content (``v``),
        then its answers again."""
        if not self.pending:
            return ""
        details = thaw(self.pending[0].details)
        block = self._edit_block(details if isinstance(details, dict) else {}, limit=None)
        return self._break() + block + self.style(f"  {APPROVAL_HINT}: ", "yellow")

    def _command_block(self, command: str, dir_path: Any) -> str:
        room = max(20, self.width - 4)
        lines = [
            piece
            for line in command.split("\n")
            for piece in (textwrap.wrap(line, room, break_on_hyphens=False, replace_whitespace=False) or [""])
        ]
        out = "".join(self.style(f"    {piece}", "bold") + "\n" for piece in lines)
        if isinstance(dir_path, str) and dir_path:
            out += self.style(f"    (in {dir_path})", "dim") + "\n"
        return out

    def _edit_block(self, details: dict[str, Any], *, limit: int | None) -> str:
        """An edit's diff (hunks, coloured), or a new file's content; ``limit`` lines,
        then how many more ``v`` shows."""
        diff, content = details.get("fileDiff"), details.get("newContent")
        rows: list[str]
        omitted_key = "fileDiffOmittedLines"
        if details.get("isNewFile") and isinstance(content, str):
            rows = [self.style("  │ ", "dim") + line for line in content.rstrip("\n").split("\n")]
            omitted_key = "newContentOmittedLines"
        elif isinstance(diff, str) and diff:
            rows = [self._diff_row(line) for line in _hunk_lines(diff)]
        elif isinstance(content, str):  # no diff (the file is too large): the content
            rows = [self.style("  │ ", "dim") + line for line in content.rstrip("\n").split("\n")]
            omitted_key = "newContentOmittedLines"
        else:
            rows = []
        out = "".join(f"{row}\n" for row in (rows if limit is None else rows[:limit]))
        if limit is not None and len(rows) > limit:
            more = len(rows) - limit
            out += self.style(f"  … {more} more line{'s' if more != 1 else ''} (press {VIEW_KEY} to view all)", "dim") + "\n"
        else:
            unsent = details.get(omitted_key)
            if isinstance(unsent, int) and unsent > 0:
                out += self.style(f"  … {unsent} more line{'s' if unsent != 1 else ''} not shown (too long)", "dim") + "\n"
        note = details.get("note")
        if isinstance(note, str) and note:
            out += self.style(f"  ({note})", "dim") + "\n"
        return out

    def _diff_row(self, line: str) -> str:
        colour = {"+": "green", "-": "red", "@": "cyan"}.get(line[:1], "")
        return "  " + (self.style(line, colour) if colour else line)

    def tool_result(self, call: CompletedCall) -> str:
        """A user-initiated call's result (``ToolCallResult``): its output unless it was
        streamed live, and its status when there was no status line for it."""
        known = self.calls.get(call.call_id)
        out = ""
        if known is None or not known.streamed:
            text = shown_text(call)
            if known is not None and known.detail_shown:
                first, _, rest = text.strip().partition("\n")
                if first == known.detail_shown:  # its status line showed it
                    text = rest
            if text:
                colour = "red" if call.status == "error" else ""
                out += self._break() + "".join(
                    self.style(f"  {line}", colour) + "\n" if colour else f"  {line}\n" for line in text.rstrip("\n").split("\n")
                )
        if known is None:
            symbol = SYMBOLS.get(call.status, "•")
            out += self._line(f"{symbol} {call.name} {call.status}")
        return out

    def sessions_table(self, sessions: list[SessionSummary], current: str) -> str:
        if not sessions:
            return self._line("No sessions for this workspace.")
        rows = [self._break()]
        number = 0
        for s in sessions:
            mark = "*" if s.session_id == current else " "
            state = s.state + (", busy" if s.busy else "")
            if s.title:  # numbered as --list-sessions numbers them (those with a prompt)
                number += 1
                label = f"{number:3}."
            else:
                label = "   -"
            rows.append(f"{mark}{label} {s.title or '(no prompt yet)'}  {self.style(f'[{s.session_id}] {state}', 'dim')}\n")
        return "".join(rows)


TODO_MARKS = {"completed": "[x]", "in_progress": "[>]", "pending": "[ ]", "cancelled": "[-]", "blocked": "[!]"}


def parse_answer(text: str) -> str | None:
    return ANSWERS.get(text.strip().lower())


def _hunk_lines(diff: str) -> list[str]:
    """A unified diff without its file headers (``Index:``, ``===``, ``---``, ``+++``)."""
    lines = diff.rstrip("\n").split("\n")
    start = next((i for i, line in enumerate(lines) if line.startswith("@@")), len(lines))
    return lines[start:]


def _title(req: ApprovalRequested) -> str:
    details = thaw(req.details)
    return str((details.get("title") if isinstance(details, dict) else None) or req.name)


def _args_summary(name: str, args: Any) -> str:
    if not isinstance(args, dict) or not args:
        return ""
    for key in ("command", "file_path", "dir_path", "pattern", "path", "query", "url", "prompt"):
        value = args.get(key)
        if isinstance(value, str) and value:
            short = value if len(value) <= 80 else value[:77] + "..."
            return f" {short}"
    text = json.dumps(args, ensure_ascii=False)
    return " " + (text if len(text) <= 80 else text[:77] + "...")


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.1f} s"
