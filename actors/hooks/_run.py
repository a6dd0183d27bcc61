"""Running one command hook: Gemini CLI's ``HookRunner.executeCommandHook``.

``bash -c <command>`` in its own process group (so that killing it kills what it
started), ``cwd`` = the input's ``cwd``, environment = the given process environment +
``GEMINI_PROJECT_DIR``, ``GEMINI_PLANS_DIR``, ``GEMINI_CWD``, ``GEMINI_SESSION_ID``,
``CLAUDE_PROJECT_DIR`` + the hook's ``env``. The same ``$VAR`` tokens in the command
are replaced by shell-quoted values first (``expandCommand``, quoting with Gemini's
``escapeShellArg``: :func:`actors.common.escape_shell_arg`). stdin gets
``JSON.stringify(input)`` then EOF; stdout and stderr are captured.

Output (``parse_hook_output``): ``text = stdout.trim() || stderr.trim()``; JSON (also a
JSON string that holds JSON) → that value whatever the exit code; otherwise the text
becomes ``{decision: 'allow', systemMessage}`` (exit 0), ``{decision: 'allow',
systemMessage: 'Warning: ' + text}`` (exit 1) or ``{decision: 'deny', reason}`` (any
other exit code). ``success`` is ``exit code == 0``. A command that bash cannot find
exits 127 with ``bash: ...: command not found`` on stderr, so — as in Gemini — it
denies; only a failure to start bash itself (or a missing ``cwd``) is a failure
without output.

Differences, on purpose:
- Timeout: Gemini sends SIGTERM to bash only and "SIGKILL after 5 s" never fires
  (``child.killed`` is already true). We signal the whole process group and the
  children that left it (``setsid``), as the shell tool does: SIGTERM, then SIGKILL
  after ``kill_grace_s`` (5 s) if the leader is still alive, then a SIGKILL sweep. The result is the same failure, "Hook timed out after Nms".
- Output cap: Gemini buffers everything. We keep at most ``MAX_OUTPUT_BYTES`` (16 MiB)
  per stream and keep draining the rest (so the hook never blocks on a full pipe);
  a hook that exceeds it fails with an error saying so, and its output is not used.

Cancellation kills the process group (bounded, shielded) and re-raises.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Mapping
from typing import Any, Literal

import attrs
import trio

from actors.common import (
    descendants,
    escape_shell_arg,
    group_has_live_members,
    js_json,
    js_number,
    js_trim,
    signal_group,
    spawn_error,
)
from bus.json_values import freeze

from ._config import CommandHook

MAX_OUTPUT_BYTES = 16 * 1024 * 1024
"""Bytes kept per stream; the rest is read and discarded."""
KILL_GRACE_S = 5.0
"""After a timeout's SIGTERM, how long the hook has before SIGKILL (Gemini: 5 s)."""
CANCEL_GRACE_S = 0.2
"""After a cancellation's SIGTERM, how long before SIGKILL (bounded clean-up)."""
_REAP_S = 1.0
_POLL_S = 0.002
_READ_CHUNK = 65536


EXIT_SUCCESS = 0
EXIT_NON_BLOCKING = 1


@attrs.frozen(kw_only=True)
class HookResult:
    """What one hook did (Gemini's ``HookExecutionResult``)."""

    hook: CommandHook
    success: bool
    """Exit code 0 (a hook exiting 2 with a ``deny`` answer is unsuccessful AND denies)."""
    output: Any = None
    """The parsed answer (usually a JSON object), None when the hook answered nothing
    usable; used by aggregation whether or not ``success``."""
    output_format: Literal["json", "text"] | None = None
    exit_code: int | None = None
    """None when the hook did not exit by itself (timeout, cancel, spawn failure, signal)."""
    stdout: str = ""
    stderr: str = ""
    duration_ms: int = 0
    error: str | None = None
    """Why it failed to run: timeout, spawn error, output too large, cancelled."""


# ---------------------------------------------------------------------------- pure parts


