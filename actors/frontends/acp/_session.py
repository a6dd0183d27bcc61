"""One ACP session: a client of its session's actors on the bus, like the headless run.

``AcpSession`` is what every ACP session does (the view, prompts, cancels, permissions);
``BusSession`` (``_bus_session``) runs the session's actors in this process and is described here;
``_attach.AttachedSession`` follows a session of the daemon instead (``--attach``).

Accepts: every message of its session, as an observer (``SessionView`` maps them to ACP);
at its address ``client:acp:<session id>``, ``ReadTextFile``/``WriteTextFile`` from the
session's executors (it is their ``FileAccess``: served by the ACP client's ``fs/*``
when it offers them for that path, else by the local disk), ``HooksFinished``, and
``BatchSettled`` of the user's own calls.
Emits: ``OpenSession``, ``SubmitPrompt``, ``CancelTurn``, ``ConfigureSession``,
``AddContext``, ``CloseSession`` and ``RunHooks`` (SessionStart/SessionEnd) to the
session's actors, ``ApprovalAnswered`` and the user's calls (``ScheduleBatch`` of one
``client_initiated`` call, ``CancelBatch``) to its scheduler, ``FileAccessed`` to
executors; ``session/update`` notifications and ``session/request_permission`` /
``fs/*`` requests to the ACP client.

The user's own calls: a prompt ``/tool NAME {json}`` or ``/shell COMMAND`` runs the
call through the scheduler as the user's (policy, approvals through
``session/request_permission``, ``session/cancel`` kills it); the client sees it as a
``tool_call`` with its updates, the model never sees it, and the prompt ends
``end_turn`` (``cancelled`` when it was cancelled). ``/tool!`` and ``/shell!`` also add
the result to the conversation (``AddContext``), so the next prompt carries it.
Owns: the session's actors (``actors.host.opening.open_session``), its model gateway (one per
session: a fake-responses file restarts at its first line for every session, as in
Gemini CLI), the view, and the waiters of its pending ``session/prompt`` and
``session/set_mode`` requests.
Stops: ``close()`` sends ``CloseSession`` (a running turn is cancelled first) and the
session ends after ``SessionClosed``; or the connection's hard cancel. Pending prompts
are answered with an error, never left waiting.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

import attrs
import trio

from actors.frontends.acp._present import OUTCOMES, Presenter
from actors.frontends.acp._protocol import (
    AGENT_VERSION,
    COMMANDS,
    USER_CALL_COMMANDS,
    ClientCapabilities,
    approval_mode_of,
    mode_id,
)
from actors.frontends.acp._rpc import INTERNAL_ERROR, RpcError
from actors.frontends.acp._view import (
    AskPermission,
    Closed,
    Configured,
    Effect,
    NeedOriginal,
    PromptDone,
    SessionView,
    TurnBegan,
    Update,
    collapse_replay,
    zero_quota,
)
from actors.host.at_command import expand_at_references_off_loop
from actors.host.mcp_session import McpInputError, SessionMcp, run_prompt_command
from actors.host.sessions import INTERRUPTED_TOOL_REASON
from actors.host.user_calls import SHELL_TOOL, parse_tool_call
from actors.recording import Recording, default_data_dir
from bus.messages import (
    ApprovalMode,
    ApprovalRequested,
    CompletedCall,
    Message,
    SessionConfigured,
    SessionOpened,
    ToolCallUpdated,
    as_approval_mode,
    new_id,
)

SUBSCRIPTION_CAPACITY = 4096
"""The front end's view of the bus (a blocking observer: a client that stops reading
slows its own session down, nothing is dropped). The pump never sends on the bus
itself, so it cannot wait on its own full buffer."""
CLOSE_GRACE_S = 2.0

T = TypeVar("T")


class Peer(Protocol):
    """What a session needs from its ACP connection."""

    client_caps: ClientCapabilities
    auth_type: str | None

    async def notify(self, method: str, params: Any) -> None: ...

    async def request(self, method: str, params: Any) -> Any: ...


@attrs.frozen(kw_only=True)
class AcpOptions:
    """``agentbus acp`` flags that shape its sessions."""

    model: str | None = None
    approval_mode: str | None = None
    yolo: bool = False
    fake_responses: str | None = None
    fake_responses_non_strict: str | None = None
    record_responses: str | None = None
    data_dir: Path | None = None
    policy: tuple[str, ...] = ()
    allowed_tools: tuple[str, ...] = ()
    allowed_mcp_server_names: tuple[str, ...] | None = None
    """``--allowed-mcp-server-names``, split on commas; None: not given."""
    debug: bool = False
    attach: bool = False
    """Run sessions in the agentbus daemon (``--attach``) instead of in this process."""
    daemon_paths: Any = None
    """The daemon's ``DaemonPaths`` (None: ``actors.frontends.daemon.default_paths()``)."""

    def data_directory(self) -> Path:
        return self.data_dir if self.data_dir is not None else default_data_dir()


