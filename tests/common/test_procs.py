"""Process groups and trees (psutil), on real processes."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator

import psutil
import pytest

from actors.common import (
    child_process_groups,
    descendants,
    group_has_live_members,
    group_members,
    signal_group,
)
from tests.frontends.daemon._procs import ends_within

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc"), reason="needs /proc (Linux)")


@pytest.fixture
def group(subreaper: None) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """A shell in a group of its own whose child sleeps; yields it and the child's pid
    (ours to reap once the shell is gone: the test process is a subreaper)."""
    proc = subprocess.Popen(
        ["bash", "-c", "sleep 30 & echo $!; wait"], stdout=subprocess.PIPE, start_new_session=True
    )
    assert proc.stdout is not None
    child = int(proc.stdout.readline())
    try:
        yield proc, child
    finally:
        signal_group(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        proc.stdout.close()
        with contextlib.suppress(ChildProcessError):
            os.waitpid(child, 0)


def test_group_members_are_the_groups_processes(
    group: tuple[subprocess.Popen[bytes], int],
) -> None:
    proc, child = group
    assert sorted(group_members(proc.pid) or []) == sorted([proc.pid, child])
    assert os.getpid() in (group_members(os.getpgrp()) or [])


def test_descendants_and_child_groups(group: tuple[subprocess.Popen[bytes], int]) -> None:
    proc, child = group
    assert [p.pid for p in descendants(proc.pid)] == [child]
    assert child in [p.pid for p in descendants(os.getpid())]
    assert proc.pid in child_process_groups()
    assert os.getpgrp() not in child_process_groups()


def test_group_dies_with_signal_group(group: tuple[subprocess.Popen[bytes], int]) -> None:
    proc, child = group
    assert group_has_live_members(proc.pid)
    signal_group(proc.pid, signal.SIGKILL, descendants(proc.pid))
    proc.wait(timeout=10)
    assert ends_within(child, 10)  # against a hang only: its pidfd says when it is gone
    assert not group_has_live_members(proc.pid)  # a zombie is no live member


def test_without_a_process_list_the_group_is_probed_by_signal(
    group: tuple[subprocess.Popen[bytes], int], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The hook runner's copy answered None here and stopped waiting for the group.
    proc, child = group

    def no_proc() -> list[int]:
        raise FileNotFoundError("/proc")

    monkeypatch.setattr(psutil, "pids", no_proc)
    assert group_members(proc.pid) is None
    assert group_has_live_members(proc.pid) is True
    signal_group(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    # Reaped, so that no zombie member answers the signal probe: by bash, when its wait
    # caught the child's death before its own SIGKILL, else by us (the subreaper).
    with contextlib.suppress(ChildProcessError):
        os.waitpid(child, 0)
    assert not group_has_live_members(proc.pid)


def test_signal_group_skips_processes_already_gone() -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"], start_new_session=True)
    remembered = psutil.Process(gone.pid)
    gone.wait(timeout=10)
    signal_group(gone.pid, signal.SIGTERM, [remembered])  # no error


def test_psutil_loads_on_first_use() -> None:
    """A headless run that starts no process does not import psutil (12 ms of start-up)."""
    code = (
        "import sys, actors.common, actors.frontends.headless._headless\n"
        "assert 'psutil' not in sys.modules\n"
        "import os; actors.common.descendants(os.getpid())\n"
        "assert 'psutil' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
