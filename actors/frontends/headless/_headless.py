"""Headless mode: a drop-in for ``gemini -p PROMPT -o text|json|stream-json``.

The run is a client of the bus like any other: it starts the process-wide gateway and
one session's actors, subscribes to the session, submits the prompt, and turns what it
observes into Gemini CLI's output. Ctrl-C (SIGINT) or SIGTERM sends ``CancelTurn``;
the run ends after the turn's cancelled end with exit code 130.
"""

from __future__ import annotations

import math
import os
import signal
import sys
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

import attrs
import trio

from actors.frontends.headless._force_exit import force_exit
from actors.frontends.headless._output import HeadlessPrinter
from actors.gateway import (
    GATEWAY_ADDRESS,
    Backend,
    GatewayActor,
    RetryPolicy,
)
from actors.hooks import HookConfig
from actors.host import runtime
from actors.host import sessions as _sessions
from actors.host import settings as _settings
from actors.host.args import HeadlessArgs
from actors.host.auth import check_auth
from actors.host.backend import make_backend
from actors.host.context import session_context
from actors.host.errors import FatalAuthenticationError, FatalError, FatalInputError
from actors.host.opening import open_session
from actors.host.setup import (
    SessionSetup,
    approval_mode_from,
    model_from,
    print_warnings,
    run_hooks,
    session_config,
    session_setup,
    session_start_context,
)
from actors.recording import default_data_dir, recording_path
from actors.scheduler import PolicyEngine
from actors.tools import Tool, ToolEnv
from bus import ALL_SESSIONS, Bus
from bus.messages import (
    CancelTurn,
    CloseSession,
    SessionClosed,
    SubmitPrompt,
    TurnEnded,
    TurnError,
    new_id,
)


@attrs.frozen(kw_only=True)
class Prepared:
    """Everything a headless run needs, resolved before any actor starts."""

    args: HeadlessArgs
    workspace: Path
    settings: Mapping[str, Any]
    session_id: str
    model: str
    approval_mode: str
    user_input: str
    hooks: HookConfig
    backend: Backend
    tools: Mapping[str, Tool]
    registered_names: tuple[str, ...]
    policy: PolicyEngine
    env: ToolEnv
    recording: Path | None
    max_session_turns: int
    history: tuple[Any, ...]
    setup: SessionSetup | None = None
    """The shared session setup the run's ``SessionConfig`` is made from."""


def prepare(
    args: HeadlessArgs, settings: Mapping[str, Any], *, stdin_text: str | None
) -> Prepared:
    """Resolve flags, settings, input and backend; raise ``FatalError`` on bad input."""
    workspace = Path(os.getcwd()).resolve()
    # --session-id / --resume first, as Gemini CLI resolves them before anything else.
    session_id, resumed = _sessions.session_for_run(args, workspace)
    uses_fake = bool(args.fake_responses or args.fake_responses_non_strict)
    check_auth(settings, os.environ, fake_model=uses_fake)

    prompt = args.prompt if args.prompt is not None else (" ".join(args.query) or None)
    if stdin_text:
        prompt = f"{stdin_text}\n\n{prompt}" if prompt else stdin_text
    if not prompt or not prompt.strip():
        raise FatalInputError(
            "No input provided via stdin. Input can be provided by piping data into gemini "
            "or using the --prompt option."
        )

    approval = approval_mode_from(args.approval_mode, args.yolo, settings)
    model = model_from(args.model, settings)
    backend = make_backend(args, settings)
    setup = session_setup(
        workspace=workspace,
        settings=settings,
        session_id=session_id,
        model=model,
        approval_mode=approval,
        interactive=False,
        policy_paths=args.policy,
        allowed_tools=args.allowed_tools,
        allowed_mcp_server_names=args.allowed_mcp_server_names,
    )
    print_warnings(setup)
    env, tools, policy, hooks = setup.env, setup.tools, setup.policy, setup.hooks
    data_dir = Path(args.data_dir) if args.data_dir else default_data_dir()
    max_turns = _settings.get(settings, "model.maxSessionTurns", -1)
    history = (
        {"role": "user", "parts": [{"text": session_context(workspace, env.project_temp_dir)}]},
        *resumed,  # a resumed session's conversation, rebuilt from its recording
    )
    return Prepared(
        args=args,
        workspace=workspace,
        settings=settings,
        session_id=session_id,
        model=model,
        approval_mode=approval,
        user_input=prompt,
        hooks=hooks,
        backend=backend,
        tools=tools,
        registered_names=tuple(tools),
        policy=policy,
        env=env,
        recording=recording_path(data_dir, session_id),
        max_session_turns=int(max_turns) if isinstance(max_turns, int) else -1,
        history=history,
        setup=setup,
    )