class Waiter(Generic[T]):
    """One answer, awaited by one task (a pending ``session/prompt``...)."""

    def __init__(self) -> None:
        self._event = trio.Event()
        self._value: T | None = None
        self._error: BaseException | None = None

    def set(self, value: T) -> None:
        if not self._event.is_set():
            self._value = value
            self._event.set()

    def fail(self, error: BaseException) -> None:
        if not self._event.is_set():
            self._error = error
            self._event.set()

    async def wait(self) -> T:
        await self._event.wait()
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]


@attrs.frozen(kw_only=True)
class Started:
    """What ``session/new`` and ``session/load`` answer with, once the session runs."""

    approval_mode: str
    model: str
    replay: tuple[Mapping[str, Any], ...] = ()


def replay_of(
    recording: Recording, presenter: Presenter, view: SessionView | None = None, *, ended: bool = False
) -> list[dict[str, Any]]:
    """A recording as the ACP updates ``session/load`` replays; ``view``: the replay
    view to feed (a session followed on from the recording's end goes on with it, so
    it knows the calls the replay showed); ``ended``: the session runs nowhere, so a
    call the recording leaves unsettled (its process was killed) ends ``failed``."""
    view = view if view is not None else SessionView(presenter, replay=True)
    updates: list[Mapping[str, Any]] = []
    effects = [effect for env in recording.envelopes for effect in view.feed(env.message)]
    if ended:
        effects += view.interrupted(INTERRUPTED_TOOL_REASON)
    for effect in effects:
        if isinstance(effect, Update):
            updates.append(effect.update)
    return collapse_replay(updates)


def recorded_settings(recording: Recording) -> tuple[str | None, str | None]:
    """The approval mode and model a recorded session last ran with."""
    mode = model = None
    for env in recording.envelopes:
        msg = env.message
        if isinstance(msg, SessionOpened | SessionConfigured):
            mode, model = msg.approval_mode, msg.model
    return mode, model


