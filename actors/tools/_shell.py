"""``run_shell_command``: Gemini CLI 0.61's shell tool on trio (no pty).

The command runs as ``<bash> -c <guarded command>`` (``bash`` resolved on ``PATH``) in a
new session, so it leads its own process group; stdin is ``/dev/null``. Output is
collected like Gemini CLI's ``child_process`` path (``GEMINI_PTY_INFO=child_process``,
always the case headless): stdout and stderr merged into one text, decoded as UTF-8 with
replacement, ANSI escapes stripped, trimmed. Gemini reads two pipes; libuv delivers
their data in the order it became readable, i.e. write order — except for output
written before Node starts watching the pipes (the first instant), where stdout comes
first, so Gemini itself is not deterministic there (``ls missing; echo after`` was
recorded both ways). Here both streams share one pipe: always write order, and no
dependence on trio's deliberately randomised task order. Like Gemini, the call ends
when the process has exited *and* the pipe is closed, so a background job that keeps
it open keeps the call running.

What the model gets (``llm_content``), for a finished foreground command::

    <untrusted_context>
    Output: <stdout+stderr, ANSI stripped, trimmed, or "(empty)">
    Error: <spawn error>                      only when the process could not start
    Exit Code: <n>                            only when non-zero
    Signal: <number>                          only when bash itself was killed
    Background PIDs: <pid>, <pid>             only when jobs were left running
    Process Group PGID: <pid>                 when the process started
    </untrusted_context>

and ``return_display`` is the bare output (or ``Command exited with code: N``,
``Command terminated by signal: N``, ``Command failed: <error>`` when there was none).
Background calls, the inactivity timeout and blocked command substitution have their
own texts (``background_message``, ``_timeout_message``, ``INJECTION_MESSAGE``). Command
substitution is blocked in the model's commands only, and as the call's error (Gemini
CLI returns it as a result); the user's own calls (``ToolEnv.user_call``) run as typed,
as Gemini CLI's shell mode runs them. Above ``tools.truncateToolOutputThreshold``
(40 000) characters the content is truncated as Gemini's tool executor does and the
whole text goes to ``<project temp>/tool-outputs/session-<id>/<tool>_<call id>.txt``
(``ToolResult.output_file``); since ``Tool.execute`` has no call id, ``execute`` takes
it as the keyword-only ``call_id`` argument.

Cancellation (the executor's cancel scope) kills the whole process group — SIGTERM to
the group and to every descendant, SIGKILL after 0.2 s (Gemini's ``SIGKILL_TIMEOUT_MS``),
all inside bounded shielded scopes — and re-raises ``trio.Cancelled``; the executor
then asks :meth:`ShellTool.cancelled_result` for Gemini's result ("Command was cancelled
by user before it could complete...", with the output streamed until then).

Background calls (``is_background``) and jobs a foreground command leaves running are
recorded in a :class:`BackgroundProcessRegistry` (by default the module's
:data:`BACKGROUND_PROCESSES`); they outlive the call, and whoever owns the session
kills them with :func:`kill_background_processes` (or ``registry.kill(session_id)``).

Memory: the output is held once, as decoded chunks while the command runs (the tool's
``return_display`` needs all of it, as in Gemini — 2 MB in ``perf-high-volume-shell``),
capped at Gemini's 16 M characters. The model's text is produced from that copy by a
:class:`TruncatingWriter`, which keeps only head and tail and streams everything to the
output file; no second full copy of the ``llm_content`` is built.

Blocking work done inline (all local and small): path checks, the temp dir for the
background-PID file, reading that file, writing the truncation file.
"""

from __future__ import annotations

import codecs
import errno
import os
import re
import shutil
import signal as signal_mod
import subprocess
import tempfile
from collections import deque
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs
import trio
from bus.messages import ToolResult

from actors.common import (
    descendants,
    escape_shell_arg,
    group_has_live_members,
    js_to_fixed,
    js_trim,
    node_resolve,
    signal_group,
    strip_shell_wrapper,
    utf16_len,
    utf16_tail,
)

from ._base import OutputSink, Tool, ToolEnv
from ._paths import NodeFsError, validate_path_access
from ._truncate import (
    TruncatingWriter,
    tool_output_path,
    truncation_threshold,
)

__all__ = [
    "BACKGROUND_PROCESSES",
    "SHELL_TOOLS",
    "BackgroundProcess",
    "BackgroundProcessRegistry",
    "ShellTool",
    "build_shell_env",
    "detect_command_substitution",
    "kill_background_processes",
    "strip_ansi",
    "user_cancelled_result",
    "wrap_untrusted",
]

