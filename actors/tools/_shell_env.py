"""The environment a shell command runs in, and the shell tool's settings.

Gemini CLI's ``prepareExecution``: the process environment, redacted when
``security.environmentVariableRedaction`` says so (or on GitHub), plus fixed variables
that keep git, pagers and editors from waiting for a terminal; and
``tools.shell.inactivityTimeout``. Pure functions of the source environment and the
merged settings.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from actors.common import env_redacted, js_parse_int

from ._base import setting

DEFAULT_INACTIVITY_TIMEOUT_S = 300
"""``tools.shell.inactivityTimeout`` default (seconds without output)."""


_GIT_OVERRIDES = (
    ("credential.helper", ""),
    ("core.fsmonitor", ""),
    ("core.hooksPath", ""),
    ("core.sshCommand", ""),
    ("core.pager", "cat"),
    ("core.editor", ""),
    ("sequence.editor", ""),
    ("diff.external", ""),
)


def build_shell_env(
    source: Mapping[str, str], settings: Mapping[str, Any] | None = None
) -> dict[str, str]:
    """The environment Gemini gives the shell (``prepareExecution``).

    ``source`` is sanitised when ``security.environmentVariableRedaction.enabled`` is set
    or on GitHub (``GITHUB_SHA`` / ``SURFACE=Github``), then Gemini's fixed variables are
    added: ``GEMINI_CLI=1``, ``TERM=xterm-256color``, ``PAGER``/``GIT_PAGER=cat``, git
    configured not to prompt, page, or run hooks and editors, no display or D-Bus.
    """
    settings = settings or {}
    redaction = setting(settings, "security", "environmentVariableRedaction")
    redaction = redaction if isinstance(redaction, Mapping) else {}
    git_config_keys = [k for k in source if k.startswith("GIT_CONFIG_")]
    allowed = {str(k).upper() for k in redaction.get("allowed") or ()}
    allowed.update(k.upper() for k in git_config_keys)
    blocked = {str(k).upper() for k in redaction.get("blocked") or ()}
    strict = bool(source.get("GITHUB_SHA")) or source.get("SURFACE") == "Github"
    if redaction.get("enabled") is True or strict:
        env = {k: v for k, v in source.items() if not env_redacted(k, v, allowed, blocked, strict)}
    else:
        env = dict(source)
    env.update(GEMINI_CLI="1", TERM="xterm-256color", PAGER="cat", GIT_PAGER="cat")
    for key in git_config_keys:
        env[key] = source[key]
    count = js_parse_int(env.get("GIT_CONFIG_COUNT") or "0")
    env.update(GIT_CONFIG_GLOBAL="/dev/null", GIT_CONFIG_SYSTEM="/dev/null")
    env["GIT_CONFIG_NOSYSTEM"] = "1"
    for key, value in _GIT_OVERRIDES:
        index = "NaN" if count is None else str(count)
        env[f"GIT_CONFIG_KEY_{index}"] = key
        env[f"GIT_CONFIG_VALUE_{index}"] = value
        count = None if count is None else count + 1
    env["GIT_CONFIG_COUNT"] = "NaN" if count is None else str(count)
    env.update(
        GIT_TERMINAL_PROMPT="0",
        GIT_ASKPASS="",
        SSH_ASKPASS="",
        GH_PROMPT_DISABLED="1",
        GCM_INTERACTIVE="never",
        DISPLAY="",
        DBUS_SESSION_BUS_ADDRESS="",
    )
    return env


def inactivity_timeout(settings: Mapping[str, Any]) -> float:
    """``tools.shell.inactivityTimeout`` in seconds (default 300; <= 0 disables)."""
    value = setting(settings, "tools", "shell", "inactivityTimeout")
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        return float(DEFAULT_INACTIVITY_TIMEOUT_S)
    return float(value)
