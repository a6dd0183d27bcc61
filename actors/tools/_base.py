"""The contract every built-in tool implements, and what executors give it.

A tool is a pure description plus an async ``execute``: its declaration (Gemini CLI's
name and parameter schema), a value validator (run after the JSON-schema check, in the
scheduler's ``validating`` state), a one-line description, and the execution itself.
Tools hold no state between calls; the executor actor owns the running calls.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any, Protocol

import attrs

from actors.common import node_join
from bus.messages import ModelRole, ToolResult

OutputSink = Callable[[str], Awaitable[None]]
"""Where a running tool reports live output (shell)."""


@attrs.frozen(kw_only=True)
class ToolEnv:
    """Where tools run. Built once per session by the wiring."""

    workspace: Path
    """Absolute, resolved workspace root (the cwd of the run)."""
    project_temp_dir: Path
    """Gemini CLI's per-project temp dir: ``<home>/.gemini/tmp/<project slug>``."""
    session_id: str = ""
    model: str = ""
    settings: Mapping[str, Any] = attrs.field(factory=dict)
    """Merged settings.json (read-only view)."""
    model_access: ModelAccess | None = None
    """How a tool calls the model (web_fetch, google_web_search); set by the executor."""
    file_access: FileAccess | None = None
    """How an editing tool reads and writes files through the session's client (an
    editor that serves its unsaved buffers); set by the executor when the session has
    such a client, None: the tool uses the local disk."""

    terminal_access: TerminalAccess | None = None
    """How the shell runs a command in a terminal of the session's client (an editor
    that shows it live: ACP's ``terminal/*``); set by the executor when the session has
    such a client, None: the shell runs it here."""

    approval_mode: str = ""
    """The approval mode of the batch the running call belongs to (set per call)."""
    active_model: str = ""
    """The model of the turn that asked for the running call (set per call)."""
    user_call: bool = False
    """The user asked for the running call, not the model (set per call)."""
    agents: SubagentAccess | None = None
    """How ``invoke_agent`` starts child sessions; set by the wiring when the session
    may run subagents."""

    def workspace_dirs(self) -> tuple[Path, ...]:
        return (self.workspace,)


def plans_dir(env: ToolEnv) -> str:
    """Gemini's ``Storage.getPlansDir`` (no custom directory): the session's ``plans``
    folder in the project temp directory."""
    # Here, beside the environment it reads: the session's start asks for it, and the
    # write_file tool's module (with its diff and path modules, 0.6 ms) is not needed then.
    temp = str(env.project_temp_dir)
    return node_join(temp, env.session_id, "plans") if env.session_id else node_join(temp, "plans")


def error_result(message: str, display: str, error_type: str) -> ToolResult:
    """A call that failed: the model reads ``message`` (also the error's message), the user
    ``display``."""
    return ToolResult(
        llm_content=message, return_display=display, error_type=error_type, error_message=message
    )


def setting(settings: Mapping[str, Any], *keys: str) -> Any:
    """``settings[key][key]...`` of merged settings; None where a level is missing or is
    not an object."""
    node: Any = settings
    for key in keys:
        if not isinstance(node, Mapping):
            return None
        node = node.get(key)
    return node


class ModelCallError(Exception):
    """A tool's model call failed (the gateway's ``ModelFailed``); ``status`` if HTTP."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


class ModelAccess(Protocol):
    """A tool's line to the model gateway (through its executor, as bus messages)."""

    async def generate(
        self,
        *,
        model: str,
        contents: Sequence[Any],
        config: Mapping[str, Any] | None = None,
        role: ModelRole = "utility_tool",
    ) -> dict[str, Any]:
        """One ``generateContent`` call; returns the ``GenerateContentResponse`` as JSON
        data. Raises ``ModelCallError``; cancellation closes the request."""
        ...