SHELL_TOOL_NAME = "run_shell_command"

BACKGROUND_DELAY_MS = 200
"""``shell.ts``: default wait before a background call returns."""
SHOW_NL_DESCRIPTION_THRESHOLD = 150
DEFAULT_INACTIVITY_TIMEOUT_S = 300
"""``tools.shell.inactivityTimeout`` default (seconds without output)."""
MAX_CHILD_PROCESS_BUFFER_SIZE = 16 * 1024 * 1024
"""Characters (UTF-16 units) of output kept; older output is dropped."""
MAX_SNIFF_SIZE = 4096
BINARY_SAMPLE_SIZE = 512
SIGKILL_TIMEOUT_S = 0.2
"""``process-utils.ts``: SIGTERM, then SIGKILL after this grace."""
_REAP_TIMEOUT_S = 2.0
"""Bound on waiting for a SIGKILLed leader to be reaped."""
_POST_KILL_DRAIN_S = 1.0
"""After an inactivity kill, how long the pipes may still deliver output."""
_POLL_S = 0.005
"""How often a dying process group is checked (no event exists for non-children)."""
_READ_SIZE = 65536
_FEED_SLICE = 65536

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
USER_CANCEL_MESSAGE = "Command was cancelled by user before it could complete."
USER_CANCEL_DISPLAY = "Command cancelled by user."
TRUNCATION_WARNING = (
    "\n[GEMINI_CLI_WARNING: Output truncated. The buffer is limited to "
    f"{MAX_CHILD_PROCESS_BUFFER_SIZE // (1024 * 1024)}MB.]"
)

_UNTRUSTED_OPEN = "<untrusted_context>\n"
_UNTRUSTED_CLOSE = "\n</untrusted_context>"
_CLOSE_TAG = "</untrusted_context>"
_ESCAPED_CLOSE_TAG = "&lt;/untrusted_context&gt;"


# ======================================================================================
# Pure helpers: text


_ANSI = re.compile(
    # ansi-regex 6.2 as bundled in 0.61: OSC ... ST, then CSI and friends (ASCII digits).
    r"(?:\x1b\][\s\S]*?(?:\x07|\x1b\\|\x9c))"
    r"|[\x1b\x9b][\[\]()#;?]*(?:[0-9]{1,4}(?:[;:][0-9]{0,4})*)?[0-9A-PR-TZcf-nq-uy=><~]"
)


def strip_ansi(text: str) -> str:
    """``strip-ansi`` (returns ``text`` itself when there is nothing to strip)."""
    if "\x1b" not in text and "\x9b" not in text:
        return text
    return _ANSI.sub("", text)


def wrap_untrusted(text: str) -> str:
    """``wrapUntrusted``: the text inside ``<untrusted_context>`` tags, closing tag escaped."""
    return _UNTRUSTED_OPEN + text.replace(_CLOSE_TAG, _ESCAPED_CLOSE_TAG) + _UNTRUSTED_CLOSE


# ======================================================================================
# Pure helpers: the command line


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


# ======================================================================================
# Pure helpers: environment


