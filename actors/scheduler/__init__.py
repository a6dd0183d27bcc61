"""Tool scheduler actor: waves, policy, approvals, cancellation."""

from typing import TYPE_CHECKING

from actors.common import lazy_exports

from ._actor import DENIED_BY_POLICY, PolicyLike, SchedulerActor, SchedulerWiring
from ._logic import (
    ToolSpec,
    cancelled_response_parts,
    is_parallelizable,
    plan_waves,
    with_wait_for_previous,
)

if TYPE_CHECKING:
    from ._policy import PolicyEngine
    from ._policy_cache import reuse_parsed_policies
    from ._policy_rules import PolicyFileError

__getattr__ = lazy_exports(
    __name__,
    {
        "PolicyEngine": "._policy",
        "PolicyFileError": "._policy_rules",
        "reuse_parsed_policies": "._policy_cache",
    },
)

__all__ = [
    "PolicyEngine",
    "PolicyFileError",
    "reuse_parsed_policies",
    "cancelled_response_parts",
    "DENIED_BY_POLICY",
    "PolicyLike",
    "SchedulerActor",
    "SchedulerWiring",
    "ToolSpec",
    "is_parallelizable",
    "plan_waves",
    "with_wait_for_previous",
]
