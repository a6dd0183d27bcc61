"""The recorder actor: the session's append-only log, and the code that reads it back.

Accepts: every message of its session, as an observer. Emits: nothing unless it fails,
and then loudly (``RecorderError`` stops the session: the supervisor's nursery cancels
the other actors). Owns: ``<data dir>/sessions/<session id>.jsonl``. Stops: after the
session's last message (``SessionClosed``), when its subscription closes, or by its
supervisor's cancel.

**The file.** One JSON object per line, UTF-8, ``\\n``-terminated, only ever appended:

- a *meta* line opens each process's part of the file (a resumed session appends a new
  one): ``{"v": 1, "kind": "meta", "session_id", "workspace", "started", "model", ...}``;
- every message of the session is one *envelope* line, ``bus.codec.encode_envelope``
  plus a wall timestamp: ``{"v": 1, "seq", "session_id", "sender", "to", "wall", "msg"}``;
- a *void* line, ``{"v": 1, "kind": "void", "first", "last"}``, accounts for sequence
  numbers the bus gave to messages that reached no one (their sender was cancelled
  inside ``Bus.send`` before the first observer took them), so the numbering in the
  file stays whole and a replay can reproduce it.

**Contents by reference.** A history is carried whole by every ``StartTurn`` and every
model request (``INTERNED`` names the fields), so written as it is, a recording grows
with the square of the session's length. Those fields are written by reference: each
distinct content (a ``Content`` of the conversation, a request's config) gets a number,
1, 2, ... in the order this process first writes it, and goes in that line's ``defs``
(``{"17": {...}}``); the field itself leaves ``msg`` for the line's ``refs``: a number,
or for a list, its numbers with runs written ``[first, last]``, after the ``same``
count it shares with the same field of the last message of its type
(``{"same": 210, "then": [[412, 415]]}``). Such a line is version 2 (a reader that
predates it refuses it as newer, instead of reading a request without its contents)
and is still one JSON object of one message. Numbers are per process: a meta line
starts them again, so a resumed session never depends on an earlier process's table,
and a torn line (only ever a process's last) is never referred to. ``decode_line``
reads a line back given the ``ContentRefs`` of the lines before it in the part; the
loader and the daemon's catch-up (which reads the file from the start, by sequence
number) use it. Version 1 files, without references, load as before.

**Ownership.** One process runs a session at a time: the recorder holds an exclusive
``flock`` on the recording for the session's life (``SessionClaim``). A second
recorder of it fails with ``SessionInUseError`` (it names the owner's pid when the
owner's meta line does); ``session_in_use`` lets a front end refuse early. At each sync
point the recorder also checks that the path still names the file it writes: a
recording deleted or replaced under a running session stops it with a
``RecorderError`` saying so, rather than writing on into a file nobody can read.

**Durability.** Each line is written with one ``write(2)`` as it is observed, so a
killed process loses at most a line that was being written (the page cache survives
``kill -9``). ``fsync`` runs at the points that matter: a turn's end, before an
approval is asked, and the session's end. "Before it is reported to clients" holds
because the recorder is the session's *first* observer and its subscription has no
buffer: the bus hands each message to the recorder before any other observer or the
recipient gets it, and the recorder writes (and at a sync point fsyncs) it
synchronously, without a checkpoint, before it asks for the next one. Every task that
acts on a message therefore runs after that message is on disk; a client printing a
turn's end prints a durable end. The wiring must start the recorder before anyone else
observes the session (``runtime.supervise_session`` starts it first; clients subscribe
after the supervisor is up). The fsync blocks the event loop for the time a disk takes
(about a millisecond on an SSD, a few per turn): a worker thread would need a
checkpoint, and with it the guarantee would go.

**Failure.** A write that fails (disk full, permissions, a vanished directory) raises
``RecorderError`` naming the file and the cause; nothing is dropped silently.

**Secrets.** API keys never reach the file: values of ``GEMINI_API_KEY``,
``GOOGLE_API_KEY`` and other ``*_API_KEY`` variables of the environment (8 characters
or more), Google API keys (``AIza...``), bearer tokens, and the values of
``Authorization``/``x-goog-api-key``-like keys are replaced by ``[REDACTED]``. A
scrubbed message still decodes; it is then not byte-equal to what was delivered.

**Reading.** ``load_recording`` parses a file back (``read_meta`` reads only its
first line): a torn last line (the process died
while writing it) is reported and ignored, and so is a torn line that ends a process's
part of the file (the next process terminates it with a newline and says so in its meta
line, ``"torn_tail": true``). Any other bad line is a ``RecordingError`` naming the file
and line. Nothing is ever truncated or rewritten.
"""

from __future__ import annotations

import contextlib
import datetime
import errno
import fcntl
import gc
import hashlib
import json
import os
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, Protocol

import attrs
import trio

from bus import Bus, CodecError, Envelope
from bus.codec import FORMAT_VERSION, envelope_from_plain, envelope_to_plain, to_plain
from bus.json_values import freeze, thaw
from bus.messages import (
    ApprovalRequested,
    CheckLoop,
    GenerateRequest,
    HistoryCompressed,
    Message,
    OpenSession,
    SessionClosed,
    StartTurn,
    TurnEnded,
)
from bus.planted import planted

