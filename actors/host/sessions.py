"""Sessions on disk: listing, resolving ``--resume``, deleting, rebuilding a history.

Gemini CLI's semantics (reference §6.2, ``cli/src/utils/sessionUtils.ts`` and
``sessions.ts``): the sessions of the current project (recordings whose meta line names
this workspace) sorted by start time, numbered from 1; ``latest`` is the newest; an
identifier matches a full session id first, then an index. A session with nothing
resumable (no real prompt, no model answer) is not listed.

The resumed history is the recording replayed into the session's state the way the
session actor builds it: the last ``OpenSession.history``, then every
``TurnEnded.history_added`` (``history_reset`` honoured) and ``ContextAdded.content``, in
order. A turn that never ended (the process was killed) contributes what had
happened: its prompt, each completed model answer, each settled batch of function
responses. Calls left without a response get a cancelled response, so every call has
exactly one; a history that ends with function responses gets Gemini CLI's closing
model turn
``[The previous response was interrupted before it completed.]``. The old session
context turn is dropped (the new process prepends a fresh one), and so are user turns
Gemini CLI ignores on resume (empty, or starting with ``/``, ``?``,
``<session_context>``, ``<hook_context>``).
"""

from __future__ import annotations

import datetime
import os
import re
import sys
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, TextIO

import attrs

from actors.common import js_parse_int
from actors.recording import (
    Recording,
    RecordingError,
    TornLine,
    default_data_dir,
    delete_recording,
    iter_recordings,
    json_object,
    last_stamp,
    line_type,
    lines_forward,
    load_recording,
    recording_path,
    session_in_use,
    sessions_dir,
)
from actors.scheduler import cancelled_response_parts
from actors.turn import (
    INTERRUPTED_RESPONSE_PLACEHOLDER,
    ModelTurnBuilder,
    is_function_response,
    user_content,
)
from bus.json_values import thaw
from bus.messages import (
    BatchSettled,
    ContextAdded,
    GenerateRequest,
    GenerationCancelled,
    ModelChunk,
    ModelFailed,
    ModelFinished,
    ModelRetrying,
    OpenSession,
    ScheduleBatch,
    StartTurn,
    StreamRetried,
    ToolCallRequested,
    TurnEnded,
)
from bus.session_ids import SESSION_ID_RE

RESUME_LATEST = "latest"
INTERRUPTED_TOOL_REASON = "The session was interrupted before the tool finished."
NO_SESSIONS = "No previous sessions found for this project."


