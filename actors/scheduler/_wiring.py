"""What the scheduler is wired with: the policy it asks (a protocol, so that tests can
script one), the session's tools as ``ToolSpec`` data, the hook runner; and the unions of
messages its inbox and its running batch take."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, TypeAlias

import attrs

from bus.messages import (
    ApprovalAnswered,
    ApprovalModeChanged,
    CancelBatch,
    HooksFinished,
    ScheduleBatch,
    ToolFinished,
)

from ._logic import (
    ToolSpec,
)


class PolicyVerdictLike(Protocol):
    @property
    def decision(self) -> str: ...
    @property
    def deny_message(self) -> str | None: ...


class PolicyLike(Protocol):
    def check(
        self,
        tool_name: str,
        args: Mapping[str, Any],
        *,
        approval_mode: str | None = None,
        tool_annotations: Mapping[str, Any] | None = None,
    ) -> PolicyVerdictLike: ...

    def add_session_rule(
        self,
        tool_name: str,
        *,
        command_prefix: str | Sequence[str] | None = None,
        args_pattern: str | None = None,
        allow_redirection: bool | None = None,
        mcp_name: str | None = None,
    ) -> None: ...


DENIED_BY_POLICY = "Tool execution denied by policy."

BatchInbox: TypeAlias = CancelBatch | ApprovalModeChanged | ToolFinished | ApprovalAnswered | HooksFinished
"""What the actor forwards to the running batch."""
SchedulerInbox: TypeAlias = ScheduleBatch | BatchInbox
"""What reaches the scheduler's address."""


@attrs.frozen(kw_only=True)
class SchedulerWiring:
    session_id: str
    address: str
    tools: Mapping[str, ToolSpec]
    """Registered tools (what the model may call in this session)."""
    policy: PolicyLike
    model: Callable[[], str] = lambda: ""
    """Current model, for the multimodal response rules."""
    registered_names: tuple[str, ...] = ()
    """Registry order, for "did you mean" suggestions (defaults to ``tools`` order)."""
    hooks_address: str | None = None
    """The session's hook runner, when hooks are configured."""
    has_hooks: Callable[[str, str], bool] = lambda event, target: False
    reject_message: str | None = None
    """A subagent's scheduler: a call the user rejects ("cancel") is a *soft* rejection,
    cancelled with this error for the model, and the batch's other calls go on (Gemini
    CLI's ``SUBAGENT_REJECTED_ERROR_PREFIX`` response)."""