async def run_prepared(p: Prepared, stdout: TextIO, stderr: TextIO) -> int:
    bus = Bus()
    printer = HeadlessPrinter(
        p.args.output_format or "text",
        stdout,
        stderr,
        session_id=p.session_id,
        requested_model=p.model,
        clock_ms=lambda: time.monotonic() * 1000,
        raw_output=p.args.raw_output or p.args.accept_raw_output_risk,
        max_attempts=RetryPolicy.from_settings(_settings.get(p.settings, "general.maxAttempts")).max_attempts,
    )
    assert p.setup is not None
    cfg = session_config(
        p.setup,
        history=p.history,
        recording=p.recording,
        settings=p.settings,
        mcp_allowed_names=p.args.allowed_mcp_server_names,
        settings_from_files=True,
        one_session_process=True,
    )
    exit_code = 0
    async with trio.open_nursery() as nursery:
        await nursery.start(GatewayActor(bus, p.backend).run)
        client = bus.connect(f"client:headless:{p.session_id}")
        subs: list[Any] = []

        def observe(_addrs: runtime.SessionAddresses) -> None:
            # After the supervisor: the recorder must be the session's first observer, so
            # that what this client prints is on disk first (actors/recorder.py).
            subs.append(bus.subscribe(p.session_id, "headless", policy="block", capacity=1024))
            # Subagents' sessions, for the stats only (drained as the main session goes).
            subs.append(bus.subscribe(ALL_SESSIONS, "headless:agents", capacity=math.inf))

        addrs = await open_session(nursery, bus, cfg, client, observe=observe)
        sub, descendants = subs
        printer.start()
        user_input = p.user_input
        context = await session_start_context(client, addrs, p.session_id, "startup")
        prompt = await _prompt_for_model(p, addrs, user_input, context, stdout, stderr)
        signals = _SignalWatch(client, addrs.session, p.session_id)
        if isinstance(prompt, int):
            exit_code = prompt
            await client.send(CloseSession(session_id=p.session_id, reason="headless run finished"), to=addrs.session)
        else:
            user_input, parts = prompt
            printer.user_message(user_input)
            await client.send(
                SubmitPrompt(
                    session_id=p.session_id,
                    prompt_id=p.session_id,
                    parts=tuple(parts),
                    display_text=user_input,
                ),
                to=addrs.session,
            )
            nursery.start_soon(signals.run)
        async for env in sub:
            msg = env.message
            _drain_descendants(descendants, p.session_id, printer)
            printer.on(msg)
            if isinstance(msg, TurnEnded):
                if msg.stop_reason == "cancelled":
                    exit_code = printer.fail(
                        TurnError(
                            kind="cancelled",
                            type="FatalCancellationError",
                            message="Operation cancelled.",
                            exit_code=130,
                        )
                    )
                else:
                    exit_code = printer.finish(msg)
                await run_hooks(client, addrs, p.session_id, "SessionEnd", "exit", {"reason": "exit"})
                await client.send(
                    CloseSession(session_id=p.session_id, reason="headless run finished"),
                    to=addrs.session,
                )
            elif isinstance(msg, SessionClosed):
                break
        bus.unsubscribe(sub)
        bus.unsubscribe(descendants)
        client.close()
        bus.disconnect(GATEWAY_ADDRESS)
        signals.stop()
    return exit_code


async def _prompt_for_model(
    p: Prepared,
    addrs: runtime.SessionAddresses,
    user_input: str,
    context: str | None,
    stdout: TextIO,
    stderr: TextIO,
) -> tuple[str, list[dict[str, Any]]] | int:
    """The prompt's display text and parts: an MCP prompt's command run (Gemini's
    headless slash commands), or ``@`` references expanded (files, MCP resources). An
    exit code instead when nothing goes to the model: a failure is one line on stderr
    (42, Gemini's ``FatalInputError``), ``/<prompt> help`` its text on stdout (0)."""
    if addrs.mcp is None and "@" not in (text := _with_context(user_input, context)):
        # No MCP server (no prompt commands, no resources) and no ``@``: the prompt as
        # typed, without importing what commands and references need.
        return text, [{"text": text}]
    from actors.host.at_command import expand_at_references_off_loop
    from actors.host.mcp_session import McpInputError, run_prompt_command

    try:
        ran = await run_prompt_command(addrs.mcp, user_input)
        if ran is not None and ran.prompt is None:
            stdout.write(ran.message)
            stdout.flush()
            return 0
        text = _with_context(ran.prompt if ran is not None and ran.prompt is not None else user_input, context)
        if ran is not None:
            return text, [{"text": text}]
        return text, await expand_at_references_off_loop(
            text, p.workspace, env=p.env, glob_available="glob" in p.tools, mcp=addrs.mcp
        )
    except McpInputError as exc:
        stderr.write(exc.message + "\n")
        stderr.flush()
        return FatalInputError.exit_code


