"""Gemini CLI's command hooks: configuration, planning, running, aggregation, translation.

The lead's integration points use:

- ``load_hook_config(settings)`` at start (``HookConfigError`` lists every problem);
- ``HookConfig.has_hooks(event, target)`` before building a ``RunHooks`` (≈ free when
  nothing matches);
- ``HookRunnerActor`` (one per session) answering ``RunHooks`` with ``HooksFinished``;
- the readers in ``_aggregate`` and the translators in ``_translate`` to apply an
  aggregated output the way Gemini does.
"""

from typing import TYPE_CHECKING

from actors.common import lazy_exports

from ._config import (
    DEFAULT_TIMEOUT_MS,
    HOOK_EVENTS,
    CommandHook,
    HookConfig,
    HookConfigError,
    HookDefinition,
    load_hook_config,
)
from ._plan import TOOL_EVENTS, TRIGGER_EVENTS, Plan

if TYPE_CHECKING:
    from bus.llm_shapes import (
        LLMShapeError,
        apply_llm_request,
        apply_tool_config,
        from_llm_response,
        modified_response,
        synthetic_response,
        to_llm_request,
        to_llm_response,
    )

    from ._actor import HookRunnerActor, iso_timestamp
    from ._aggregate import (
        additional_context,
        aggregate,
        chain_input,
        clear_context,
        effective_reason,
        is_ask,
        is_blocking,
        should_stop,
        tail_tool_call,
        tool_input_override,
    )
    from ._run import HookResult, parse_hook_output, run_command_hook

# The runner, the hooks' commands and the translators are imported when first used: a
# session without hooks needs only the configuration.
__getattr__ = lazy_exports(
    __name__,
    {
        "LLMShapeError": "bus.llm_shapes",
        "apply_llm_request": "bus.llm_shapes",
        "apply_tool_config": "bus.llm_shapes",
        "from_llm_response": "bus.llm_shapes",
        "modified_response": "bus.llm_shapes",
        "synthetic_response": "bus.llm_shapes",
        "to_llm_request": "bus.llm_shapes",
        "to_llm_response": "bus.llm_shapes",
        "HookRunnerActor": "._actor",
        "iso_timestamp": "._actor",
        "additional_context": "._aggregate",
        "aggregate": "._aggregate",
        "chain_input": "._aggregate",
        "clear_context": "._aggregate",
        "effective_reason": "._aggregate",
        "is_ask": "._aggregate",
        "is_blocking": "._aggregate",
        "should_stop": "._aggregate",
        "tail_tool_call": "._aggregate",
        "tool_input_override": "._aggregate",
        "HookResult": "._run",
        "parse_hook_output": "._run",
        "run_command_hook": "._run",
    },
)

__all__ = [
    "DEFAULT_TIMEOUT_MS",
    "HOOK_EVENTS",
    "TOOL_EVENTS",
    "TRIGGER_EVENTS",
    "CommandHook",
    "HookConfig",
    "HookConfigError",
    "HookDefinition",
    "HookResult",
    "HookRunnerActor",
    "LLMShapeError",
    "Plan",
    "additional_context",
    "aggregate",
    "apply_llm_request",
    "apply_tool_config",
    "chain_input",
    "clear_context",
    "effective_reason",
    "from_llm_response",
    "is_ask",
    "is_blocking",
    "iso_timestamp",
    "load_hook_config",
    "modified_response",
    "parse_hook_output",
    "run_command_hook",
    "should_stop",
    "synthetic_response",
    "tail_tool_call",
    "to_llm_request",
    "to_llm_response",
    "tool_input_override",
]
