"""A finished headless run leaves without the interpreter's teardown.

Once ``agentbus -p`` has its exit status, the work is done: the session closed, its
recording written and fsynced by the recorder, every child process of a tool waited for
by the scheduler. What Python would still do is take the process apart: clear every
module, free the some hundred thousand objects start-up made, one by one: from ``main``'s
return to the process's end took 6.6 ms of a ``-p hi`` run's 130, 2.6 ms without (median
of 15 runs), and the kernel frees the memory at once. ``exit_without_teardown`` does what an ordinary exit does that anyone can
see, in the same order, and then ``os._exit``:

1. the threads Python would wait for: none may be left (a non-daemon thread still
   running, e.g. an executor's worker, means the ordinary exit, which waits for it);
2. the ``atexit`` functions (the compiled-methods cache is saved there, logging flushed,
   ``weakref.finalize`` objects run);
3. stdout and stderr flushed; a flush that fails (a closed pipe) means the ordinary exit,
   which reports it as it always does.

Not under ``-X dev`` or ``-W`` options: there the teardown's warnings (an unclosed file)
are what the user asked to see.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading


def exit_without_teardown(status: int) -> None:
    """``os._exit(status)`` after what an ordinary exit shows; returns (nothing done but the
    ``atexit`` functions, which then do not run twice) when the ordinary exit is needed."""
    if sys.flags.dev_mode or sys.warnoptions:
        return
    main = threading.main_thread()
    if any(t is not main and not t.daemon and t.is_alive() for t in threading.enumerate()):
        return
    atexit._run_exitfuncs()
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
    except Exception:  # noqa: BLE001 - the ordinary exit reports it, as it always does
        return
    os._exit(status)
