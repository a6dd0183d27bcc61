"""Tool scheduler actor: waves, policy, approvals, cancellation."""

from ._actor import DENIED_BY_POLICY, PolicyLike, SchedulerActor, SchedulerWiring
from ._logic import ToolSpec, is_parallelizable, plan_waves, with_wait_for_previous

__all__ = [
    "DENIED_BY_POLICY",
    "PolicyLike",
    "SchedulerActor",
    "SchedulerWiring",
    "ToolSpec",
    "is_parallelizable",
    "plan_waves",
    "with_wait_for_previous",
]