SYNC_POINTS = (TurnEnded, ApprovalRequested, SessionClosed)
"""Messages after which the file is fsynced (before anyone else sees them)."""

REFS_VERSION = 2
"""The version of a line that carries ``defs``/``refs`` (every other line is written as
``bus.codec.FORMAT_VERSION``, 1): a reader that predates them refuses the line as newer
than it reads instead of decoding a request without its contents."""

INTERNED: Mapping[type[Message], tuple[tuple[str, bool], ...]] = {
    StartTurn: (("history", True),),
    GenerateRequest: (("contents", True), ("config", False)),
    OpenSession: (("history", True),),
    HistoryCompressed: (("history", True),),
    CheckLoop: (("history", True),),
}
"""The fields written by reference (see "Contents by reference"): field name, and
whether each element of the tuple is one content (else the whole value is one). Each
of these messages repeats what earlier lines hold; all are the actors' own traffic,
not client events (``actors/frontends/daemon/_catchup.INTERNAL``)."""
INTERNED_TYPES = frozenset(cls.__name__ for cls in INTERNED)

REDACTED = "[REDACTED]"
SECRET_ENV_NAMES = ("GEMINI_API_KEY", "GOOGLE_API_KEY")
MIN_SECRET_LEN = 8
"""Shorter environment values (``GEMINI_API_KEY=fake`` in tests) are not real keys, and
scrubbing them would mangle ordinary text."""


class RecorderError(Exception):
    """The recording cannot be written; the session must stop."""


class SessionInUseError(RecorderError):
    """Another process holds the session's recording (it owns the session)."""


class RecordingError(Exception):
    """A recording cannot be read: names the file and line."""

    def __init__(self, path: Path | str, line: int | None, message: str) -> None:
        self.path = str(path)
        self.line = line
        self.detail = message
        where = f"{path}:{line}" if line is not None else str(path)
        super().__init__(f"{where}: {message}")


# -- where recordings live -----------------------------------------------------------------
def default_data_dir() -> Path:
    """``$AGENTBUS_DATA_DIR``, else ``$XDG_DATA_HOME/agentbus``, else ``~/.local/share/agentbus``."""
    explicit = os.environ.get("AGENTBUS_DATA_DIR")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_DATA_HOME")
    base = Path(xdg) if xdg else Path.home() / ".local" / "share"
    return base / "agentbus"


def sessions_dir(data_dir: Path) -> Path:
    return data_dir / "sessions"


def recording_path(data_dir: Path, session_id: str) -> Path:
    return sessions_dir(data_dir) / f"{session_id}.jsonl"


_last_wall: tuple[int, str] = (-1, "")


def wall_clock_iso() -> str:
    """UTC now, ISO 8601 with milliseconds (formatted once per millisecond: it is
    stamped on every line)."""
    global _last_wall
    ms = int(time.time() * 1000)
    if ms != _last_wall[0]:
        stamp = datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC).isoformat(timespec="milliseconds")
        _last_wall = (ms, stamp.replace("+00:00", "Z"))
    return _last_wall[1]


# -- secrets ------------------------------------------------------------------------------------
_SENSITIVE_KEY = re.compile(
    r"^(?:authorization|proxy[-_]authorization|x[-_]goog[-_]api[-_]key|x[-_]api[-_]key|api[-_]?key)$",
    re.IGNORECASE,
)
_SECRET_PATTERNS = re.compile(
    r"AIza[0-9A-Za-z_\-]{35}|(?<![A-Za-z])Bearer\s+[A-Za-z0-9._~+/=\-]{8,}", re.IGNORECASE
)
_SENSITIVE_KEY_IN_TEXT = re.compile(
    r'"(?:authorization|proxy[-_]authorization|x[-_]goog[-_]api[-_]key|x[-_]api[-_]key|api[-_]?key)"\s*:',
    re.IGNORECASE,
)


_TRIGGERS = ("aiza", "bearer", "authoriz", "api")


def secrets_from_env(environ: Mapping[str, str]) -> tuple[str, ...]:
    """The environment's API key values worth scrubbing (longest first)."""
    found = {
        v
        for k, v in environ.items()
        if (k in SECRET_ENV_NAMES or k.endswith("_API_KEY")) and len(v) >= MIN_SECRET_LEN
    }
    return tuple(sorted(found, key=len, reverse=True))


