"""Executor actor: runs the calls of one tool kind (files, shell...) for one session.

Accepts: ``RunTool`` (start a call), ``CancelTool`` (stop it); the replies to its
tools' model calls (``ModelAccess``), file accesses (``FileAccess``: ``FileAccessed``)
and commands run in the client's terminals (``TerminalAccess``: ``TerminalOutput``,
``TerminalExited``).
Emits: ``ToolOutputStreamed`` events while a call runs, and exactly one ``ToolFinished``
per ``RunTool`` to its ``reply_to`` — also when the call was cancelled or crashed;
``GenerateRequest`` to the gateway, ``ReadTextFile``/``WriteTextFile`` to the
session's file-access client and ``RunInTerminal``/``KillTerminal`` to its terminal
client, for its tools.
Owns: the running calls, each in its own cancel scope (a shell call's process group
dies with its scope).
Stops: when its inbox closes (running calls are cancelled and reported; then each
tool's ``close_session`` runs, e.g. the shell kills processes it left in the
background), or by its supervisor's cancel.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeAlias, assert_never

import attrs
import trio

from actors.common import format_truncated_output, utf16_len
from bus import Bus, DeliveryError, Port
from bus.json_values import thaw
from bus.messages import (
    CancelGeneration,
    CancelTool,
    FileAccessed,
    GenerateRequest,
    GenerationCancelled,
    KillTerminal,
    ModelChunk,
    ModelFailed,
    ModelFinished,
    ModelReply,
    ModelRole,
    ReadTextFile,
    RunInTerminal,
    RunTool,
    TerminalExited,
    TerminalOutput,
    ToolFinished,
    ToolOutputStreamed,
    ToolResult,
    WriteTextFile,
    new_id,
)
from bus.planted import planted

from ._base import FileAccessError, ModelCallError, OutputSink, TerminalRun, Tool, ToolEnv
from ._declared import loaded_tool, real_tool
from ._truncate import truncate_tool_output, truncation_threshold

CLOSE_GRACE_S = 2.0

ExecutorInbox: TypeAlias = RunTool | CancelTool | ModelReply | FileAccessed | TerminalOutput | TerminalExited
"""What reaches an executor's address."""


