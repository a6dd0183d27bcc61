"""The native protocol's rules, without I/O: framing, decoding, who may do what.

Frames are lines of UTF-8 JSON, at most ``MAX_FRAME`` bytes each (newline excluded).
A longer frame is dropped up to its newline and answered ``frame_too_large``. Each
frame must decode (``bus.codec``) to a client request of ``bus.messages.client``;
the first must be ``Hello`` with this ``PROTOCOL_VERSION``. Requests about a session
need the connection to have opened it first (``CreateSession``, ``LoadSession`` or
``Subscribe``). Every refused frame is a ``ProtocolError``; after ``MAX_ERRORS`` of them
the connection is closed, and any error before a valid ``Hello`` (another frame first,
one that does not decode, a wrong version, a missing or wrong token where one is needed)
closes it at once. A frame that does not decode, whatever the reason (not UTF-8, not
JSON, nested deeper than the stack, an integer too long to convert, a lone surrogate, a
value of the wrong type), is ``bad_frame``.
"""

from __future__ import annotations

import hmac
import os
from collections.abc import Iterable, Mapping
from typing import Any, get_args

import attrs

from bus import CodecError
from bus.codec import decode, to_plain
from bus.json_values import SURROGATE_ESCAPE, unicode_clean
from bus.messages import (
    PROTOCOL_VERSION,
    Answer,
    ApprovalMode,
    ApprovalOutcome,
    CallTool,
    Cancel,
    CreateSession,
    DaemonStatus,
    EndSession,
    Hello,
    ListMcpServers,
    ListSessions,
    LoadSession,
    Message,
    Prompt,
    ProtocolError,
    ProtocolErrorCode,
    SetMode,
    StopDaemon,
    Subscribe,
    TerminalExited,
    TerminalOutput,
    Unsubscribe,
)
from bus.session_ids import session_id_problem

MAX_FRAME = 64 << 20
"""As ``agentbus acp``'s line limit: a prompt may carry a pasted file. The client checks
it before sending (``client.DaemonClient.send``); before ``Hello`` the connection allows
far less (``_connection.HELLO_MAX_FRAME``)."""
MAX_ERRORS = 5

REQUESTS = (
    Hello,
    ListSessions,
    CreateSession,
    LoadSession,
    EndSession,
    Subscribe,
    Unsubscribe,
    Prompt,
    Cancel,
    Answer,
    SetMode,
    CallTool,
    ListMcpServers,
    DaemonStatus,
    StopDaemon,
    TerminalOutput,
    TerminalExited,
)
ANSWERS = (TerminalOutput, TerminalExited)
"""Frames that answer the daemon's ``RunInTerminal`` (``CreateSession.terminals``): no reply."""
OPENS_SESSION = (CreateSession, LoadSession, Subscribe)
NEEDS_SESSION = (
    EndSession, Unsubscribe, Prompt, Cancel, Answer, SetMode, CallTool, ListMcpServers, TerminalOutput, TerminalExited
)
APPROVAL_MODES: tuple[str, ...] = get_args(ApprovalMode)
OUTCOMES: tuple[str, ...] = get_args(ApprovalOutcome)


@attrs.frozen
class Oversized:
    """A frame longer than the limit (its bytes were dropped)."""

    size: int
    limit: int = MAX_FRAME


