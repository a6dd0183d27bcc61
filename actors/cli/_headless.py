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

from .. import runtime
from ..gateway import (
    GATEWAY_ADDRESS,
    Backend,
    BackendError,
    FakeResponsesBackend,
    FakeResponsesError,
    GatewayActor,
    RetryPolicy,
)
from ..hooks import HookConfig
from ..recorder import default_data_dir
from ..scheduler._policy import PolicyEngine
from ..tools._base import Tool, ToolEnv
from . import _sessions, _settings
from ._args import HeadlessArgs
from ._at_command import expand_at_references
from ._context import session_context
from ._errors import FatalAuthenticationError, FatalError, FatalInputError
from ._force_exit import force_exit
from ._output import HeadlessPrinter
from ._setup import (
    SessionSetup,
    approval_mode_from,
    model_from,
    print_warnings,
    run_hooks,
    session_config,
    session_setup,
    session_start_context,
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


def workspace_settings() -> dict[str, Any]:
    return _settings.load_settings(Path(os.getcwd()).resolve())


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
        recording=data_dir / "sessions" / f"{session_id}.jsonl",
        max_session_turns=int(max_turns) if isinstance(max_turns, int) else -1,
        history=history,
        setup=setup,
    )


def auth_type_from_env(environ: Mapping[str, str]) -> str | None:
    if environ.get("GOOGLE_GENAI_USE_GCA") == "true":
        return "oauth-personal"
    if environ.get("GOOGLE_GENAI_USE_VERTEXAI") == "true":
        return "vertex-ai"
    if environ.get("GOOGLE_GEMINI_BASE_URL"):
        return "gateway"
    if environ.get("GEMINI_API_KEY"):
        return "gemini-api-key"
    if environ.get("CLOUD_SHELL") == "true" or environ.get("GEMINI_CLI_USE_COMPUTE_ADC") == "true":
        return "compute-default-credentials"
    return None


def check_auth(settings: Mapping[str, Any], environ: Mapping[str, str], *, fake_model: bool) -> None:
    """Gemini CLI's headless auth validation (exit 41).

    Deliberate difference: with ``--fake-responses`` and no auth configured at all, the
    run proceeds (no model is contacted); Gemini CLI refuses. An enforced type that
    does not match is refused either way.
    """
    effective = _settings.get(settings, "security.auth.selectedType") or auth_type_from_env(environ)
    enforced = _settings.get(settings, "security.auth.enforcedType")
    if enforced and effective != enforced:
        if effective:
            raise FatalAuthenticationError(
                f"The enforced authentication type is '{enforced}', but the current type is "
                f"'{effective}'. Please re-authenticate with the correct type."
            )
        raise FatalAuthenticationError(
            f"The auth type '{enforced}' is enforced, but no authentication is configured."
        )
    if fake_model:
        return
    if not effective:
        home = _settings.gemini_home()
        raise FatalAuthenticationError(
            f"Please set an Auth method in your {home}/.gemini/settings.json or specify one of "
            "the following environment variables before running: GEMINI_API_KEY, "
            "GOOGLE_GENAI_USE_VERTEXAI, GOOGLE_GENAI_USE_GCA"
        )
    if effective == "gemini-api-key" and not (environ.get("GEMINI_API_KEY") or environ.get("GOOGLE_API_KEY")):
        raise FatalAuthenticationError(
            "When using Gemini API, you must specify the GEMINI_API_KEY environment variable.\n"
            "Update your environment and try again (no reload needed if using .env)!"
        )


def make_backend(args: HeadlessArgs, settings: Mapping[str, Any] | None = None) -> Backend:
    """The model backend: a fake-responses file (served over HTTP through the real SDK
    when ``AGENTBUS_FAKE_RESPONSES_OVER_HTTP=1``), else google-genai; recorded with
    ``--record-responses``. Retries follow ``general.maxAttempts``."""
    from ..gateway import (
        RecordingBackend,
        RetryPolicy,
        fake_responses_over_http,
        live_backend,
        load_fake_responses,
        over_http_requested,
    )

    settings = settings or {}
    retry = RetryPolicy.from_settings(_settings.get(settings, "general.maxAttempts"))
    path = args.fake_responses_non_strict or args.fake_responses
    strict = args.fake_responses_non_strict is None
    backend: Backend
    try:
        if path is not None and over_http_requested():
            load_fake_responses(path)  # the same checks, the same messages
            backend = fake_responses_over_http(path, strict=strict, retry_policy=retry)
        elif path is not None:
            fake = FakeResponsesBackend.from_file(path, strict=strict)
            fake.retry_policy = retry
            backend = fake
        else:
            auth = _settings.get(settings, "security.auth.selectedType") or auth_type_from_env(os.environ)
            backend = live_backend(auth_type=auth, retry_policy=retry)
    except FakeResponsesError as exc:
        raise FatalError(f"agentbus: {exc}", exit_code=1) from None
    except BackendError as exc:
        raise FatalError(exc.message, exit_code=1) from None
    if args.record_responses:
        backend = RecordingBackend(backend, args.record_responses)
    return backend


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
    cfg = attrs.evolve(
        session_config(p.setup, history=p.history, recording=p.recording, settings=p.settings),
        **runtime.guard_settings(p.settings),
    )
    exit_code = 0
    async with trio.open_nursery() as nursery:
        await nursery.start(GatewayActor(bus, p.backend).run)
        client = bus.connect(f"client:headless:{p.session_id}")
        addrs = await nursery.start(runtime.supervise_session, bus, cfg)
        # After the supervisor: the recorder must be the session's first observer, so
        # that what this client prints is on disk first (actors/recorder.py).
        sub = bus.subscribe(p.session_id, "headless", policy="block", capacity=1024)
        # Subagents' sessions, for the stats only (drained as the main session goes).
        descendants = bus.subscribe(ALL_SESSIONS, "headless:agents", capacity=math.inf)
        await client.send(runtime.open_session_message(cfg), to=addrs.session)
        printer.start()
        user_input = p.user_input
        context = await session_start_context(client, addrs, p.session_id, "startup")
        if context:
            # Headless Gemini CLI puts SessionStart context in front of the prompt.
            user_input = f"<hook_context>{context}</hook_context>\n\n{user_input}"
        printer.user_message(user_input)
        await client.send(
            SubmitPrompt(
                session_id=p.session_id,
                prompt_id=p.session_id,
                parts=tuple(
                    expand_at_references(
                        user_input, p.workspace, env=p.env, glob_available="glob" in p.tools
                    )
                ),
                display_text=user_input,
            ),
            to=addrs.session,
        )
        signals = _SignalWatch(client, addrs.session, p.session_id)
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
        self.scope.cancel()

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