class SessionError(Exception):
    """``--resume``/``--delete-session`` could not pick a session (Gemini CLI's codes)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@attrs.frozen(kw_only=True)
class SessionInfo:
    id: str
    path: Path
    started: str
    last_updated: str
    first_user_message: str
    index: int = 0
    workspace: str = ""

    @property
    def display_name(self) -> str:
        name = self.first_user_message
        return name if len(name) <= 100 else name[:97] + "..."


# -- text helpers (Gemini CLI's) -------------------------------------------------------------
def clean_message(text: str) -> str:
    """Newlines and runs of whitespace become one space; non-printable characters go."""
    text = re.sub(r"\n+", " ", text)
    text = re.sub(r"\s+", " ", text)
    text = re.sub(r"[^\x20-\x7E]+", "", text)
    return text.strip()


def is_ignored_user_text(trimmed: str) -> bool:
    return (
        not trimmed
        or trimmed.startswith("/")
        or trimmed.startswith("?")
        or trimmed.startswith("<session_context>")
        or trimmed.startswith("<hook_context>")
    )


def _parse_time(ts: str) -> datetime.datetime:
    try:
        return datetime.datetime.fromisoformat(ts.replace("Z", "+00:00"))
    except ValueError:
        return datetime.datetime.fromtimestamp(0, datetime.UTC)


def format_relative_time(timestamp: str, now: datetime.datetime | None = None) -> str:
    """``formatRelativeTime(ts, 'long')``: "Just now", "5 minutes ago", "1 day ago"."""
    now = now or datetime.datetime.now(datetime.UTC)
    seconds = int((now - _parse_time(timestamp)).total_seconds() // 1)
    minutes, hours = seconds // 60, seconds // 3600
    days = hours // 24
    if days > 0:
        return f"{days} day{'' if days == 1 else 's'} ago"
    if hours > 0:
        return f"{hours} hour{'' if hours == 1 else 's'} ago"
    if minutes > 0:
        return f"{minutes} minute{'' if minutes == 1 else 's'} ago"
    return "Just now"


def _parts_text(parts: Iterable[Any]) -> str:
    return "".join(str(p.get("text") or "") for p in parts if isinstance(p, dict) and "text" in p)


# -- listing -----------------------------------------------------------------------------------
_LISTED_TYPES = frozenset({"OpenSession", "SubmitPrompt", "TurnEnded"})
"""The messages a listing reads; the others it skips by the type their line ends with."""


def scan_session(path: Path) -> SessionInfo | None:
    """A light read of one recording for listing; ``None`` when it is unreadable, has
    no meta or messages, or nothing resumable.

    Reads from the start only until it knows what a listing shows (the first meta
    line, the first real prompt, that something is resumable), decoding no message
    but those, and the last stamp from the end: a session's first lines and last
    line, however long it is."""
    try:
        with path.open("rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            found = _scan_head(fh, path.stem)
            if found is None:
                return None
            sid, started, workspace, shown = found
            last = last_stamp(fh, size)
    except OSError:
        return None
    return SessionInfo(
        id=sid,
        path=path,
        started=started,
        last_updated=last or started,
        first_user_message=clean_message(shown) if shown is not None else "Empty conversation",
        workspace=workspace,
    )


def _scan_head(fh: Any, sid: str) -> tuple[str, str, str, str | None] | None:
    """(session id, started, workspace, first user message) from the recording's
    first lines, or ``None`` when the whole of it shows nothing resumable."""
    started: str | None = None
    workspace: str | None = None
    first_user: str | None = None
    fallback_user: str | None = None
    resumable = False
    for line in lines_forward(fh):
        if started is not None and workspace is not None and resumable and first_user is not None:
            break
        kind = line_type(line)
        if kind is not None and kind not in _LISTED_TYPES:
            if started is None:  # a recording without a meta line starts with its first stamp
                data = json_object(line)
                wall = data.get("wall") if data is not None else None
                started = wall if isinstance(wall, str) else None
            continue
        data = json_object(line) if line.strip() else None
        if data is None:
            continue
        if data.get("kind") == "meta":
            if started is None and isinstance(data.get("started"), str):
                started = data["started"]
            if workspace is None and isinstance(data.get("workspace"), str):
                workspace = data["workspace"]
            if isinstance(data.get("session_id"), str):
                sid = data["session_id"]
            continue
        wall = data.get("wall")
        if started is None and isinstance(wall, str):
            started = wall
        msg = data.get("msg")
        if not isinstance(msg, dict):
            continue
        kind = msg.get("type")
        if kind == "OpenSession" and workspace is None and isinstance(msg.get("workspace"), str):
            workspace = msg["workspace"]
        elif kind == "SubmitPrompt":
            text = str(msg.get("display_text") or _parts_text(msg.get("parts") or ()))
            if fallback_user is None:
                fallback_user = text
            if not is_ignored_user_text(text.strip()):
                resumable = True
                if first_user is None:
                    first_user = text
        elif kind == "TurnEnded" and msg.get("history_added"):
            resumable = True
    if started is None or workspace is None or not resumable:
        return None
    return sid, started, workspace, first_user if first_user is not None else fallback_user


def list_sessions(data_dir: Path, workspace: Path) -> list[SessionInfo]:
    """This project's sessions, oldest first, with their 1-based index."""
    found: dict[str, SessionInfo] = {}
    for path in iter_recordings(data_dir):
        info = scan_session(path)
        if info is None or info.workspace != str(workspace):
            continue
        found[info.id] = info
    ordered = sorted(found.values(), key=lambda s: (_parse_time(s.started), s.id))
    return [attrs.evolve(s, index=i + 1) for i, s in enumerate(ordered)]


def session_exists(data_dir: Path, session_id: str) -> bool:
    return recording_path(data_dir, session_id).exists()


def find_session(identifier: str, sessions: Sequence[SessionInfo], data_dir: Path) -> SessionInfo:
    """By full id first, then by index (digits only); raises ``SessionError``."""
    ident = identifier.strip()
    if not sessions:
        raise SessionError("NO_SESSIONS_FOUND", NO_SESSIONS)
    for s in sessions:
        if s.id == ident:
            return s
    if ident.isdigit() and str(int(ident)) == ident and 0 < int(ident) <= len(sessions):
        return sessions[int(ident) - 1]
    raise SessionError(
        "INVALID_SESSION_IDENTIFIER",
        f'Invalid session identifier "{ident}".\n  Searched for sessions in {sessions_dir(data_dir)}.\n'
        "  Use --list-sessions to see available sessions, then use --resume {number}, "
        "--resume {uuid}, or --resume latest.",
    )