def _with_context(text: str, context: str | None) -> str:
    """Headless Gemini CLI puts SessionStart context in front of the prompt."""
    return f"<hook_context>{context}</hook_context>\n\n{text}" if context else text


def _drain_descendants(sub: Any, session_id: str, printer: HeadlessPrinter) -> None:
    while True:
        try:
            env = sub.receive.receive_nowait()
        except trio.WouldBlock:
            return
        if env.session_id != session_id:
            printer.on_descendant(env.message)


class _SignalWatch:
    """SIGINT/SIGTERM: the first cancels the turn, a second forces the exit."""

    def __init__(self, client: Any, session_address: str, session_id: str) -> None:
        self.client = client
        self.session_address = session_address
        self.session_id = session_id
        self.scope = trio.CancelScope()

    def stop(self) -> None:
        self.scope.cancel(reason="the headless run ended: no more signals to watch")

    async def run(self) -> None:
        with self.scope, trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            seen = 0
            async for _sig in signals:
                seen += 1
                if seen == 1:
                    await self.client.send(
                        CancelTurn(
                            session_id=self.session_id,
                            turn_id=None,
                            reason="interrupted by signal",
                            requested_by=self.client.address,
                        ),
                        to=self.session_address,
                    )
                else:
                    force_exit(130)


STDIN_FIRST_DATA_WAIT_S = 0.5
STDIN_LIMIT = 8 * 1024 * 1024


def read_stdin() -> str | None:
    """Piped input, as Gemini CLI reads it: nothing arriving within 0.5 s means none."""
    import select

    try:
        if sys.stdin is None or sys.stdin.isatty():
            return None
        fd = sys.stdin.fileno()
        ready, _, _ = select.select([fd], [], [], STDIN_FIRST_DATA_WAIT_S)
        if not ready:
            return None
        chunks: list[bytes] = []
        size = 0
        while size < STDIN_LIMIT:
            block = os.read(fd, 65536)
            if not block:
                break
            chunks.append(block)
            size += len(block)
    except (OSError, ValueError):
        return None
    data = b"".join(chunks)
    if len(data) > STDIN_LIMIT:
        sys.stderr.write(f"Warning: stdin input truncated to {STDIN_LIMIT} bytes.\n")
        data = data[:STDIN_LIMIT]
    text = data.decode("utf-8", errors="replace")
    return text if text else None


def run_headless(args: HeadlessArgs, settings: Mapping[str, Any]) -> int:
    if args.output_format is None:
        configured = _settings.get(settings, "output.format")
        args.output_format = configured if configured in ("text", "json", "stream-json") else "text"
    fmt = args.output_format
    if args.skip_trust:
        # As Gemini CLI: its processes (shell commands, hooks, MCP servers) inherit it.
        os.environ["GEMINI_CLI_TRUST_WORKSPACE"] = "true"
    try:
        prepared = prepare(args, settings, stdin_text=read_stdin())
    except FatalError as exc:
        return report_fatal(exc, fmt, session_id=args.session_id or str(uuid.uuid4()))
    return trio.run(run_prepared, prepared, sys.stdout, sys.stderr)


def report_fatal(exc: FatalError, fmt: str, *, session_id: str) -> int:
    """A fatal error before the session runs: one message, Gemini CLI's exit code."""
    if fmt == "json" and isinstance(exc, FatalAuthenticationError):
        printer = HeadlessPrinter(
            fmt, sys.stdout, sys.stderr, session_id=session_id, requested_model="", clock_ms=time.monotonic
        )
        printer.write_json_error("Error", exc.message, exc.exit_code)
    else:
        sys.stderr.write(exc.message + "\n")
    return exc.exit_code


__all__ = ["new_id", "run_headless"]