_ALWAYS_ALLOWED_ENV = frozenset(
    {
        "PATH", "SYSTEMROOT", "COMSPEC", "PATHEXT", "WINDIR", "TEMP", "TMP", "USERPROFILE",
        "SYSTEMDRIVE", "HOME", "LANG", "SHELL", "TMPDIR", "USER", "LOGNAME", "TERM",
        "COLORTERM", "ADDITIONAL_CONTEXT", "AVAILABLE_LABELS", "BRANCH_NAME", "DESCRIPTION",
        "EVENT_NAME", "GITHUB_ENV", "IS_PULL_REQUEST", "ISSUES_TO_TRIAGE", "ISSUE_BODY",
        "ISSUE_NUMBER", "ISSUE_TITLE", "PULL_REQUEST_NUMBER", "REPOSITORY", "TITLE",
        "TRIGGERING_ACTOR",
    }
)  # fmt: skip
_NEVER_ALLOWED_ENV = frozenset(
    {
        "CLIENT_ID", "DB_URI", "CONNECTION_STRING", "AWS_DEFAULT_REGION", "AZURE_CLIENT_ID",
        "AZURE_TENANT_ID", "SLACK_WEBHOOK_URL", "TWILIO_ACCOUNT_SID", "DATABASE_URL",
        "GOOGLE_CLOUD_PROJECT", "GOOGLE_CLOUD_ACCOUNT", "FIREBASE_PROJECT_ID",
    }
)  # fmt: skip
_NEVER_ALLOWED_NAME = re.compile(
    "TOKEN|SECRET|PASSWORD|PASSWD|KEY|AUTH|CREDENTIAL|CREDS|PRIVATE|CERT", re.IGNORECASE
)
_NEVER_ALLOWED_VALUE = tuple(
    re.compile(p, re.IGNORECASE)
    for p in (
        r"-----BEGIN (RSA|OPENSSH|EC|PGP) PRIVATE KEY-----",
        r"-----BEGIN CERTIFICATE-----",
        r"(https?|ftp|smtp)://[^:\s]{1,1024}:[^@\s]{1,1024}@",
        r"(ghp|gho|ghu|ghs|ghr|github_pat)_[a-zA-Z0-9_]{36,}",
        r"AIzaSy[a-zA-Z0-9_\\-]{33}",
        r"AKIA[A-Z0-9]{16}",
        r"eyJ[a-zA-Z0-9_-]{0,10240}\.[a-zA-Z0-9_-]{0,10240}\.[a-zA-Z0-9_-]{0,10240}",
        r"(s|r)k_(live|test)_[0-9a-zA-Z]{24}",
        r"xox[abpr]-[a-zA-Z0-9-]+",
    )
)
_GIT_OVERRIDES = (
    ("credential.helper", ""),
    ("core.fsmonitor", ""),
    ("core.hooksPath", ""),
    ("core.sshCommand", ""),
    ("core.pager", "cat"),
    ("core.editor", ""),
    ("sequence.editor", ""),
    ("diff.external", ""),
)


def _setting(settings: Mapping[str, Any], *keys: str) -> Any:
    node: Any = settings
    for key in keys:
        if not isinstance(node, Mapping):
            return None
        node = node.get(key)
    return node


def _redacted(key: str, value: str, allowed: set[str], blocked: set[str], strict: bool) -> bool:
    key = key.upper()
    if key.startswith("GEMINI_CLI_"):
        return False
    if value and any(p.search(value.upper()) for p in _NEVER_ALLOWED_VALUE):
        return True
    if key.startswith("GIT_CONFIG_") or key in allowed:
        return False
    if key in blocked:
        return True
    if key in _ALWAYS_ALLOWED_ENV:
        return False
    if key in _NEVER_ALLOWED_ENV or strict:
        return True
    return _NEVER_ALLOWED_NAME.search(key) is not None


def _js_parse_int(text: str) -> int | None:
    match = re.match(r"\s*([+-]?\d+)", text)
    return int(match.group(1)) if match else None


def build_shell_env(
    source: Mapping[str, str], settings: Mapping[str, Any] | None = None
) -> dict[str, str]:
    """The environment Gemini gives the shell (``prepareExecution``).

    ``source`` is sanitised when ``security.environmentVariableRedaction.enabled`` is set
    or on GitHub (``GITHUB_SHA`` / ``SURFACE=Github``), then Gemini's fixed variables are
    added: ``GEMINI_CLI=1``, ``TERM=xterm-256color``, ``PAGER``/``GIT_PAGER=cat``, git
    configured not to prompt, page, or run hooks and editors, no display or D-Bus.
    """
    settings = settings or {}
    redaction = _setting(settings, "security", "environmentVariableRedaction")
    redaction = redaction if isinstance(redaction, Mapping) else {}
    git_config_keys = [k for k in source if k.startswith("GIT_CONFIG_")]
    allowed = {str(k).upper() for k in redaction.get("allowed") or ()}
    allowed.update(k.upper() for k in git_config_keys)
    blocked = {str(k).upper() for k in redaction.get("blocked") or ()}
    strict = bool(source.get("GITHUB_SHA")) or source.get("SURFACE") == "Github"
    if redaction.get("enabled") is True or strict:
        env = {k: v for k, v in source.items() if not _redacted(k, v, allowed, blocked, strict)}
    else:
        env = dict(source)
    env.update(GEMINI_CLI="1", TERM="xterm-256color", PAGER="cat", GIT_PAGER="cat")
    for key in git_config_keys:
        env[key] = source[key]
    count = _js_parse_int(env.get("GIT_CONFIG_COUNT") or "0")
    env.update(GIT_CONFIG_GLOBAL="/dev/null", GIT_CONFIG_SYSTEM="/dev/null")
    env["GIT_CONFIG_NOSYSTEM"] = "1"
    for key, value in _GIT_OVERRIDES:
        index = "NaN" if count is None else str(count)
        env[f"GIT_CONFIG_KEY_{index}"] = key
        env[f"GIT_CONFIG_VALUE_{index}"] = value
        count = None if count is None else count + 1
    env["GIT_CONFIG_COUNT"] = "NaN" if count is None else str(count)
    env.update(
        GIT_TERMINAL_PROMPT="0",
        GIT_ASKPASS="",
        SSH_ASKPASS="",
        GH_PROMPT_DISABLED="1",
        GCM_INTERACTIVE="never",
        DISPLAY="",
        DBUS_SESSION_BUS_ADDRESS="",
    )
    return env


