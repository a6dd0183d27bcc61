"""The built-in registry: Gemini CLI's order, write_todos by model, and the headless
filters (policy exclusions, ``tools.core``) applied to the new tools."""

from __future__ import annotations

from pathlib import Path

import pytest

from actors.cli._args import HeadlessArgs
from actors.cli._headless import prepare
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
