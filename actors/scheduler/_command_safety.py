"""Shell-command heuristics of Gemini CLI's policy: known-safe and dangerous commands.

Gemini splits a command into words with the ``shell-quote`` package
(``actors.common.shell_words``) and then asks: is it
a known read-only command (``cat``, ``ls``, ``git status``, ``sed -n 5p``...) that needs
no question, a dangerous one (``rm -rf``, ``find -exec``, ``git -c``, a mutating git
subcommand) that always asks, and does it run git (asked about in an untrusted folder)?
Pure code.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Sequence
from typing import Final

from actors.common import ShellQuoteError, js_trim, shell_words, split_commands

_GIT_PREDECESSORS: Final = frozenset({"sudo", "env", "time", "&&", "||", ";", "|", "&", "(", "\\n"})
_ENV_ASSIGNMENT = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*=")


def _basename(path: str) -> str:
    return posixpath.basename(path.rstrip("/")) if path.strip("/") else path


def contains_git_command(args: Sequence[str]) -> bool:
    for index, arg in enumerate(args):
        trimmed = arg.strip()
        if not trimmed or _basename(trimmed).lower() not in ("git", "git.exe"):
            continue
        prev = index - 1
        while prev >= 0 and _ENV_ASSIGNMENT.match(args[prev]):
            prev -= 1
        if prev >= 0 and args[prev].lower() not in _GIT_PREDECESSORS:
            continue
        return True
    return False


_SAFE_COMMANDS: Final = frozenset(
    {
        "__read",
        "__write",
        "cat",
        "cd",
        "cut",
        "echo",
        "expr",
        "false",
        "grep",
        "head",
        "id",
        "ls",
        "nl",
        "paste",
        "pwd",
        "rev",
        "seq",
        "stat",
        "tail",
        "tr",
        "true",
        "uname",
        "uniq",
        "wc",
        "which",
        "whoami",
        "numfmt",
        "tac",
    }
)
_FIND_UNSAFE: Final = frozenset(
    {"-exec", "-execdir", "-ok", "-okdir", "-delete", "-fls", "-fprint", "-fprint0", "-fprintf"}
)
_TRUSTED_BIN_PREFIXES: Final = (
    "/usr/bin",
    "/bin",
    "/usr/local/bin",
    "/opt/homebrew/bin",
    "/opt/homebrew/Cellar",
    "/usr/local/Cellar",
    "/usr/sbin",
    "/sbin",
    "/google/bin",
    "/google/src/cloud",
)


def _is_ripgrep(cmd: str) -> bool:
    return _basename(cmd) in ("rg", "rg.exe")


def _ripgrep_unsafe(args: Sequence[str]) -> bool:
    for arg in args:
        if arg in ("--search-zip", "-z"):
            return True
        for opt in ("--pre", "--hostname-bin"):
            if arg == opt or arg.startswith(opt + "="):
                return True
    return False


def _base64_unsafe(args: Sequence[str]) -> bool:
    return any(
        a in ("-o", "--output") or a.startswith("--output=") or (a.startswith("-o") and a != "-o")
        for a in args[1:]
    )


def _git_config_override(args: Sequence[str]) -> bool:
    return any(
        a in ("-c", "--config-env")
        or (a.startswith("-c") and len(a) > 2)
        or a.startswith("--config-env=")
        for a in args
    )


_GIT_OPTS_WITH_VALUE: Final = (
    "-C",
    "-c",
    "--config-env",
    "--exec-path",
    "--git-dir",
    "--namespace",
    "--super-prefix",
    "--work-tree",
)


def _git_subcommand(args: Sequence[str]) -> tuple[int, str | None]:
    skip_next = False
    for idx in range(1, len(args)):
        if skip_next:
            skip_next = False
            continue
        arg = args[idx]
        if any(arg.startswith(o + "=") for o in _GIT_OPTS_WITH_VALUE[2:]) or (
            (arg.startswith("-C") or arg.startswith("-c")) and len(arg) > 2
        ):
            continue
        if arg in _GIT_OPTS_WITH_VALUE:
            skip_next = True
            continue
        if arg == "--" or arg.startswith("-"):
            continue
        if arg in ("status", "log", "diff", "show", "branch"):
            return idx, arg
        return -1, None
    return -1, None


def _git_args_read_only(args: Sequence[str]) -> bool:
    unsafe = ("--output", "--ext-diff", "--textconv", "--exec", "--paginate")
    return not any(
        a in unsafe or a.startswith("--output=") or a.startswith("--exec=") for a in args
    )


_GIT_BRANCH_READ_FLAGS: Final = frozenset(
    {"--list", "-l", "--show-current", "-a", "--all", "-r", "--remotes", "-v", "-vv", "--verbose"}
)


def _git_branch_read_only(args: Sequence[str]) -> bool:
    if not args:
        return True
    seen = False
    for arg in args:
        if arg in _GIT_BRANCH_READ_FLAGS or arg.startswith("--format="):
            seen = True
        else:
            return False
    return seen


def _git_read_only(args: Sequence[str]) -> bool | None:
    """True/False for a recognised read-only-capable git subcommand, None otherwise."""
    idx, sub = _git_subcommand(args)
    if sub is None:
        return None
    rest = args[idx + 1 :]
    if sub == "branch":
        return _git_args_read_only(rest) and _git_branch_read_only(rest)
    return _git_args_read_only(rest)


def _sed_print_arg(arg: str | None) -> bool:
    if not arg or not arg.endswith("p"):
        return False
    parts = arg[:-1].split(",")
    return 1 <= len(parts) <= 2 and all(p and p.isascii() and p.isdigit() for p in parts)


def _safe_to_exec(args: Sequence[str]) -> bool:
    if not args:
        return False
    cmd = args[0]
    if cmd in _SAFE_COMMANDS:
        return True
    if cmd == "base64":
        return not _base64_unsafe(args)
    if cmd == "find":
        return not any(a in _FIND_UNSAFE for a in args)
    if _is_ripgrep(cmd):
        trusted = cmd.startswith("/") and any(
            cmd == p or cmd.startswith(p + "/") for p in _TRUSTED_BIN_PREFIXES
        )
        return trusted and not _ripgrep_unsafe(args)
    if cmd == "git":
        if _git_config_override(args):
            return False
        return _git_read_only(args) is True
    if cmd == "sed":
        return len(args) <= 4 and len(args) > 2 and args[1] == "-n" and _sed_print_arg(args[2])
    return False


def is_known_safe_command(args: Sequence[str]) -> bool:
    """Read-only commands that need no confirmation (cat, ls, git status, sed -n 5p...)."""
    if not args:
        return False
    normalized = ["bash" if a == "zsh" else a for a in args]
    if _safe_to_exec(normalized):
        return True
    if len(normalized) == 3 and normalized[0] == "bash" and normalized[1] in ("-lc", "-c"):
        script = normalized[2]
        if re.search("[()<>]", script):
            return False
        commands = split_commands(script)
        if not commands:
            return False
        for sub in commands:
            try:
                words = shell_words(js_trim(sub))
            except ShellQuoteError:
                return False
            if words and not _safe_to_exec(words):
                return False
        return True
    return False


def is_dangerous_command(args: Sequence[str]) -> bool:
    """rm -f/-rf/-fr, sudo of those, find -exec/-delete, rg --pre, git -c, mutating git."""
    if not args:
        return False
    cmd = args[0]
    if cmd == "rm":
        return len(args) > 1 and args[1] in ("-f", "-rf", "-fr")
    if cmd == "sudo":
        return is_dangerous_command(args[1:])
    if cmd == "find":
        return any(a in _FIND_UNSAFE for a in args)
    if _is_ripgrep(cmd):
        return _ripgrep_unsafe(args)
    if cmd == "git":
        if _git_config_override(args):
            return True
        read_only = _git_read_only(args)
        return read_only is False
    if cmd == "base64":
        return _base64_unsafe(args)
    return False
