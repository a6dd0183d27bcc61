"""Where the daemon lives: its private directory, socket, lock and log.

``$AGENTBUS_RUNTIME_DIR`` if set, else ``$XDG_RUNTIME_DIR/agentbus``, else
``~/.local/state/agentbus``. The directory is created mode 0700 and refused when
another user owns it or others can enter it; the socket is mode 0600. One daemon per
directory: it holds an exclusive ``flock`` on ``daemon.lock`` (which also names its
pid) for as long as it runs, so a second daemon refuses to start, and a crashed one
leaves no stale lock (the kernel drops it with the process). A daemon that listens on
TCP as well writes the token TCP clients must present to ``daemon.token`` (mode 0600)
and removes it when it stops.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
from collections.abc import Iterator, Mapping
from pathlib import Path

import attrs

SOCKET_NAME = "daemon.sock"
LOCK_NAME = "daemon.lock"
LOG_NAME = "daemon.log"
TOKEN_NAME = "daemon.token"
MAX_SOCKET_PATH = 107
"""``sun_path`` holds 108 bytes with its terminating NUL on Linux."""


class DaemonPathError(Exception):
    """The daemon's directory cannot be used safely."""


class DaemonRunningError(Exception):
    """Another daemon holds the lock."""

    def __init__(self, paths: DaemonPaths, pid: int | None) -> None:
        self.paths = paths
        self.pid = pid
        who = f"pid {pid}" if pid else "another process"
        super().__init__(f"a daemon is already running ({who}) on {paths.socket}")


@attrs.frozen
class DaemonPaths:
    runtime_dir: Path

    @property
    def socket(self) -> Path:
        return self.runtime_dir / SOCKET_NAME

    @property
    def lock(self) -> Path:
        return self.runtime_dir / LOCK_NAME

    @property
    def log(self) -> Path:
        return self.runtime_dir / LOG_NAME

    @property
    def token(self) -> Path:
        """The token of the TCP listener (only while a daemon listens on TCP)."""
        return self.runtime_dir / TOKEN_NAME


def default_paths(environ: Mapping[str, str] | None = None) -> DaemonPaths:
    env = os.environ if environ is None else environ
    explicit = env.get("AGENTBUS_RUNTIME_DIR")
    if explicit:
        return DaemonPaths(Path(explicit))
    xdg = env.get("XDG_RUNTIME_DIR")
    if xdg and Path(xdg).is_dir():
        return DaemonPaths(Path(xdg) / "agentbus")
    return DaemonPaths(Path.home() / ".local" / "state" / "agentbus")


def prepare_runtime_dir(paths: DaemonPaths) -> None:
    """Create the directory (0700) or check an existing one is private to this user."""
    d = paths.runtime_dir
    d.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = d.lstat()
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        raise DaemonPathError(f"{d} is not a directory")
    if info.st_uid != os.getuid():
        raise DaemonPathError(f"{d} belongs to another user (uid {info.st_uid})")
    if info.st_mode & 0o077:
        os.chmod(d, 0o700)
    if len(os.fsencode(paths.socket)) > MAX_SOCKET_PATH:
        raise DaemonPathError(
            f"socket path {paths.socket} is longer than {MAX_SOCKET_PATH} bytes; "
            "set AGENTBUS_RUNTIME_DIR to a shorter directory"
        )


def read_pid(paths: DaemonPaths) -> int | None:
    try:
        text = paths.lock.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


@contextlib.contextmanager
def hold_lock(paths: DaemonPaths) -> Iterator[None]:
    """Hold the daemon lock for the ``with`` block; raises ``DaemonRunningError``."""
    fd = os.open(paths.lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise DaemonRunningError(paths, read_pid(paths)) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        try:
            yield
        finally:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
    finally:
        os.close(fd)  # releases the lock


def lock_is_held(paths: DaemonPaths) -> bool:
    """A daemon runs on ``paths`` (its lock is held)."""
    try:
        fd = os.open(paths.lock, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False