class ExecutorActor:
    def __init__(
        self,
        bus: Bus,
        *,
        address: str,
        tools: Mapping[str, Tool],
        env: ToolEnv,
        gateway_address: str | None = None,
        file_access_address: str | None = None,
        terminal_address: str | Callable[[], str | None] | None = None,
    ) -> None:
        self.bus = bus
        self.address = address
        self.tools = dict(tools)
        self.gateway_address = gateway_address
        self.file_access_address = file_access_address
        """The session's file-access client (``ReadTextFile``/``WriteTextFile``), if any."""
        self._model_replies: dict[str, trio.MemorySendChannel[ModelReply]] = {}
        self._file_replies: dict[str, trio.MemorySendChannel[FileAccessed]] = {}
        self.terminal_address = terminal_address
        """The session's terminal client (``RunInTerminal``), if any; a callable names
        it at each call (None: that call's command runs here)."""
        self._terminal_replies: dict[str, trio.MemorySendChannel[TerminalOutput | TerminalExited]] = {}
        self._port: Port | None = None
        self.env = attrs.evolve(env, model_access=self) if gateway_address else env
        if file_access_address:
            self.env = attrs.evolve(self.env, file_access=self)
        if terminal_address:
            self.env = attrs.evolve(self.env, terminal_access=self)
        self._running: dict[str, trio.CancelScope] = {}

    async def run(self, *, task_status: trio.TaskStatus[Port] = trio.TASK_STATUS_IGNORED) -> None:
        port = self.bus.connect(self.address)
        self._port = port
        try:
            async with trio.open_nursery() as nursery:
                task_status.started(port)
                async for env in port:
                    msg = env.message
                    if not isinstance(msg, ExecutorInbox):
                        continue  # no peer is wired to send it anything else
                    match msg:
                        case ModelChunk() | ModelFinished() | ModelFailed() | GenerationCancelled() as reply:
                            waiting = self._model_replies.get(reply.request_id)
                            if waiting is not None:
                                waiting.send_nowait(reply)
                        case FileAccessed() as accessed:
                            file_waiting = self._file_replies.get(accessed.request_id)
                            if file_waiting is not None:
                                file_waiting.send_nowait(accessed)
                        case TerminalOutput() | TerminalExited() as term:
                            term_waiting = self._terminal_replies.get(term.request_id)
                            if term_waiting is not None:
                                term_waiting.send_nowait(term)
                        case RunTool() as run:
                            scope = trio.CancelScope()
                            self._running[run.call_id] = scope
                            nursery.start_soon(self._call, port, run, scope)
                        case CancelTool(call_id=call_id, reason=why):
                            running = self._running.get(call_id)
                            if running is not None:
                                running.cancel(reason=f"CancelTool: {why}")
                        case _ as unreachable:
                            assert_never(unreachable)
                for scope in self._running.values():
                    scope.cancel(reason="executor inbox closed")
        finally:
            port.close()
            if not planted("executor.skip_close"):
                await self._close_tools()

    async def _close_tools(self) -> None:
        """Let tools release what outlives a call (background processes): bounded."""
        with trio.move_on_after(CLOSE_GRACE_S, shield=True):
            for declared in self.tools.values():
                tool = loaded_tool(declared)  # a tool never made ran nothing to release
                close = getattr(tool, "close_session", None)
                if close is not None:
                    await close(self.env)

    async def _call(self, port: Port, run: RunTool, scope: trio.CancelScope) -> None:
        started = trio.current_time()
        live: list[str] = []

        async def output(text: str) -> None:
            live.append(text)
            await port.publish(
                ToolOutputStreamed(session_id=run.session_id, call_id=run.call_id, text=text)
            )

        tool = self.tools.get(run.name)
        made = None
        """The tool that runs the call (a declared tool's real one, made by its first use)."""
        result = ToolResult(cancelled=True, llm_content="".join(live))
        with scope:
            if tool is None:
                result = ToolResult(
                    error_type="tool_not_registered",
                    error_message=f'Tool "{run.name}" is not served by {self.address}.',
                )
            else:
                try:
                    made = real_tool(tool)
                    env = self.env
                    if run.approval_mode or run.model:
                        env = attrs.evolve(env, approval_mode=run.approval_mode, active_model=run.model)
                    if run.client_initiated:
                        env = attrs.evolve(env, user_call=True)
                    if env.terminal_access is not None and self._terminal_client() is None:
                        env = attrs.evolve(env, terminal_access=None)  # no editor serves terminals now
                    result = await _execute(made, thaw(run.args), env, output, run.call_id)
                    if not isinstance(result, ToolResult):
                        raise TypeError(f"the tool returned {type(result).__name__}, not a ToolResult")
                    if getattr(made, "truncates_text_result", False):
                        result = truncated_text_result(result, run.name, run.call_id, env)
                except Exception as exc:  # a crashing tool is that call's error, not ours
                    result = ToolResult(
                        error_type="unhandled_exception",
                        error_message=f"{type(exc).__name__}: {exc}",
                    )
        if scope.cancelled_caught:
            # A tool that says what a cancelled call gives the model (the shell: Gemini's
            # text; a replay: the recorded result) answers it (``cancelled_result(streamed,
            # call_id)``); otherwise the output streamed until the cancel.
            cancelled = getattr(made, "cancelled_result", None)
            if cancelled is not None:
                result = cancelled("".join(live), run.call_id)
            else:
                result = ToolResult(cancelled=True, llm_content="".join(live))
        self._running.pop(run.call_id, None)
        done = ToolFinished(
            session_id=run.session_id,
            call_id=run.call_id,
            result=result,
            duration_ms=int((trio.current_time() - started) * 1000),
        )
        try:
            await port.send(done, to=run.reply_to)
            if planted("executor.two_results"):
                await port.send(done, to=run.reply_to)
        except DeliveryError:
            pass


    async def generate(
        self,
        *,
        model: str,
        contents: Any,
        config: Mapping[str, Any] | None = None,
        role: ModelRole = "utility_tool",
    ) -> dict[str, Any]:
        """``ModelAccess`` for this executor's tools: a ``GenerateRequest`` to the gateway."""
        assert self._port is not None and self.gateway_address is not None
        request_id = new_id()
        # Unbounded on purpose: the actor's loop must never block routing a reply.
        send, receive = trio.open_memory_channel[ModelReply](float("inf"))
        self._model_replies[request_id] = send
        chunks: list[Any] = []
        done = False
        try:
            await self._port.send(
                GenerateRequest(
                    session_id=self.env.session_id,
                    request_id=request_id,
                    reply_to=self.address,
                    method="generateContent",
                    model=model,
                    contents=tuple(contents),
                    config=dict(config or {}),
                    role=role,
                ),
                to=self.gateway_address,
            )
            async for reply in receive:
                match reply:
                    case ModelChunk():
                        chunks.append(thaw(reply.chunk))
                    case ModelFinished():
                        done = True
                        return chunks[-1] if chunks else {}
                    case ModelFailed():
                        done = True
                        raise ModelCallError(reply.error.message, status=reply.error.status)
                    case GenerationCancelled():
                        done = True
                        raise ModelCallError("the model request was cancelled")
                    case _ as unreachable:
                        assert_never(unreachable)
            raise ModelCallError("the executor stopped")
        finally:
            self._model_replies.pop(request_id, None)
            if not done:
                with trio.move_on_after(CLOSE_GRACE_S, shield=True):
                    try:
                        await self._port.send(
                            CancelGeneration(
                                session_id=self.env.session_id, request_id=request_id, reason="tool call cancelled"
                            ),
                            to=self.gateway_address,
                        )
                    except DeliveryError:
                        pass


    async def read_text_file(self, path: str) -> str:
        """``FileAccess`` for this executor's tools: a ``ReadTextFile`` to the client."""
        reply = await self._file_request(
            lambda rid: ReadTextFile(
                session_id=self.env.session_id, request_id=rid, reply_to=self.address, path=path
            )
        )
        return reply.content or ""

    async def write_text_file(self, path: str, content: str) -> None:
        """``FileAccess``: a ``WriteTextFile`` to the client."""
        await self._file_request(
            lambda rid: WriteTextFile(
                session_id=self.env.session_id,
                request_id=rid,
                reply_to=self.address,
                path=path,
                content=content,
            )
        )

    async def _file_request(self, make: Callable[[str], ReadTextFile | WriteTextFile]) -> FileAccessed:
        assert self._port is not None and self.file_access_address is not None
        request_id = new_id()
        # Capacity 1: exactly one reply comes; the actor's loop never blocks routing it.
        send, receive = trio.open_memory_channel[FileAccessed](1)
        self._file_replies[request_id] = send
        try:
            try:
                await self._port.send(make(request_id), to=self.file_access_address)
            except DeliveryError:
                raise FileAccessError("the session's client is gone") from None
            reply = await receive.receive()
        finally:
            self._file_replies.pop(request_id, None)
        if reply.error is not None or reply.not_found:
            raise FileAccessError(reply.error or "file not found", not_found=reply.not_found)
        return reply


    def _terminal_client(self) -> str | None:
        where = self.terminal_address
        return where() if callable(where) else where

    async def run_in_terminal(
        self,
        *,
        call_id: str,
        command: str,
        args: Sequence[str],
        cwd: str,
        env: Mapping[str, str],
        output: OutputSink | None,
    ) -> TerminalRun:
        """``TerminalAccess`` for the shell: a ``RunInTerminal`` to the client; on
        cancellation a ``KillTerminal``, and its ``TerminalExited`` awaited (bounded),
        so the command is gone when the call reports it cancelled."""
        assert self._port is not None
        address = self._terminal_client()
        if address is None:
            return TerminalRun(error="the editor that runs this session's commands went away")
        request_id = new_id()
        # Unbounded: the actor's loop must never block routing the client's events.
        send, receive = trio.open_memory_channel[TerminalOutput | TerminalExited](float("inf"))
        self._terminal_replies[request_id] = send
        done = False
        try:
            try:
                await self._port.send(
                    RunInTerminal(
                        session_id=self.env.session_id,
                        request_id=request_id,
                        reply_to=self.address,
                        call_id=call_id,
                        command=command,
                        args=tuple(args),
                        cwd=cwd,
                        env=dict(env),
                    ),
                    to=address,
                )
            except DeliveryError:
                return TerminalRun(error="the session's client is gone")
            async for reply in receive:
                if isinstance(reply, TerminalOutput):
                    if output is not None and reply.text:
                        await output(reply.text)
                    continue
                done = True
                return TerminalRun(
                    output=reply.output, exit_code=reply.exit_code, signal=reply.signal, error=reply.error
                )
            raise AssertionError("unreachable: the reply channel is never closed")
        finally:
            if not done:
                with trio.move_on_after(CLOSE_GRACE_S, shield=True):
                    try:
                        await self._port.send(
                            KillTerminal(session_id=self.env.session_id, request_id=request_id, reason="tool call cancelled"),
                            to=address,
                        )
                        async for reply in receive:
                            if isinstance(reply, TerminalExited):
                                break
                    except DeliveryError:
                        pass
            self._terminal_replies.pop(request_id, None)


