"""The recorder actor: the session's append-only log.

Observes every message of its session (a ``block`` subscription: the bus waits for
it, so nothing is ever dropped) and appends each, codec-encoded with its sequence
number and a wall timestamp, as one JSON line to ``<data dir>/sessions/<id>.jsonl``.
Durable at the points that matter: it fsyncs when a turn ends and before an approval
is asked.
Emits nothing unless it fails, and then loudly: a write error raises ``RecorderError``,
which stops the session (the supervisor's nursery cancels its siblings).
Stops: when the session's last message (``SessionClosed``) is written, or its
subscription closes.
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Callable
from pathlib import Path
from typing import IO

import trio

from bus import Bus
from bus.codec import encode_envelope
from bus.messages import ApprovalRequested, SessionClosed, TurnEnded

SYNC_POINTS = (TurnEnded, ApprovalRequested, SessionClosed)


class RecorderError(Exception):
    """The recording cannot be written; the session must stop."""


def default_data_dir() -> Path:
    """``$AGENTBUS_DATA_DIR``, else ``$XDG_DATA_HOME/agentbus``, else ``~/.local/share/agentbus``."""
    explicit = os.environ.get("AGENTBUS_DATA_DIR")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_DATA_HOME")
    base = Path(xdg) if xdg else Path.home() / ".local" / "share"
    return base / "agentbus"


def wall_clock_iso() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class RecorderActor:
    def __init__(
        self,
        bus: Bus,
        *,
        session_id: str,
        path: Path,
        wall_clock: Callable[[], str] = wall_clock_iso,
    ) -> None:
        self.bus = bus
        self.session_id = session_id
        self.path = path
        self.wall_clock = wall_clock
        self.written = 0

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        sub = self.bus.subscribe(self.session_id, f"recorder:{self.session_id}", policy="block", capacity=4096)
        try:
            fh = self._open()
        except OSError as exc:
            self.bus.unsubscribe(sub)
            raise RecorderError(f"cannot open recording {self.path}: {exc.strerror or exc}") from exc
        task_status.started()
        try:
            async for env in sub:
                line = encode_envelope(env, wall=self.wall_clock())
                try:
                    fh.write(line + "\n")
                    fh.flush()
                    if isinstance(env.message, SYNC_POINTS):
                        os.fsync(fh.fileno())
                except OSError as exc:
                    raise RecorderError(
                        f"cannot write recording {self.path}: {exc.strerror or exc}"
                    ) from exc
                self.written += 1
                if isinstance(env.message, SessionClosed):
                    break
        finally:
            self.bus.unsubscribe(sub)
            fh.close()

    def _open(self) -> IO[str]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        return self.path.open("a", encoding="utf-8")