def inactivity_timeout(settings: Mapping[str, Any]) -> float:
    """``tools.shell.inactivityTimeout`` in seconds (default 300; <= 0 disables)."""
    value = _setting(settings, "tools", "shell", "inactivityTimeout")
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        return float(DEFAULT_INACTIVITY_TIMEOUT_S)
    return float(value)


# ======================================================================================
# What a run produced, and Gemini's texts for it


@attrs.frozen(kw_only=True)
class ShellOutcome:
    """Gemini's ``ShellExecutionResult``, reduced to what the texts use."""

    output: str = ""
    """Merged output, ANSI stripped and trimmed."""
    exit_code: int | None = None
    """``None`` when the process was killed by a signal or never exited on its own."""
    signal: int | None = None
    error: str | None = None
    """Spawn error (Node's wording: ``spawn /usr/bin/bash ENOENT``)."""
    pid: int | None = None
    timed_out: bool = False
    """Killed by the inactivity timeout."""
    background_pids: tuple[str, ...] = ()


def _llm_pieces(
    outcome: ShellOutcome, command: str, command_to_execute: str, timeout_s: float
) -> list[str]:
    """The unwrapped ``llmContent`` as pieces (the output alone is one big piece)."""
    if outcome.timed_out:
        pieces = [_timeout_message(timeout_s)]
        if js_trim(outcome.output):
            pieces += [" Below is the output before it was cancelled:\n", outcome.output]
        else:
            pieces.append(" There was no output before it was cancelled.")
        return pieces
    pieces = ["Output: ", outcome.output or "(empty)"]
    if outcome.error is not None:
        error = (
            outcome.error.replace(command_to_execute, command)
            if command_to_execute
            else (outcome.error)
        )
        pieces.append(f"\nError: {error}")
    if outcome.exit_code is not None and outcome.exit_code != 0:
        pieces.append(f"\nExit Code: {outcome.exit_code}")
    if outcome.signal:
        pieces.append(f"\nSignal: {outcome.signal}")
    if outcome.background_pids:
        pieces.append(f"\nBackground PIDs: {', '.join(outcome.background_pids)}")
    if outcome.pid:
        pieces.append(f"\nProcess Group PGID: {outcome.pid}")
    return pieces


def _timeout_message(timeout_s: float) -> str:
    minutes = js_to_fixed(timeout_s * 1000 / 60000, 1)
    return (
        f"Command was automatically cancelled because it exceeded the timeout of {minutes} "
        "minutes without output."
    )


def _return_display(outcome: ShellOutcome, timeout_s: float) -> str:
    if outcome.timed_out:
        message = _timeout_message(timeout_s)
        if js_trim(outcome.output):
            return f"{message}\n\nOutput before cancellation:\n{outcome.output}"
        return message
    if js_trim(outcome.output):
        return outcome.output
    if outcome.signal:
        return f"Command terminated by signal: {outcome.signal}"
    if outcome.error is not None:
        return f"Command failed: {outcome.error}"
    if outcome.exit_code is not None and outcome.exit_code != 0:
        return f"Command exited with code: {outcome.exit_code}"
    return ""


def background_message(pid: int | None) -> str:
    shown = "undefined" if pid is None else str(pid)
    return f"Command moved to background (PID: {shown}). Output hidden. Press Ctrl+B to view."


def user_cancelled_result(streamed: str) -> ToolResult:
    """Gemini's result for a call the user cancelled, from the text it had streamed.

    :class:`ShellTool` re-raises ``trio.Cancelled`` instead; an executor that wants
    Gemini's partial response can build it from what the output sink received.
    """
    output = js_trim(strip_ansi(streamed))
    if js_trim(output):
        llm = f"{USER_CANCEL_MESSAGE} Below is the output before it was cancelled:\n{output}"
        display = f"{USER_CANCEL_DISPLAY}\n\nOutput before cancellation:\n{output}"
    else:
        llm = f"{USER_CANCEL_MESSAGE} There was no output before it was cancelled."
        display = USER_CANCEL_DISPLAY
    return ToolResult(llm_content=wrap_untrusted(llm), return_display=display, cancelled=True)


