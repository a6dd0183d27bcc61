"""Reading a recording back whole: its processes' parts (``Segment``), each envelope
line decoded with its contents resolved, torn lines reported and skipped (the package
docstring's "Reading").
"""

from __future__ import annotations

import contextlib
import gc
import json
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import attrs

from bus import CodecError, Envelope
from bus.codec import envelope_from_plain
from bus.messages import SessionClosed

from ._lines import RecordingError, check_version, json_object
from ._refs import ContentRefs


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
        data = json_object(text)
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
            check_version(p, lineno, data.get("v"))
            first, last = data.get("first"), data.get("last")
            if not isinstance(first, int) or not isinstance(last, int) or last < first:
                raise RecordingError(p, lineno, "a void line needs integer 'first' <= 'last'")
            if check_sequence and expected_seq is not None and first != expected_seq:
                raise RecordingError(p, lineno, f"sequence gap: expected seq {expected_seq}, found void from {first}")
            voids.append((first, last))
            expected_seq = last + 1
            continue
        if data is not None and data.get("kind") == "meta":
            check_version(p, lineno, data.get("v"))
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
            check_version(p, lineno, data.get("v"))
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



def _strip_where(message: str, where: str) -> str:
    prefix = f"{where}: "
    return message[len(prefix) :] if message.startswith(prefix) else message


def _short(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."



__all__ = [
    "RecordedLine",
    "Recording",
    "Segment",
    "TornLine",
    "cyclic_gc_paused",
    "decode_line",
    "load_recording",
    "parse_recording",
]
