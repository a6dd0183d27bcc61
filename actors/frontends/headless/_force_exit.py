"""A forced exit (a second Ctrl-C or SIGTERM while cleaning up) that leaves no process
behind: the process groups of our child processes get SIGKILL first.

Tools start their processes in process groups of their own (``start_new_session``), so
exiting alone would leave them running. The children are found in ``/proc`` (Linux);
elsewhere only the exit happens.
"""

from __future__ import annotations

import os
import signal
from typing import NoReturn

from actors.common import child_process_groups


def force_exit(code: int) -> NoReturn:
    for group in child_process_groups():
        try:
            os.killpg(group, signal.SIGKILL)
        except OSError:
            pass
    os._exit(code)