@attrs.define
class Scrubber:
    """Removes secrets from encoded lines; cheap when there are none (one regex search
    and a substring test per secret on the line). Not frozen: the daemon adds the keys
    of a client that loads a running session (:meth:`add`), since that session's model
    requests use them from then on; the recorder reads ``secrets`` at each line."""

    secrets: tuple[str, ...] = ()

    def add(self, secrets: Iterable[str]) -> None:
        """Scrub these too, from the next line on (longest first, as ever)."""
        self.secrets = tuple(sorted({*self.secrets, *secrets}, key=len, reverse=True))

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Scrubber:
        return cls(secrets_from_env(os.environ if environ is None else environ))

    def needs(self, text: str) -> bool:
        if any(s in text or _json_inner(s) in text for s in self.secrets):
            return True
        # The patterns are slow to search; a lower-cased substring test rules most lines out.
        low = text.lower()
        if not any(t in low for t in _TRIGGERS):
            return False
        return bool(_SECRET_PATTERNS.search(text) or _SENSITIVE_KEY_IN_TEXT.search(text))

    def scrub_text(self, text: str) -> str:
        for secret in self.secrets:
            text = text.replace(secret, REDACTED)
        return _SECRET_PATTERNS.sub(REDACTED, text)

    def scrub(self, value: Any) -> Any:
        """A copy of plain JSON data with every secret replaced."""
        if isinstance(value, str):
            return self.scrub_text(value)
        if isinstance(value, Mapping):
            return {
                k: (REDACTED if isinstance(k, str) and _SENSITIVE_KEY.match(k) and v is not None else self.scrub(v))
                for k, v in value.items()
            }
        if isinstance(value, list | tuple):
            return [self.scrub(v) for v in value]
        return value


def _json_inner(s: str) -> str:
    return json.dumps(s, ensure_ascii=False)[1:-1]


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _utf8(text: str) -> bytes:
    """A line as UTF-8; a lone surrogate (a file name or workspace path that is not
    UTF-8, held with ``surrogateescape``) can only stand inside a JSON string, so it is
    written as its ``\\uXXXX`` escape, which reads back as the same string."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text).encode("utf-8")


def _dumps(data: Any) -> str:
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def encode_line(env: Envelope, wall: str, scrubber: Scrubber, table: ContentTable | None = None) -> str:
    """One envelope as the recording's line (without the newline), secrets removed.

    With a ``table``, the fields ``INTERNED`` names are written by reference: contents
    the table has not seen go in the line's ``defs``, the fields in its ``refs``."""
    fields = INTERNED.get(type(env.message)) if table is not None else None
    if not fields:
        data = envelope_to_plain(env, wall=wall)
    else:
        assert table is not None
        defs: dict[str, Any] = {}
        refs: dict[str, Any] = {}
        for name, each in fields:
            value = getattr(env.message, name)
            if each:
                refs[name] = table.refer(type(env.message).__name__, name, value, defs)
            else:
                refs[name] = table.refer_whole(type(env.message).__name__, name, value, defs)
        emptied: dict[str, Any] = {name: () for name, _ in fields}
        msg = to_plain(attrs.evolve(env.message, **emptied))
        for name, _ in fields:
            msg.pop(name, None)
        data = {"v": REFS_VERSION, "seq": env.seq}
        if defs:
            data["defs"] = defs
        data.update(session_id=env.session_id, sender=env.sender, to=env.recipient, wall=wall, refs=refs, msg=msg)
    text = _dumps(data)
    if scrubber.needs(text):
        text = _dumps(scrubber.scrub(data))
    return text


def _runs(numbers: list[int]) -> list[int | list[int]]:
    """``numbers`` with each run of consecutive ones of 3 or more as ``[first, last]``:
    a history is mostly the contents in the order they were first written, so the
    references of a long one stay a few bytes."""
    out: list[int | list[int]] = []
    i = 0
    while i < len(numbers):
        j = i
        while j + 1 < len(numbers) and numbers[j + 1] == numbers[j] + 1:
            j += 1
        if j - i >= 2:
            out.append([numbers[i], numbers[j]])
        else:
            out.extend(numbers[i : j + 1])
        i = j + 1
    return out


class ContentTable:
    """The writer's side of "Contents by reference": which contents this process has
    written, each under a number (1, 2, ... in the order first written).

    A content is known by a digest of its JSON text, so equal contents built apart
    share one number (not by ``==``: it holds ``1 == 1.0 == True``), and first, for
    speed, by identity with the content at the same place in the last message of its
    type (the session passes the same frozen objects from turn to turn). Only that last
    message's contents are held here, and a digest for each distinct content: memory
    stays what one history takes. A model request is built afresh each time, so each of
    its contents is dumped to be known: a few microseconds a content, a few
    milliseconds a request of a 300-turn session."""

    def __init__(self) -> None:
        self._by_digest: dict[bytes, int] = {}
        self._last: dict[tuple[str, str], tuple[tuple[Any, ...], list[int]]] = {}
        """The contents last written for each (message type, field), and their numbers."""
        self._last_whole: dict[tuple[str, str], tuple[Any, int]] = {}

    def refer(self, type_name: str, field: str, values: tuple[Any, ...], defs: dict[str, Any]) -> Any:
        """The ``refs`` entry of a list of contents (new ones added to ``defs``): the
        runs of their numbers, after as many as the list shares with the same field
        of the last message of its type (``{"same": k, "then": runs}``). A
        conversation mostly grows at its end, so a long one costs a few bytes a
        message."""
        key = (type_name, field)
        prev_values, prev = self._last.get(key, ((), []))
        numbers = [
            prev[i] if i < len(prev_values) and prev_values[i] is v else self.intern(v, defs)
            for i, v in enumerate(values)
        ]
        self._last[key] = (values, numbers)
        same = 0
        for a, b in zip(prev, numbers, strict=False):
            if a != b:
                break
            same += 1
        if not same:
            return _runs(numbers)
        return {"same": same, "then": _runs(numbers[same:])}

    def refer_whole(self, type_name: str, field: str, value: Any, defs: dict[str, Any]) -> int:
        """The ``refs`` entry of a field that is one content (a request's config)."""
        key = (type_name, field)
        last = self._last_whole.get(key)
        if last is not None and last[0] is value:
            return last[1]
        number = self.intern(value, defs)
        self._last_whole[key] = (value, number)
        return number

    def __len__(self) -> int:
        return len(self._by_digest)

    def intern(self, value: Any, defs: dict[str, Any]) -> int:
        """The number of ``value``; a new one is added to ``defs`` (plain JSON)."""
        # Frozen JSON dumps as it is (``frozendict`` is a ``dict``): only a new content is thawed.
        text = _dumps(value)
        digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()
        number = self._by_digest.get(digest)
        if number is None:
            number = self._by_digest[digest] = len(self._by_digest) + 1
            defs[str(number)] = thaw(value)
        return number


