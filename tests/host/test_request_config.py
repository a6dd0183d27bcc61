"""The request config: frozen once per model and tool set, and shared by every session
of a process built from equal tools (a daemon's hundred sessions froze a hundred equal
configs, one at each session's first model request)."""

from __future__ import annotations

from actors.host.setup import request_config_for
from actors.tools import builtin_tools
from bus.json_values import freeze, thaw

MODEL = "gemini-2.5-flash"


def _tools() -> dict[str, object]:
    return {t.name: t for t in builtin_tools(MODEL)}


def test_sessions_with_equal_tools_share_one_frozen_config() -> None:
    first, second = _tools(), _tools()
    a = request_config_for(first)(MODEL)  # type: ignore[arg-type]
    b = request_config_for(second)(MODEL)  # type: ignore[arg-type]
    assert a is b
    assert a == freeze(thaw(a)) and thaw(a)["tools"][0]["functionDeclarations"]


def test_configs_that_differ_are_not_shared() -> None:
    tools = _tools()
    plain = request_config_for(tools)(MODEL)  # type: ignore[arg-type]
    plans = request_config_for(tools, plans_dir="/tmp/plans")(MODEL)  # type: ignore[arg-type]
    assert plans is not plain
    descriptions = {d["name"]: d["description"] for d in plans["tools"][0]["functionDeclarations"]}
    assert descriptions["write_file"].startswith("PLANS ONLY")
    # Equal as Python values is not equal as JSON: 1 and 1.0 are kept apart, each as given.
    whole = request_config_for(tools, temperature=1)(MODEL)  # type: ignore[arg-type]
    floating = request_config_for(tools, temperature=1.0)(MODEL)  # type: ignore[arg-type]
    assert whole is not floating
    assert type(whole["temperature"]) is int and type(floating["temperature"]) is float