class AcpSession:
    """What every ACP session does, whatever runs its actors: the view, the waiters of
    pending requests, prompts and local commands, cancels, permissions, the original
    text of an edit. Subclasses connect it to the actors (``BusSession``: in this
    process; ``AttachedSession``: in the daemon)."""

    def __init__(self, peer: Peer, options: AcpOptions, *, session_id: str, workspace: Path) -> None:
        self.peer = peer
        self.options = options
        self.session_id = session_id
        self.workspace = workspace
        self.address = f"client:acp:{session_id}"
        self.view: SessionView | None = None
        self._nursery: trio.Nursery | None = None
        self._env: Any = None
        self._tools: Mapping[str, Any] = {}
        self._prompts: dict[str, Waiter[Mapping[str, Any]]] = {}
        self._configures: dict[str, Waiter[Configured]] = {}
        self._call_waiters: dict[str, Waiter[CompletedCall]] = {}
        """The user's own calls waiting for their ``BatchSettled`` (in-process)."""
        self._cancel_on_start: set[str] = set()
        self._cancelled_turns: set[str] = set()
        self._user_calls: set[str] = set()
        """Request ids of the user's own calls still running."""
        self._running_turn: str | None = None
        self._answer_routes: dict[str, tuple[str, str]] = {}
        self._asking: dict[str, trio.CancelScope] = {}
        """Calls whose ``session/request_permission`` waits for the client's answer."""
        self._closing = False
        self._closed = trio.Event()
        self.started = False
        """``run`` handed back ``Started``: failures after that end this session only."""

    # -- what a subclass provides -----------------------------------------------------------
    async def run(self, *, task_status: trio.TaskStatus[Started] = trio.TASK_STATUS_IGNORED) -> None:
        raise NotImplementedError

    async def close(self, reason: str) -> None:
        raise NotImplementedError

    expands_prompts = True
    """Whether this process runs a prompt's MCP command and expands its ``@`` references
    (else the process holding the session's MCP servers, the daemon, does: ``_submit``
    then gets the text and only the parts beside it)."""

    def _ready(self) -> bool:
        return self._nursery is not None and not self._closing and not self._closed.is_set()

    async def _submit(self, prompt_id: str, parts: tuple[Any, ...], text: str) -> None:
        raise NotImplementedError

    async def _send_cancel(self, turn_id: str) -> None:
        raise NotImplementedError

    async def _send_answer(self, correlation_id: str, outcome: str) -> None:
        raise NotImplementedError

    async def _send_configure(self, request_id: str, approval_mode: ApprovalMode | None, model: str | None) -> None:
        raise NotImplementedError

    async def _call_tool(self, request_id: str, name: str, args: dict[str, Any], share: bool) -> tuple[CompletedCall, bool]:
        """Run the user's own call; its settled form, and whether it was added to the
        conversation."""
        raise NotImplementedError

    async def _cancel_call(self, request_id: str) -> None:
        raise NotImplementedError

    # -- requests from the client ------------------------------------------------------------
    async def prompt(self, blocks: list[dict[str, Any]]) -> Mapping[str, Any]:
        if not self._ready():
            raise RpcError(INTERNAL_ERROR, "the session is closed")
        command = command_text(blocks)
        if command.startswith("/"):
            words = command[1:].split(maxsplit=1)
            name = words[0] if words else ""
            if name in USER_CALL_COMMANDS:
                return await self._user_call(name, words[1] if len(words) > 1 else "")
            if name in {c.name for c in COMMANDS}:
                await self._say(self._command(name))
                return {"stopReason": "end_turn", "_meta": zero_quota()}
        text, extra = prompt_parts(blocks)
        if not self.expands_prompts:
            return await self._prompt(text, [], extra)
        try:
            # An MCP prompt's command, and @ references (files, MCP resources): a
            # failure is one message, nothing reaches the model, the session goes on.
            ran = await run_prompt_command(self._mcp(), command) if command.startswith("/") else None
            if ran is not None and ran.prompt is None:
                await self._say(ran.message)
                return {"stopReason": "end_turn", "_meta": zero_quota()}
            parts = (
                [{"text": ran.prompt}]
                if ran is not None and ran.prompt is not None
                else await expand_at_references_off_loop(
                    text, self.workspace, env=self._env, glob_available="glob" in self._tools, mcp=self._mcp()
                )
                if text
                else []
            )
        except McpInputError as exc:
            await self._say(exc.message)
            return {"stopReason": "end_turn", "_meta": zero_quota()}
        return await self._prompt(text, parts, extra)

    async def _prompt(self, text: str, parts: list[dict[str, Any]], extra: list[dict[str, Any]]) -> Mapping[str, Any]:
        prompt_id = new_id()
        waiter: Waiter[Mapping[str, Any]] = Waiter()
        self._prompts[prompt_id] = waiter
        await self._submit(prompt_id, (*parts, *extra), text)
        return await waiter.wait()

    def _mcp(self) -> SessionMcp | None:
        """The session's MCP servers (an in-process session's; None for one attached
        to a daemon, whose prompts and resources the daemon serves)."""
        addrs = getattr(self, "addrs", None)
        mcp: SessionMcp | None = getattr(addrs, "mcp", None)
        return mcp

    def mcp_commands(self) -> list[dict[str, Any]]:
        """The session's MCP prompts as ``available_commands_update`` entries."""
        mcp = self._mcp()
        return [
            command_entry(c.command, c.description, [(str(a.get("name")), bool(a.get("required"))) for a in c.arguments])
            for c in sorted(mcp.commands.values(), key=lambda c: c.command)
        ] if mcp else []

    async def _say(self, text: str) -> None:
        await self._notify({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}})

    async def _user_call(self, command: str, rest: str) -> Mapping[str, Any]:
        """``/tool NAME {json}``, ``/shell COMMAND`` (``!``: shared with the model)."""
        share = command.endswith("!")
        try:
            if command.startswith("shell"):
                if not rest.strip():
                    raise ValueError("name the command: COMMAND")
                name, args = SHELL_TOOL, {"command": rest.strip()}
            else:
                name, args = parse_tool_call(rest)
        except ValueError as exc:
            # Bad input: one line, nothing runs, the session is unaffected.
            await self._say(f"/{command}: {exc}")
            return {"stopReason": "end_turn", "_meta": zero_quota()}
        request_id = new_id()
        self._user_calls.add(request_id)
        try:
            call, added = await self._call_tool(request_id, name, args, share)
        finally:
            self._user_calls.discard(request_id)
        if added:
            await self._say("The result was added to the conversation: your next prompt carries it.")
        elif share:
            await self._say("Nothing was added to the conversation: the call did not run.")
        if call.status == "cancelled":
            return {"stopReason": "cancelled"}
        return {"stopReason": "end_turn", "_meta": zero_quota()}

    def cancel(self, *, withdraw: bool = False) -> None:
        """``session/cancel``: the running turn, and prompts sent before the cancel that
        have not started yet, end cancelled; so do the user's own calls. The client
        answers its pending permission requests itself (the spec's obligation after
        ``session/cancel``): they are not withdrawn, unless ``withdraw`` (a cancel the
        client did not send as ``session/cancel``)."""
        if not withdraw:
            self._asking.clear()  # the client's own "cancelled" answers them
        self._cancel_on_start |= set(self._prompts)
        if self._running_turn is not None:
            self._cancel_turn(self._running_turn)
        if self._nursery is not None:
            for request_id in self._user_calls:
                self._nursery.start_soon(self._cancel_call, request_id)

    def _cancel_turn(self, turn_id: str) -> None:
        if turn_id in self._cancelled_turns or self._nursery is None:
            return
        self._cancelled_turns.add(turn_id)
        self._nursery.start_soon(self._send_cancel, turn_id)

    async def configure(self, *, mode: str | None = None, model: str | None = None) -> Configured:
        if not self._ready():
            raise RpcError(INTERNAL_ERROR, "the session is closed")
        approval_mode = as_approval_mode(approval_mode_of(mode)) if mode is not None else None
        request_id = new_id()
        waiter: Waiter[Configured] = Waiter()
        self._configures[request_id] = waiter
        await self._send_configure(request_id, approval_mode, model)
        return await waiter.wait()

    def _command(self, name: str) -> str:
        view = self.view
        if name == "about":
            return (
                "agentbus Info:\n"
                f"- Version: {AGENT_VERSION}\n"
                f"- OS: {sys.platform}\n"
                f"- Model: {view.model if view else ''}\n"
                f"- Mode: {mode_id(view.approval_mode) if view else ''}\n"
                f"- Workspace: {self.workspace}"
            )
        lines = ["Available commands:"] + [
            f"  /{c.name}{' ' + c.hint if c.hint else ''} - {c.description}" for c in COMMANDS
        ]
        return "\n".join(lines)

    def _fail_waiters(self, why: str = "the session closed") -> None:
        gone = RpcError(INTERNAL_ERROR, why)
        for call in self._call_waiters.values():
            call.fail(gone)
        self._call_waiters.clear()
        for prompt in self._prompts.values():
            prompt.fail(gone)
        for configured in self._configures.values():
            configured.fail(gone)
        self._prompts.clear()
        self._configures.clear()

    # -- the session's events -----------------------------------------------------------------
    async def _notify(self, update: Mapping[str, Any]) -> None:
        await self.peer.notify("session/update", {"sessionId": self.session_id, "update": update})

    async def _feed(self, msg: Message) -> None:
        assert self.view is not None
        if isinstance(msg, ApprovalRequested) and msg.answer_to:
            # A subagent's approval: its own scheduler takes the answer.
            self._answer_routes[msg.correlation_id] = (msg.answer_to, msg.answer_session_id or msg.session_id)
        if isinstance(msg, ToolCallUpdated) and msg.status != "awaiting_approval":
            asking = self._asking.pop(msg.call_id, None)
            if asking is not None:
                # Settled without this client's answer (the turn was cancelled, the mode
                # changed, another client answered): withdraw the question.
                asking.cancel(reason="the call no longer waits for an answer")
        if isinstance(msg, SessionOpened):
            # The actors (re)started: no question asked before waits any more.
            for asking in self._asking.values():
                asking.cancel(reason="the session restarted")
            self._asking.clear()
        for effect in self.view.feed(msg):
            await self._apply(effect)

    async def _apply(self, effect: Effect) -> None:
        assert self.view is not None and self._nursery is not None
        match effect:
            case Update(update=update):
                await self._notify(update)
            case NeedOriginal(call_id=call_id, path=path):
                original = await self._read_original(path)
                for follow in self.view.original_read(call_id, original):
                    await self._apply(follow)
            case AskPermission():
                self._nursery.start_soon(self._ask, effect)
            case TurnBegan(prompt_id=prompt_id, turn_id=turn_id):
                self._running_turn = turn_id
                if prompt_id in self._cancel_on_start:
                    self._cancel_turn(turn_id)
            case PromptDone(prompt_id=prompt_id, result=result, error=error):
                self._running_turn = None
                self._cancel_on_start.discard(prompt_id)
                prompt = self._prompts.pop(prompt_id, None)
                if prompt is not None:
                    if error is not None:
                        prompt.fail(error)
                    else:
                        prompt.set(result or {"stopReason": "end_turn"})
            case Configured(request_id=request_id):
                configured = self._configures.pop(request_id, None)
                if configured is not None:
                    configured.set(effect)
            case Closed():
                self._closed.set()

    async def _ask(self, ask: AskPermission) -> None:
        """``session/request_permission``, its answer to the scheduler. A question whose
        call settles meanwhile is withdrawn (``$/cancel_request``, by the peer)."""
        scope = self._asking[ask.call_id] = trio.CancelScope()
        try:
            with scope:
                answer = await self.peer.request(
                    "session/request_permission",
                    {"sessionId": self.session_id, "options": [dict(o) for o in ask.options], "toolCall": dict(ask.tool_call)},
                )
            if scope.cancelled_caught:
                return
            if self._asking.get(ask.call_id) is scope:
                del self._asking[ask.call_id]
            outcome = answer.get("outcome") if isinstance(answer, dict) else None
            chosen = (
                "cancelled"
                if not isinstance(outcome, dict) or outcome.get("outcome") == "cancelled"
                else str(outcome.get("optionId"))
            )
        except RpcError:
            chosen = "cancel"  # the client cannot answer: the call is rejected
        if chosen == "cancelled":
            # The client cancelled the prompt turn (the spec's only use of it): the turn's
            # cancel settles the call, the same way whichever message arrives first.
            self.cancel()
            return
        await self._send_answer(ask.correlation_id, chosen if chosen in OUTCOMES else "cancel")

    # -- files ----------------------------------------------------------------------------------
    def client_serves(self, path: str, *, write: bool) -> bool:
        """The ACP client answers for ``path`` (Gemini CLI: files of the workspace, not
        its own ``~/.gemini`` state) when it offered that operation."""
        caps = self.peer.client_caps
        if not (caps.write_text_file if write else caps.read_text_file):
            return False
        return within(path, str(self.workspace)) and not within(path, os.path.expanduser("~/.gemini"))

    async def _read_original(self, path: str) -> str:
        """The current text of a file an edit would change; "" when it does not exist
        (a client's -32002 included) or cannot be read."""
        try:
            return await self._read(path)
        except (RpcError, OSError):
            return ""

    async def _read(self, path: str) -> str:
        if self.client_serves(path, write=False):
            result = await self.peer.request("fs/read_text_file", {"sessionId": self.session_id, "path": path})
            content = result.get("content") if isinstance(result, dict) else None
            if not isinstance(content, str):
                raise RpcError(INTERNAL_ERROR, "fs/read_text_file answered without content")
            return content
        return await trio.to_thread.run_sync(read_local, path)


