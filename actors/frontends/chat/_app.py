"""The chat loop: a terminal, a daemon connection, one session at a time.

Three tasks share the screen: the events of the session (rendered by ``Renderer``),
the lines the user types (prompts, approval answers, commands) and Ctrl-C (SIGINT).
The first Ctrl-C cancels what runs (the turn, a ``!command`` or ``/tool`` call); a
second one, or one when nothing runs and the user was warned, exits. The session stays
in the daemon after the chat exits (``agentbus chat --resume ID`` comes back to it).

The user's own calls (``!command``, ``/tool NAME {json}``) stay out of the model's
history; doubled (``!!command``, ``/tool! NAME {json}``) their result is added to the
conversation as Gemini CLI adds shell-mode output, so the next prompt carries it.
Lines come from ``_lines`` (readline with Tab completion on a terminal).
"""

from __future__ import annotations

import collections
import os
import signal
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

import attrs
import trio

from actors.frontends.chat._lines import LineSource, SingleKey
from actors.frontends.chat._mcp import find_prompt, help_of, parse_mcp_args, render_servers
from actors.frontends.chat._render import ANSWER_WORDS, ANSWERS, VIEW_KEY, Renderer, parse_answer
from actors.frontends.daemon.client import DaemonClient, DaemonError
from actors.host.user_calls import parse_tool_call
from bus import Envelope
from bus.messages import (
    ApprovalRequested,
    ApprovalSettled,
    CaughtUp,
    SessionOpened,
    SessionReady,
    SessionSummary,
    TurnEnded,
    TurnStarted,
    new_id,
)

EVENTS_GRACE_S = 2.0
ANSWER_KEYS = frozenset({*(a for a in ANSWERS if len(a) == 1), VIEW_KEY})
"""Keys that answer a waiting approval at once on a terminal (``y``, ``a``, ``n``, 1-3,
and ``v`` to view all of a diff or content shown in part)."""
KEY_WORDS = {"y": "es", "n": "o", "a": "lways"}
"""The rest of the word a single-key answer begins: typed on after it out of habit
(``yes`` Enter), it is dropped rather than sent as a prompt."""

HELP = """Commands:
  /sessions            sessions of this workspace (running, dormant, recorded)
  /resume ID|N         switch to a session (by id or its number in /sessions)
  /new                 start a new session here
  /mode MODE           approval mode: default, auto_edit, yolo, plan
  /tool NAME {json}    run a tool yourself, e.g. /tool read_file {"file_path": "README.md"}
  /mcp [desc|schema]   the session's MCP servers: state, tools, prompts, resources
  /PROMPT args         run an MCP server's prompt (/PROMPT help: its arguments)
  !COMMAND             run a shell command yourself (live output; Ctrl-C stops it)
  /tool! …  !!COMMAND  the same, and add the result to the conversation (the next
                       prompt carries it; otherwise the model never sees it)
  /quit                leave (the session stays in the daemon)
Ctrl-C cancels the running turn or call; a second Ctrl-C exits. @path in a prompt
attaches that file, @server:uri an MCP server's resource. Tab completes commands (MCP
prompts too), tool names and paths (after @ and in !)."""


def numbered(sessions: Sequence[SessionSummary]) -> list[SessionSummary]:
    """The sessions ``N`` and ``latest`` name: those with a prompt, as
    ``agentbus --list-sessions`` numbers them (the daemon lists the others after them)."""
    return [s for s in sessions if s.title]


@attrs.frozen(kw_only=True)
class ChatOptions:
    workspace: Path
    resume: str | None = None
    model: str = ""
    approval_mode: str = ""
    fake_responses: str = ""
    fake_chunk_delay_ms: int = 0
    colour: bool = False
    interactive: bool = True
    """stdin is a terminal: show the ``>`` prompt marker."""