def truncated_text_result(result: ToolResult, tool_name: str, call_id: str, env: ToolEnv) -> ToolResult:
    """Gemini's truncation of an MCP tool's result (``truncateOutputIfNeeded``): a
    result of one text part longer than ``tools.truncateToolOutputThreshold`` gives the
    model its head and tail and saves the whole text as the shell's output is saved. The
    display, when as long, is cut the same way (Gemini shows it whole: a 50 MB display
    would be recorded and drawn whole)."""
    parts = result.llm_content
    if result.error_type is not None or isinstance(parts, str) or not isinstance(parts, Sequence) or len(parts) != 1:
        return result
    part = parts[0]
    text = part.get("text") if isinstance(part, Mapping) else None
    threshold = truncation_threshold(env.settings)
    if not isinstance(text, str) or threshold <= 0 or utf16_len(text) <= threshold:
        return result
    assert isinstance(part, Mapping)
    truncated = truncate_tool_output(
        text,
        tool_name=tool_name,
        call_id=call_id,
        project_temp_dir=env.project_temp_dir,
        session_id=env.session_id,
        threshold=threshold,
    )
    if truncated.output_file is None:
        return result
    display = result.return_display
    if isinstance(display, str):
        display = format_truncated_output(display, truncated.output_file, threshold)
    return attrs.evolve(
        result,
        llm_content=({**part, "text": truncated.content},),
        return_display=display,
        output_file=truncated.output_file,
    )


_TAKES_CALL_ID: dict[Any, bool] = {}
"""Whether a tool class's ``execute`` takes ``call_id`` (``inspect.signature`` costs
30 us, a tenth of a call's whole way through the scheduler: asked once per class)."""


def _takes_call_id(tool: Tool) -> bool:
    execute = getattr(type(tool), "execute", None)
    if not inspect.isfunction(execute) or "execute" in getattr(tool, "__dict__", ()):
        # an instance's own execute, not a method of its class
        return "call_id" in inspect.signature(tool.execute).parameters
    known = _TAKES_CALL_ID.get(execute)
    if known is None:
        known = _TAKES_CALL_ID[execute] = "call_id" in inspect.signature(tool.execute).parameters
    return known


async def _execute(
    tool: Tool, args: Mapping[str, Any], env: ToolEnv, output: Any, call_id: str
) -> ToolResult:
    if _takes_call_id(tool):
        result: ToolResult = await tool.execute(args, env, output, call_id=call_id)  # type: ignore[call-arg]
        return result
    return await tool.execute(args, env, output)
