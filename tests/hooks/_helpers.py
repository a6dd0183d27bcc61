"""Shared helpers for hook tests: process-group liveness, hook commands."""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path


def group_alive(pgid: int) -> bool:
    """Whether a non-zombie process is still in process group ``pgid`` (Linux /proc)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            raw = (entry / "stat").read_bytes()
        except OSError:
            continue
        fields = raw[raw.rfind(b")") + 2 :].split()
        if len(fields) >= 3 and int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
            return True
    return False


def py(code: str) -> str:
    """A hook command running ``code`` with this Python (no node needed)."""
    return f"{shlex.quote(sys.executable)} -c {shlex.quote(code)}"


ECHO_INPUT = py("import sys, json; d = json.load(sys.stdin); print(json.dumps({'systemMessage': json.dumps(d)}))")
"""A hook that answers with its whole input, JSON-encoded, as ``systemMessage``."""

ENV = dict(os.environ)


class PidPipe:
    """A FIFO at ``path`` that hook commands write their process ids to (``echo $$ >
    path`` or ``>> path``), read as the lines come: no polling. It holds a write end
    itself, so that its read end never reports end-of-file between two writers."""

    def __init__(self, path: Path) -> None:
        os.mkfifo(path)
        self._read = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        self._write = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        self._buffer = b""
        self.pids: list[int] = []

    async def wait(self, count: int = 1) -> list[int]:
        """The first ``count`` process ids, once they have been written."""
        import trio

        while len(self.pids) < count:
            await trio.lowlevel.wait_readable(self._read)
            try:
                self._buffer += os.read(self._read, 4096)
            except BlockingIOError:
                continue
            *lines, self._buffer = self._buffer.split(b"\n")
            self.pids += [int(line) for line in lines if line.strip()]
        return self.pids[:count]

    def close(self) -> None:
        os.close(self._read)
        os.close(self._write)
