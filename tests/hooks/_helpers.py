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


def pids_in(path: Path) -> list[int]:
    """Process ids a hook wrote to ``path`` (``echo $$ >> path``), complete lines only."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return []
    return [int(line) for line in text.splitlines(keepends=True) if line.endswith("\n")]


async def wait_for_pids(path: Path, count: int = 1) -> list[int]:
    """Wait until hooks have written ``count`` process ids to ``path``."""
    import trio

    # Polling: the only signal is a file another process writes.
    while len(found := pids_in(path)) < count:  # noqa: ASYNC110
        await trio.sleep(0.005)
    return found