def expand_command(command: str, *, cwd: str, plans_dir: str, session_id: str) -> str:
    """Gemini's ``expandCommand``: the ``$VAR`` tokens, in its order, shell-quoted."""
    escaped_cwd = escape_shell_arg(cwd)
    return (
        command.replace("$GEMINI_PROJECT_DIR", escaped_cwd)
        .replace("$GEMINI_CWD", escaped_cwd)
        .replace("$GEMINI_PLANS_DIR", escape_shell_arg(plans_dir))
        .replace("$GEMINI_SESSION_ID", escape_shell_arg(session_id))
        .replace("$CLAUDE_PROJECT_DIR", escaped_cwd)
    )


def hook_environment(
    hook: CommandHook,
    base_env: Mapping[str, str],
    *,
    cwd: str,
    plans_dir: str,
    session_id: str,
) -> dict[str, str]:
    return {
        **base_env,
        "GEMINI_PROJECT_DIR": cwd,
        "GEMINI_PLANS_DIR": plans_dir,
        "GEMINI_CWD": cwd,
        "GEMINI_SESSION_ID": session_id,
        "CLAUDE_PROJECT_DIR": cwd,
        **hook.env,
    }


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _json_parse(text: str) -> Any:
    return json.loads(text, parse_constant=_reject_constant)


def convert_plain_text(text: str, exit_code: int) -> dict[str, Any]:
    """``convertPlainTextToHookOutput``."""
    if exit_code == EXIT_SUCCESS:
        return {"decision": "allow", "systemMessage": text}
    if exit_code == EXIT_NON_BLOCKING:
        return {"decision": "allow", "systemMessage": f"Warning: {text}"}
    return {"decision": "deny", "reason": text}


def parse_hook_output(
    stdout: str, stderr: str, exit_code: int | None
) -> tuple[Any, Literal["json", "text"] | None]:
    """Gemini's parsing of what a hook printed: ``(output, format)``.

    ``exit_code`` None (killed by a signal) counts as 0, as Gemini's ``exitCode || 0``.
    JSON that is not an object or array (``42``, ``null``, ``true``) yields no output.
    """
    text = js_trim(stdout) or js_trim(stderr)
    if not text:
        return None, None
    try:
        parsed = _json_parse(text)
        if isinstance(parsed, str):
            parsed = _json_parse(parsed)
        freeze(parsed)  # JSON no message can carry (nested past 128 levels) is text
    except (ValueError, RecursionError):
        return convert_plain_text(text, exit_code or EXIT_SUCCESS), "text"
    if isinstance(parsed, dict | list):
        return parsed, "json"
    return None, None


# ---------------------------------------------------------------------------- processes


async def terminate_group(proc: trio.Process, grace: float, *, shield: bool = True) -> None:
    """SIGTERM the process group and the leader's descendants that left it, SIGKILL
    them after ``grace`` if the leader lives, then SIGKILL them anyway (members that
    ignored SIGTERM) and wait, briefly, until no member is left running. Bounded;
    shielded unless told otherwise."""
    pgid = proc.pid
    with trio.CancelScope(shield=shield):
        # While the leader is unreaped its PID is ours, so its process tree is too.
        children = descendants(pgid) if proc.returncode is None else []
        if proc.returncode is None:
            signal_group(pgid, signal.SIGTERM, children)
            with trio.move_on_after(grace):
                await proc.wait()
        signal_group(pgid, signal.SIGKILL, children)
        with trio.move_on_after(_REAP_S):
            if proc.returncode is None:
                await proc.wait()
            # A SIGKILLed process is gone only once the kernel has scheduled its exit;
            # nothing signals that for members that are not our children, so poll.
            while group_has_live_members(pgid):  # noqa: ASYNC110
                await trio.sleep(_POLL_S)


class _Capture:
    """Bytes of one stream, up to a cap; the rest is counted and dropped."""

    def __init__(self, limit: int) -> None:
        self.data = bytearray()
        self.limit = limit
        self.dropped = 0

    async def drain(self, stream: Any) -> None:
        if stream is None:
            return
        while True:
            try:
                chunk = await stream.receive_some(_READ_CHUNK)
            except (trio.ClosedResourceError, trio.BrokenResourceError):
                return
            if not chunk:
                return
            room = self.limit - len(self.data)
            if room > 0:
                self.data += chunk[:room]
            self.dropped += max(0, len(chunk) - max(room, 0))

    def text(self) -> str:
        return self.data.decode("utf-8", errors="replace")


