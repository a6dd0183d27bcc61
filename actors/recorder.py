"""The recorder actor: appends every message of its session to the session's recording.

Accepts: every message of its session, as an observer. Emits: nothing unless it fails,
and then loudly (``RecorderError`` stops the session: the supervisor's nursery cancels
the other actors). Owns: ``<data dir>/sessions/<session id>.jsonl``, and the session
itself: an exclusive lock on the file for the session's life (``SessionClaim``). Stops:
after the session's last message (``SessionClosed``), when its subscription closes, or
by its supervisor's cancel.

The format — meta, envelope and void lines, contents by reference, ownership, secrets,
reading back — is ``actors.recording``'s (its package docstring); this module only
decides when to write what.

**Ownership.** A second recorder of a session fails with ``SessionInUseError``. At each
sync point the recorder also checks that the path still names the file it writes: a
recording deleted or replaced under a running session stops it with a
``RecorderError`` saying so, rather than writing on into a file nobody can read.

**Durability.** Each line is written with one ``write(2)`` as it is observed, so a
killed process loses at most a line that was being written (the page cache survives
``kill -9``). ``fsync`` runs at the points that matter: a turn's end, before an
approval is asked, and the session's end. "Before it is reported to clients" holds
because the recorder is the session's *first* observer and a *tap* (``Bus.subscribe``):
the bus calls it with each message, in the sender's task, before any other observer or
the recipient gets it, and it writes the line (and at a sync point fsyncs it)
synchronously, without a checkpoint; no task switch a message. Every task that acts on a
message therefore runs after that message is on disk; a client printing a
turn's end prints a durable end (a tap is first whenever it subscribed, so no other
observer can come before it). The fsync runs in a worker thread (it takes what a disk
takes, and a daemon whose sessions end their turns together would otherwise stop for
all of them in a row), and the bus *holds* the sync points for the recorder
(``Bus.subscribe(holds=...)``): nobody else is handed one until it is synced (a daemon
client's catch-up from the file stops before it: ``Bus.held``), and the session's next
message waits. Under a virtual clock (``trio.testing.MockClock``, as
replays and tests run) a thread would let the clock jump while the disk works: there the
fsync runs inline, blocking the event loop. So it does for a process that serves one
session and its subagents (``agentbus -p``, ``agentbus tool``: ``sync_inline``), whose
loop has little else to do meanwhile than wait for that fsync: handing it to a thread
cost such a run more than the fsync itself (a `-p hi` run 2.7 ms of wall time: the
thread's start and two hand-overs). Inline, nothing is held after the tap returns while
the writes succeed (the fsync is done by then); once one has failed, the sync points are
held, as in a thread, so no observer sees one that is not on disk. Either way the bus
counts every message as held while the tap writes it (``Bus.held``): a catch-up reading
the file in a worker thread meanwhile stops before its line.

**Failure.** A write that fails (disk full, permissions, a vanished directory) raises
``RecorderError`` naming the file and the cause; nothing is dropped silently.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import trio

from actors.recording import (
    ContentTable,
    FileSink,
    RecorderError,
    Scrubber,
    SessionClaim,
    Sink,
    Tail,
    encode_line,
    line_bytes,
    meta_line,
    read_tail,
    void_line,
    wall_clock_iso,
)
from bus import Bus, Envelope
from bus.messages import ApprovalRequested, SessionClosed, TurnEnded
from bus.planted import planted

SYNC_POINTS = (TurnEnded, ApprovalRequested, SessionClosed)
"""Messages after which the file is fsynced (before anyone else sees them)."""
_SYNC_NAMES = frozenset(t.__name__ for t in SYNC_POINTS)


def _virtual_clock() -> bool:
    """Whether this run's clock is trio's ``MockClock`` (only if trio.testing is loaded)."""
    testing = sys.modules.get("trio.testing")
    return testing is not None and isinstance(trio.lowlevel.current_clock(), testing.MockClock)


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
        sync_inline: bool = False,
    ) -> None:
        self.bus = bus
        self.sync_inline = sync_inline
        """fsync in the sender's task, as under a virtual clock (see "Durability")."""
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
        meta = meta_line(
            self.session_id,
            self.wall_clock(),
            self.meta,
            first_seq=self.bus.next_seq(self.session_id),
            resumed=tail.last_seq > 0,
            torn_tail=tail.torn,
            scrubber=self.scrubber,
        )
        head = ("\n" if tail.needs_newline else "") + meta + "\n"
        try:
            sink.write(line_bytes(head))
            sink.fsync()
        except OSError as exc:
            raise self._fail("write", exc) from exc
        # A tap: the bus calls ``tap`` with each message in its sender's task, before
        # anyone else has it (module doc). This task fsyncs the sync points the tap
        # hands over, raises what the tap could not do (in this task: the sender is
        # not to blame), and ends after the session's last message.
        off_loop = not (self.sync_inline or _virtual_clock())
        failed: list[Exception] = []

        def tap(env: Envelope) -> bool:
            if failed:
                return False
            try:
                due = self._append(sink, env, claim, sync=not off_loop)
            except Exception as exc:  # noqa: BLE001 - raised in this task, not the sender's
                failed.append(exc)
                return True
            return due or isinstance(env.message, SessionClosed)

        sub = self.bus.subscribe(
            self.session_id,
            f"recorder:{self.session_id}",
            policy="block",
            capacity=math.inf,
            # Inline, a sync point is on disk when the tap returns, unless its write failed:
            # then it is held, as in a thread, until the recorder lets go as it stops
            # with the error (and the session with it).
            holds=_SYNC_NAMES.__contains__ if off_loop else (lambda name: bool(failed) and name in _SYNC_NAMES),
            tap=tap,
        )
        try:
            self._next_seq = self.bus.next_seq(self.session_id)
            task_status.started()
            async for env in sub:
                if failed:
                    raise failed[0]
                if off_loop and isinstance(env.message, SYNC_POINTS):
                    try:
                        await trio.to_thread.run_sync(sink.fsync)
                        self._synced(claim)
                    except OSError as exc:
                        raise self._fail("write", exc) from exc
                    sub.release(env.seq)
                if isinstance(env.message, SessionClosed):
                    break
        finally:
            self.bus.unsubscribe(sub)

    def _append(self, sink: Sink, env: Envelope, claim: SessionClaim | None = None, *, sync: bool = True) -> bool:
        """Write one message, synchronously (no checkpoint: see "Durability"), and fsync
        at a sync point; ``sync=False``: True when it is one (the caller fsyncs)."""
        if planted("recorder.drop_line") and env.seq % 10 == 0:
            return False
        line = encode_line(env, self.wall_clock(), self.scrubber, self.table) + "\n"
        if env.seq > self._next_seq:
            # Numbers the bus gave to messages whose sender was cancelled before they
            # reached the first observer (this one): delivered to no one.
            line = void_line(self._next_seq, env.seq - 1) + "\n" + line
            self.voided += env.seq - self._next_seq
        self._next_seq = env.seq + 1
        try:
            sink.write(line_bytes(line))
            due = isinstance(env.message, SYNC_POINTS)
            if due and sync:
                sink.fsync()
                self._synced(claim)
        except OSError as exc:
            raise self._fail("write", exc) from exc
        self.written += 1
        return due and not sync

    def _synced(self, claim: SessionClaim | None) -> None:
        self.synced += 1
        lost = claim.lost() if claim is not None else None
        if lost is not None:
            raise RecorderError(
                f"the recording {self.path} {lost} while the session ran; the session stops "
                "(what it did since is in no file anyone can read, and it could not be resumed)"
            )



__all__ = ["SYNC_POINTS", "RecorderActor"]
