"""A stdio MCP server seen from its side: ``stdio_tee.py LOG -- COMMAND...`` runs COMMAND
with this process's stdout, forwards its stdin to it line by line and appends each line
to LOG (what the server was sent: a ``notifications/cancelled`` shows it was told of a
cancel). COMMAND's pid is written to ``LOG.pid``; when COMMAND exits, so does this
process, with its status, so the client sees the server go away.

For servers the tests do not write (``@modelcontextprotocol/server-everything``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading


def main() -> None:
    log, command = sys.argv[1], sys.argv[sys.argv.index("--") + 1 :]
    child = subprocess.Popen(command, stdin=subprocess.PIPE)
    # A SIGTERM to the group is the server's to act on: this process ends when it does
    # (and reaps it, so that the group is gone when the server is).
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    with open(log + ".pid", "w") as pid:
        pid.write(str(child.pid))
    os.close(1)  # only the server holds the client's end: its exit is the client's EOF
    assert child.stdin is not None
    threading.Thread(target=lambda: os._exit(child.wait()), daemon=True).start()
    with open(log, "ab", buffering=0) as seen:
        for line in sys.stdin.buffer:
            seen.write(line)
            try:
                child.stdin.write(line)
                child.stdin.flush()
            except BrokenPipeError:
                break
    child.stdin.close()
    os._exit(child.wait())


if __name__ == "__main__":
    main()