class FrameSplitter:
    """Bytes in, complete frames out, never holding more than ``limit`` bytes."""

    def __init__(self, limit: int = MAX_FRAME) -> None:
        self.limit = limit
        self._buf = bytearray()
        self._dropping = 0
        """Bytes of an oversized frame dropped so far (0: not dropping)."""

    def feed(self, data: bytes) -> list[bytes | Oversized]:
        out: list[bytes | Oversized] = []
        start = 0
        while start < len(data):
            nl = data.find(b"\n", start)
            chunk = data[start:] if nl < 0 else data[start:nl]
            if self._dropping:
                self._dropping += len(chunk)
                if nl >= 0:
                    out.append(Oversized(self._dropping, self.limit))
                    self._dropping = 0
            elif len(self._buf) + len(chunk) > self.limit:
                self._dropping = len(self._buf) + len(chunk)
                self._buf.clear()
                if nl >= 0:
                    out.append(Oversized(self._dropping, self.limit))
                    self._dropping = 0
            else:
                self._buf += chunk
                if nl >= 0:
                    frame = bytes(self._buf)
                    self._buf.clear()
                    if frame.strip():
                        out.append(frame)
            if nl < 0:
                break
            start = nl + 1
        return out

    @property
    def pending(self) -> int:
        return len(self._buf) + self._dropping


@attrs.define
class ConnectionRules:
    """What one connection may do: its hello, its sessions, its error count."""

    hello: Hello | None = None
    sessions: set[str] = attrs.field(factory=set)
    errors: int = 0
    token: str = ""
    """Required in ``Hello`` when not empty."""

    def check(self, frame: bytes | Oversized) -> Message | ProtocolError:
        """Decode and admit one frame: the request, or the error to answer with."""
        if isinstance(frame, Oversized):
            return self._error(None, "frame_too_large", f"frame of {frame.size} bytes exceeds {frame.limit}")
        try:
            text = frame.decode("utf-8")
        except UnicodeDecodeError as exc:
            return self._error(None, "bad_frame", f"not UTF-8: {exc}")
        try:
            msg = decode(text)
        except CodecError as exc:
            return self._error(None, "bad_frame", str(exc))
        if SURROGATE_ESCAPE.search(text) is not None and not _encodable(msg):
            rid = getattr(msg, "request_id", None)
            return self._error(
                rid if isinstance(rid, str) and _encodable(rid) else None,
                "bad_frame",
                "text with a lone surrogate (a \\uD800-\\uDFFF escape not in a pair) is not Unicode",
            )
        return self.admit(msg)

    def admit(self, msg: Message) -> Message | ProtocolError:
        rid = getattr(msg, "request_id", None)
        rid = rid if isinstance(rid, str) else None
        if not isinstance(msg, REQUESTS):
            return self._error(rid, "not_a_request", f"{type(msg).__name__} is not a request a client can send")
        if self.hello is None:
            if not isinstance(msg, Hello):
                return self._error(rid, "hello_required", "the first frame must be Hello", fatal=True)
            if msg.protocol != PROTOCOL_VERSION:
                return self._error(
                    rid, "bad_version", f"protocol {msg.protocol} is not supported (this daemon speaks {PROTOCOL_VERSION})", fatal=True
                )
            if self.token and not hmac.compare_digest(msg.token.encode(), self.token.encode()):
                which = "a wrong token" if msg.token else "no token"
                return self._error(rid, "bad_token", f"{which}: this connection needs the daemon's token", fatal=True)
            self.hello = msg
            return msg
        if isinstance(msg, Hello):
            return self._error(rid, "invalid", "Hello was already received")
        if isinstance(msg, NEEDS_SESSION) and msg.session_id not in self.sessions:
            return self._error(
                rid, "not_yours", f"session {msg.session_id!r} was not opened on this connection", session_id=msg.session_id
            )
        problem = _value_problem(msg)
        if problem is not None:
            return self._error(rid, "invalid", problem, session_id=msg.session_id)
        return msg

    def _error(
        self, rid: str | None, code: ProtocolErrorCode, message: str, *, fatal: bool = False, session_id: str = ""
    ) -> ProtocolError:
        self.errors += 1
        # Nothing but a valid Hello opens a connection: any error before it closes it.
        fatal = fatal or self.hello is None
        if self.errors >= MAX_ERRORS and not fatal:
            return ProtocolError(
                request_id=rid,
                code="too_many_errors",
                message=f"{message} ({self.errors} protocol errors: closing)",
                fatal=True,
                session_id=session_id,
            )
        return ProtocolError(request_id=rid, code=code, message=message, fatal=fatal, session_id=session_id)