def resolve_resume(arg: str, data_dir: Path, workspace: Path) -> SessionInfo:
    """The session ``--resume ARG`` names; raises ``SessionError``."""
    sessions = list_sessions(data_dir, workspace)
    if arg.strip() == RESUME_LATEST:
        if not sessions:
            raise SessionError("NO_SESSIONS_FOUND", NO_SESSIONS)
        return sessions[-1]
    return find_session(arg, sessions, data_dir)


# -- the commands ---------------------------------------------------------------------------------
def list_command(data_dir: Path, workspace: Path, out: TextIO) -> int:
    """``--list-sessions``: Gemini CLI's text, on stdout; exit 0."""
    sessions = list_sessions(data_dir, workspace)
    if not sessions:
        out.write(NO_SESSIONS)
        return 0
    out.write(f"\nAvailable sessions for this project ({len(sessions)}):\n")
    for s in sessions:
        out.write(f"  {s.index}. {s.display_name} ({format_relative_time(s.last_updated)}) [{s.id}]\n")
    return 0


def delete_command(arg: str, data_dir: Path, workspace: Path, out: TextIO, err: TextIO) -> int:
    """``--delete-session``: by id, else ``parseInt`` index, with Gemini CLI's texts.
    Gemini CLI exits 0 even when nothing was deleted; here a session that is not there
    exits 42 (its code for a bad ``--resume``) and a failed deletion 1."""
    from actors.host.errors import FatalInputError

    sessions = list_sessions(data_dir, workspace)
    if not sessions:
        err.write("No sessions found for this project.")
        return FatalInputError.exit_code
    chosen = next((s for s in sessions if s.id == arg), None)
    if chosen is None:
        index = js_parse_int(arg)
        if index is None or index < 1 or index > len(sessions):
            err.write(f'Invalid session identifier "{arg}". Use --list-sessions to see available sessions.')
            return FatalInputError.exit_code
        chosen = sessions[index - 1]
    try:
        in_use = delete_recording(chosen.path)
    except OSError as exc:
        err.write(f"Failed to delete session: {exc.strerror or exc}")
        return 1
    if in_use:
        err.write(f"Failed to delete session: {in_use}")
        return 1
    out.write(
        f"Deleted session {chosen.index}: {chosen.first_user_message} ({format_relative_time(chosen.last_updated)})"
    )
    return 0


def data_dir_of(args: Any) -> Path:
    """``--data-dir``, else ``AGENTBUS_DATA_DIR``/XDG (see ``actors.recording``)."""
    explicit = getattr(args, "data_dir", None)
    return Path(explicit) if explicit else default_data_dir()


def session_for_run(args: Any, workspace: Path, err: TextIO | None = None) -> tuple[str, tuple[Any, ...]]:
    """The session id of a headless run and the history it continues (``()`` for a new
    session), from ``--session-id`` / ``--resume``. Raises ``FatalInputError`` (42)."""
    from actors.host.errors import FatalInputError

    err = err if err is not None else sys.stderr
    data_dir = data_dir_of(args)
    if args.session_id:
        if session_exists(data_dir, args.session_id):
            raise FatalInputError(
                f'Error starting session: Session ID "{args.session_id}" already exists. '
                "Use --resume to resume it, or provide a different ID."
            )
        return args.session_id, ()
    if args.resume is None:
        return str(uuid.uuid4()), ()
    try:
        info = resolve_resume(args.resume, data_dir, workspace)

        def report(torn: TornLine) -> None:
            err.write(f"Warning: {info.path}:{torn.line}: {torn.reason}; ignored\n")

        if in_use := session_in_use(info.path):
            # One process owns a session at a time (its recorder holds the recording).
            raise FatalInputError(f"Error resuming session: {in_use}")
        history = history_of_file(info.path, on_torn=report)
    except SessionError as exc:
        if exc.code == "NO_SESSIONS_FOUND" and args.resume.strip() == RESUME_LATEST:
            err.write(f"{exc.message}\n")
            return str(uuid.uuid4()), ()
        raise FatalInputError(f"Error resuming session: {exc.message}") from None
    except RecordingError as exc:
        raise FatalInputError(f"Error resuming session: {exc}") from None
    return info.id, tuple(history)