class ContentRefs:
    """The reader's side: the contents defined so far in one process's part of a
    recording (frozen once; every message that refers to one shares the object)."""

    def __init__(self) -> None:
        self._contents: dict[int, Any] = {}
        self._last: dict[tuple[str, str], tuple[Any, ...]] = {}

    def reset(self) -> None:
        """A new process's part starts (its meta line): numbering starts again."""
        self._contents.clear()
        self._last.clear()

    def expand(self, data: dict[str, Any]) -> dict[str, Any]:
        """Take in the line's ``defs`` and resolve its ``refs``: the fields they stand
        for, by name (empty for a line without); raises ``ValueError`` naming what is
        wrong."""
        defs = data.get("defs")
        if defs is not None:
            if not isinstance(defs, dict):
                raise ValueError("'defs' must be an object")
            for key, value in defs.items():
                if not key.isdigit():
                    raise ValueError(f"'defs' key {key!r} is not a number")
                self._contents[int(key)] = freeze(value)
        refs = data.get("refs")
        if refs is None:
            return {}
        msg = data.get("msg")
        if not isinstance(refs, dict) or not isinstance(msg, dict):
            raise ValueError("'refs' and 'msg' must be objects")
        type_name = str(msg.get("type"))
        fields: dict[str, Any] = {}
        for name, ref in refs.items():
            if isinstance(ref, list):
                fields[name] = self._last[(type_name, name)] = tuple(self._contents_of(ref))
            elif isinstance(ref, dict):
                same, then = ref.get("same"), ref.get("then")
                prev = self._last.get((type_name, name), ())
                if not isinstance(same, int) or not 0 <= same <= len(prev) or not isinstance(then, list):
                    raise ValueError(f"{name!r}: 'same' must count contents of the last {type_name}, 'then' be a list")
                fields[name] = self._last[(type_name, name)] = prev[:same] + tuple(self._contents_of(then))
            else:
                fields[name] = self._content(ref)
        return fields

    def _contents_of(self, refs: list[Any]) -> list[Any]:
        out: list[Any] = []
        for ref in refs:
            if isinstance(ref, list):
                if len(ref) != 2 or not all(isinstance(r, int) and not isinstance(r, bool) for r in ref):
                    raise ValueError(f"a run of references must be [first, last], got {ref!r}")
                first, last = ref
                if not 0 < first <= last or last - first >= len(self._contents):
                    raise ValueError(f"the run of references {ref!r} is not within the contents defined")
                out.extend(self._content(r) for r in range(first, last + 1))
            else:
                out.append(self._content(ref))
        return out

    def _content(self, ref: Any) -> Any:
        if not isinstance(ref, int) or isinstance(ref, bool):
            raise ValueError(f"a reference must be a number, got {ref!r}")
        try:
            return self._contents[ref]
        except KeyError:
            raise ValueError(f"content {ref} is defined by no earlier line of this process") from None


def decode_line(data: dict[str, Any], refs: ContentRefs, *, where: str | None = None) -> Envelope:
    """One envelope line (parsed JSON, version checked) as the envelope it records,
    its references resolved through ``refs`` (which it extends); raises ``CodecError``."""
    try:
        fields = refs.expand(data)
    except ValueError as exc:
        raise CodecError(str(exc), where=where) from None
    env = envelope_from_plain(data, where=where)
    if not fields:
        return env
    # Put in after decoding, as they are: each content was frozen once when defined
    # (``freeze`` would walk a long history content by content for every message
    # again: the load of a 300-turn session went from 0.2 s to 1.2 s). The message was
    # just built here and nobody holds it yet; its fields stay frozen JSON.
    known = attrs.fields_dict(type(env.message))
    for name, value in fields.items():
        if name not in known:
            raise CodecError(f"invalid {type(env.message).__name__}: no field {name!r}", where=where)
        object.__setattr__(env.message, name, value)
    return env