# ======================================================================================
# Output collection


def _utf16_drop_front(text: str, units: int) -> str:
    """``text.substring(units)`` (a split pair's half becomes U+FFFD)."""
    return utf16_tail(text, utf16_len(text) - units)


class _OutputCollector:
    """Collects the output like Gemini's ``child_process`` path.

    UTF-8 with a leading BOM dropped and invalid bytes replaced (as WHATWG's decoder
    does); a NUL byte in the first 512 bytes marks the output binary and stops
    collection; only the last 16 M characters are kept.
    """

    def __init__(self, sink: OutputSink | None, on_activity: Callable[[], None]) -> None:
        self._sink = sink
        self._on_activity = on_activity
        self._decoder = codecs.getincrementaldecoder("utf-8-sig")(errors="replace")
        self._chunks: deque[tuple[str, int]] = deque()
        self._units = 0
        self._truncated = False
        self._sample = bytearray()
        self._sniffed = 0
        self.binary = False

    async def feed(self, data: bytes | bytearray) -> None:
        self._on_activity()
        if not self.binary and self._sniffed < MAX_SNIFF_SIZE:
            if len(self._sample) < BINARY_SAMPLE_SIZE:
                self._sample += data[: BINARY_SAMPLE_SIZE - len(self._sample)]
            self._sniffed += len(data)
            if 0 in self._sample:
                self.binary = True
        if self.binary:
            return
        text = self._decoder.decode(data, False)
        if text:
            self._append(text)
            if self._sink is not None:
                await self._sink(text)

    def _append(self, text: str) -> None:
        units = utf16_len(text)
        self._chunks.append((text, units))
        self._units += units
        excess = self._units - MAX_CHILD_PROCESS_BUFFER_SIZE
        while excess > 0:
            self._truncated = True
            first, first_units = self._chunks[0]
            if first_units <= excess:
                self._chunks.popleft()
                self._units -= first_units
                excess -= first_units
            else:
                kept = _utf16_drop_front(first, excess)
                self._chunks[0] = (kept, first_units - excess)
                self._units -= excess
                excess = 0

    async def finish(self) -> str:
        """Flush the decoder; the final output (ANSI stripped, trimmed)."""
        rest = self._decoder.decode(b"", True)
        if rest:
            # Gemini appends the decoder's remainder past the cap, as here.
            units = utf16_len(rest)
            self._chunks.append((rest, units))
            self._units += units
            if self._sink is not None and not self.binary:
                await self._sink(rest)
        joined = "".join(text for text, _ in self._chunks)
        self._chunks.clear()
        if self._truncated:
            joined += TRUNCATION_WARNING
        return js_trim(strip_ansi(joined))


# ======================================================================================
# Processes and process groups


async def _terminate(proc: trio.Process, grace: float = SIGKILL_TIMEOUT_S) -> None:
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


def _close_pipes(proc: trio.Process) -> None:
    for stream in (proc.stdout, proc.stderr):
        close = getattr(stream, "close", None)
        if callable(close):
            close()


def _spawn_error(executable: str, exc: BaseException) -> str:
    """Node's message for a failed ``spawn`` (``spawn /usr/bin/bash ENOENT``)."""
    if isinstance(exc, OSError) and exc.errno is not None:
        return f"spawn {executable} {errno.errorcode.get(exc.errno, f'E{exc.errno}')}"
    return str(exc)


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
                    _close_pipes(entry.process)
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


# ======================================================================================
# The tool


@attrs.frozen(kw_only=True)
class _Params:
    command: str
    description: str | None = None
    dir_path: str | None = None
    is_background: bool = False
    delay_ms: float | None = None

    @classmethod
    def from_args(cls, args: Mapping[str, Any]) -> _Params:
        command = args.get("command")
        description = args.get("description")
        dir_path = args.get("dir_path")
        delay = args.get("delay_ms")
        return cls(
            command=command if isinstance(command, str) else "",
            description=description if isinstance(description, str) else None,
            dir_path=dir_path if isinstance(dir_path, str) else None,
            is_background=args.get("is_background") is True,
            delay_ms=float(delay)
            if isinstance(delay, int | float) and not isinstance(delay, bool)
            else None,
        )


