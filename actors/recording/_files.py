"""Where recordings live and who owns them: the data directory, a session's path, the
listing of a directory's recordings, the ownership lock (the package docstring's
"Ownership"), and deleting a recording nobody holds.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterable
from pathlib import Path

from ._lines import is_meta_line, json_object
from ._scan import lines_backward


class RecorderError(Exception):
    """The recording cannot be written; the session must stop."""


class SessionInUseError(RecorderError):
    """Another process holds the session's recording (it owns the session)."""


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


def iter_recordings(data_dir: Path) -> Iterable[Path]:
    """Every recording file in ``data_dir`` (any order)."""
    folder = sessions_dir(data_dir)
    try:
        return [p for p in folder.iterdir() if p.suffix == ".jsonl" and p.is_file()]
    except FileNotFoundError:
        return []


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
            size = os.fstat(fh.fileno()).st_size
            meta_line = next((raw for raw in lines_backward(fh, size, limit=block) if is_meta_line(raw)), None)
    except OSError:
        return None
    meta = json_object(meta_line) if meta_line is not None else None
    pid = meta.get("pid") if meta else None
    return pid if isinstance(pid, int) and _alive(pid) else None


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


__all__ = [
    "RecorderError",
    "SessionClaim",
    "SessionInUseError",
    "default_data_dir",
    "delete_recording",
    "in_use_message",
    "iter_recordings",
    "recorder_error_in",
    "recording_path",
    "session_in_use",
    "sessions_dir",
]
