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
recorded in a :class:`BackgroundProcessRegistry` (by default
:data:`BACKGROUND_PROCESSES`); they outlive the call, and whoever owns the session
kills them with :func:`kill_background_processes` (or ``registry.kill(session_id)``).

When the session's client runs commands in terminals it shows (``ToolEnv.terminal_access``:
an ACP editor with ``terminal/*``), a foreground command runs there instead — the same
``bash -c`` line, our environment's changes over the client's, the same texts from what
the terminal reports (its signal names read as numbers), a cancel kills it through the
client; no background-PID bookkeeping, no inactivity timeout and no process-group line
(the client owns the process). Background calls still run here.

This module is the tool itself (parameters, the run, the result); its parts live beside
it: ``_shell_command`` (the command line, command substitution, background PIDs),
``_shell_env`` (environment and settings), ``_shell_output`` (collecting the output,
Gemini's texts) and ``_shell_processes`` (ending a process group, the registry).

Memory: the output is held once, as decoded chunks while the command runs (the tool's
``return_display`` needs all of it, as in Gemini — 2 MB in ``perf-high-volume-shell``),
capped at Gemini's 16 M characters. The model's text is produced from that copy by a
:class:`TruncatingWriter`, which keeps only head and tail and streams everything to the
output file; no second full copy of the ``llm_content`` is built.

Blocking work: writing the truncated output's file and reading a background call's
log run in worker threads; done inline, as local and small, are the path checks, the
temp dir for the background-PID file and reading that file.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs
import trio

from actors.common import js_trim, node_resolve, spawn_error, strip_ansi
from bus.messages import ToolResult

from ._base import OutputSink, Tool, ToolEnv
from ._fs_errors import NodeFsError
from ._paths import validate_path_access
from ._shell_command import (
    INJECTION_DISPLAY,
    INJECTION_ERROR_TYPE,
    INJECTION_MESSAGE,
    detect_command_substitution,
    ensure_promptvars_disabled,
    read_background_pids,
    resolve_executable,
    wrap_command_for_background_pids,
)
from ._shell_env import build_shell_env, inactivity_timeout
from ._shell_output import (
    OutputCollector,
    ShellOutcome,
    background_message,
    llm_pieces,
    read_log_output,
    return_display,
    user_cancelled_result,
)
from ._shell_processes import (
    BACKGROUND_PROCESSES,
    BackgroundProcess,
    BackgroundProcessRegistry,
    close_pipes,
    terminate,
)
from ._truncate import TruncatingWriter, tool_output_path, truncation_threshold
from ._untrusted import wrap_untrusted, write_untrusted

__all__ = ["SHELL_TOOLS", "SHELL_TOOL_NAME", "ShellTool"]

SHELL_TOOL_NAME = "run_shell_command"

BACKGROUND_DELAY_MS = 200
"""``shell.ts``: default wait before a background call returns."""
SHOW_NL_DESCRIPTION_THRESHOLD = 150
_POST_KILL_DRAIN_S = 1.0
"""After an inactivity kill, how long the pipes may still deliver output."""
_READ_SIZE = 65536


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

    def confirmation_details(self, args: Mapping[str, Any], env: ToolEnv) -> dict[str, Any]:
        """What the approval shows: the whole command and its root commands (Gemini CLI's
        ``command``, ``rootCommand``), the directory when it is not the workspace."""
        from actors.common import command_roots, strip_shell_wrapper  # the shell's readers: on use

        params = _Params.from_args(args)
        details: dict[str, Any] = {
            "command": params.command,
            "rootCommand": ", ".join(dict.fromkeys(command_roots(strip_shell_wrapper(params.command)))),
        }
        if params.dir_path:
            details["dirPath"] = params.dir_path
        return details

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
        from actors.common import strip_shell_wrapper

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
        if env.terminal_access is not None and not params.is_background:
            return await self._run_in_client_terminal(params, stripped, cwd, env, call_id, output)
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

    # ---------------------------------------------------------------- client terminal

    async def _run_in_client_terminal(
        self,
        params: _Params,
        stripped: str,
        cwd: str,
        env: ToolEnv,
        call_id: str,
        output: OutputSink | None,
    ) -> ToolResult:
        """A foreground command in a terminal of the session's client (an editor shows it
        live): the same ``bash -c`` line, our environment's changes over the client's,
        and the same texts for the model. What differs: no background-PID bookkeeping
        or inactivity timeout (the client owns the process), no process-group id in the
        text; cancelling kills it through the client."""
        assert env.terminal_access is not None
        command = ensure_promptvars_disabled(stripped)
        shell_env = build_shell_env(os.environ, env.settings)
        changed = {name: value for name, value in shell_env.items() if os.environ.get(name) != value}
        run = await env.terminal_access.run_in_terminal(
            call_id=call_id,
            command=resolve_executable("bash") or "bash",
            args=["-c", command],
            cwd=cwd,
            env=changed,
            output=output,
        )
        outcome = ShellOutcome(
            output=js_trim(strip_ansi(run.output)),
            exit_code=run.exit_code if run.signal is None else None,
            signal=_signal_number(run.signal),
            error=run.error,
        )
        timeout_s = inactivity_timeout(env.settings)
        return await trio.to_thread.run_sync(self._finish, outcome, params, command, timeout_s, env, call_id)

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
            outcome = ShellOutcome(error=spawn_error(argv[0], exc), exit_code=1)
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
            collector = OutputCollector(output, on_activity)
            with io_scope:
                await _pump_until_closed(proc, collector)
            timed_out = io_scope.cancelled_caught
            if timed_out:
                await terminate(proc)
                with trio.move_on_after(_POST_KILL_DRAIN_S):
                    await _pump_until_closed(proc, collector)
            text = await collector.finish()
        except BaseException:
            with trio.CancelScope(shield=True):
                await terminate(proc)
            raise
        finally:
            close_pipes(proc)
        returncode = proc.returncode
        background_pids = () if timed_out else read_background_pids(pid_file, proc.pid)
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
        # Writes the whole output (up to 16 M characters) when it is truncated: in a worker
        # thread, not abandoned on cancel (the file is never left half written).
        return await trio.to_thread.run_sync(
            self._finish, outcome, params, command_to_execute, timeout_s, env, call_id
        )

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
        display = return_display(outcome, timeout_s)
        if outcome.error is not None:
            # Gemini drops the content of failed calls; the model sees the message only.
            return ToolResult(
                llm_content=wrap_untrusted(
                    "".join(llm_pieces(outcome, params.command, command_to_execute, timeout_s))
                ),
                return_display=display,
                error_type="shell_execute_error",
                error_message=outcome.error,
                data=data,
            )
        pieces = llm_pieces(outcome, params.command, command_to_execute, timeout_s)
        path = tool_output_path(env.project_temp_dir, SHELL_TOOL_NAME, call_id, env.session_id)
        with TruncatingWriter(path, truncation_threshold(env.settings)) as writer:
            write_untrusted(writer, pieces)
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
            message = spawn_error(argv[0], exc)
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
            # Up to 16 MiB of log: read in a worker thread.
            initial = await trio.to_thread.run_sync(
                read_log_output, log_path, abandon_on_cancel=True
            )
        except BaseException:
            with trio.CancelScope(shield=True):
                await self.background.kill_entries((entry,))
            raise
        text = background_message(proc.pid)
        return ToolResult(
            llm_content=wrap_untrusted(text),
            return_display=text,
            data={"pid": proc.pid, "command": params.command, "initialOutput": initial},
        )


def _signal_number(name: str | None) -> int | None:
    """A signal's number from the name a client reports (``SIGTERM``, ``TERM``, ``15``)."""
    if not name:
        return None
    if name.isdigit():
        return int(name)
    try:
        return int(signal.Signals[name if name.startswith("SIG") else f"SIG{name}"])
    except KeyError:
        return None


async def _pump(stream: trio.abc.ReceiveStream, collector: OutputCollector) -> None:
    while True:
        data = await stream.receive_some(_READ_SIZE)
        if not data:
            return
        await collector.feed(data)


async def _pump_until_closed(proc: trio.Process, collector: OutputCollector) -> None:
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


SHELL_TOOLS: tuple[Tool, ...] = (ShellTool(),)
