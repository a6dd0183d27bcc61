"""The command line the shell tool runs, and what it refuses to run.

Gemini CLI runs a model's command as ``bash -c`` of the command with ``shopt -u
promptvars ...`` in front, inside a subshell whose ``EXIT`` trap writes the jobs it left
running to a file (read back by :func:`read_background_pids`); a command with command
substitution is refused first (:func:`detect_command_substitution`, the model's commands
only). Pure, except :func:`resolve_executable` (looks at ``PATH``) and
:func:`read_background_pids` (reads the file).
"""

from __future__ import annotations

import os
from pathlib import Path

from actors.common import js_trim

BASH_SHOPT_GUARD = "shopt -u promptvars nullglob extglob nocaseglob dotglob;"

INJECTION_MESSAGE = (
    "Command injection detected: command substitution syntax ($(), backticks, <() or >()) "
    "found in command arguments. On PowerShell, @() array subexpressions and $() "
    "subexpressions are also blocked. This is a security risk and the command was blocked."
)
INJECTION_DISPLAY = "Blocked: command substitution detected in shell command."
INJECTION_ERROR_TYPE = "policy_violation"
"""The error of a model's command blocked for command substitution (Gemini CLI reports
no error: see docs/differences.md)."""


def detect_command_substitution(command: str) -> bool:
    """Gemini's bash check: ``$(``, backticks, and unquoted ``<(`` / ``>(`` are refused."""
    in_single = in_double = False
    i = 0
    n = len(command)
    while i < n:
        c = command[i]
        if c == "'" and not in_double:
            in_single = not in_single
        elif c == '"' and not in_single:
            in_double = not in_double
        elif in_single:
            pass
        elif c == "\\" and i + 1 < n and (not in_double or command[i + 1] in '$`"\\\n'):
            i += 2
            continue
        elif c == "$" and command[i + 1 : i + 2] == "(":
            return True
        elif not in_double and c in "<>" and command[i + 1 : i + 2] == "(":
            return True
        elif c == "`":
            return True
        i += 1
    return False


def wrap_command_for_background_pids(command: str, pid_file: str) -> str:
    """Run the command in a subshell whose EXIT trap lists the jobs it left running."""
    from actors.common import escape_shell_arg  # the shell's syntax: imported on first use

    trimmed = js_trim(command)
    if not trimmed:
        return ""
    if trimmed.endswith("\\"):
        trimmed += " "
    return (
        f"_bgpids_file={escape_shell_arg(pid_file)}\n(\n"
        f"  trap 'jobs -p > \"$_bgpids_file\"' EXIT\n{trimmed}\n)\n__code=$?\nexit $__code"
    )


def ensure_promptvars_disabled(command: str) -> str:
    if command.lstrip().startswith(BASH_SHOPT_GUARD):
        return command
    return f"{BASH_SHOPT_GUARD} {command}"


def resolve_executable(name: str, path_env: str | None = None) -> str | None:
    """``resolveExecutable``: the first executable ``<dir>/<name>`` on ``PATH``."""
    if os.path.isabs(name):
        return name if os.access(name, os.X_OK) else None
    search = os.environ.get("PATH") if path_env is None else path_env
    if not search:
        return None
    for directory in search.split(os.pathsep):
        candidate = os.path.join(directory, name)
        if os.access(candidate, os.X_OK):
            return candidate
    return None


def read_background_pids(pid_file: Path, leader: int) -> tuple[str, ...]:
    """The jobs the command's subshell listed at exit (``jobs -p``), minus the leader."""
    try:
        content = pid_file.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ()
    pids: list[str] = []
    for raw in content.split("\n"):
        line = js_trim(raw)
        if not line:
            continue
        if not line.isdigit() or not line.isascii():
            if any(
                marker in line
                for marker in (
                    "sysmond service not found",
                    "Cannot get process list",
                    "sysmon request failed",
                )
            ):
                continue
            pids.append("NaN")  # Number(line), as Gemini does
            continue
        if int(line) != leader:
            pids.append(str(int(line)))
    return tuple(pids)
