"""The texts the scheduler shows when policy stops a call, or a tool is not found."""

from __future__ import annotations

from collections.abc import Sequence

from ._policy_rules import POLICY_DENIED_MESSAGE, PolicyVerdict


def policy_denial_message(verdict: PolicyVerdict) -> str:
    """The tool error for a deny verdict (error type ``policy_violation``)."""
    extra = f" {verdict.deny_message}" if verdict.deny_message else ""
    return f"{POLICY_DENIED_MESSAGE}{extra}"


def confirmation_unsupported_message(display_name: str) -> str:
    """The headless tool error for an ask_user verdict (type ``unhandled_exception``)."""
    return (
        f'Tool execution for "{display_name}" requires user confirmation, '
        "which is not supported in non-interactive mode."
    )


def levenshtein(a: str, b: str) -> int:
    if a == b:
        return 0
    if not a:
        return len(b)
    if not b:
        return len(a)
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(
                min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb))
            )
        previous = current
    return previous[-1]


def tool_suggestion(unknown: str, names: Sequence[str], top_n: int = 3) -> str:
    ranked = sorted(names, key=lambda n: levenshtein(unknown, n))[:top_n]
    if not ranked:
        return ""
    quoted = ", ".join(f'"{n}"' for n in ranked)
    if len(ranked) > 1:
        return f" Did you mean one of: {quoted}?"
    return f" Did you mean {quoted}?"


def tool_not_found_message(name: str, active_tool_names: Sequence[str]) -> str:
    """The ``tool_not_registered`` error, suggestions ranked as Gemini does.

    ``active_tool_names`` must be in registry order (ties keep that order).
    """
    return f'Tool "{name}" not found.{tool_suggestion(name, active_tool_names)}'