class ChatApp:
    def __init__(self, client: DaemonClient, out: TextIO, opts: ChatOptions, lines: LineSource) -> None:
        self.client = client
        self.out = out
        self.opts = opts
        self.lines = lines
        self.render = Renderer(colour=opts.colour, me=client.address)
        self.session_id = ""
        self.my_prompts: set[str] = set()
        self.turn_prompts: dict[str, str] = {}
        """Every running turn's prompt id (ours may not be known as ours yet)."""
        self.ended_prompts: collections.deque[str] = collections.deque(maxlen=64)
        """Prompts whose turn ended lately: the turn of a prompt can end before the
        daemon's acceptance of it reaches us, and it must not then be waited for."""
        self.tool_calls: set[str] = set()
        self.prompt_commands: list[str] = []
        """The session's MCP prompts' commands (``/<command>``), for Tab completion."""
        self.interrupts = 0
        self.exit_code = 0
        self.idle = trio.Event()
        self.idle.set()
        self.rendered = trio.Event()
        """Set (and replaced) after each event is shown."""
        self.unseen_questions: set[str] = set()
        """Approvals waiting when we subscribed whose question has not been shown yet
        (it follows ``Subscribed``): a line typed meanwhile is its answer, not a prompt."""
        self.questions: set[str] = set()
        """The session's approvals seen asked or settled since we subscribed."""
        self.questions_seen = trio.Event()
        self.questions_seen.set()
        self.caught_up = trio.Event()
        """The conversation before we attached has been shown (``CaughtUp``)."""
        self.caught_up.set()
        self.after_key = ""
        """The rest of the word of the last single-key answer (see ``KEY_WORDS``)."""
        self._nursery: trio.Nursery | None = None

    # -- output -----------------------------------------------------------------------------------------
    def write(self, text: str) -> None:
        if text:
            self.out.write(text)
            self.out.flush()

    def line(self, text: str, *styles: str) -> None:
        self.write(self.render.ensure_line_start() + self.render.style(text, *styles) + "\n")

    def prompt_marker(self) -> None:
        if self.opts.interactive and self._is_idle() and not self.render.pending:
            # What the user had typed when output interrupted them is shown again.
            typed = self.lines.pending_text()
            self.write(self.render.ensure_line_start() + self.render.style("> ", "bold", "blue") + typed)
            self.render.mid_line = True

    def _sync_keys(self) -> None:
        """Single keys answer while an approval waits (on a terminal)."""
        self.lines.keys = ANSWER_KEYS if self.render.pending else frozenset()

    def _is_idle(self) -> bool:
        return not self.my_prompts and not self.tool_calls and not self.render.busy

    def _update_idle(self) -> None:
        if self._is_idle():
            self.idle.set()
        elif self.idle.is_set():
            self.idle = trio.Event()
        self._changed()

    def _changed(self) -> None:
        """Wakes whoever waits on what is shown or what runs (``rendered``)."""
        self.rendered.set()
        self.rendered = trio.Event()

    # -- run ------------------------------------------------------------------------------------------------
    async def run(self) -> int:
        await self._open_first()
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            nursery.start_soon(self._events)
            nursery.start_soon(self._signals)
            if self.opts.colour:
                nursery.start_soon(self._ticker)
            self.prompt_marker()
            self.exit_code = await self._input()
            nursery.cancel_scope.cancel(reason="chat exits")
        self.line(f"Session {self.session_id} stays in the daemon: agentbus chat --resume {self.session_id}", "dim")
        return self.exit_code

    async def _open_first(self) -> None:
        o = self.opts
        if o.resume:
            ident = o.resume
            if ident == "latest" or ident.isdigit():
                listed = numbered((await self.client.list_sessions(str(o.workspace))).sessions)
                if not listed:
                    raise DaemonError("unknown_session", "no sessions for this workspace")
                chosen = listed[-1] if ident == "latest" else listed[int(ident) - 1] if 0 < int(ident) <= len(listed) else None
                if chosen is None:
                    raise DaemonError("unknown_session", f"no session number {ident}")
                ident = chosen.session_id
            ready = await self.client.load_session(
                ident, fake_responses=o.fake_responses, fake_chunk_delay_ms=o.fake_chunk_delay_ms
            )
            await self._switch(ready, resuming=True)
        else:
            ready = await self.client.create_session(
                str(o.workspace),
                model=o.model,
                approval_mode=o.approval_mode,
                fake_responses=o.fake_responses,
                fake_chunk_delay_ms=o.fake_chunk_delay_ms,
            )
            await self._switch(ready, resuming=False)

    async def _switch(self, ready: SessionReady, *, resuming: bool) -> None:
        if self.session_id and self.session_id != ready.session_id:
            try:
                await self.client.unsubscribe(self.session_id)
            except DaemonError:
                pass
        self.session_id = ready.session_id
        s = ready.summary
        self.render.busy = s.busy
        self._update_idle()  # a turn that runs (maybe waiting on an approval) is waited for
        self.render.pending.clear()
        self.render.catching_up = True
        self.caught_up = trio.Event()
        self._sync_keys()
        self.questions.clear()
        verb = "resumed" if ready.resumed or resuming else "new"
        self.line(
            f"agentbus chat · {verb} session {s.session_id} · {s.model} · mode {s.approval_mode} · {s.workspace}",
            "bold",
        )
        if s.title:
            self.line(f"  {s.title}", "dim")
        self.line("Type a prompt, or /help. Ctrl-C cancels a turn; twice exits.", "dim")
        try:
            servers = (await self.client.list_mcp_servers(self.session_id)).servers
            self.prompt_commands = [f"/{p.command}" for s in servers for p in s.prompts]
        except DaemonError:
            self.prompt_commands = []
        # From the start: the conversation so far is shown (as history, until the daemon's
        # ``CaughtUp``); an approval still waiting is asked.
        try:
            subscribed = await self.client.subscribe(self.session_id, from_seq=1)
        except DaemonError:
            # No history comes: what is typed next is not held back waiting for it.
            self.render.catching_up = False
            self.caught_up.set()
            raise
        # (They may have been shown already: they follow the reply at once.)
        self.unseen_questions = set(subscribed.pending_approvals) - self.questions
        if self.unseen_questions:
            self.questions_seen = trio.Event()

    # -- events ---------------------------------------------------------------------------------------------
    async def _events(self) -> None:
        async for event in self.client.events:
            if isinstance(event, CaughtUp):
                if event.session_id == self.session_id and self.render.catching_up:
                    self.render.catching_up = False
                    self.render.width = terminal_width(self.out)
                    self.write(self.render.approval_prompt())  # one still waiting
                    self._sync_keys()
                    self.caught_up.set()
                    self._changed()
                    self.prompt_marker()
                continue
            if isinstance(event, Envelope):
                if event.session_id != self.session_id:
                    continue
                msg = event.message
                if isinstance(msg, TurnStarted):
                    self.turn_prompts[msg.turn_id] = msg.prompt_id
                if isinstance(msg, ApprovalRequested | ApprovalSettled):
                    self.questions.add(msg.correlation_id)
                    self.unseen_questions.discard(msg.correlation_id)
            if isinstance(event, Envelope) and isinstance(event.message, ApprovalRequested):
                self.render.width = terminal_width(self.out)
            self.write(self.render.on(event, now=trio.current_time()))
            self._sync_keys()
            if not self.unseen_questions:
                self.questions_seen.set()
            self._changed()
            if isinstance(event, Envelope) and isinstance(event.message, TurnEnded | SessionOpened):
                # A SessionOpened ends every turn still open (its process stopped).
                msg = event.message
                ended = [msg.turn_id] if isinstance(msg, TurnEnded) else list(self.turn_prompts)
                for turn_id in ended:
                    if (started := self.turn_prompts.pop(turn_id, None)) is not None:
                        # Ours even if the acceptance came after the turn started (or ended).
                        self.my_prompts.discard(started)
                        self.ended_prompts.append(started)
                self.interrupts = 0
                self._update_idle()
                if ended and not self.render.catching_up:
                    self.prompt_marker()
        self.line("(the daemon closed the connection)", "red")
        self.exit_code = 1
        if self._nursery is not None:
            self._nursery.cancel_scope.cancel(reason="connection closed")

    async def _ticker(self) -> None:
        while True:
            await trio.sleep(1)
            self.write(self.render.progress(trio.current_time()))

    # -- Ctrl-C -------------------------------------------------------------------------------------------------
    async def _signals(self) -> None:
        with trio.open_signal_receiver(signal.SIGINT) as signals:
            async for _ in signals:
                self.interrupts += 1
                running = not self._is_idle() or bool(self.render.pending)
                if self.interrupts >= 2:
                    self.line("exiting", "yellow")
                    self.exit_code = 130
                    assert self._nursery is not None
                    self._nursery.cancel_scope.cancel(reason="Ctrl-C twice")
                    return
                if running:
                    self.line("cancelling… (Ctrl-C again to exit)", "yellow")
                    await self._cancel_all()
                else:
                    self.line("(press Ctrl-C again to exit, or type /quit)", "dim")
                    self.prompt_marker()

    async def _cancel_all(self) -> None:
        try:
            for rid in list(self.tool_calls):
                await self.client.cancel(self.session_id, tool_request_id=rid)
            if self.render.busy or self.my_prompts or self.render.pending:
                await self.client.cancel(self.session_id)
        except DaemonError as exc:
            self.line(f"error: {exc.message}", "red")

    # -- input ------------------------------------------------------------------------------------------------------
    async def _input(self) -> int:
        while True:
            line = await self.lines.read_line()
            if line is None:
                # End of input (a pipe, Ctrl-D): let what runs finish, then leave; a
                # question nobody can answer here any more stays in the daemon.
                await self.caught_up.wait()
                await self._until_idle_or_asked()
                if self.render.pending:
                    self.line(f"(a question waits: agentbus chat --resume {self.session_id} answers it)", "yellow")
                return 0
            if isinstance(line, SingleKey):
                await self._key_typed(line)
                continue
            self.render.mid_line = False  # the terminal echoed the newline
            after_key, self.after_key = self.after_key, ""
            if after_key and line.strip().lower() in (after_key, ""):
                continue  # "yes" and Enter typed out of habit after "y" answered
            if await self._line_typed(line) == "quit":
                return 0

    async def _key_typed(self, key: str) -> None:
        """A single key typed while an approval waited (not echoed: say what it did)."""
        self.interrupts = 0
        if not self.render.pending:  # settled meanwhile (another client answered)
            return
        if key == VIEW_KEY:
            self.write(self.render.style("view all", "bold") + "\n" + self.render.approval_view())
            return
        outcome = parse_answer(key)
        if outcome is not None:
            self.write(self.render.style(ANSWER_WORDS.get(outcome, outcome), "bold") + "\n")
            self.after_key = KEY_WORDS.get(key, "")
            await self._answer(outcome)

    async def _answer(self, outcome: str) -> None:
        req = self.render.pending[0]
        try:
            await self.client.answer(self.session_id, req.correlation_id, outcome)
        except DaemonError as exc:
            self.line(f"error: {exc.message}", "red")
            return
        # Settled when the session says so: what is typed next is not its answer.
        while req in self.render.pending:
            shown = self.rendered
            await shown.wait()

    async def _until_idle_or_asked(self, *, ours_only: bool = False) -> None:
        """Until nothing runs (``ours_only``: nothing this chat started), or a question
        waits for an answer."""
        def settled() -> bool:
            ours_done = not self.my_prompts and not self.tool_calls
            return bool(self.render.pending) or (ours_done if ours_only else self._is_idle())

        while not settled():
            shown = self.rendered
            await shown.wait()

    async def _line_typed(self, text: str) -> str | None:
        self.interrupts = 0
        stripped = text.strip()
        await self.caught_up.wait()
        await self.questions_seen.wait()
        if not self.opts.interactive:
            # Piped lines are a script: each waits for what the last one started, so a
            # "y" after a prompt answers the question that prompt's turn asks.
            await self._until_idle_or_asked(ours_only=True)
        if self.render.pending:
            if stripped.lower() == VIEW_KEY:
                self.write(self.render.approval_view())
                return None
            outcome = parse_answer(stripped)
            if outcome is None:
                self.write(self.render.approval_prompt(full=False))
                return None
            await self._answer(outcome)
            return None
        if not stripped:
            self.prompt_marker()
            return None
        try:
            if stripped.startswith("!"):
                share = stripped.startswith("!!")
                command = stripped[2 if share else 1 :].strip()
                if not command:
                    self.line("usage: !COMMAND (or !!COMMAND to add its output to the conversation)", "yellow")
                    self.prompt_marker()
                else:
                    self._start_tool("run_shell_command", {"command": command}, share=share)
            elif stripped.startswith("/"):
                return await self._command(stripped)
            else:
                accepted = await self.client.prompt(self.session_id, text)
                if accepted.prompt_id not in self.ended_prompts:  # its turn may be over already
                    self.my_prompts.add(accepted.prompt_id)
                self._update_idle()
        except DaemonError as exc:
            self.line(f"error: {exc.message}", "red")
            self.prompt_marker()
        return None

    async def _command(self, text: str) -> str | None:
        name, _, rest = text.partition(" ")
        rest = rest.strip()
        match name:
            case "/quit" | "/exit":
                return "quit"
            case "/help":
                self.line(HELP)
            case "/sessions":
                listed = (await self.client.list_sessions(str(self.opts.workspace))).sessions
                self.write(self.render.sessions_table(list(listed), self.session_id))
            case "/resume":
                await self._resume(rest)
            case "/new":
                ready = await self.client.create_session(
                    str(self.opts.workspace),
                    model=self.opts.model,
                    approval_mode=self.opts.approval_mode,
                    fake_responses=self.opts.fake_responses,
                )
                await self._switch(ready, resuming=False)
            case "/mcp":
                descriptions, schema, only = parse_mcp_args(rest)
                servers = (await self.client.list_mcp_servers(self.session_id)).servers
                self.line(render_servers(servers, descriptions=descriptions, schema=schema, only=only))
            case "/mode":
                if not rest:
                    self.line("usage: /mode default|auto_edit|yolo|plan", "yellow")
                else:
                    await self.client.set_mode(self.session_id, rest)
                    self.line(f"approval mode: {rest}", "green")
            case "/tool" | "/tool!":
                if not rest:
                    self.line(f'usage: {name} NAME {{"arg": "value"}}', "yellow")
                else:
                    try:
                        tool, args = parse_tool_call(rest)
                    except ValueError as exc:
                        self.line(f"error: {exc}", "red")
                    else:
                        self._start_tool(tool, args, share=name == "/tool!")
                        return None
            case _:
                servers = (await self.client.list_mcp_servers(self.session_id)).servers
                prompt = find_prompt(servers, name[1:])
                if prompt is None:
                    self.line(f"unknown command {name}; /help lists them", "yellow")
                elif rest.split(maxsplit=1)[:1] == ["help"]:
                    self.line(help_of(prompt))
                else:
                    # The daemon runs the prompt (prompts/get) and sends its text.
                    accepted = await self.client.prompt(self.session_id, text)
                    if accepted.prompt_id not in self.ended_prompts:
                        self.my_prompts.add(accepted.prompt_id)
                    self._update_idle()
                    return None
        self.prompt_marker()
        return None

    async def _resume(self, ident: str) -> None:
        if not ident:
            self.line("usage: /resume ID|N (see /sessions)", "yellow")
            return
        if ident.isdigit():
            listed = numbered((await self.client.list_sessions(str(self.opts.workspace))).sessions)
            index = int(ident)
            if not 0 < index <= len(listed):
                self.line(f"no session number {index}; /sessions lists them", "yellow")
                return
            ident = listed[index - 1].session_id
        ready = await self.client.load_session(ident, fake_responses=self.opts.fake_responses)
        await self._switch(ready, resuming=True)

    def _start_tool(self, name: str, args: dict[str, Any], *, share: bool = False) -> None:
        rid = new_id()
        self.tool_calls.add(rid)
        self._update_idle()
        assert self._nursery is not None
        self._nursery.start_soon(self._run_tool, rid, name, args, share)

    async def _run_tool(self, rid: str, name: str, args: dict[str, Any], share: bool) -> None:
        try:
            result = await self.client.call_tool(self.session_id, name, args, request_id=rid, add_to_context=share)
        except DaemonError as exc:
            self.line(f"error: {exc.message}", "red")
        else:
            # The reply can overtake the call's events: let them be shown first.
            with trio.move_on_after(EVENTS_GRACE_S):
                while result.call.call_id not in self.render.finished:
                    await self.rendered.wait()
            self.write(self.render.tool_result(result.call))
            if result.added_to_context:
                self.line("↳ added to the conversation: your next prompt carries it", "dim")
            elif share:
                self.line("↳ not added to the conversation: the call did not run", "yellow")
        finally:
            self.tool_calls.discard(rid)
            self._update_idle()
        self.prompt_marker()


_TOOL_NAMES: list[str] = []


def tool_names() -> list[str]:
    """The built-in tools' names, for completion (the session's registry may hold
    fewer: a call of an excluded one is refused by the scheduler, as typed)."""
    if not _TOOL_NAMES:
        from actors.tools import builtin_tools

        _TOOL_NAMES.extend(t.name for t in builtin_tools())
    return _TOOL_NAMES


def terminal_width(stream: TextIO) -> int:
    """The width of the terminal ``stream`` writes to (80 when it is not one)."""
    try:
        return os.get_terminal_size(stream.fileno()).columns or 80
    except (OSError, ValueError, AttributeError):
        return 80


def use_colour(stream: TextIO, environ: dict[str, str] | None = None) -> bool:
    env = os.environ if environ is None else environ
    if env.get("NO_COLOR"):
        return False
    if env.get("FORCE_COLOR"):
        return True
    return stream.isatty() and env.get("TERM", "") not in ("", "dumb")


StdinFactory = Callable[[], trio.abc.ReceiveStream]
