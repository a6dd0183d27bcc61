"""What every entry point needs to start a session: the tool registry, the policy
engine, the hook configuration, the tools' environment, and the ``SessionConfig``.

Headless runs, the daemon and ACP all build sessions here, so a session behaves the
same whichever way it was started.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from .. import runtime
from ..gateway import GATEWAY_ADDRESS
from ..hooks import HookConfig, HookConfigError, load_hook_config
from ..scheduler._policy import PolicyEngine, PolicyFileError
from ..tools import builtin_tools, executor_kind
from ..tools._base import Tool, ToolEnv
from . import _settings
from ._context import SYSTEM_INSTRUCTION, session_context
from ._errors import FatalConfigError
from ._models import classifier_choice, classifier_request, resolve_model

APPROVAL_ALIASES = {"autoEdit": "auto_edit"}


def project_slug(workspace: Path) -> str:
    slug = re.sub(r"[^a-z0-9._-]+", "-", workspace.name.lower()).strip("-")
    return slug or "project"


def approval_mode_from(flag: str | None, yolo: bool, settings: Mapping[str, Any]) -> str:
    """``--approval-mode``, else ``--yolo``, else ``general.defaultApprovalMode`` (never yolo)."""
    if flag:
        return flag
    if yolo:
        return "yolo"
    configured = _settings.get(settings, "general.defaultApprovalMode")
    if configured in ("default", "auto_edit", "autoEdit", "plan"):
        return str(APPROVAL_ALIASES.get(configured, configured))
    return "default"


def model_from(flag: str | None, settings: Mapping[str, Any]) -> str:
    """``-m``, else ``$GEMINI_MODEL``, else ``model.name``, else ``auto``."""
    name = flag or os.environ.get("GEMINI_MODEL") or _settings.get(settings, "model.name") or ""
    return str(name).strip() or "auto"


@attrs.frozen(kw_only=True)
class SessionSetup:
    session_id: str
    workspace: Path
    model: str
    approval_mode: str
    env: ToolEnv
    tools: Mapping[str, Tool]
    policy: PolicyEngine
    hooks: HookConfig
    interactive: bool
    warnings: tuple[str, ...] = ()


def session_setup(
    *,
    workspace: Path,
    settings: Mapping[str, Any],
    session_id: str,
    model: str,
    approval_mode: str,
    interactive: bool,
    policy_paths: Sequence[str] = (),
    allowed_tools: Sequence[str] = (),
) -> SessionSetup:
    """Registry, policy and hooks for a session; raises ``FatalConfigError`` on bad config."""
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
            approval_mode=approval_mode,
            interactive=interactive,
            settings=settings,
            policy_paths=[Path(p) for p in policy_paths],
            user_policy_dir=home / ".gemini" / "policies",
            workspace_policy_dir=workspace / ".gemini" / "policies",
            allowed_tools=list(allowed_tools),
            known_tools=tuple(all_tools),
            strict=True,
        )
    except PolicyFileError as exc:
        raise FatalConfigError(f"Error in policy file {exc}") from None
    excluded = policy.excluded_tools(all_tools, approval_mode=approval_mode)
    core = _settings.get(settings, "tools.core")
    tools = {
        n: t
        for n, t in all_tools.items()
        if n not in excluded and (not isinstance(core, list) or n in core)
    }
    try:
        hooks = load_hook_config(settings)
    except HookConfigError as exc:
        raise FatalConfigError(f"Invalid hooks configuration in settings.json:\n{exc}") from None
    return SessionSetup(
        session_id=session_id,
        workspace=workspace,
        model=model,
        approval_mode=approval_mode,
        env=env,
        tools=tools,
        policy=policy,
        hooks=hooks,
        interactive=interactive,
        warnings=tuple(warnings),
    )


def print_warnings(setup: SessionSetup) -> None:
    for warning in setup.warnings:
        sys.stderr.write(f"Warning: {warning}\n")


def environment_context(setup: SessionSetup) -> Any:
    """The first user turn of a new session: what the model should know about where it runs."""
    return {"role": "user", "parts": [{"text": session_context(setup.workspace, setup.env.project_temp_dir)}]}


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


def session_config(
    setup: SessionSetup,
    *,
    history: Sequence[Any],
    recording: Path | None,
    settings: Mapping[str, Any],
) -> runtime.SessionConfig:
    """The ``SessionConfig`` that ``runtime.supervise_session`` runs."""
    max_turns = _settings.get(settings, "model.maxSessionTurns", -1)
    return runtime.SessionConfig(
        session_id=setup.session_id,
        model=setup.model,
        approval_mode=setup.approval_mode,
        env=setup.env,
        tools=setup.tools,
        executor_of=executor_kind,
        policy=setup.policy,
        request_config=request_config_for(setup.tools),
        route_model=resolve_model,
        classifier_choice=classifier_choice,
        classifier_request=classifier_request,
        history=tuple(history),
        recording=recording,
        gateway_address=GATEWAY_ADDRESS,
        interactive=setup.interactive,
        max_session_turns=int(max_turns) if isinstance(max_turns, int) else -1,
        registered_names=tuple(setup.tools),
        hooks=setup.hooks,
    )