# -- writing -----------------------------------------------------------------------------------
class Sink(Protocol):
    """Where lines go: an append-only file (tests substitute failing ones)."""

    def write(self, data: bytes) -> None: ...
    def fsync(self) -> None: ...
    def close(self) -> None: ...


class FileSink:
    """An ``O_APPEND`` file written with ``os.write`` (no userspace buffer), mode 0600."""

    def __init__(self, path: Path) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            n = os.write(self.fd, view)
            if n == 0:  # pragma: no cover - a regular file never does this
                raise OSError(errno.EIO, "short write")
            view = view[n:]

    def fsync(self) -> None:
        os.fsync(self.fd)

    def close(self) -> None:
        os.close(self.fd)


class SessionClaim:
    """A session's ownership: an exclusive ``flock`` on its recording, held by the
    recorder for the session's life on a descriptor of its own (the sink only appends).
    The lock goes with the process: a killed owner frees it. ``lost`` tells whether the
    path still names the file being written (it was not deleted or replaced)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd = os.open(path, os.O_RDONLY | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self.fd)
            raise SessionInUseError(in_use_message(path)) from None
        except OSError:
            os.close(self.fd)
            raise

    def lost(self) -> str | None:
        """Why the path no longer names this file (``None``: it does)."""
        mine = os.fstat(self.fd)
        try:
            there = os.stat(self.path)
        except FileNotFoundError:
            return "was deleted"
        if (there.st_dev, there.st_ino) != (mine.st_dev, mine.st_ino):
            return "was replaced by another file"
        return None

    def close(self) -> None:
        os.close(self.fd)  # releases the lock


def in_use_message(path: Path) -> str:
    """``SessionInUseError``'s text: which process holds the session, when its meta line says."""
    pid = _owner_pid(path)
    who = f"another agentbus process (pid {pid})" if pid is not None else "another agentbus process"
    return f"session {path.stem!r} is in use by {who}; attach to it there or wait until it ends ({path})"


def _owner_pid(path: Path, *, block: int = 1 << 16) -> int | None:
    """The pid in the last meta line within the file's last ``block`` bytes (the owner
    wrote it when it took the session), if any."""
    try:
        with path.open("rb") as fh:
            size = fh.seek(0, os.SEEK_END)
            fh.seek(max(0, size - block))
            data = fh.read()
    except OSError:
        return None
    for raw in reversed(data.split(b"\n")):
        if b'"kind":"meta"' in raw:
            meta = _json_object(raw)
            pid = meta.get("pid") if meta else None
            return pid if isinstance(pid, int) and _alive(pid) else None
    return None


def _alive(pid: int) -> bool:
    """A process ``pid`` exists (a meta line of a process that ended names no owner)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return True
    return True


def session_in_use(path: Path) -> str | None:
    """Why ``path``'s session cannot be taken now (another process owns it), else
    ``None``. A check ahead of starting (to refuse early and clearly); the recorder's
    own claim is what makes it hold."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return in_use_message(path)
    except OSError:
        return None
    finally:
        os.close(fd)
    return None


def delete_recording(path: Path) -> str | None:
    """Delete ``path`` while holding its lock, so that no process claims the session
    between the check and the deletion; why not, when another process owns it. Raises
    ``OSError`` when it cannot be deleted."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return in_use_message(path)
        path.unlink()
    finally:
        os.close(fd)
    return None


@attrs.frozen
class Tail:
    """What an existing recording ends with, as the next process finds it."""

    last_seq: int = 0
    """The last complete envelope's sequence number (0: none)."""
    needs_newline: bool = False
    """The file does not end with a newline (the last write was cut short)."""
    torn: bool = False
    """The last line is not a complete JSON object (it is reported and ignored)."""