def session_command(args: Any, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """``--list-sessions`` / ``--delete-session``: no prompt needed (exit codes: see
    ``delete_command``)."""
    out = out if out is not None else sys.stdout
    err = err if err is not None else sys.stderr
    workspace = Path(os.getcwd()).resolve()
    if args.list_sessions:
        return list_command(data_dir_of(args), workspace, out)
    return delete_command(str(args.delete_session), data_dir_of(args), workspace, out, err)


# -- the history of a recording -------------------------------------------------------------------
def _is_environment_context(content: Any) -> bool:
    parts = content.get("parts") or []
    return bool(parts) and isinstance(parts[0], dict) and str(parts[0].get("text", "")).startswith("<session_context>")


class _OpenTurn:
    """A turn without ``TurnEnded``: what it had added to history when the process died
    (the turn actor's own bookkeeping, replayed from its messages)."""

    def __init__(self, start: StartTurn) -> None:
        self.tid = start.turn_id
        self.added: list[Any] = []
        self.message: Any = thaw(user_content(start.parts))
        self.request: str | None = None
        self.builder = ModelTurnBuilder(now_ms=0)
        self.ids: list[str] = []
        self.pending_calls: list[tuple[str, str]] = []
        self.batch_id: str | None = None
        """The batch the turn sent for its calls (user calls have batches of their own)."""
        self.over = False

    def feed(self, msg: Any) -> None:
        if self.over:
            return
        match msg:
            case GenerateRequest(role="main") if msg.reply_to.startswith("turn:"):
                self.request = msg.request_id
                self.builder = ModelTurnBuilder(now_ms=0)
                self.ids = []
            case ModelChunk(request_id=self.request):
                self.builder.read(thaw(msg.chunk))
            case ModelRetrying(request_id=self.request):
                self.builder.reset()
            case StreamRetried(turn_id=self.tid):
                self.ids = []
            case ToolCallRequested(turn_id=self.tid):
                self.ids.append(msg.call_id)
            case ScheduleBatch() if msg.reply_to.startswith("turn:"):
                self.batch_id = msg.batch_id
            case ModelFinished(request_id=self.request):
                content, calls = self._answer()
                self.added.extend([self.message, content])
                self.message = None
                self.request = None
                self.pending_calls = calls
                if not calls:
                    self.over = True
            case ModelFailed(request_id=self.request):
                if self.message is not None and is_function_response(self.message.get("parts") or ()):
                    self.added.append(self.message)
                self.message = None
                self.request = None
                self.over = True
            case GenerationCancelled(request_id=self.request):
                self.added.clear()  # an aborted stream rolls the whole prompt back
                self.message = None
                self.over = True
            case BatchSettled() if self._answers_pending(msg):
                parts = [p for c in msg.calls for p in thaw(c.response_parts)]
                self.message = thaw(user_content(parts))
                self.pending_calls = []
            case _:
                pass

    def _answers_pending(self, msg: BatchSettled) -> bool:
        """The turn's own batch (a user's call settled meanwhile is not the turn's)."""
        return bool(self.pending_calls) and msg.batch_id == self.batch_id

    def _answer(self) -> tuple[Any, list[tuple[str, str]]]:
        """The model turn, with the call ids the turn actually assigned."""
        content = thaw(self.builder.content())
        computed = [cid for cid, _name, _args in self.builder.calls]
        rename = dict(zip(computed, self.ids, strict=False)) if len(self.ids) == len(computed) else {}
        for part in content.get("parts") or []:
            fc = part.get("functionCall")
            if isinstance(fc, dict) and fc.get("id") in rename:
                fc["id"] = rename[fc["id"]]
        calls = [(rename.get(cid, cid), name) for cid, name, _args in self.builder.calls]
        return content, calls

    def contents(self) -> list[Any]:
        out = list(self.added)
        if self.message is not None:
            # The prompt (or the function responses) was sent; Gemini CLI records it then.
            out.append(self.message)
        return out


class _Conversation:
    """The session's history, message by message, as the session actor builds it."""

    def __init__(self) -> None:
        self.history: list[Any] = []
        self.open_turn: _OpenTurn | None = None

    def feed(self, msg: Any) -> None:
        match msg:
            case OpenSession():
                self.history = [thaw(c) for c in msg.history]
                self.open_turn = None
            case StartTurn():
                self.open_turn = _OpenTurn(msg)
            case TurnEnded():
                if getattr(msg, "history_reset", False):
                    self.history = [h for h in self.history if _is_environment_context(h)]
                self.history.extend(thaw(c) for c in msg.history_added)
                self.open_turn = None
            case ContextAdded():
                self.history.append(thaw(msg.content))  # a user's call result, shared between turns
            case _:
                if self.open_turn is not None:
                    self.open_turn.feed(msg)

    def contents(self) -> list[Any]:
        if self.open_turn is None:
            return list(self.history)
        return [*self.history, *self.open_turn.contents()]


def conversation_of(recording: Recording | Iterable[Any]) -> list[Any]:
    """The session's history as the recording left it (plain JSON contents), including
    what an unfinished turn had added. May end with unanswered calls (see
    ``close_dangling_calls``)."""
    messages = (
        (env.message for env in recording.envelopes) if isinstance(recording, Recording) else recording
    )
    conversation = _Conversation()
    for msg in messages:
        conversation.feed(msg)
    return conversation.contents()


def history_of_file(path: Path, *, on_torn: Callable[[TornLine], None] | None = None) -> list[Any]:
    """``resumable_history`` of the recording at ``path``, folded line by line as it is
    read, never all of it in memory at once (a long recording held whole took seconds
    just to free, and in the daemon's worker thread that stalled every session).
    Raises ``RecordingError``."""
    conversation = _Conversation()
    load_recording(path, on_torn=on_torn, on_line=lambda line: conversation.feed(line.env.message))
    return _resumable(conversation.contents())


def close_dangling_calls(history: Sequence[Any], reason: str = INTERRUPTED_TOOL_REASON) -> list[Any]:
    """Give every function call exactly one response, right after its model turn (a
    cancelled one when it has none), and close a trailing function-response turn with
    Gemini CLI's interrupted-response placeholder."""
    out: list[Any] = []
    i = 0
    items = list(history)
    while i < len(items):
        content = items[i]
        out.append(content)
        i += 1
        if content.get("role") != "model":
            continue
        calls = [
            (str(p["functionCall"].get("id") or ""), str(p["functionCall"].get("name") or ""))
            for p in content.get("parts") or []
            if isinstance(p, dict) and isinstance(p.get("functionCall"), dict)
        ]
        if not calls:
            continue
        nxt = items[i] if i < len(items) else None
        answered: dict[str, Any] = {}
        extra: list[Any] = []
        if nxt is not None and nxt.get("role") == "user" and is_function_response(nxt.get("parts") or ()):
            for part in nxt.get("parts") or []:
                rid = str(part["functionResponse"].get("id") or "")
                if rid not in answered:
                    answered[rid] = part
                else:
                    extra.append(part)
            i += 1
        parts = [
            answered.pop(cid) if cid in answered else cancelled_response_parts(name, cid, reason)[0]
            for cid, name in calls
        ]
        del extra  # a duplicate response would break "exactly one": dropped
        out.append({"role": "user", "parts": parts})
    if out and out[-1].get("role") == "user" and is_function_response(out[-1].get("parts") or ()):
        out.append({"role": "model", "parts": [{"text": INTERRUPTED_RESPONSE_PLACEHOLDER}]})
    return out


def resumable_history(recording: Recording) -> list[Any]:
    """The conversation a resumed session continues (without any session context)."""
    return _resumable(conversation_of(recording))


def _resumable(conversation: list[Any]) -> list[Any]:
    kept = []
    for content in conversation:
        parts = content.get("parts") or []
        if content.get("role") == "user" and not is_function_response(parts):
            if is_ignored_user_text(_parts_text(parts).strip()):
                continue
        kept.append(content)
    return close_dangling_calls(kept)


def history_problems(history: Sequence[Any]) -> list[str]:
    """Why ``history`` is not valid for a model request (empty when it is): every call
    answered exactly once, in order, by the next turn; roles user/model only."""
    problems: list[str] = []
    for i, content in enumerate(history):
        if content.get("role") not in ("user", "model"):
            problems.append(f"content {i}: role {content.get('role')!r}")
        if content.get("role") != "model":
            continue
        ids = [
            p["functionCall"].get("id")
            for p in content.get("parts") or []
            if isinstance(p, dict) and isinstance(p.get("functionCall"), dict)
        ]
        if not ids:
            continue
        nxt = history[i + 1] if i + 1 < len(history) else None
        got = [
            p["functionResponse"].get("id")
            for p in (nxt or {}).get("parts") or []
            if isinstance(p, dict) and isinstance(p.get("functionResponse"), dict)
        ]
        if len(got) != len(ids) or Counter(got) != Counter(ids):
            problems.append(f"content {i}: calls {ids} answered by {got}")
    return problems


__all__ = [
    "NO_SESSIONS",
    "RESUME_LATEST",
    "SESSION_ID_RE",
    "SessionError",
    "SessionInfo",
    "clean_message",
    "close_dangling_calls",
    "conversation_of",
    "delete_command",
    "find_session",
    "format_relative_time",
    "history_of_file",
    "history_problems",
    "list_command",
    "list_sessions",
    "resolve_resume",
    "resumable_history",
    "scan_session",
    "session_command",
    "session_exists",
    "session_for_run",
]
