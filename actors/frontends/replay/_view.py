"""How a replay prints the session: as a person at a terminal would follow it
(``human``), or exactly as the headless client printed it (``text``, ``json``,
``stream-json``: Gemini CLI's formats, one result per turn)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, TextIO

from actors.frontends.headless import HeadlessPrinter
from bus.json_values import thaw
from bus.messages import (
    ApprovalRequested,
    ApprovalSettled,
    CancelTurn,
    Message,
    ModelSelected,
    PromptQueued,
    SessionOpened,
    StreamRetried,
    SubmitPrompt,
    TextStreamed,
    ThoughtStreamed,
    ToolCallRequested,
    ToolCallUpdated,
    TurnEnded,
    TurnNotice,
)


class View(Protocol):
    def segment(self, number: int, meta: Any) -> None: ...
    def on(self, msg: Message) -> None: ...
    def close(self) -> int: ...


def _brief(args: Any, limit: int = 70) -> str:
    args = thaw(args) or {}
    for key in ("command", "file_path", "dir_path", "pattern", "url", "prompt", "query"):
        if isinstance(args, dict) and key in args:
            value = str(args[key]).replace("\n", " ")
            return value if len(value) <= limit else value[: limit - 3] + "..."
    return ""


class HumanView:
    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.at_line_start = True
        self.args: dict[str, Any] = {}
        self.names: dict[str, str] = {}
        self.cancel_shown = False

    def write(self, text: str) -> None:
        if text:
            self.out.write(text)
            self.at_line_start = text.endswith("\n")

    def line(self, text: str) -> None:
        if not self.at_line_start:
            self.write("\n")
        self.write(text + "\n")

    def segment(self, number: int, meta: Any) -> None:
        started = meta.get("started", "") if hasattr(meta, "get") else ""
        label = "resumed" if number > 1 else "session"
        self.line(f"── {label} (process {number}{', ' + started if started else ''}) ──")

    def on(self, msg: Message) -> None:
        match msg:
            case SessionOpened():
                self.line(f"session {msg.session_id}: model {msg.model}, approval mode {msg.approval_mode}")
            case SubmitPrompt():
                text = msg.display_text or "".join(str(p.get("text", "")) for p in msg.parts if isinstance(p, dict))
                self.line(f"> {text}")
            case PromptQueued():
                self.line(f"  (prompt queued, position {msg.position})")
            case ModelSelected():
                pass
            case ThoughtStreamed():
                self.line(f"  thinking: {msg.subject or msg.description[:60]}")
            case TextStreamed():
                self.write(msg.text)
            case StreamRetried():
                self.line(f"  (stream retried, attempt {msg.attempt}: {msg.reason})")
            case ToolCallRequested():
                self.args[msg.call_id] = _brief(msg.args)
            case ToolCallUpdated(status="executing"):
                self.line(f"  > {msg.name} {self.args.get(msg.call_id, '')}".rstrip())
            case ToolCallUpdated(status="success" | "error" | "cancelled"):
                detail = f": {msg.detail}" if msg.detail and msg.status != "success" else ""
                self.line(f"    {msg.status} {msg.name}{detail}")
            case ApprovalRequested():
                self.names[msg.correlation_id] = msg.name
                self.line(f"  ? {msg.name} {_brief(msg.args)} — approve?".replace("  —", " —"))
            case ApprovalSettled() if msg.outcome:
                self.line(f"    {msg.answered_by}: {msg.outcome}")
            case CancelTurn() if not self.cancel_shown:
                self.cancel_shown = True  # once: the session forwards it to the turn
                self.line(f"  ^C cancel ({msg.reason}) by {msg.requested_by}")
            case TurnNotice():
                self.line(f"  [{msg.severity.upper()}] {msg.message}")
            case TurnEnded():
                self.cancel_shown = False
                error = f": {msg.error.message.splitlines()[0]}" if msg.error is not None else ""
                self.line(f"[turn ended: {msg.stop_reason}{error}]")
            case _:
                pass

    def close(self) -> int:
        if not self.at_line_start:
            self.write("\n")
        self.out.flush()
        return 0


class HeadlessView:
    """Gemini CLI's headless output, turn by turn (a new printer per prompt)."""

    def __init__(self, fmt: str, out: TextIO, err: TextIO, clock_ms: Callable[[], float]) -> None:
        self.fmt = fmt
        self.out = out
        self.err = err
        self.clock_ms = clock_ms
        self.printer: HeadlessPrinter | None = None
        self.session_id = ""
        self.model = ""
        self.exit_code = 0

    def segment(self, number: int, meta: Any) -> None:
        self.session_id = str(meta.get("session_id", "")) if hasattr(meta, "get") else ""
        self.model = str(meta.get("model", "")) if hasattr(meta, "get") else ""

    def on(self, msg: Message) -> None:
        match msg:
            case SessionOpened():
                self.session_id, self.model = msg.session_id, msg.model
            case SubmitPrompt():
                self.printer = HeadlessPrinter(
                    self.fmt,
                    self.out,
                    self.err,
                    session_id=self.session_id or msg.session_id,
                    requested_model=self.model,
                    clock_ms=self.clock_ms,
                )
                self.printer.start()
                self.printer.user_message(msg.display_text)
            case TurnEnded() if self.printer is not None:
                self.printer.on(msg)
                self.exit_code = self.printer.finish(msg) if msg.stop_reason != "cancelled" else 130
                self.printer = None
            case _:
                if self.printer is not None:
                    self.printer.on(msg)

    def close(self) -> int:
        self.out.flush()
        return self.exit_code
