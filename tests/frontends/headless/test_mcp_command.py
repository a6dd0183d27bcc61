"""``agentbus mcp add|remove|list`` as a user runs it: a real process, HOME in a temporary
directory, settings.json read back."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from actors.frontends.mcp import with_top_level_value
from actors.host.settings import load_settings_file

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def work(tmp_path: Path) -> Path:
    (tmp_path / "home").mkdir()
    (tmp_path / "proj").mkdir()
    return tmp_path


def run(work: Path, *args: str, cwd: str = "proj") -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(work / "home"),
        "GEMINI_CLI_HOME": str(work / "home"),
        "PYTHONPATH": str(ROOT),
    }
    return subprocess.run(
        [sys.executable, "-m", "actors.frontends", "mcp", *args],
        cwd=work / cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def project_settings(work: Path) -> Any:
    return json.loads((work / "proj" / ".gemini" / "settings.json").read_text())


def user_settings(work: Path) -> Any:
    return json.loads((work / "home" / ".gemini" / "settings.json").read_text())


def test_add_list_remove(work: Path) -> None:
    r = run(work, "add", "-e", "FOO=bar", "my-server", "/path/to/server", "arg1", "arg2")
    assert (r.returncode, r.stdout, r.stderr) == (0, "", 'MCP server "my-server" added to project settings. (stdio)\n')
    assert project_settings(work) == {
        "mcpServers": {"my-server": {"command": "/path/to/server", "args": ["arg1", "arg2"], "env": {"FOO": "bar"}}}
    }
    r = run(
        work, "add", "--transport", "sse", "--scope", "user", "-H", "X-API-Key: your-key", "sse-server", "https://example.com/sse"
    )
    assert r.stderr == 'MCP server "sse-server" added to user settings. (sse)\n'
    assert user_settings(work) == {
        "mcpServers": {"sse-server": {"url": "https://example.com/sse", "type": "sse", "headers": {"X-API-Key": "your-key"}}}
    }
    r = run(work, "list")
    assert r.returncode == 0
    assert r.stderr.startswith("Configured MCP servers:\n\n")
    assert "sse-server: https://example.com/sse (sse)" in r.stderr
    assert "my-server: /path/to/server arg1 arg2 (stdio)" in r.stderr
    r = run(work, "remove", "my-server")
    assert (r.returncode, r.stderr) == (0, 'Server "my-server" removed from project settings.\n')
    assert project_settings(work) == {"mcpServers": {}}
    r = run(work, "remove", "my-server")
    assert (r.returncode, r.stderr) == (0, 'Server "my-server" not found in project settings.\n')


def test_unknown_options_and_everything_after_a_double_dash_are_server_arguments(work: Path) -> None:
    assert run(work, "add", "test-server", "npx", "-y", "http://example.com/pkg").returncode == 0
    assert run(work, "add", "other", "npx", "--", "-s", "--trust").returncode == 0
    assert run(work, "add", "third", "python", "-m", "srv", "--trust", "--timeout", "500").returncode == 0
    servers = project_settings(work)["mcpServers"]
    assert servers["test-server"] == {"command": "npx", "args": ["-y", "http://example.com/pkg"]}
    assert servers["other"] == {"command": "npx", "args": ["-s", "--trust"]}
    assert servers["third"] == {"command": "python", "args": ["-m", "srv"], "timeout": 500, "trust": True}


def test_add_again_updates_and_says_so(work: Path) -> None:
    run(work, "add", "s", "one")
    r = run(work, "add", "-t", "http", "--include-tools", "a,b", "--exclude-tools", "c", "s", "http://h/mcp")
    assert r.stderr == (
        'MCP server "s" is already configured within project settings.\nMCP server "s" updated in project settings.\n'
    )
    assert project_settings(work)["mcpServers"]["s"] == {
        "url": "http://h/mcp",
        "type": "http",
        "includeTools": ["a", "b"],
        "excludeTools": ["c"],
    }


def test_other_keys_comments_and_layout_stay(work: Path) -> None:
    path = work / "proj" / ".gemini" / "settings.json"
    path.parent.mkdir()
    original = '{\n  // my model\n  "model": {"name": "gemini-2.5-pro"},\n  "mcpServers": {"old": {"command": "x"}}, /* end */\n  "tools": {"core": ["ls"]}\n}\n'
    path.write_text(original)
    assert run(work, "add", "new", "y").returncode == 0
    text = path.read_text()
    assert text.startswith('{\n  // my model\n  "model": {"name": "gemini-2.5-pro"},\n  "mcpServers": {')
    assert text.endswith(', /* end */\n  "tools": {"core": ["ls"]}\n}\n')
    assert load_settings_file(path) == {
        "model": {"name": "gemini-2.5-pro"},
        "mcpServers": {"old": {"command": "x"}, "new": {"command": "y", "args": []}},
        "tools": {"core": ["ls"]},
    }


def test_a_bad_settings_file_is_one_error_and_nothing_is_written(work: Path) -> None:
    path = work / "proj" / ".gemini" / "settings.json"
    path.parent.mkdir()
    path.write_text('{"model": ')
    r = run(work, "add", "s", "x")
    assert r.returncode == 1
    assert r.stderr.count("\n") == 1 and str(path) in r.stderr and "nothing was written" in r.stderr
    assert path.read_text() == '{"model": '
    r = run(work, "list")
    assert r.returncode == 1 and str(path) in r.stderr
    path.write_text('{"mcpServers": ["x"]}')
    r = run(work, "remove", "s")
    assert r.returncode == 1 and "'mcpServers' is not an object" in r.stderr
    assert path.read_text() == '{"mcpServers": ["x"]}'


def test_project_scope_in_the_home_directory_is_refused(work: Path) -> None:
    r = run(work, "add", "s", "x", cwd="home")
    assert (r.returncode, r.stderr) == (1, "Error: Please use --scope user to edit settings in the home directory.\n")
    assert not (work / "home" / ".gemini" / "settings.json").exists()


def test_a_malformed_command_line_exits_2(work: Path) -> None:
    assert run(work, "add", "only-a-name").returncode == 2
    assert run(work, "add", "-t", "ws", "s", "x").returncode == 2
    assert run(work, "add", "--timeout", "soon", "s", "x").returncode == 2
    assert run(work).returncode == 2


def test_list_without_servers_and_blocked_servers(work: Path) -> None:
    assert run(work, "list").stderr == "No MCP servers configured.\n"
    (work / "proj" / ".gemini").mkdir()
    (work / "proj" / ".gemini" / "settings.json").write_text(
        json.dumps({"mcpServers": {"a": {"command": "x"}, "b": {"url": "http://127.0.0.1:9/"}}, "mcp": {"excluded": ["a"]}})
    )
    r = run(work, "list")
    assert "⛔ a: x  (stdio) - Blocked\n" in r.stderr


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (None, '{\n  "mcpServers": {\n    "s": 1\n  }\n}\n'),
        ("{}", '{\n  "mcpServers": {\n    "s": 1\n  }\n}'),
        ('{"a": 1}', '{"a": 1,\n  "mcpServers": {\n    "s": 1\n  }}'),
        ('{\n    "a": [1, {"b": 2}]\n}\n', '{\n    "a": [1, {"b": 2}],\n    "mcpServers": {\n      "s": 1\n    }\n}\n'),
        ('{"mcpServers": null, "x": "}"}', '{"mcpServers": {\n  "s": 1\n}, "x": "}"}'),
        ('{"a": "//", "mcpServers": {} // c\n}', '{"a": "//", "mcpServers": {\n  "s": 1\n} // c\n}'),
    ],
)
def test_editing_replaces_only_the_value(text: str | None, expected: str) -> None:
    assert with_top_level_value(text, "mcpServers", {"s": 1}) == expected


SERVER = str(ROOT / "tests" / "fakes" / "mcp_server.py")


def test_list_connects_to_each_server_and_counts_its_tools(work: Path) -> None:
    assert run(work, "add", "fake", sys.executable, SERVER, "--exclude-tools", "crash,wait").returncode == 0
    assert run(work, "add", "--timeout", "300", "hung", sys.executable, SERVER, "--hang").returncode == 0
    assert run(work, "add", "missing", str(work / "no-such-program")).returncode == 0
    r = run(work, "list")
    assert r.returncode == 0
    assert r.stderr == (
        "Configured MCP servers:\n\n"
        f"✓ fake: {sys.executable} {SERVER} (stdio) - Connected (5 tools)\n"
        f"✗ hung: {sys.executable} {SERVER} --hang (stdio) - Disconnected\n"
        f"✗ missing: {work / 'no-such-program'}  (stdio) - Disconnected\n"
    )



def echo_stats(work: Path, *flags: str) -> Any:
    """A headless run whose model calls ``mcp_a_echo`` once: that tool's stats."""
    script = work / "model.responses"
    call = {"functionCall": {"name": "mcp_a_echo", "args": {"text": "x"}}}
    responses = [[{"candidates": [{"content": {"role": "model", "parts": [p]}, "finishReason": "STOP"}]}] for p in (call, {"text": "ok"})]
    script.write_text("".join(json.dumps({"method": "generateContentStream", "response": r}) + "\n" for r in responses))
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(work / "home"),
        "GEMINI_CLI_HOME": str(work / "home"),
        "AGENTBUS_DATA_DIR": str(work / "data"),
        "PYTHONPATH": str(ROOT),
    }
    r = subprocess.run(
        [sys.executable, "-m", "actors.frontends", "-p", "go", "-m", "gemini-2.5-flash", "-o", "json",
         "--fake-responses", str(script), *flags],
        cwd=work / "proj", env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["stats"]["tools"]["byName"]["mcp_a_echo"]


def test_allowed_mcp_server_names_starts_only_those(work: Path) -> None:
    for name in ("a", "b"):
        assert run(work, "add", name, sys.executable, SERVER).returncode == 0
    assert echo_stats(work, "-y")["success"] == 1
    assert echo_stats(work, "-y", "--allowed-mcp-server-names", "b")["fail"] == 1


def test_the_flag_allows_its_servers_tools_as_mcp_allowed_does(work: Path) -> None:
    # Gemini CLI puts --allowed-mcp-server-names in place of mcp.allowed for the policy too:
    # headless, without -y, those servers' tools run instead of needing a confirmation.
    assert run(work, "add", "a", sys.executable, SERVER).returncode == 0
    assert echo_stats(work)["fail"] == 1
    assert echo_stats(work, "--allowed-mcp-server-names", "a")["success"] == 1


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=10,
)


@given(
    st.dictionaries(st.sampled_from(["mcpServers", "model", "a", "//", "/*"]) | st.text(max_size=4), JSON, max_size=4),
    st.dictionaries(st.text(max_size=4), JSON, max_size=3),
    st.sampled_from([None, 0, 2, "\t"]),
    st.booleans(),
)
def test_editing_any_settings_text_changes_only_the_key(
    data: dict[str, Any], servers: dict[str, Any], indent: Any, comment: bool
) -> None:
    text = json.dumps(data, indent=indent, ensure_ascii=False)
    if comment:
        text = "// settings\n" + text + " /* end */\n"
    edited = with_top_level_value(text, "mcpServers", servers)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "settings.json"
        path.write_text(edited, encoding="utf-8")
        assert load_settings_file(path) == {**data, "mcpServers": servers}