_DESCRIPTION = (
    "Runs a shell command with `bash -c <command>` and reports what it printed. The "
    "command leads its own process group, so the whole group can be stopped with "
    "`kill -- -PGID` or signalled with `kill -s SIGNAL -- -PGID`. Background jobs may be "
    "started with `&`.\n\n"
    "Keep the output small and make sure the command ends by itself: prefer quiet or "
    "silent flags (for example `npm install --silent`) and switch pagers off "
    "(`git --no-pager`, `systemctl --no-pager`, or `PAGER=cat`).\n\n"
    "The result contains:\n"
    "Output: what stdout and stderr printed, interleaved; `(empty)` if nothing; may be "
    "partial after an error or while background jobs still hold the output open.\n"
    "Exit Code: only when the exit status was not zero.\n"
    "Error: only when the process could not be started.\n"
    "Signal: only when the process was ended by a signal.\n"
    "Background PIDs: only when background jobs were left running.\n"
    "Process Group PGID: when the process group is known."
)

_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "command": {
            "type": "string",
            "description": "The exact bash command line, run as `bash -c <command>`.",
        },
        "description": {
            "type": "string",
            "description": (
                "What the command does, for the user: specific and short, one sentence if "
                "possible and never more than three, without line breaks."
            ),
        },
        "dir_path": {
            "type": "string",
            "description": (
                "(OPTIONAL) Directory to run the command in; the project root when "
                "omitted. It has to exist already and lie inside the workspace."
            ),
        },
        "is_background": {
            "type": "boolean",
            "description": (
                "True for long-running commands such as servers or file watchers: the "
                "command is started, given a moment to fail early, and then left running "
                "in the background."
            ),
        },
        "delay_ms": {
            "type": "integer",
            "description": (
                "Optional. For background commands, how many milliseconds to wait after "
                "the start before returning, so the process can start up and print its "
                "first output."
            ),
        },
    },
    "required": ["command"],
}