def read_tail(path: Path, *, block: int = 1 << 16) -> Tail:
    """Inspect the end of an existing recording without reading all of it."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return Tail()
    if size == 0:
        return Tail()
    with path.open("rb") as fh:
        data = b""
        pos = size
        while True:
            step = min(block, pos)
            pos -= step
            fh.seek(pos)
            data = fh.read(step) + data
            complete = data.split(b"\n")
            # complete[0] may be a partial line unless we reached the start.
            candidates = complete if pos == 0 else complete[1:]
            if _find_last_seq(candidates) is not None or pos == 0:
                break
    needs_newline = not data.endswith(b"\n")
    last_line = data.rsplit(b"\n", 1)[-1] if needs_newline else b""
    torn = needs_newline and _json_object(last_line) is None
    seq = _find_last_seq(candidates) or 0
    return Tail(last_seq=seq, needs_newline=needs_newline, torn=torn)


def _json_object(raw: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _find_last_seq(lines: list[bytes]) -> int | None:
    for raw in reversed(lines):
        if not raw.strip():
            continue
        data = _json_object(raw)
        if data is not None and isinstance(data.get("seq"), int):
            return int(data["seq"])
    return None


class RecorderActor:
    """Appends every message of one session to its recording (see the module doc)."""

    def __init__(
        self,
        bus: Bus,
        *,
        session_id: str,
        path: Path,
        meta: Mapping[str, Any] | None = None,
        wall_clock: Callable[[], str] = wall_clock_iso,
        scrubber: Scrubber | None = None,
        open_sink: Callable[[Path], Sink] = FileSink,
    ) -> None:
        self.bus = bus
        self.session_id = session_id
        self.path = path
        self.meta = dict(meta or {})
        self.wall_clock = wall_clock
        self.scrubber = scrubber if scrubber is not None else Scrubber.from_env()
        self.open_sink = open_sink
        self.written = 0
        self.synced = 0
        self.voided = 0
        self._next_seq = 1
        self.table = ContentTable()
        """The contents this process wrote (numbered per process: see the module doc)."""

    def _fail(self, doing: str, exc: OSError) -> RecorderError:
        return RecorderError(f"cannot {doing} recording {self.path}: {exc.strerror or exc}")

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            claim = SessionClaim(self.path)
        except OSError as exc:
            raise self._fail("open", exc) from exc
        try:
            try:
                tail = read_tail(self.path)
                sink = self.open_sink(self.path)
            except OSError as exc:
                raise self._fail("open", exc) from exc
            try:
                await self._record(claim, sink, tail, task_status)
            finally:
                sink.close()
        finally:
            claim.close()

    async def _record(self, claim: SessionClaim, sink: Sink, tail: Tail, task_status: trio.TaskStatus[None]) -> None:
        # A resumed session continues its numbering after the recording's last line.
        if tail.last_seq:
            self.bus.start_session_at(self.session_id, tail.last_seq + 1)
        meta: dict[str, Any] = {
            "v": FORMAT_VERSION,
            "kind": "meta",
            "session_id": self.session_id,
            "started": self.wall_clock(),
            **self.meta,
            "first_seq": self.bus.next_seq(self.session_id),
            "resumed": tail.last_seq > 0,
        }
        if tail.torn:
            meta["torn_tail"] = True
        head = ("\n" if tail.needs_newline else "") + _dumps(self.scrubber.scrub(meta)) + "\n"
        try:
            sink.write(_utf8(head))
            sink.fsync()
        except OSError as exc:
            raise self._fail("write", exc) from exc
        # Capacity 0: the bus waits until the recorder has taken each message, and
        # the recorder is subscribed before any other observer (module doc).
        sub = self.bus.subscribe(self.session_id, f"recorder:{self.session_id}", policy="block", capacity=0)
        try:
            self._next_seq = self.bus.next_seq(self.session_id)
            task_status.started()
            async for env in sub:
                self._append(sink, env, claim)
                if isinstance(env.message, SessionClosed):
                    break
        finally:
            self.bus.unsubscribe(sub)

    def _append(self, sink: Sink, env: Envelope, claim: SessionClaim | None = None) -> None:
        """Write one message, synchronously (no checkpoint: see "Durability")."""
        if planted("recorder.drop_line") and env.seq % 10 == 0:
            return
        line = encode_line(env, self.wall_clock(), self.scrubber, self.table) + "\n"
        if env.seq > self._next_seq:
            # Numbers the bus gave to messages whose sender was cancelled before they
            # reached the first observer (this one): delivered to no one.
            void = {"v": FORMAT_VERSION, "kind": "void", "first": self._next_seq, "last": env.seq - 1}
            line = _dumps(void) + "\n" + line
            self.voided += env.seq - self._next_seq
        self._next_seq = env.seq + 1
        try:
            sink.write(_utf8(line))
            if isinstance(env.message, SYNC_POINTS):
                sink.fsync()
                self.synced += 1
                lost = claim.lost() if claim is not None else None
                if lost is not None:
                    raise RecorderError(
                        f"the recording {self.path} {lost} while the session ran; the session stops "
                        "(what it did since is in no file anyone can read, and it could not be resumed)"
                    )
        except OSError as exc:
            raise self._fail("write", exc) from exc
        self.written += 1


def recorder_error_in(exc: BaseException) -> RecorderError | None:
    """The ``RecorderError`` inside ``exc`` (possibly nested exception groups), if any."""
    if isinstance(exc, RecorderError):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = recorder_error_in(inner)
            if found is not None:
                return found
    return None


# -- reading -------------------------------------------------------------------------------------
@attrs.frozen
class RecordedLine:
    """One envelope line of a recording."""

    line: int
    """1-based line number in the file."""
    env: Envelope
    wall: str | None
    """The wall timestamp written beside it (``None`` if absent)."""


@attrs.frozen
class Segment:
    """What one process wrote: its meta line and its messages."""

    meta: Mapping[str, Any]
    meta_line: int | None
    lines: tuple[RecordedLine, ...]

    @property
    def envelopes(self) -> list[Envelope]:
        return [r.env for r in self.lines]

    @property
    def closed(self) -> bool:
        """The process ended the session in order (its last message is ``SessionClosed``)."""
        return bool(self.lines) and isinstance(self.lines[-1].env.message, SessionClosed)


@attrs.frozen
class TornLine:
    line: int
    reason: str


@attrs.frozen
class Recording:
    path: Path
    segments: tuple[Segment, ...]
    torn: tuple[TornLine, ...] = ()
    voids: tuple[tuple[int, int], ...] = ()
    """Sequence numbers (first, last) the bus gave to messages nobody received."""

    @property
    def lines(self) -> list[RecordedLine]:
        return [r for s in self.segments for r in s.lines]

    @property
    def envelopes(self) -> list[Envelope]:
        return [r.env for s in self.segments for r in s.lines]

    @property
    def meta(self) -> Mapping[str, Any]:
        """The first process's meta line (empty for a file without one)."""
        return self.segments[0].meta if self.segments else {}

    @property
    def session_id(self) -> str:
        sid = self.meta.get("session_id")
        if isinstance(sid, str):
            return sid
        envs = self.envelopes
        return envs[0].session_id if envs else ""

    @property
    def last_seq(self) -> int:
        envs = self.envelopes
        return envs[-1].seq if envs else 0

    @property
    def last_wall(self) -> str | None:
        for seg in reversed(self.segments):
            for rec in reversed(seg.lines):
                if rec.wall:
                    return rec.wall
            started = seg.meta.get("started")
            if isinstance(started, str):
                return started
        return None


