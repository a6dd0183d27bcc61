"""Process groups and process trees (psutil), for the shell tool, the hook runner and
a forced exit.

The shell tool and the hook runner start each command in a process group of its own and
must end the whole group, and the children that left it, on cancel or timeout
(SIGTERM, a grace, SIGKILL: Gemini's ``killProcessGroup``); a forced exit kills the
groups of our children. Descendants are :class:`psutil.Process` objects, remembered
between the SIGTERM and the SIGKILL: psutil refuses to signal one whose PID has since
been given to another process, which a bare PID cannot tell.

psutil has no process-group field, so a group's members are found with ``getpgid`` over
every PID. Where psutil cannot list processes, a group is probed with ``killpg(pgid, 0)``
instead (a zombie member then still counts).
"""

from __future__ import annotations

import errno
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import psutil

_GONE = ("zombie", "dead")
"""``psutil.STATUS_ZOMBIE`` and ``STATUS_DEAD`` (psutil is imported when first used: a run
that starts no process does not pay for it)."""


def descendants(pid: int) -> list[psutil.Process]:
    """All descendants of ``pid``, parents before children (Gemini walks ``pgrep -P``);
    empty when ``pid`` is gone."""
    import psutil

    try:
        return psutil.Process(pid).children(recursive=True)
    except (psutil.Error, OSError):
        return []


def group_members(pgid: int) -> list[int] | None:
    """The processes of group ``pgid`` that have not exited (zombies have); None when
    processes cannot be listed."""
    import psutil

    try:
        pids = psutil.pids()
    except (psutil.Error, OSError):
        return None
    members: list[int] = []
    for pid in pids:
        try:
            if os.getpgid(pid) != pgid or psutil.Process(pid).status() in _GONE:
                continue
        except (psutil.Error, OSError):
            continue  # gone meanwhile
        members.append(pid)
    return members


def group_has_live_members(pgid: int) -> bool:
    """Whether a process of the group has not exited yet (without a process list:
    whether the group can still be signalled)."""
    members = group_members(pgid)
    if members is not None:
        return bool(members)
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def signal_group(pgid: int, sig: int, processes: Sequence[psutil.Process] = ()) -> None:
    """Send ``sig`` to the group, then to each of ``processes`` (children that left the
    group), deepest first; processes already gone (or whose PID was reused) are skipped."""
    import psutil

    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass
    for proc in reversed(processes):
        try:
            proc.send_signal(sig)
        except (psutil.Error, OSError):
            pass


def child_process_groups(pid: int | None = None) -> set[int]:
    """The process groups of ``pid``'s children (default: ours), other than our own."""
    import psutil

    own = os.getpgrp()
    try:
        children = psutil.Process(os.getpid() if pid is None else pid).children()
    except (psutil.Error, OSError):
        return set()
    groups: set[int] = set()
    for child in children:
        try:
            group = os.getpgid(child.pid)
        except OSError:
            continue
        if group != own:
            groups.add(group)
    return groups


def spawn_error(executable: str, exc: BaseException) -> str:
    """Node's message for a process that could not start (``spawn /usr/bin/bash ENOENT``);
    a Python refusal that has no errno (a NUL in an argument) keeps its own text."""
    if isinstance(exc, OSError) and exc.errno is not None:
        return f"spawn {executable} {errno.errorcode.get(exc.errno, f'E{exc.errno}')}"
    return f"spawn {executable}: {exc}"
