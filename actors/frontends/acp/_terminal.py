"""The shell's commands in the ACP client's terminals (``terminal/*``).

When the client offers ``clientCapabilities.terminal``, an in-process session's shell
executor sends ``RunInTerminal`` here instead of starting the process itself (the
``TerminalAccess`` seam of ``actors.tools``). One command is one terminal:

1. ``terminal/create`` (``bash -c <command>``, its cwd, our environment's changes);
2. the terminal is shown inside the tool call (content ``{"type": "terminal"}``), so
   the editor shows the output live;
3. ``terminal/wait_for_exit``, while ``terminal/output`` is polled for what the
   command printed since (sent on as ``TerminalOutput``: other clients of the session
   and the recording see it too);
4. ``terminal/output`` once more for the whole output and the exit status, then
   ``terminal/release`` — always, also when the call was cancelled (``KillTerminal``:
   ``terminal/kill`` first) or the client failed.

What the executor gets back is one ``TerminalExited``: the output, the exit code or
the signal's name — a command the user killed in the editor ends as a signal, like a
local one killed — or ``error`` when the client could not run it or answered nonsense.
Nothing here stops the session: a client's error is that call's result.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import trio

from actors.frontends.acp._rpc import RpcError
from bus.json_values import thaw
from bus.messages import RunInTerminal, TerminalExited, TerminalOutput

OUTPUT_BYTE_LIMIT = 16 * 1024 * 1024
"""What the client keeps of a command's output (the shell's own cap: 16 M characters)."""
POLL_S = 0.5
"""How often the output is asked for while the command runs."""
GRACE_S = 2.0
"""Bound on the clean-up requests (kill, last output, release) after a cancel."""
CREATE_TIMEOUT_S = 30.0
"""How long ``terminal/create`` is waited for, a kill or cancel notwithstanding."""

Request = Callable[[str, Any], Awaitable[Any]]


async def run_in_client_terminal(
    request: Request,
    session_id: str,
    run: RunInTerminal,
    *,
    shown: Callable[[str], Awaitable[None]],
    streamed: Callable[[TerminalOutput], Awaitable[None]],
    kill: trio.CancelScope,
) -> TerminalExited:
    """Run ``run`` in a new terminal of the client (see the module doc); ``kill`` is
    cancelled to kill it (``KillTerminal``)."""

    def exited(**fields: Any) -> TerminalExited:
        return TerminalExited(session_id=run.session_id, request_id=run.request_id, **fields)

    env = thaw(run.env)
    params = {
        "sessionId": session_id,
        "command": run.command,
        "args": list(run.args),
        "env": [{"name": str(k), "value": str(v)} for k, v in (env.items() if isinstance(env, dict) else ())],
        "cwd": run.cwd,
        "outputByteLimit": OUTPUT_BYTE_LIMIT,
    }
    terminal_id: str | None = None
    ids: dict[str, str] = {}
    status: Any = None
    failure: str | None = None
    try:
        with kill:
            # Shielded (bounded): a kill or cancel meanwhile would abandon a terminal the
            # editor may have started, its id never learned, so never killed or released;
            # the kill takes effect once the id is known.
            created: Any = None
            with trio.move_on_after(CREATE_TIMEOUT_S, shield=True) as creating:
                try:
                    created = await request("terminal/create", params)
                except RpcError as exc:
                    return exited(error=f"The editor could not run the command: {exc.message}")
            if creating.cancelled_caught:
                return exited(error=f"The editor did not answer terminal/create within {CREATE_TIMEOUT_S:g} s")
            found = created.get("terminalId") if isinstance(created, dict) else None
            if not isinstance(found, str) or not found:
                return exited(error=f"The editor answered terminal/create without a terminalId: {created!r}")
            terminal_id = found
            ids = {"sessionId": session_id, "terminalId": terminal_id}
            await shown(terminal_id)
            seen = ""
            async with trio.open_nursery() as nursery:

                async def follow() -> None:
                    nonlocal seen
                    while True:
                        await trio.sleep(POLL_S)
                        try:
                            now = _output_of(await request("terminal/output", ids))
                        except RpcError:
                            return  # the live view stops; the end is read below
                        if now.startswith(seen) and len(now) > len(seen):
                            await streamed(
                                TerminalOutput(session_id=run.session_id, request_id=run.request_id, text=now[len(seen) :])
                            )
                        seen = now

                nursery.start_soon(follow)
                try:
                    status = await request("terminal/wait_for_exit", ids)
                except RpcError as exc:
                    failure = f"The editor's terminal failed: {exc.message}"
                nursery.cancel_scope.cancel(reason="the command exited")
        if terminal_id is None:
            return exited(error="cancelled before the command started")
        if failure is not None:
            return exited(error=failure, terminal_id=terminal_id)
        with trio.move_on_after(GRACE_S, shield=True):
            if kill.cancelled_caught:
                await request("terminal/kill", ids)
            last = await request("terminal/output", ids)
            output = _output_of(last)
            if isinstance(last, dict) and isinstance(last.get("exitStatus"), dict):
                status = last["exitStatus"]
            return exited(output=output, terminal_id=terminal_id, **_exit_of(status))
        failure = "The editor did not answer in time after the command was killed"
    except RpcError as exc:
        # The client released or lost the terminal, or failed: the call's error.
        failure = f"The editor's terminal failed: {exc.message}"
    finally:
        if terminal_id is not None:
            with trio.move_on_after(GRACE_S, shield=True):
                try:
                    await request("terminal/release", ids)
                except RpcError:
                    pass  # already gone: nothing left to free
    return exited(error=failure, terminal_id=terminal_id or "", **_exit_of(status))


def _output_of(answer: Any) -> str:
    output = answer.get("output") if isinstance(answer, dict) else None
    if not isinstance(output, str):
        raise RpcError(-32603, f"terminal/output answered without output: {answer!r}")
    return output


def _exit_of(status: Any) -> dict[str, Any]:
    if not isinstance(status, dict):
        return {}
    code, signal = status.get("exitCode"), status.get("signal")
    return {
        "exit_code": code if isinstance(code, int) and not isinstance(code, bool) else None,
        "signal": signal if isinstance(signal, str) and signal else None,
    }