async def _feed(stream: Any, data: bytes) -> None:
    if stream is None:
        return
    try:
        await stream.send_all(data)
        await stream.aclose()
    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
        pass  # the hook exited or closed stdin without reading it all (Gemini: EPIPE)


def _close_pipes(proc: trio.Process) -> None:
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        close = getattr(stream, "close", None)
        if callable(close):
            close()


def _mib(n: int) -> str:
    return js_number(n / (1024 * 1024))


async def run_command_hook(
    hook: CommandHook,
    hook_input: Mapping[str, Any],
    *,
    base_env: Mapping[str, str],
    plans_dir: str = "",
    kill_grace_s: float = KILL_GRACE_S,
    max_output_bytes: int = MAX_OUTPUT_BYTES,
    executable: str = "bash",
) -> HookResult:
    """Run ``hook`` with ``hook_input`` on stdin and parse its answer.

    ``cwd`` and ``session_id`` come from the input. Never raises for the hook's own
    failures (they are the result); re-raises ``trio.Cancelled`` after killing the
    process group.
    """
    started = trio.current_time()
    cwd = str(hook_input.get("cwd") or os.getcwd())
    session_id = str(hook_input.get("session_id") or "")

    def elapsed() -> int:
        return int((trio.current_time() - started) * 1000)

    command = expand_command(hook.command, cwd=cwd, plans_dir=plans_dir, session_id=session_id)
    env = hook_environment(hook, base_env, cwd=cwd, plans_dir=plans_dir, session_id=session_id)
    try:
        proc = await trio.lowlevel.open_process(
            [executable, "-c", command],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env=env,
            start_new_session=True,
        )
    except (OSError, ValueError) as exc:
        return HookResult(
            hook=hook, success=False, error=spawn_error(executable, exc), duration_ms=elapsed()
        )
    out = _Capture(max_output_bytes)
    err = _Capture(max_output_bytes)
    timed_out = False
    try:
        with trio.move_on_after(hook.timeout_ms / 1000) as deadline:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_feed, proc.stdin, js_json(hook_input).encode("utf-8", "replace"))
                nursery.start_soon(out.drain, proc.stdout)
                nursery.start_soon(err.drain, proc.stderr)
            # Gemini waits for 'close': the process exited AND its pipes reached EOF.
            await proc.wait()
        if deadline.cancelled_caught:
            timed_out = True
            # Not shielded: a cancel during the grace escalates to the bounded kill below.
            await terminate_group(proc, kill_grace_s, shield=False)
    except BaseException:
        await terminate_group(proc, CANCEL_GRACE_S)
        raise
    finally:
        _close_pipes(proc)
    stdout, stderr = out.text(), err.text()
    if timed_out:
        return HookResult(
            hook=hook,
            success=False,
            stdout=stdout,
            stderr=stderr,
            duration_ms=elapsed(),
            error=f"Hook timed out after {js_number(hook.timeout_ms)}ms",
        )
    returncode = proc.returncode
    exit_code = returncode if returncode is not None and returncode >= 0 else None
    if out.dropped or err.dropped:
        which = "stdout" if out.dropped else "stderr"
        return HookResult(
            hook=hook,
            success=False,
            exit_code=exit_code,
            stdout=stdout,
            stderr=stderr,
            duration_ms=elapsed(),
            error=(
                f"Hook output exceeded {_mib(max_output_bytes)} MiB on {which}; "
                f"{out.dropped + err.dropped} bytes were discarded and the output was not used"
            ),
        )
    output, output_format = parse_hook_output(stdout, stderr, exit_code)
    return HookResult(
        hook=hook,
        success=exit_code == EXIT_SUCCESS,
        output=output,
        output_format=output_format,
        exit_code=exit_code,
        stdout=stdout,
        stderr=stderr,
        duration_ms=elapsed(),
    )