class FileAccessError(Exception):
    """A file access through the client failed; ``not_found``: the file does not exist."""

    def __init__(self, message: str, *, not_found: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.not_found = not_found


class FileAccess(Protocol):
    """A tool's line to the client's files (through its executor, as bus messages).

    Tools stay unaware of who serves the files: the implementation decides, per path,
    whether the client or the local disk answers."""

    async def read_text_file(self, path: str) -> str:
        """The text of ``path`` (absolute). Raises ``FileAccessError``."""
        ...

    async def write_text_file(self, path: str, content: str) -> None:
        """Replace the text of ``path`` (absolute), creating it. Raises ``FileAccessError``."""
        ...


@attrs.frozen(kw_only=True)
class TerminalRun:
    """How a command run in the client's terminal ended."""

    output: str = ""
    """All its output (stdout and stderr as the terminal captured them)."""
    exit_code: int | None = None
    signal: str | None = None
    """The name of the signal that ended it (``SIGKILL``), if one did."""
    error: str | None = None
    """It could not run (or the client failed while it ran)."""


class TerminalAccess(Protocol):
    """The shell's line to the client's terminals (through its executor, as bus
    messages)."""

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
        """Run ``command args`` in ``cwd`` until it exits; ``output`` gets what it
        prints as it runs. Cancellation kills it (and the terminal is released)."""
        ...


class ChildSession(Protocol):
    """A running subagent session, as its supervising tool call sees it."""

    session_id: str
    depth: int
    """1 for a child of the main session, 2 for a grandchild, ..."""

    async def send(self, message: Any) -> None:
        """A command to the child's session actor (``SubmitPrompt``, ``CancelTurn``...)."""
        ...

    async def receive(self) -> Any:
        """The child session's next message (every message of it, in order)."""
        ...

    async def publish_parent(self, message: Any) -> None:
        """Publish an event in the parent session (nested activity, approvals)."""
        ...


class SubagentAccess(Protocol):
    """The wiring's capability to start child sessions (``ToolEnv.agents``)."""

    depth: int
    """This session's depth (the main session: 0)."""
    max_depth: int

    def environment(self) -> str:
        """The directory context the agents' system prompts end with (as of now)."""
        ...

    def definitions(self) -> Mapping[str, Any]:
        """Usable agents by name (``AgentDefinition``)."""
        ...

    def broken(self) -> Mapping[str, str]:
        """Agent names whose definition failed to load -> why."""
        ...

    def open_child(
        self,
        definition: Any,
        *,
        system_instruction: str,
        parent_call_id: str,
        model: str,
        approval_mode: str,
    ) -> AbstractAsyncContextManager[ChildSession]:
        """Start a child session for ``definition``; leaving the context closes it
        (its running turn cancelled and acknowledged first) and waits for every task of
        it to end."""
        ...


class ShowsConfirmation(Protocol):
    """A tool whose approval shows what the call would do (Gemini CLI's
    ``getConfirmationDetails``): an edit its diff, a shell call its whole command.

    Called by the scheduler on its event loop before it asks, so what it reads and
    computes must be bounded; its mapping (JSON values) goes into
    ``ApprovalRequested.details`` next to the scheduler's ``type`` and ``title``."""

    def confirmation_details(self, args: Mapping[str, Any], env: ToolEnv) -> Mapping[str, Any]: ...


class Tool(Protocol):
    """A built-in tool."""

    name: str
    """Model-facing name (``read_file``)."""
    display_name: str
    """Gemini CLI's display name (``ReadFile``), used in some messages."""
    kind: str
    """``read``, ``edit``, ``search``, ``execute``, ``fetch``, ``think``, ``other``..."""

    def declaration(self, model: str) -> dict[str, Any]:
        """``{"name", "description", "parametersJsonSchema"}`` for ``model``'s family."""
        ...

    def validate(self, args: Mapping[str, Any], env: ToolEnv) -> str | None:
        """Value checks after the schema check; an error message or None."""
        ...

    def describe(self, args: Mapping[str, Any], env: ToolEnv) -> str:
        """Gemini CLI's ``getDescription()`` for this call."""
        ...

    async def execute(
        self, args: Mapping[str, Any], env: ToolEnv, output: OutputSink | None = None
    ) -> ToolResult:
        """Run the call. Cancellation arrives as ``trio.Cancelled``; clean up and re-raise.

        A tool may also define ``async close_session(env)``: the executor calls it when
        the session ends, to release what outlives a call (background processes).
        """
        ...