NOT_FOUND_TEXT = re.compile(r"not found|ENOENT|no such file", re.IGNORECASE)
"""How a client that does not use -32002 says a file is missing (reference D7)."""


def within(path: str, root: str) -> bool:
    try:
        return os.path.commonpath([os.path.abspath(path), os.path.abspath(root)]) == os.path.abspath(root)
    except ValueError:
        return False


def read_local(path: str) -> str:
    with open(path, "rb") as handle:
        return handle.read().decode("utf-8", "replace")


def write_local(path: str, content: str) -> None:
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="") as handle:
        handle.write(content)


def command_entry(name: str, description: str, arguments: Sequence[tuple[str, bool]]) -> dict[str, Any]:
    """An MCP prompt as an ``available_commands_update`` entry: its arguments
    (``(name, required)``) are the input hint, required ones bare, the others in
    brackets."""
    entry: dict[str, Any] = {"name": name, "description": description}
    if arguments:
        entry["input"] = {"hint": " ".join(arg if required else f"[{arg}]" for arg, required in arguments)}
    return entry


def command_text(blocks: Sequence[Mapping[str, Any]]) -> str:
    """The prompt's leading text (Gemini CLI looks for a slash command there)."""
    text = ""
    for block in blocks:
        if block.get("type") != "text":
            break
        text += str(block.get("text", ""))
    return text.strip()


