"""A kill (or cancel) while ``terminal/create`` waits for the editor: the terminal the
editor starts is still killed and released once its id is known (it was abandoned: its
id never learned, the command ran on in the editor)."""

from __future__ import annotations

from typing import Any

import trio

from actors.frontends.acp._terminal import run_in_client_terminal
from bus.messages import RunInTerminal, TerminalOutput


async def test_a_kill_during_create_kills_and_releases_the_terminal_once_created() -> None:
    calls: list[tuple[str, Any]] = []
    create_asked = trio.Event()
    create_answer = trio.Event()

    async def request(method: str, params: Any) -> Any:
        calls.append((method, params.get("terminalId")))
        if method == "terminal/create":
            create_asked.set()
            await create_answer.wait()  # a slow editor
            return {"terminalId": "t1"}
        if method == "terminal/output":
            return {"output": "partial", "exitStatus": {"exitCode": None, "signal": "SIGKILL"}}
        return {}

    async def shown(terminal_id: str) -> None:
        await trio.lowlevel.checkpoint()

    async def streamed(out: TerminalOutput) -> None:
        return None

    run = RunInTerminal(session_id="s", request_id="r", reply_to="shell:s", call_id="c", command="sleep", args=("60",), cwd="/")
    kill = trio.CancelScope()
    result: list[Any] = []

    async def run_it() -> None:
        result.append(await run_in_client_terminal(request, "acp-s", run, shown=shown, streamed=streamed, kill=kill))

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run_it)
            await create_asked.wait()
            kill.cancel()  # KillTerminal while the editor is still creating
            create_answer.set()
    [exited] = result
    assert exited.terminal_id == "t1"
    assert ("terminal/kill", "t1") in calls and ("terminal/release", "t1") in calls, calls
