"""Importing trio without running ``/sbin/ldconfig``.

trio names its worker threads with ``pthread_setname_np``; to find it, ``import trio``
calls ``ctypes.util.find_library("pthread")``, which on Linux forks ``/sbin/ldconfig -p``
and searches its list of every shared library on the machine: 2.5 to 10 ms of a ``-p hi``
run's 130 (a child process: the busier the machine, the longer). With the GNU C library that search always ends at the
library's soname, ``libpthread.so.0`` (the same on every architecture, and still there
since glibc 2.34 moved the functions into libc), which the dynamic loader finds itself.

``answer_pthread_lookup`` makes ``find_library`` give that answer for ``"pthread"``
without the child process, on glibc only; every other name, and every other C library
(musl has no ``libpthread``), goes to the real search. The entry point turns it on for a
process of its own (``actors.frontends.main``), before anything imports trio.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

GLIBC_PTHREAD = "libpthread.so.0"


def answer_pthread_lookup() -> bool:
    """``ctypes.util.find_library("pthread")`` answers without ``ldconfig`` from now on;
    False (and nothing changed) when this is not Linux with glibc."""
    if not uses_glibc():
        return False
    import ctypes.util

    search: Callable[[str], str | None] = ctypes.util.find_library
    if getattr(search, "_answers_pthread", False):
        return True

    def find_library(name: str) -> str | None:
        return GLIBC_PTHREAD if name == "pthread" else search(name)

    find_library._answers_pthread = True  # type: ignore[attr-defined]
    ctypes.util.find_library = find_library
    return True


def uses_glibc() -> bool:
    """Linux with the GNU C library (it alone answers ``CS_GNU_LIBC_VERSION``)."""
    if sys.platform != "linux":
        return False
    try:
        version = os.confstr("CS_GNU_LIBC_VERSION")
    except (ValueError, OSError):
        return False
    return bool(version) and str(version).startswith("glibc")