class ShellTool:
    """``run_shell_command`` (Gemini's ``ShellTool``, kind ``execute``)."""

    name = SHELL_TOOL_NAME
    display_name = "Shell"
    kind = "execute"

    def __init__(self, *, background: BackgroundProcessRegistry | None = None) -> None:
        self.background = BACKGROUND_PROCESSES if background is None else background

    async def close_session(self, env: ToolEnv) -> None:
        """The session ends: kill what its shell calls left running."""
        await self.background.kill(env.session_id or None)

    def cancelled_result(self, streamed: str, call_id: str) -> ToolResult:
        """What the model gets of a call cancelled while it ran (Gemini's text)."""
        del call_id  # the same for every call
        return user_cancelled_result(streamed)

    def declaration(self, model: str) -> dict[str, Any]:
        del model  # the same for every model family
        return {
            "name": self.name,
            "description": _DESCRIPTION,
            "parametersJsonSchema": _SCHEMA,
        }

    def validate(self, args: Mapping[str, Any], env: ToolEnv) -> str | None:
        params = _Params.from_args(args)
        if not js_trim(params.command):
            return "Command cannot be empty."
        if params.dir_path:
            return _check_path(node_resolve(str(env.workspace), params.dir_path), env)
        return None

    def describe(self, args: Mapping[str, Any], env: ToolEnv) -> str:
        params = _Params.from_args(args)
        description = js_trim(params.description) if params.description else ""
        if len(params.command) <= SHOW_NL_DESCRIPTION_THRESHOLD or not description:
            return params.command
        return description

    async def execute(
        self,
        args: Mapping[str, Any],
        env: ToolEnv,
        output: OutputSink | None = None,
        *,
        call_id: str = "",
        on_pid: Callable[[int], None] | None = None,
    ) -> ToolResult:
        """Run the call.

        ``call_id`` (the scheduler's id, ``run_shell_command__...``) names the file that
        receives a truncated output; ``on_pid`` is told the process-group id as soon as
        the process exists (Gemini's ``setExecutionIdCallback``).
        """
        params = _Params.from_args(args)
        stripped = strip_shell_wrapper(params.command)
        if not env.user_call and detect_command_substitution(stripped):
            # Gemini CLI returns the block as an ordinary result (shown as a success);
            # here it is the call's error: the command did not run.
            return ToolResult(
                llm_content=INJECTION_MESSAGE,
                return_display=INJECTION_DISPLAY,
                error_type=INJECTION_ERROR_TYPE,
                error_message=INJECTION_MESSAGE,
            )
        workspace = str(env.workspace)
        cwd = node_resolve(workspace, params.dir_path) if params.dir_path else workspace
        problem = _check_path(cwd, env)
        if problem is not None:
            return ToolResult(
                llm_content=problem,
                return_display="Path not in workspace.",
                error_type="path_not_in_workspace",
                error_message=problem,
            )
        temp_dir = Path(tempfile.mkdtemp(prefix="gemini-shell-"))
        pid_file = temp_dir / "bgpids.tmp"
        command_to_execute = wrap_command_for_background_pids(stripped, str(pid_file))
        executable = resolve_executable("bash") or "bash"
        argv = [executable, "-c", ensure_promptvars_disabled(command_to_execute)]
        shell_env = build_shell_env(os.environ, env.settings)
        if params.is_background:
            return await self._run_background(
                params, stripped, argv, cwd, shell_env, env, call_id, temp_dir, on_pid
            )
        try:
            return await self._run_foreground(
                params, stripped, command_to_execute, argv, cwd, shell_env, env, call_id,
                pid_file, output, on_pid,
            )  # fmt: skip
        finally:
            shutil.rmtree(temp_dir, ignore_errors=True)

    # ---------------------------------------------------------------- foreground

    async def _run_foreground(
        self,
        params: _Params,
        stripped: str,
        command_to_execute: str,
        argv: list[str],
        cwd: str,
        shell_env: dict[str, str],
        env: ToolEnv,
        call_id: str,
        pid_file: Path,
        output: OutputSink | None,
        on_pid: Callable[[int], None] | None,
    ) -> ToolResult:
        timeout_s = inactivity_timeout(env.settings)
        try:
            proc = await trio.lowlevel.open_process(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                cwd=cwd,
                env=shell_env,
                start_new_session=True,
            )
        except (OSError, ValueError) as exc:
            outcome = ShellOutcome(error=_spawn_error(argv[0], exc), exit_code=1)
            return self._finish(outcome, params, command_to_execute, timeout_s, env, call_id)
        io_scope = trio.CancelScope()
        timed_out = False

        def on_activity() -> None:
            if timeout_s > 0:
                io_scope.deadline = trio.current_time() + timeout_s

        try:
            on_activity()
            if on_pid is not None:
                on_pid(proc.pid)
            collector = _OutputCollector(output, on_activity)
            with io_scope:
                await _pump_until_closed(proc, collector)
            timed_out = io_scope.cancelled_caught
            if timed_out:
                await _terminate(proc)
                with trio.move_on_after(_POST_KILL_DRAIN_S):
                    await _pump_until_closed(proc, collector)
            text = await collector.finish()
        except BaseException:
            with trio.CancelScope(shield=True):
                await _terminate(proc)
            raise
        finally:
            _close_pipes(proc)
        returncode = proc.returncode
        background_pids = () if timed_out else _read_background_pids(pid_file, proc.pid)
        outcome = ShellOutcome(
            output=text,
            exit_code=returncode if returncode is not None and returncode >= 0 else None,
            signal=-returncode if returncode is not None and returncode < 0 else None,
            pid=proc.pid,
            timed_out=timed_out,
            background_pids=background_pids,
        )
        if background_pids and not timed_out:
            self.background.add(
                BackgroundProcess(
                    pid=proc.pid,
                    command=stripped,
                    session_id=env.session_id,
                    call_id=call_id,
                    member_pids=tuple(int(p) for p in background_pids if p.isdigit()),
                    started_at=trio.current_time(),
                )
            )
        return self._finish(outcome, params, command_to_execute, timeout_s, env, call_id)

    def _finish(
        self,
        outcome: ShellOutcome,
        params: _Params,
        command_to_execute: str,
        timeout_s: float,
        env: ToolEnv,
        call_id: str,
    ) -> ToolResult:
        data: dict[str, Any] | None = None
        if not outcome.timed_out and outcome.exit_code not in (None, 0):
            data = {"exitCode": outcome.exit_code, "isError": True}
        display = _return_display(outcome, timeout_s)
        if outcome.error is not None:
            # Gemini drops the content of failed calls; the model sees the message only.
            return ToolResult(
                llm_content=wrap_untrusted(
                    "".join(_llm_pieces(outcome, params.command, command_to_execute, timeout_s))
                ),
                return_display=display,
                error_type="shell_execute_error",
                error_message=outcome.error,
                data=data,
            )
        pieces = _llm_pieces(outcome, params.command, command_to_execute, timeout_s)
        path = tool_output_path(env.project_temp_dir, SHELL_TOOL_NAME, call_id, env.session_id)
        with TruncatingWriter(path, truncation_threshold(env.settings)) as writer:
            writer.write(_UNTRUSTED_OPEN)
            for piece in pieces:
                escaped = piece.replace(_CLOSE_TAG, _ESCAPED_CLOSE_TAG)
                for start in range(0, len(escaped), _FEED_SLICE):
                    writer.write(escaped[start : start + _FEED_SLICE])
            writer.write(_UNTRUSTED_CLOSE)
            truncated = writer.finish()
        return ToolResult(
            llm_content=truncated.content,
            return_display=display,
            output_file=truncated.output_file,
            data=data,
        )

    # ---------------------------------------------------------------- background

    async def _run_background(
        self,
        params: _Params,
        stripped: str,
        argv: list[str],
        cwd: str,
        shell_env: dict[str, str],
        env: ToolEnv,
        call_id: str,
        temp_dir: Path,
        on_pid: Callable[[int], None] | None,
    ) -> ToolResult:
        """Start the command with its output going to a log file, wait, and return.

        The output goes straight to ``<tmp>/background-processes/background-<pid>.log``
        (where Gemini logs background output), so nothing has to read pipes after the
        call returns and the process never blocks on a full pipe.
        """
        log_dir = env.project_temp_dir.parent / "background-processes"
        log_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, pending = tempfile.mkstemp(dir=log_dir, prefix=".pending-", suffix=".log")
        try:
            proc = await trio.lowlevel.open_process(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=fd,
                stderr=fd,
                cwd=cwd,
                env=shell_env,
                start_new_session=True,
            )
        except (OSError, ValueError) as exc:
            os.unlink(pending)
            shutil.rmtree(temp_dir, ignore_errors=True)
            message = _spawn_error(argv[0], exc)
            text = background_message(None)
            return ToolResult(
                llm_content=wrap_untrusted(text),
                return_display=text,
                error_type="shell_execute_error",
                error_message=message,
                data={"command": params.command, "initialOutput": ""},
            )
        finally:
            os.close(fd)
        log_path = log_dir / f"background-{proc.pid}.log"
        os.replace(pending, log_path)
        entry = self.background.add(
            BackgroundProcess(
                pid=proc.pid,
                command=stripped,
                session_id=env.session_id,
                call_id=call_id,
                log_path=log_path,
                started_at=trio.current_time(),
                process=proc,
                temp_dir=temp_dir,
            )
        )
        try:
            if on_pid is not None:
                on_pid(proc.pid)
            delay_ms = BACKGROUND_DELAY_MS if params.delay_ms is None else params.delay_ms
            await trio.sleep(max(delay_ms, 0) / 1000)
        except BaseException:
            with trio.CancelScope(shield=True):
                await self.background.kill_entries((entry,))
            raise
        text = background_message(proc.pid)
        return ToolResult(
            llm_content=wrap_untrusted(text),
            return_display=text,
            data={
                "pid": proc.pid,
                "command": params.command,
                "initialOutput": _read_log_output(log_path),
            },
        )


async def _pump(stream: trio.abc.ReceiveStream, collector: _OutputCollector) -> None:
    while True:
        data = await stream.receive_some(_READ_SIZE)
        if not data:
            return
        await collector.feed(data)


async def _pump_until_closed(proc: trio.Process, collector: _OutputCollector) -> None:
    """Until the process has exited and the pipe is closed (Node's ``close`` event)."""
    assert proc.stdout is not None
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_pump, proc.stdout, collector)
        await proc.wait()


def _check_path(path: str, env: ToolEnv) -> str | None:
    try:
        return validate_path_access(path, env)
    except NodeFsError as exc:
        return exc.message


def _read_background_pids(pid_file: Path, leader: int) -> tuple[str, ...]:
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


def _read_log_output(path: Path) -> str:
    """A background log so far, as Gemini's ``output`` (last 16 MiB, stripped, trimmed)."""
    try:
        with open(path, "rb") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(max(0, size - MAX_CHILD_PROCESS_BUFFER_SIZE))
            raw = f.read()
    except OSError:
        return ""
    return js_trim(strip_ansi(codecs.decode(raw, "utf-8-sig", errors="replace")))


SHELL_TOOLS: tuple[Tool, ...] = (ShellTool(),)
