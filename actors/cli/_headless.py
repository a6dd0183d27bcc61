"""Headless mode: a drop-in for ``gemini -p PROMPT -o text|json|stream-json``.

The run is a client of the bus like any other: it starts the process-wide gateway and
one session's actors, subscribes to the session, submits the prompt, and turns what it
observes into Gemini CLI's output. Ctrl-C (SIGINT) or SIGTERM sends ``CancelTurn``;
the run ends after the turn's cancelled end with exit code 130.
"""

from __future__ import annotations

import os
import re
import signal
import sys
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

import attrs
import trio

from bus import Bus
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
)
from ..recorder import default_data_dir
from ..scheduler._policy import PolicyEngine, PolicyFileError
from ..tools import builtin_tools, executor_kind
from ..tools._base import Tool, ToolEnv
from . import _settings
from ._args import HeadlessArgs
from ._at_command import expand_at_references
from ._context import SYSTEM_INSTRUCTION, session_context
from ._errors import FatalAuthenticationError, FatalError, FatalInputError
from ._models import (
    classifier_choice,
    classifier_request,
    resolve_model,
)
from ._output import HeadlessPrinter

APPROVAL_ALIASES = {"autoEdit": "auto_edit"}


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
    parts: tuple[Any, ...]
    backend: Backend
    tools: Mapping[str, Tool]
    registered_names: tuple[str, ...]
    policy: PolicyEngine
    env: ToolEnv
    recording: Path | None
    max_session_turns: int
    history: tuple[Any, ...]


def project_slug(workspace: Path) -> str:
    slug = re.sub(r"[^a-z0-9._-]+", "-", workspace.name.lower()).strip("-")
    return slug or "project"


def workspace_settings() -> dict[str, Any]:
    return _settings.load_settings(Path(os.getcwd()).resolve())


def prepare(
    args: HeadlessArgs, settings: Mapping[str, Any], *, stdin_text: str | None
) -> Prepared:
    """Resolve flags, settings, input and backend; raise ``FatalError`` on bad input."""
    workspace = Path(os.getcwd()).resolve()
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

    approval = args.approval_mode or ("yolo" if args.yolo else None)
    if approval is None:
        configured = _settings.get(settings, "general.defaultApprovalMode")
        approval = APPROVAL_ALIASES.get(configured, configured) if configured in (
            "default",
            "auto_edit",
            "autoEdit",
            "plan",
        ) else "default"

    model = (
        (args.model or os.environ.get("GEMINI_MODEL") or _settings.get(settings, "model.name") or "")
        .strip()
        or "auto"
    )

    backend = make_backend(args)
    session_id = args.session_id or str(uuid.uuid4())
    home = _settings.gemini_home()
    env = ToolEnv(
        workspace=workspace,
        project_temp_dir=home / ".gemini" / "tmp" / project_slug(workspace),
        session_id=session_id,
        model=model,
        settings=settings,
    )
    all_tools = {t.name: t for t in builtin_tools(model)}
    try:
        policy, warnings = PolicyEngine.build(
            approval_mode=approval,
            interactive=False,
            settings=settings,
            policy_paths=[Path(p) for p in args.policy],
            user_policy_dir=home / ".gemini" / "policies",
            workspace_policy_dir=workspace / ".gemini" / "policies",
            allowed_tools=args.allowed_tools,
            known_tools=tuple(all_tools),
        )
    except PolicyFileError as exc:
        raise FatalError(str(exc), exit_code=1) from None
    for warning in warnings:
        sys.stderr.write(f"Warning: {warning}\n")
    excluded = policy.excluded_tools(all_tools, approval_mode=approval)
    core = _settings.get(settings, "tools.core")
    tools = {
        n: t
        for n, t in all_tools.items()
        if n not in excluded and (not isinstance(core, list) or n in core)
    }

    parts = expand_at_references(prompt, workspace)
    data_dir = Path(args.data_dir) if args.data_dir else default_data_dir()
    max_turns = _settings.get(settings, "model.maxSessionTurns", -1)
    history = (
        {"role": "user", "parts": [{"text": session_context(workspace, env.project_temp_dir)}]},
    )
    return Prepared(
        args=args,
        workspace=workspace,
        settings=settings,
        session_id=session_id,
        model=model,
        approval_mode=approval,
        user_input=prompt,
        parts=tuple(parts),
        backend=backend,
        tools=tools,
        registered_names=tuple(tools),
        policy=policy,
        env=env,
        recording=data_dir / "sessions" / f"{session_id}.jsonl",
        max_session_turns=int(max_turns) if isinstance(max_turns, int) else -1,
        history=history,
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


def make_backend(args: HeadlessArgs) -> Backend:
    path = args.fake_responses_non_strict or args.fake_responses
    if path is not None:
        try:
            return FakeResponsesBackend.from_file(path, strict=args.fake_responses_non_strict is None)
        except FakeResponsesError as exc:
            raise FatalError(f"agentbus: {exc}", exit_code=1) from None
    from ..gateway import live_backend

    try:
        return live_backend()
    except BackendError as exc:
        raise FatalError(exc.message, exit_code=1) from None


def request_config_for(tools: Mapping[str, Tool]) -> Any:
    from ..scheduler import with_wait_for_previous

    def config(model: str) -> Mapping[str, Any]:
        decls = []
        for tool in tools.values():
            decl = dict(tool.declaration(model))
            schema = decl.pop("parametersJsonSchema", None) or decl.pop("parameters", None) or {}
            decl["parametersJsonSchema"] = with_wait_for_previous(schema)
            decls.append(decl)
        out: dict[str, Any] = {
            "systemInstruction": SYSTEM_INSTRUCTION,
            "temperature": 1,
            "topP": 0.95,
            "topK": 64,
            "thinkingConfig": {"includeThoughts": True},
        }
        if decls:
            out["tools"] = [{"functionDeclarations": decls}]
        return out

    return config


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
    )
    cfg = runtime.SessionConfig(
        session_id=p.session_id,
        model=p.model,
        approval_mode=p.approval_mode,
        env=p.env,
        tools=p.tools,
        executor_of=executor_kind,
        policy=p.policy,
        request_config=request_config_for(p.tools),
        route_model=resolve_model,
        classifier_choice=classifier_choice,
        classifier_request=classifier_request,
        history=p.history,
        recording=p.recording,
        gateway_address=GATEWAY_ADDRESS,
        interactive=False,
        max_session_turns=p.max_session_turns,
        registered_names=p.registered_names,
    )
    exit_code = 0
    async with trio.open_nursery() as nursery:
        await nursery.start(GatewayActor(bus, p.backend).run)
        sub = bus.subscribe(p.session_id, "headless", policy="block", capacity=1024)
        client = bus.connect(f"client:headless:{p.session_id}")
        addrs = await nursery.start(runtime.supervise_session, bus, cfg)
        await client.send(runtime.open_session_message(cfg), to=addrs.session)
        printer.start(p.user_input)
        await client.send(
            SubmitPrompt(
                session_id=p.session_id,
                prompt_id=p.session_id,
                parts=p.parts,
                display_text=p.user_input,
            ),
            to=addrs.session,
        )
        signals = _SignalWatch(client, addrs.session, p.session_id)
        nursery.start_soon(signals.run)
        async for env in sub:
            msg = env.message
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
                await client.send(
                    CloseSession(session_id=p.session_id, reason="headless run finished"),
                    to=addrs.session,
                )
            elif isinstance(msg, SessionClosed):
                break
        bus.unsubscribe(sub)
        client.close()
        bus.disconnect(GATEWAY_ADDRESS)
        signals.stop()
    return exit_code


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
                    os._exit(130)


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
