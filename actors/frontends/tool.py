"""``agentbus tool NAME --args JSON``: run one tool yourself, headless.

    agentbus tool read_file --args '{"file_path": "README.md"}'
    agentbus tool run_shell_command --args '{"command": "ls"}' -o json
    agentbus tool --list

The call takes the path every session's calls take: the session is wired as for any
other entry point (``session_setup`` + ``session_config`` + ``open_session``, all in ``actors.host``), and the
call goes to its scheduler as a user's call (``ToolCallRequest.client_initiated``):
registry and schema validation, the tool's own checks (a path outside the workspace),
policy (deny rules, ``--approval-mode plan``), BeforeTool/AfterTool hooks, then the
executor. The user named the call, so a policy that would ask is answered by the asking
itself, as Gemini CLI treats client-initiated calls (``scheduler/policy.ts``); nobody
can be asked anything else (a BeforeTool hook that asks for a confirmation), so that is
refused with Gemini CLI's non-interactive wording.

Output: the result as text (what a user is shown: the tool's display, an edit's diff,
else what the model would be given), or with ``-o json`` one document (``tool``,
``args``, ``status``, ``llm_content``, ``display``, ``error`` ``{type, message}``,
``duration_ms``, ``session_id``, ``call_id``).

Exit codes: 0 the call succeeded; 1 the tool failed (or policy refused it); 42 bad input
(unknown tool, arguments that are not a JSON object or fail the schema or the tool's
checks, a path outside the workspace; Gemini CLI's ``FatalInputError`` code) with one
line on stderr; 2 a malformed command line (argparse); 130 cancelled (Ctrl-C or
SIGTERM: the call is cancelled through the scheduler and its process group killed; a
second signal exits at once); settings errors as in headless runs (52).

The session is recorded like every session (``<data dir>/sessions/<id>.jsonl``); it
has no prompt, so ``--list-sessions`` does not list it. The model is reached only by
tools that use it (``web_fetch``, ``google_web_search``): the live backend starts on
their first request, so other tools never load it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

import attrs
import trio

from actors.frontends.headless import force_exit
from actors.gateway import (
    GATEWAY_ADDRESS,
    Backend,
    BackendError,
    ChunkSink,
    GatewayActor,
    open_backend,
)
from actors.host.args import APPROVAL_MODES, HeadlessArgs
from actors.host.errors import FatalError, FatalInputError
from actors.host.opening import open_session
from actors.host.setup import (
    SessionSetup,
    approval_mode_from,
    model_from,
    print_warnings,
    session_config,
    session_setup,
)
from actors.host.user_calls import is_bad_input, json_args, model_text, shown_text
from actors.recording import RecorderError, default_data_dir, recorder_error_in, recording_path
from bus import Bus
from bus.json_values import thaw
from bus.messages import (
    BatchSettled,
    CancelBatch,
    CloseSession,
    CompletedCall,
    GenerateRequest,
    ScheduleBatch,
    ToolCallRequest,
    new_id,
)

EXIT_OK = 0
EXIT_TOOL_ERROR = 1
EXIT_BAD_INPUT = FatalInputError.exit_code
EXIT_CANCELLED = 130


class ToolArgsError(FatalInputError):
    """``--args`` is not a JSON object."""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="agentbus tool",
        description="Run one tool yourself in this workspace, through a session's scheduler "
        "(validation, policy, hooks), and print its result.",
        epilog="Exit codes: 0 success, 1 the tool failed, 42 bad input (unknown tool, "
        "bad arguments, a path outside the workspace), 130 cancelled.",
    )
    p.add_argument("name", nargs="?", help="the tool's name (agentbus tool --list shows them)")
    p.add_argument(
        "--args",
        dest="tool_args",
        default="{}",
        metavar="JSON",
        help="the arguments, a JSON object ('-': read it from stdin); default {}",
    )
    p.add_argument("-o", "--output-format", choices=("text", "json"), default="text", help="text (default) or json")
    p.add_argument("--approval-mode", choices=APPROVAL_MODES, default=None, help="the session's approval mode")
    p.add_argument("-y", "--yolo", action="store_true", help="same as --approval-mode yolo")
    p.add_argument("-m", "--model", default=None, help="the model of tools that call one (web_fetch, google_web_search)")
    p.add_argument("--policy", action="append", default=[], metavar="FILE", help="policy files or directories")
    p.add_argument("--allowed-tools", action="append", default=[], metavar="NAME", help="tools allowed without asking")
    p.add_argument("--list", action="store_true", help="list the tools with a line about each, and exit")
    p.add_argument("--data-dir", default=None, metavar="DIR", help="where the session's recording goes")
    p.add_argument(
        "--fake-responses",
        default=None,
        metavar="FILE",
        help="serve the model calls of tools that make one from FILE (Gemini CLI's fake-responses format)",
    )
    return p


@attrs.frozen(kw_only=True)
class ToolRun:
    """One call, resolved before any actor starts."""

    name: str
    args: Mapping[str, Any]
    setup: SessionSetup
    settings: Mapping[str, Any]
    recording: Path | None
    make_backend: Callable[[], Backend]


def main(argv: Sequence[str]) -> int:
    from actors.host.settings import workspace_settings

    parsed = build_parser().parse_args(list(argv))
    fmt = parsed.output_format
    try:
        settings = workspace_settings()
        setup = _setup(parsed, settings)
        if parsed.list:
            return list_tools(setup, sys.stdout, fmt)
        if not parsed.name:
            build_parser().print_usage(sys.stderr)
            sys.stderr.write("agentbus tool: name the tool to run (agentbus tool --list shows them)\n")
            return 2
        args = parse_tool_args(sys.stdin.read() if parsed.tool_args == "-" else parsed.tool_args)
    except ToolArgsError as exc:
        report = ToolReport(name=parsed.name or "", args=None, call=None, error=("invalid_tool_params", exc.message))
        return report.print(sys.stdout, sys.stderr, fmt)
    except FatalError as exc:
        sys.stderr.write(f"{exc.message}\n")
        return exc.exit_code
    print_warnings(setup)
    data_dir = Path(parsed.data_dir) if parsed.data_dir else default_data_dir()
    run = ToolRun(
        name=parsed.name,
        args=args,
        setup=setup,
        settings=settings,
        recording=recording_path(data_dir, setup.session_id),
        make_backend=lambda: _backend(parsed, settings),
    )
    try:
        call = trio.run(run_tool, run)
    except KeyboardInterrupt:
        return EXIT_CANCELLED
    except (RecorderError, BaseExceptionGroup) as exc:
        failure = recorder_error_in(exc)
        if failure is None:
            raise
        sys.stderr.write(f"agentbus tool: {failure}; the call was stopped\n")
        return EXIT_TOOL_ERROR
    return ToolReport(name=run.name, args=args, call=call, session_id=setup.session_id).print(
        sys.stdout, sys.stderr, fmt
    )


def _setup(parsed: argparse.Namespace, settings: Mapping[str, Any]) -> SessionSetup:
    # Interactive policy: a person asked for this call (see the module doc).
    return session_setup(
        workspace=Path(os.getcwd()).resolve(),
        settings=settings,
        session_id=new_id(),
        model=model_from(parsed.model, settings),
        approval_mode=approval_mode_from(parsed.approval_mode, parsed.yolo, settings),
        interactive=True,
        policy_paths=parsed.policy,
        allowed_tools=parsed.allowed_tools,
    )


def _backend(parsed: argparse.Namespace, settings: Mapping[str, Any]) -> Backend:
    from actors.host.backend import make_backend

    try:
        return make_backend(HeadlessArgs(fake_responses=parsed.fake_responses), settings)
    except FatalError as exc:
        raise BackendError(exc.message, type="config") from None


def parse_tool_args(text: str) -> dict[str, Any]:
    try:
        return json_args(text, what="--args")
    except ValueError as exc:
        raise ToolArgsError(str(exc)) from None


def list_tools(setup: SessionSetup, out: TextIO, fmt: str) -> int:
    rows = []
    for name, tool in setup.tools.items():
        decl = tool.declaration(setup.model)
        description = str(decl.get("description") or "").strip()
        rows.append(
            {
                "name": name,
                "display_name": tool.display_name,
                "description": first_sentence(description),
                "parameters": decl.get("parametersJsonSchema") or decl.get("parameters") or {},
            }
        )
    if fmt == "json":
        out.write(json.dumps(rows, indent=2, ensure_ascii=False) + "\n")
        return EXIT_OK
    width = max((len(r["name"]) for r in rows), default=0)
    for r in rows:
        out.write(f"{r['name']:<{width}}  {r['description']}\n")
    return EXIT_OK


def first_sentence(text: str, limit: int = 120) -> str:
    line = text.split("\n", 1)[0].strip()
    end = line.find(". ")
    if end >= 0:
        line = line[: end + 1]
    return line if len(line) <= limit else line[: limit - 3] + "..."


async def run_tool(run: ToolRun) -> CompletedCall:
    """Start the session's actors, run the call as the user's, close the session."""
    bus = Bus()
    cfg = session_config(run.setup, history=(), recording=run.recording, settings=run.settings, one_session_process=True)
    sid = run.setup.session_id
    batch_id = new_id()
    settled: BatchSettled | None = None
    async with trio.open_nursery() as outer:
        await outer.start(GatewayActor(bus, OnDemandBackend(run.make_backend)).run)
        client = bus.connect(f"client:tool:{sid}")
        async with trio.open_nursery() as session:
            addrs = await open_session(session, bus, cfg, client)
            request = ToolCallRequest(
                call_id=f"{run.name}__user_{new_id()[:8]}", name=run.name, args=dict(run.args), client_initiated=True
            )
            watch = trio.CancelScope()
            outer.start_soon(_cancel_on_signal, watch, client, addrs.scheduler, sid, batch_id)
            await client.send(
                ScheduleBatch(
                    session_id=sid,
                    batch_id=batch_id,
                    reply_to=client.address,
                    approval_mode=cfg.approval_mode,
                    calls=(request,),
                    interactive=False,
                ),
                to=addrs.scheduler,
            )
            async for env in client:
                if isinstance(env.message, BatchSettled) and env.message.batch_id == batch_id:
                    settled = env.message
                    break
            await client.send(CloseSession(session_id=sid, reason="tool call finished"), to=addrs.session)
        # The session's actors have stopped (the recording is complete).
        watch.cancel(reason="the tool call finished")
        client.close()
        bus.disconnect(GATEWAY_ADDRESS)
    assert settled is not None and settled.calls
    return settled.calls[0]


async def _cancel_on_signal(scope: trio.CancelScope, client: Any, scheduler: str, sid: str, batch_id: str) -> None:
    """SIGINT/SIGTERM: the first cancels the call (its process group is killed), a
    second exits at once."""
    with scope, trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        seen = 0
        async for _sig in signals:
            seen += 1
            if seen > 1:
                force_exit(EXIT_CANCELLED)  # its process group is killed first
            await client.send(
                CancelBatch(session_id=sid, batch_id=batch_id, reason="interrupted by signal"), to=scheduler
            )


class OnDemandBackend:
    """The model backend, built on the first request: a call of a tool that never asks
    the model (most of them) does not pay for loading it. A backend that cannot be
    built fails that request (the tool reports the error)."""

    def __init__(self, make: Callable[[], Backend]) -> None:
        self._make = make
        self._backend: Backend | None = None
        self._lock = trio.Lock()
        self._nursery: trio.Nursery | None = None

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            try:
                yield
            finally:
                nursery.cancel_scope.cancel(reason="the gateway stops")

    async def generate(self, request: GenerateRequest, emit: ChunkSink) -> str:
        async with self._lock:
            if self._backend is None:
                backend = self._make()
                assert self._nursery is not None
                await self._nursery.start(self._hold, backend)
                self._backend = backend
        return await self._backend.generate(request, emit)

    @staticmethod
    async def _hold(backend: Backend, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with open_backend(backend):
            task_status.started()
            await trio.sleep_forever()


@attrs.frozen(kw_only=True)
class ToolReport:
    """What ``agentbus tool`` prints and returns for one call (or for arguments that
    never made one: ``error`` set, ``call`` None)."""

    name: str
    args: Mapping[str, Any] | None
    call: CompletedCall | None
    session_id: str = ""
    error: tuple[str, str] | None = None

    @property
    def status(self) -> str:
        return self.call.status if self.call is not None else "error"

    @property
    def error_pair(self) -> tuple[str, str] | None:
        if self.error is not None:
            return self.error
        call = self.call
        if call is not None and call.status == "error":
            return (call.error_type or "unknown", call.error_message or "")
        return None

    @property
    def bad_input(self) -> bool:
        return self.error is not None or (self.call is not None and is_bad_input(self.call))

    @property
    def exit_code(self) -> int:
        if self.bad_input:
            return EXIT_BAD_INPUT
        if self.status == "cancelled":
            return EXIT_CANCELLED
        return EXIT_OK if self.status == "success" else EXIT_TOOL_ERROR

    def document(self) -> dict[str, Any]:
        call = self.call
        error = self.error_pair
        return {
            "session_id": self.session_id,
            "tool": call.name if call is not None else self.name,
            "call_id": call.call_id if call is not None else None,
            "args": thaw(call.args) if call is not None else self.args,
            "status": self.status,
            "llm_content": model_text(call) if call is not None and call.status == "success" else None,
            "display": thaw(call.result_display) if call is not None else None,
            "error": {"type": error[0], "message": error[1]} if error is not None else None,
            "duration_ms": call.duration_ms if call is not None else 0,
        }

    def print(self, out: TextIO, err: TextIO, fmt: str) -> int:
        error = self.error_pair
        if fmt == "json":
            out.write(json.dumps(self.document(), indent=2, ensure_ascii=False) + "\n")
        elif self.status == "success" and self.call is not None:
            text = shown_text(self.call)
            if text:
                out.write(text if text.endswith("\n") else text + "\n")
        if self.bad_input and error is not None:
            first = error[1].strip().splitlines()[0] if error[1].strip() else error[0]
            err.write(f"agentbus tool: {first}\n")
        elif self.status == "cancelled":
            err.write("Operation cancelled.\n")
        elif error is not None and fmt != "json":
            err.write(f"{error[1] or error[0]}\n")
        return self.exit_code


__all__ = ["ToolReport", "list_tools", "main", "parse_tool_args", "run_tool"]