def prompt_parts(blocks: Sequence[Mapping[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    """ACP content blocks as the prompt's text (``@path`` references included, expanded
    later like a typed prompt) and the parts that are not text."""
    text = ""
    extra: list[dict[str, Any]] = []
    for block in blocks:
        kind = block.get("type")
        if kind == "text":
            text += str(block.get("text", ""))
        elif kind in ("image", "audio"):
            extra.append({"inlineData": {"mimeType": str(block.get("mimeType", "")), "data": str(block.get("data", ""))}})
        elif kind == "resource_link":
            uri = str(block.get("uri", ""))
            ref = uri[len("file://") :] if uri.startswith("file://") else uri
            text += f"{' ' if text and not text.endswith(' ') else ''}@{ref.replace(' ', chr(92) + ' ')}"
        elif kind == "resource":
            resource = block.get("resource") or {}
            uri = str(resource.get("uri", ""))
            if isinstance(resource.get("text"), str):
                extra.append(
                    {"text": f"\n--- Content from referenced context: {uri} ---\n{resource['text']}\n--- End of content ---"}
                )
            elif isinstance(resource.get("blob"), str):
                extra.append(
                    {"inlineData": {"mimeType": str(resource.get("mimeType", "application/octet-stream")), "data": resource["blob"]}}
                )
    return text, extra


__all__ = ["AcpOptions", "AcpSession", "Peer", "Started", "Waiter"]
