"""Process groups and process trees, read from ``/proc`` (Linux).

The shell tool and the hook runner start each command in a process group of its own
and must end the whole group (and children that left it) on cancel or timeout; a forced
exit kills the groups of our children. Where there is no ``/proc`` the table is None and
callers fall back to signalling the group.
"""

from __future__ import annotations

import os

import attrs


@attrs.frozen
class ProcInfo:
    """One line of ``/proc/<pid>/stat``, the fields we use."""

    pid: int
    ppid: int
    pgid: int
    state: str
    """``R``, ``S``, ``Z`` (zombie), ``X`` (dead)…"""


def process_table() -> list[ProcInfo] | None:
    """Every process from ``/proc`` (None where there is no ``/proc``)."""
    try:
        names = os.listdir("/proc")
    except OSError:
        return None
    table: list[ProcInfo] = []
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                raw = f.read()
        except OSError:
            continue  # gone meanwhile
        # ``pid (comm) state ppid pgrp ...``; comm may hold spaces and parentheses.
        fields = raw[raw.rfind(b")") + 2 :].split()
        if len(fields) < 3:
            continue
        table.append(ProcInfo(int(name), int(fields[1]), int(fields[2]), fields[0].decode()))
    return table


def descendants(pid: int) -> list[int]:
    """All descendants of ``pid``, parents before children (Gemini walks ``pgrep -P``)."""
    table = process_table()
    if not table:
        return []
    children: dict[int, list[int]] = {}
    for info in table:
        children.setdefault(info.ppid, []).append(info.pid)
    found: list[int] = []
    stack = [pid]
    while stack:
        for child in children.get(stack.pop(), ()):
            found.append(child)
            stack.append(child)
    return found


def group_has_live_members(pgid: int) -> bool:
    """Whether a non-zombie process is still in the group (without ``/proc``: whether
    the group can still be signalled)."""
    table = process_table()
    if table is None:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    return any(p.pgid == pgid and p.state not in ("Z", "X") for p in table)


def signal_group(pgid: int, sig: int, pids: list[int] | tuple[int, ...] = ()) -> None:
    """Send ``sig`` to the group, then to each of ``pids`` (children that left the
    group), deepest first; processes already gone are skipped."""
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass
    for pid in reversed(pids):
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def child_process_groups(pid: int | None = None) -> set[int]:
    """The process groups of ``pid``'s children (default: ours), other than our own."""
    parent = os.getpid() if pid is None else pid
    own = os.getpgrp()
    table = process_table() or []
    return {p.pgid for p in table if p.ppid == parent and p.pgid != own}