def load_recording(
    path: Path | str,
    *,
    on_torn: Callable[[TornLine], None] | None = None,
    check_sequence: bool = True,
    on_line: Callable[[RecordedLine], None] | None = None,
) -> Recording:
    """Read a recording back. Raises ``RecordingError`` (file and line) for anything but
    a torn last line of a process's part; those are passed to ``on_torn`` and skipped.
    With ``on_line``, each envelope line goes to it as it is read and is not kept (the
    segments come back without lines): a caller that folds a long recording into
    something small never holds all of it."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        raise RecordingError(p, None, "no such recording") from None
    except IsADirectoryError:
        raise RecordingError(p, None, "is a directory, not a recording") from None
    except OSError as exc:
        raise RecordingError(p, None, f"cannot read: {exc.strerror or exc}") from None
    with cyclic_gc_paused():
        return parse_recording(p, raw, on_torn=on_torn, check_sequence=check_sequence, on_line=on_line)


_gc_pause_lock = threading.Lock()
_gc_pausers = 0
_gc_was_enabled = False


@contextlib.contextmanager
def cyclic_gc_paused() -> Iterator[None]:
    """No cyclic garbage collection while a recording is parsed (by any thread).

    A parse builds containers that all survive it (frozen contents, messages), so the
    collector runs again and again over a growing heap and finds nothing: half the time
    of a load, and while it runs it holds the interpreter, so in the daemon (which loads
    in a worker thread) every session stalled with it. What is parsed has no cycles:
    reference counting frees it. Nested and concurrent pauses are counted; the last one
    out restores the collector as it was."""
    global _gc_pausers, _gc_was_enabled
    with _gc_pause_lock:
        if _gc_pausers == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_pausers += 1
    try:
        yield
    finally:
        with _gc_pause_lock:
            _gc_pausers -= 1
            if _gc_pausers == 0 and _gc_was_enabled:
                gc.enable()


def parse_recording(
    p: Path,
    raw: bytes,
    *,
    on_torn: Callable[[TornLine], None] | None = None,
    check_sequence: bool = True,
    on_line: Callable[[RecordedLine], None] | None = None,
) -> Recording:
    ends_with_newline = raw.endswith(b"\n")
    texts = raw.split(b"\n")
    if ends_with_newline:
        texts.pop()
    numbered = [(i + 1, t) for i, t in enumerate(texts) if t.strip()]
    segments: list[Segment] = []
    torn: list[TornLine] = []
    meta: Mapping[str, Any] = {}
    meta_line: int | None = None
    lines: list[RecordedLine] = []
    expected_seq: int | None = None
    session_id: str | None = None
    voids: list[tuple[int, int]] = []
    refs = ContentRefs()
    pending_bad: tuple[int, str] | None = None
    """An undecodable line: torn if the file ends or a meta line with ``torn_tail``
    follows, else an error."""

    def flush() -> None:
        if meta_line is not None or lines:
            segments.append(Segment(meta=meta, meta_line=meta_line, lines=tuple(lines)))

    for idx, (lineno, text) in enumerate(numbered):
        where = f"{p}:{lineno}"
        data = _json_object(text)
        if pending_bad is not None:
            is_repairing_meta = data is not None and data.get("kind") == "meta" and data.get("torn_tail")
            if not is_repairing_meta:
                raise RecordingError(p, pending_bad[0], pending_bad[1])
            t = TornLine(pending_bad[0], pending_bad[1])
            torn.append(t)
            if on_torn is not None:
                on_torn(t)
            pending_bad = None
        if data is not None and data.get("kind") == "void":
            _check_version(p, lineno, data.get("v"))
            first, last = data.get("first"), data.get("last")
            if not isinstance(first, int) or not isinstance(last, int) or last < first:
                raise RecordingError(p, lineno, "a void line needs integer 'first' <= 'last'")
            if check_sequence and expected_seq is not None and first != expected_seq:
                raise RecordingError(p, lineno, f"sequence gap: expected seq {expected_seq}, found void from {first}")
            voids.append((first, last))
            expected_seq = last + 1
            continue
        if data is not None and data.get("kind") == "meta":
            _check_version(p, lineno, data.get("v"))
            sid = data.get("session_id")
            if session_id is not None and isinstance(sid, str) and sid != session_id:
                raise RecordingError(p, lineno, f"meta line for session {sid!r} in the recording of {session_id!r}")
            flush()
            meta, meta_line, lines = data, lineno, []
            refs.reset()
            if isinstance(sid, str):
                session_id = sid
            continue
        try:
            if data is None:
                # Tell a torn line apart from JSON that is not an object.
                try:
                    json.loads(text)
                except ValueError as exc:
                    raise CodecError(f"malformed JSON: {exc}", where=where) from None
                raise CodecError("a recording line must be a JSON object", where=where)
            _check_version(p, lineno, data.get("v"))
            env = decode_line(data, refs, where=where)
        except CodecError as exc:
            last = idx == len(numbered) - 1
            if data is None and last and not ends_with_newline:
                t = TornLine(lineno, f"torn last line ({_short(str(exc))})")
                torn.append(t)
                if on_torn is not None:
                    on_torn(t)
                continue
            if data is None:
                pending_bad = (lineno, _strip_where(str(exc), where))
                continue
            raise RecordingError(p, lineno, _strip_where(str(exc), where)) from None
        if session_id is None:
            session_id = env.session_id
        elif env.session_id != session_id:
            raise RecordingError(p, lineno, f"message of session {env.session_id!r} in the recording of {session_id!r}")
        if check_sequence and expected_seq is not None and env.seq != expected_seq:
            raise RecordingError(p, lineno, f"sequence gap: expected seq {expected_seq}, found {env.seq}")
        expected_seq = env.seq + 1
        wall = data.get("wall")
        recorded = RecordedLine(line=lineno, env=env, wall=wall if isinstance(wall, str) else None)
        if on_line is not None:
            on_line(recorded)
        else:
            lines.append(recorded)
    if pending_bad is not None:
        raise RecordingError(p, pending_bad[0], pending_bad[1])
    flush()
    return Recording(path=p, segments=tuple(segments), torn=tuple(torn), voids=tuple(voids))


def _check_version(p: Path, lineno: int, version: Any) -> None:
    if version == FORMAT_VERSION or version == REFS_VERSION:
        return
    if isinstance(version, int) and version > REFS_VERSION:
        raise RecordingError(
            p, lineno, f"format version {version} is newer than this agentbus reads ({REFS_VERSION}); upgrade agentbus"
        )
    raise RecordingError(p, lineno, f"unsupported format version {version!r}")


def _strip_where(message: str, where: str) -> str:
    prefix = f"{where}: "
    return message[len(prefix) :] if message.startswith(prefix) else message


def _short(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def read_meta(path: Path | str, *, limit: int = 1 << 20) -> Mapping[str, Any]:
    """The first meta line of a recording, read alone (for what a session was started
    with: its workspace, model, mode). Raises ``RecordingError`` when there is no
    recording or it does not start with one (a recording is never empty: its first
    process writes the meta line before anything else)."""
    p = Path(path)
    try:
        with p.open("rb") as fh:
            first = fh.readline(limit)
    except FileNotFoundError:
        raise RecordingError(p, None, "no such recording") from None
    except OSError as exc:
        raise RecordingError(p, None, f"cannot read: {exc.strerror or exc}") from None
    if not first.strip():
        raise RecordingError(p, None, "the recording is empty")
    data = _json_object(first)
    if data is None or data.get("kind") != "meta":
        raise RecordingError(p, 1, "the recording does not start with its meta line")
    _check_version(p, 1, data.get("v"))
    return data


def iter_recordings(data_dir: Path) -> Iterable[Path]:
    """Every recording file in ``data_dir`` (any order)."""
    folder = sessions_dir(data_dir)
    try:
        return [p for p in folder.iterdir() if p.suffix == ".jsonl" and p.is_file()]
    except FileNotFoundError:
        return []


__all__ = [
    "INTERNED",
    "INTERNED_TYPES",
    "REDACTED",
    "REFS_VERSION",
    "SYNC_POINTS",
    "ContentRefs",
    "ContentTable",
    "FileSink",
    "RecordedLine",
    "RecorderActor",
    "RecorderError",
    "Recording",
    "RecordingError",
    "Scrubber",
    "Segment",
    "SessionClaim",
    "SessionInUseError",
    "Sink",
    "Tail",
    "TornLine",
    "decode_line",
    "default_data_dir",
    "encode_line",
    "in_use_message",
    "iter_recordings",
    "load_recording",
    "parse_recording",
    "read_meta",
    "read_tail",
    "recorder_error_in",
    "recording_path",
    "secrets_from_env",
    "session_in_use",
    "sessions_dir",
    "wall_clock_iso",
]
