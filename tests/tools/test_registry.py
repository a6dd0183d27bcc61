"""The built-in registry: Gemini CLI's order, write_todos by model, and the headless
filters (policy exclusions, ``tools.core``) applied to the new tools."""

from __future__ import annotations

from pathlib import Path

import pytest

from actors.frontends.headless import prepare
from actors.host.args import HeadlessArgs
from actors.tools import REGISTRY_ORDER, builtin_tools

ROOT = Path(__file__).resolve().parents[2]
HELLO = ROOT / "scenarios" / "bench" / "hi.responses"

YOLO_ORDER = [
    "update_topic",
    "list_directory",
    "read_file",
    "grep_search",
    "glob",
    "replace",
    "write_file",
    "web_fetch",
    "run_shell_command",
    "list_background_processes",
    "read_background_output",
    "google_web_search",
    "enter_plan_mode",
    "invoke_agent",
    "activate_skill",
]
"""The order Gemini CLI 0.61 sent in yolo mode (corpus request dumps)."""


def implemented(names: list[str]) -> list[str]:
    have = {t.name for t in builtin_tools("gemini-3-flash-preview")}
    return [n for n in names if n in have]


def test_order_matches_gemini_for_the_tools_we_have() -> None:
    names = [t.name for t in builtin_tools("gemini-3-flash-preview")]
    assert names[: len(implemented(YOLO_ORDER))] == implemented(YOLO_ORDER)
    assert {"update_topic", "web_fetch", "google_web_search"} <= set(names)
    assert "write_todos" not in names
    assert (
        list(REGISTRY_ORDER).index("write_todos")
        == list(REGISTRY_ORDER).index("google_web_search") + 2
    )


def test_write_todos_follows_google_web_search_for_gemini_2() -> None:
    names = [t.name for t in builtin_tools("gemini-2.5-flash")]
    assert "write_todos" in names
    assert names.index("write_todos") > names.index("google_web_search")
    assert "write_todos" not in [
        t.name for t in builtin_tools("gemini-2.5-flash", tracker_enabled=True)
    ]


def test_stateful_tools_are_fresh_per_registry() -> None:
    first = {t.name: t for t in builtin_tools("")}
    second = {t.name: t for t in builtin_tools("")}
    assert first["web_fetch"] is not second["web_fetch"]
    assert first["update_topic"] is not second["update_topic"]


@pytest.fixture
def cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GEMINI_CLI_HOME", str(tmp_path))
    monkeypatch.setenv("GEMINI_API_KEY", "fake")
    return tmp_path


def prepared_tools(model: str, approval: str | None, settings: dict[str, object]) -> list[str]:
    args = HeadlessArgs(prompt="hi", model=model, approval_mode=approval, fake_responses=str(HELLO))
    return list(prepare(args, settings, stdin_text=None).tools)


def test_headless_default_mode_excludes_what_gemini_excludes(cwd: Path) -> None:
    names = prepared_tools("gemini-2.5-flash", None, {})
    assert names[0] == "update_topic"
    assert "google_web_search" in names
    assert "web_fetch" not in names  # write.toml denies it in non-interactive default mode
    assert "write_todos" not in names  # no rule: the non-interactive default (deny)


def test_headless_yolo_and_core_tools(cwd: Path) -> None:
    names = prepared_tools("gemini-2.5-flash", "yolo", {})
    assert {"web_fetch", "google_web_search", "write_todos", "update_topic"} <= set(names)
    assert names.index("write_todos") > names.index("google_web_search")
    assert prepared_tools("gemini-3-flash-preview", "yolo", {"tools": {"core": ["web_fetch"]}}) == [
        "web_fetch"
    ]


def test_core_entry_with_arguments_registers_the_tool(cwd: Path) -> None:
    """``run_shell_command(echo)`` registers the shell tool (Gemini's ``maybeRegister``
    accepts ``<name>(``); the policy then allows only ``echo`` commands."""
    settings: dict[str, object] = {"tools": {"core": ["run_shell_command(echo)", "read_file"]}}
    assert prepared_tools("gemini-3-flash-preview", "default", settings) == [
        "read_file",
        "run_shell_command",
    ]


def test_core_and_exclude_accept_gemini_class_names(cwd: Path) -> None:
    """A class name registers the tool, but outside plan mode the ``tools.core`` policy
    rules allow only what they name (``ShellTool`` is an alias of the shell tool), so
    ``LSTool`` and ``ReadFileTool(x)`` are registered and then excluded, as in Gemini."""
    core: dict[str, object] = {"tools": {"core": ["ShellTool", "ReadFileTool(x)", "LSTool"]}}
    assert prepared_tools("gemini-3-flash-preview", "yolo", core) == ["run_shell_command"]
    assert prepared_tools("gemini-3-flash-preview", "plan", core) == ["list_directory", "read_file"]
    excluded = prepared_tools("gemini-3-flash-preview", "yolo", {"tools": {"exclude": ["ShellTool"]}})
    assert "run_shell_command" not in excluded and "read_file" in excluded


def test_update_topic_is_registered_by_its_class_name_only(cwd: Path) -> None:
    """Gemini's ``UpdateTopicTool`` has no static ``Name``: ``update_topic`` in
    ``tools.core`` does not register it (seen in plan mode, where the core rules do not
    apply; elsewhere the class name is not allowed by them)."""
    by_name = {"tools": {"core": ["update_topic", "glob"]}}
    by_class = {"tools": {"core": ["UpdateTopicTool", "glob"]}}
    assert prepared_tools("gemini-3-flash-preview", "plan", by_name) == ["glob"]
    assert prepared_tools("gemini-3-flash-preview", "plan", by_class) == ["update_topic", "glob"]
    assert prepared_tools("gemini-3-flash-preview", "yolo", by_class) == ["glob"]


def test_exclude_with_arguments_excludes_nothing(cwd: Path) -> None:
    """An exclude entry is a plain name to Gemini: ``run_shell_command(rm)`` matches no tool."""
    names = prepared_tools(
        "gemini-3-flash-preview", "yolo", {"tools": {"exclude": ["run_shell_command(rm)"]}}
    )
    assert "run_shell_command" in names


def test_settings_switch_off_write_todos_and_update_topic(cwd: Path) -> None:
    """``useWriteTodos: false``, ``experimental.taskTracker`` (its tracker replaces the
    todo list) and ``general.topicUpdateNarration: false`` (or the deprecated
    ``experimental`` key) drop the tools, as Gemini's Config does."""
    on = prepared_tools("gemini-2.5-flash", "yolo", {})
    assert {"write_todos", "update_topic"} <= set(on)
    for settings in ({"useWriteTodos": False}, {"experimental": {"taskTracker": True}}):
        assert "write_todos" not in prepared_tools("gemini-2.5-flash", "yolo", settings)
    for settings in (
        {"general": {"topicUpdateNarration": False}},
        {"experimental": {"topicUpdateNarration": False}},
    ):
        assert "update_topic" not in prepared_tools("gemini-2.5-flash", "yolo", settings)
    kept = {"general": {"topicUpdateNarration": True}, "experimental": {"topicUpdateNarration": False}}
    assert "update_topic" in prepared_tools("gemini-2.5-flash", "yolo", kept)
