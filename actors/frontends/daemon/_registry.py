"""The daemon's list of open sessions, kept on disk so that they outlive the daemon.

``<data dir>/daemon/sessions.json``: one entry per session a client created or loaded
and nobody ended. After a restart the daemon resumes an entry from its recording when a
client first touches it. Written whole (a temporary file renamed over the old one, mode
0600). Changes are made in memory (``put``, ``remove``) and written by ``write`` from a
``snapshot``: the daemon writes from a worker thread, one write for a burst of changes,
so that the event loop never waits for the disk; a write older than the last one
written is skipped, so a late thread never undoes a newer write. A session whose entry
was not written yet when the daemon died is still resumed from its recording.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from pathlib import Path
from typing import Any

import attrs
import cattrs


@attrs.frozen(kw_only=True)
class SessionEntry:
    session_id: str
    workspace: str
    model: str
    approval_mode: str
    fake_responses: str = ""
    fake_chunk_delay_ms: int = 0
    created: str = ""


_conv = cattrs.Converter()


class Registry:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._entries: dict[str, SessionEntry] = {}
        self._plain: dict[str, dict[str, Any]] = {}
        """Each entry unstructured once, for snapshots."""
        self._version = 0
        """Bumped by every change."""
        self._snapshotted = 0
        self._written = 0
        self._write_lock = threading.Lock()
        self.problem: str | None = None
        """Why the file could not be read (the daemon starts with no entries then)."""
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
            for item in raw.get("sessions", []):
                entry = _conv.structure(item, SessionEntry)
                self._entries[entry.session_id] = entry
                self._plain[entry.session_id] = _conv.unstructure(entry)
        except FileNotFoundError:
            pass
        except (OSError, ValueError, TypeError, AttributeError, cattrs.BaseValidationError) as exc:
            self.problem = f"{path}: {exc}"
            self._entries.clear()
            self._plain.clear()

    def get(self, session_id: str) -> SessionEntry | None:
        return self._entries.get(session_id)

    def entries(self) -> list[SessionEntry]:
        return list(self._entries.values())

    def put(self, entry: SessionEntry) -> bool:
        """Add or replace an entry; False when it was already there as it is."""
        if self._entries.get(entry.session_id) == entry:
            return False
        self._entries[entry.session_id] = entry
        self._plain[entry.session_id] = _conv.unstructure(entry)
        self._version += 1
        return True

    def remove(self, session_id: str) -> bool:
        if self._entries.pop(session_id, None) is None:
            return False
        del self._plain[session_id]
        self._version += 1
        return True

    @property
    def dirty(self) -> bool:
        """Changed since the last snapshot."""
        return self._snapshotted < self._version

    def snapshot(self) -> tuple[int, list[dict[str, Any]]]:
        """The entries as they are now, for ``write`` (take it where the entries change)."""
        self._snapshotted = self._version
        return self._version, list(self._plain.values())

    def write(self, snapshot: tuple[int, list[dict[str, Any]]]) -> None:
        """Write a snapshot (any thread); raises ``OSError``."""
        version, sessions = snapshot
        with self._write_lock:
            if version <= self._written:
                return
            data: dict[str, Any] = {"v": 1, "sessions": sessions}
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            tmp = self.path.with_suffix(f".{os.getpid()}.tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
            try:
                os.write(fd, (json.dumps(data, indent=1) + "\n").encode("utf-8"))
                os.fsync(fd)
            finally:
                os.close(fd)
            try:
                os.replace(tmp, self.path)
            except OSError:
                with contextlib.suppress(OSError):
                    tmp.unlink()
                raise
            self._written = version

    def save(self) -> None:
        """Write now, if anything changed (here, in this thread)."""
        if self.dirty:
            self.write(self.snapshot())
