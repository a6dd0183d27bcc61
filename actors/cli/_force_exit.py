"""A forced exit (a second Ctrl-C or SIGTERM while cleaning up) that leaves no process
behind: the process groups of our child processes get SIGKILL first.

Tools start their processes in process groups of their own (``start_new_session``), so
exiting alone would leave them running. The children are found in ``/proc`` (Linux);
elsewhere only the exit happens.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import NoReturn


def child_process_groups(pid: int | None = None) -> set[int]:
    """The process groups of ``pid``'s children (default: ours), other than our own."""
    parent = os.getpid() if pid is None else pid
    own = os.getpgrp()
    groups: set[int] = set()
    try:
        entries = list(Path("/proc").iterdir())
    except OSError:
        return groups
    for entry in entries:
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone meanwhile
        ppid, pgrp = int(fields[1]), int(fields[2])
        if ppid == parent and pgrp != own:
            groups.add(pgrp)
    return groups


def force_exit(code: int) -> NoReturn:
    for group in child_process_groups():
        try:
            os.killpg(group, signal.SIGKILL)
        except OSError:
            pass
    os._exit(code)