def _encodable(value: Message | str) -> bool:
    try:
        return unicode_clean(value if isinstance(value, str) else to_plain(value))
    except (CodecError, RecursionError):
        return False


def _value_problem(msg: Message) -> str | None:
    for name in _PATH_FIELDS:
        if why := path_problem(getattr(msg, name, "")):
            return f"{name}: {why}"
    match msg:
        case CreateSession() if msg.session_id and (problem := session_id_problem(msg.session_id)):
            return problem
        case LoadSession() | Subscribe() if problem := session_id_problem(msg.session_id):
            return problem
        case CreateSession():
            if msg.approval_mode and msg.approval_mode not in APPROVAL_MODES:
                return f"unknown approval mode {msg.approval_mode!r} (one of {', '.join(APPROVAL_MODES)})"
            if msg.fake_chunk_delay_ms < 0 or msg.fake_chunk_delay_ms > 60_000:
                return "fake_chunk_delay_ms must be within 0..60000"
        case LoadSession():
            if msg.fake_chunk_delay_ms < 0 or msg.fake_chunk_delay_ms > 60_000:
                return "fake_chunk_delay_ms must be within 0..60000"
        case SetMode():
            if msg.approval_mode not in APPROVAL_MODES:
                return f"unknown approval mode {msg.approval_mode!r} (one of {', '.join(APPROVAL_MODES)})"
        case Answer():
            if msg.outcome not in OUTCOMES:
                return f"unknown outcome {msg.outcome!r} (one of {', '.join(OUTCOMES)})"
        case Subscribe():
            if msg.from_seq is not None and msg.from_seq < 0:
                return "from_seq must not be negative"
        case Prompt():
            if not msg.text.strip() and not msg.parts:
                return "an empty prompt"
            if why := prompt_part_problem((*msg.parts, *msg.attachments)):
                return f"a prompt's parts are Gemini API parts: {why}"
        case _:
            pass
    return None


_PATH_FIELDS = ("workspace", "fake_responses")
"""The fields of a request that name a file or directory of this machine."""


def path_problem(path: str) -> str | None:
    """Why ``path`` can name no file here (``None``: it can, or it is empty): the
    system's calls refuse it before looking (they raised, and the request failed with a
    Python error)."""
    if "\x00" in path:
        return "a path cannot hold a NUL character"
    encoded = os.fsencode(path)  # (a lone surrogate is refused with its frame)
    if len(encoded) >= 4096 or any(len(name) > 255 for name in encoded.split(b"/")):
        return "the path is longer than the system allows (4,096 bytes, 255 a name)"
    return None


_PART_OBJECTS = {"inlineData": ("mimeType", "data"), "fileData": ("fileUri",)}
"""The parts of a prompt that carry an object, and the strings each object needs."""


def prompt_part_problem(parts: Iterable[Any]) -> str | None:
    """Why ``parts`` cannot be a prompt's content (``None``: they can): each is an
    object; its ``text``, if any, a string; its ``inlineData`` (``mimeType``, ``data``)
    and ``fileData`` (``fileUri``), if any, objects of strings. A prompt of other parts
    was taken, and its session died of it (and its recording could not be read again)."""
    for i, part in enumerate(parts):
        if not isinstance(part, Mapping):
            return f"part {i + 1} is not an object"
        if "text" in part and not isinstance(part["text"], str):
            return f"part {i + 1}'s text is not a string"
        for key, needed in _PART_OBJECTS.items():
            if key not in part:
                continue
            value = part[key]
            if not isinstance(value, Mapping) or not all(isinstance(value.get(k), str) for k in needed):
                return f"part {i + 1}'s {key} is not an object with {' and '.join(needed)} strings"
    return None
