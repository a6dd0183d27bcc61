"""The daemon's list of open sessions, kept on disk so that they outlive the daemon.

``<data dir>/daemon/sessions.json``: one entry per session a client created or loaded
and nobody ended. After a restart the daemon resumes an entry from its recording when a
client first touches it. Written whole (a temporary file renamed over the old one) on
every change, mode 0600.
"""

from __future__ import annotations

import contextlib
import json
import os
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
        self.problem: str | None = None
        """Why the file could not be read (the daemon starts with no entries then)."""
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
            for item in raw.get("sessions", []):
                entry = _conv.structure(item, SessionEntry)
                self._entries[entry.session_id] = entry
        except FileNotFoundError:
            pass
        except (OSError, ValueError, TypeError, AttributeError, cattrs.BaseValidationError) as exc:
            self.problem = f"{path}: {exc}"

    def get(self, session_id: str) -> SessionEntry | None:
        return self._entries.get(session_id)

    def entries(self) -> list[SessionEntry]:
        return list(self._entries.values())

    def put(self, entry: SessionEntry) -> None:
        self._entries[entry.session_id] = entry
        self._save()

    def remove(self, session_id: str) -> None:
        if self._entries.pop(session_id, None) is not None:
            self._save()

    def _save(self) -> None:
        data: dict[str, Any] = {"v": 1, "sessions": [_conv.unstructure(e) for e in self._entries.values()]}
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
