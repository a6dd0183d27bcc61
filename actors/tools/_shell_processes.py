"""The process groups the shell tool starts: ending one, and those left running.

Every command leads a process group of its own. :func:`terminate` ends one (SIGTERM to
the group and every descendant, SIGKILL after Gemini's 0.2 s, all bounded and shielded,
so safe in cancelled code); the process trees come from :mod:`actors.common`'s psutil
helpers. Background calls, and jobs a foreground command leaves running, are recorded in
a :class:`BackgroundProcessRegistry` (by default :data:`BACKGROUND_PROCESSES`); they
outlive the call, and whoever owns the session kills them with
:func:`kill_background_processes` (or ``registry.kill(session_id)``).
"""

from __future__ import annotations

import os
import shutil
import signal as signal_mod
from pathlib import Path

import attrs
import trio

from actors.common import descendants, group_has_live_members, signal_group

SIGKILL_TIMEOUT_S = 0.2
"""``process-utils.ts``: SIGTERM, then SIGKILL after this grace."""
_REAP_TIMEOUT_S = 2.0
"""Bound on waiting for a SIGKILLed leader to be reaped."""
_POLL_S = 0.005
"""How often a dying process group is checked (no event exists for non-children)."""


async def terminate(proc: trio.Process, grace: float = SIGKILL_TIMEOUT_S) -> None:
    """Kill ``proc``'s whole process group: SIGTERM, then SIGKILL after ``grace``.

    Every wait is shielded and bounded, so this is safe in cancelled code. The leader is
    reaped when it dies in time; the group is swept with SIGKILL at the end so that
    members which ignored SIGTERM (or outlived the leader) die too.
    """
    pgid = proc.pid
    children = descendants(pgid) if proc.returncode is None else []
    signal_group(pgid, signal_mod.SIGTERM, children)
    with trio.move_on_after(grace, shield=True) as scope:
        if proc.returncode is None:
            await proc.wait()
        # The leader is gone: give the rest of the group what is left of the grace.
        # Polling: nothing signals when processes that are not our children exit.
        while group_has_live_members(pgid):  # noqa: ASYNC110
            await trio.sleep(_POLL_S)
    if scope.cancelled_caught and proc.returncode is None:
        signal_group(pgid, signal_mod.SIGKILL, children)
        with trio.move_on_after(_REAP_TIMEOUT_S, shield=True):
            await proc.wait()
    signal_group(pgid, signal_mod.SIGKILL)


def close_pipes(proc: trio.Process) -> None:
    for stream in (proc.stdout, proc.stderr):
        close = getattr(stream, "close", None)
        if callable(close):
            close()


# ======================================================================================
# Background processes


@attrs.define(eq=False)
class BackgroundProcess:
    """A process group that outlives the call that started it."""

    pid: int
    """The group leader's PID, which is also the process-group id."""
    command: str
    session_id: str
    call_id: str = ""
    log_path: Path | None = None
    """Where a background call's output goes (``<tmp>/background-processes/``)."""
    member_pids: tuple[int, ...] = ()
    """Known members besides the leader (jobs a foreground command left running)."""
    started_at: float = 0.0
    """``trio.current_time()`` at registration."""
    process: trio.Process | None = attrs.field(default=None, repr=False)
    """The leader, unreaped so that its PID (the group id) cannot be reused."""
    temp_dir: Path | None = attrs.field(default=None, repr=False)

    def is_running(self) -> bool:
        if self.process is not None:
            return _leader_running(self.process) or group_has_live_members(self.pid)
        return self._group_is_ours() and group_has_live_members(self.pid)

    def _group_is_ours(self) -> bool:
        # Without the leader, the group id is only trusted while a known member is in it.
        for member in self.member_pids:
            try:
                if os.getpgid(member) == self.pid:
                    return True
            except (ProcessLookupError, PermissionError):
                continue
        return False


def _leader_running(proc: trio.Process) -> bool:
    """Whether the leader still runs, without reaping it (it pins the group id)."""
    if proc.returncode is not None:  # already reaped
        return False
    waitid = getattr(os, "waitid", None)
    if waitid is None:
        return proc.poll() is None
    try:
        return waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None
    except ChildProcessError:
        return False


class BackgroundProcessRegistry:
    """The process groups left running by shell calls, per session.

    The owner of a session calls :meth:`kill` when the session ends; nothing else stops
    these processes.
    """

    def __init__(self) -> None:
        self._entries: list[BackgroundProcess] = []

    def add(self, entry: BackgroundProcess) -> BackgroundProcess:
        self._entries.append(entry)
        return entry

    def entries(self, session_id: str | None = None) -> tuple[BackgroundProcess, ...]:
        return tuple(e for e in self._entries if session_id is None or e.session_id == session_id)

    def get(self, pid: int) -> BackgroundProcess | None:
        return next((e for e in self._entries if e.pid == pid), None)

    async def kill(self, session_id: str | None = None, *, grace: float = SIGKILL_TIMEOUT_S) -> int:
        """Kill the groups of ``session_id`` (all when None); returns how many ran.

        SIGTERM to every group at once, SIGKILL after ``grace``; leaders are reaped and
        temp files removed. Safe to call from cancelled code (bounded, shielded).
        """
        return await self.kill_entries(self.entries(session_id), grace=grace)

    async def kill_entries(
        self, targets: tuple[BackgroundProcess, ...], *, grace: float = SIGKILL_TIMEOUT_S
    ) -> int:
        """:meth:`kill` for chosen entries."""
        self._entries = [e for e in self._entries if e not in targets]
        live = [e for e in targets if e.is_running()]
        for entry in live:
            signal_group(entry.pid, signal_mod.SIGTERM, descendants(entry.pid))
        with trio.move_on_after(grace, shield=True):
            while any(e.is_running() for e in live):  # noqa: ASYNC110 (not our children)
                await trio.sleep(_POLL_S)
        for entry in live:
            if entry.process is not None or entry._group_is_ours():
                signal_group(entry.pid, signal_mod.SIGKILL, descendants(entry.pid))
        for entry in targets:
            if entry.process is not None:
                with trio.move_on_after(_REAP_TIMEOUT_S, shield=True):
                    await entry.process.wait()
                if entry.process.returncode is not None:
                    close_pipes(entry.process)
                else:  # could not reap in time: keep it for a later kill()
                    self._entries.append(entry)
                    continue
            if entry.temp_dir is not None:
                shutil.rmtree(entry.temp_dir, ignore_errors=True)
        return len(live)


BACKGROUND_PROCESSES = BackgroundProcessRegistry()
"""Where :data:`SHELL_TOOLS`' shell tool records what it leaves running."""


async def kill_background_processes(
    session_id: str | None = None, *, registry: BackgroundProcessRegistry | None = None
) -> int:
    """Kill what shell calls left running (``session_id``'s, or everything)."""
    return await (registry or BACKGROUND_PROCESSES).kill(session_id)
