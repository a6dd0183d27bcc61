"""MCP servers from settings, and their tools' names, as Gemini CLI 0.61.0 has them."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from actors.host import settings as _settings
from actors.host.mcp_config import (
    McpConfigError,
    McpServerConfig,
    acp_mcp_servers,
    configured_servers,
    expand_env_vars,
    mcp_server_prefix,
    mcp_servers,
    mcp_tool_name,
    redacted_environment,
    resolve_settings_vars,
    server_environment,
    server_headers,
    settings_scopes,
    split_server_names,
    valid_function_name,
)

# --- names -------------------------------------------------------------------------------

ANY_TEXT = st.text(st.characters(exclude_categories=()))  # surrogates and NUL included
GEMINI_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_\-.:]{0,62}$")


def _utf16_sanitised(name: str) -> str:
    """The oracle: Gemini's regex runs over UTF-16 code units."""
    data = name.encode("utf-16-le", "surrogatepass")
    units = [int.from_bytes(data[i : i + 2], "little") for i in range(0, len(data), 2)]
    ok = set(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.:")
    return "".join(chr(u) if u in ok else "_" for u in units)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        # Gemini CLI's own examples (mcp-tool.test.ts)
        ("myFunction", "mcp_myFunction"),
        ("invalid-name with spaces", "mcp_invalid-name_with_spaces"),
        ("x" * 80, "mcp_xxxxxxxxxxxxxxxxxxxxxxxxxx...xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"),
        ("!@#$%^&*()", "mcp___________"),
        ("My Tool", "mcp_My_Tool"),
        ("namespace:tool", "mcp_namespace:tool"),
        ("alsoValid-123.name", "mcp_alsoValid-123.name"),
        # already prefixed: no second prefix
        ("mcp_tool", "mcp_tool"),
        # one unit each for a BMP character and a lone surrogate, two for an astral one
        ("é\ud800😀", "mcp_____"),
        ("a\x00b", "mcp_a_b"),
    ],
)
def test_valid_function_name_examples(name: str, expected: str) -> None:
    assert valid_function_name(name) == expected


@pytest.mark.parametrize(("length", "expected"), [(59, 63), (60, 63), (76, 63), (58, 62)])
def test_names_over_63_units_are_cut_in_the_middle(length: int, expected: int) -> None:
    assert len(valid_function_name("a" * length)) == expected


def test_tool_names_join_server_and_tool_with_an_underscore() -> None:
    assert mcp_tool_name("github", "list_repos") == "mcp_github_list_repos"
    assert mcp_tool_name("my server", "do it!") == "mcp_my_server_do_it_"
    # Gemini's quirk: a server called "mcp" (mcp.serverCommand's) gets no second prefix
    assert mcp_tool_name("mcp", "echo") == "mcp_echo"
    assert mcp_server_prefix("git hub") == "mcp_git_hub_"
    assert McpServerConfig(name="s", command="x").tool_name("t") == "mcp_s_t"


@given(ANY_TEXT, ANY_TEXT)
def test_tool_names_are_always_valid_gemini_function_names(server: str, tool: str) -> None:
    name = mcp_tool_name(server, tool)
    assert GEMINI_NAME.match(name)
    assert name.startswith("mcp_")
    assert valid_function_name(name) == name


@given(ANY_TEXT)
def test_sanitising_replaces_each_utf16_unit(text: str) -> None:
    full = text if text.startswith("mcp_") else "mcp_" + text
    expected = _utf16_sanitised(full)
    got = valid_function_name(text)
    if len(expected) <= 63:
        assert got == expected
    else:
        assert got == expected[:30] + "..." + expected[-30:]


# --- $VAR expansion ----------------------------------------------------------------------

ENV = {"HOME": "/home/u", "EMPTY": "", "TOKEN": "t0k", "A": "$B", "B": "bee"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("$HOME/x", "/home/u/x"),
        ("${HOME}/x", "/home/u/x"),
        ("${MISSING:-dflt}", "dflt"),
        ("$MISSING and ${MISSING}", "$MISSING and ${MISSING}"),
        ("${EMPTY:-dflt}", ""),  # set, although empty
        ("$HOME-$TOKEN", "/home/u-t0k"),
        ("$ alone", "$ alone"),
        ("${}", "${}"),
    ],
)
def test_settings_strings_expand_as_gemini_reads_a_settings_file(text: str, expected: str) -> None:
    assert resolve_settings_vars(text, ENV) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("$HOME/x", "/home/u/x"),
        ("${HOME}", "/home/u"),
        ("$MISSING", ""),
        ("${MISSING:-dflt}", "dflt"),
        ("${MISSING-dflt}", "dflt"),
        ("${EMPTY:-dflt}", "dflt"),  # dotenv-expand: empty is unset
        ("${HOME:+alt}", "alt"),
        ("${MISSING:+alt}", ""),
        ("\\$HOME", "$HOME"),
        ("$A", "bee"),  # expanded again until no variable is left
        ("${X:-a-b}", "a-b"),
        ("$nullable", "able"),  # JavaScript's split(null) splits on "null"
    ],
)
def test_env_values_expand_as_dotenv_expand_does(text: str, expected: str) -> None:
    assert expand_env_vars(text, ENV) == expected


def test_expansion_replacement_reads_dollar_patterns_as_javascript() -> None:
    assert expand_env_vars("x$V", {"V": "a$$1"}) == "xa$1"


def test_a_variable_that_refers_to_itself_ends() -> None:
    assert expand_env_vars("$A", {"A": "x$A"}) == "x"
    assert expand_env_vars("$A", {"A": "$B", "B": "$A"}) == ""


@given(ANY_TEXT, st.dictionaries(st.from_regex(r"[A-Z_][A-Z0-9_]{0,5}", fullmatch=True), st.text(max_size=8)))
def test_expansion_always_ends_on_arbitrary_text(text: str, env: dict[str, str]) -> None:
    assert isinstance(expand_env_vars(text, env), str)
    assert isinstance(resolve_settings_vars(text, env), str)


# --- the environment of a stdio server ----------------------------------------------------


def test_a_stdio_server_gets_the_redacted_environment_and_its_own_expanded() -> None:
    environ = {
        "PATH": "/bin",
        "HOME": "/h",
        "GITHUB_TOKEN": "ghp_x",
        "MY_API_KEY": "k",
        "DATABASE_URL": "postgres://",
        "PLAIN": "ok",
        "LEAK": "https://user:pw@example.com",
        "GEMINI_CLI_X": "kept",
        "GIT_CONFIG_COUNT": "1",
    }
    config = McpServerConfig(name="s", command="srv", env={"TOKEN_FOR_SERVER": "$GITHUB_TOKEN", "N": "${MISSING}"})
    env = server_environment(config, environ)
    assert env == {
        "GEMINI_CLI": "1",
        "PATH": "/bin",
        "HOME": "/h",
        "PLAIN": "ok",
        "GEMINI_CLI_X": "kept",
        "GIT_CONFIG_COUNT": "1",
        "TOKEN_FOR_SERVER": "ghp_x",  # expanded against the whole environment
        "N": "",
    }
    assert "MY_API_KEY" in server_environment(config, environ, allowed=["my_api_key"])
    assert "PLAIN" not in server_environment(config, environ, blocked=["plain"])


def test_on_github_actions_only_the_always_allowed_variables_are_kept() -> None:
    assert redacted_environment({"GITHUB_SHA": "abc", "PATH": "/bin", "PLAIN": "x"}) == {"PATH": "/bin"}


def test_headers_expand_against_the_redacted_environment() -> None:
    config = McpServerConfig(name="s", url="http://h/mcp", headers={"A": "Bearer $SECRET_TOKEN", "B": "$PLAIN"})
    assert server_headers(config, {"SECRET_TOKEN": "s3", "PLAIN": "p"}) == {"A": "Bearer ", "B": "p"}


# --- reading servers ----------------------------------------------------------------------


def test_every_key_gemini_reads() -> None:
    settings = {
        "mcpServers": {
            "full": {
                "command": "python",
                "args": ["-m", "srv"],
                "env": {"K": "v"},
                "cwd": "/tmp",
                "timeout": 1500,
                "trust": True,
                "description": "d",
                "includeTools": ["a", "b(x)"],
                "excludeTools": ["c"],
            },
            "sse": {"url": "http://127.0.0.1:1/sse", "type": "sse", "headers": {"X": "1"}},
            "http": {"httpUrl": "https://example.com/mcp", "oauth": {"enabled": True}},
            "plain": {"url": "http://127.0.0.1:2/mcp"},
        }
    }
    servers, problems = mcp_servers(settings, environ={})
    assert problems == []
    full = servers["full"]
    assert (full.command, full.args, dict(full.env), full.cwd) == ("python", ("-m", "srv"), {"K": "v"}, "/tmp")
    assert (full.timeout_ms, full.request_timeout_ms, full.trust, full.description) == (1500, 1500, True, "d")
    assert full.transport == "stdio" and full.endpoint is None
    assert (full.include_tools, full.exclude_tools) == (("a", "b(x)"), ("c",))
    assert (servers["sse"].transport, servers["sse"].endpoint, servers["sse"].sse_fallback) == (
        "sse",
        "http://127.0.0.1:1/sse",
        False,
    )
    assert dict(servers["sse"].headers) == {"X": "1"}
    assert (servers["http"].transport, servers["http"].oauth) == ("http", {"enabled": True})
    assert (servers["plain"].transport, servers["plain"].sse_fallback) == ("http", True)
    assert servers["plain"].request_timeout_ms == 600_000
    assert list(servers) == ["full", "sse", "http", "plain"]


def test_a_url_wins_over_a_command_and_http_url_over_url() -> None:
    servers, problems = mcp_servers(
        {"mcpServers": {"s": {"command": "x", "url": "http://a/", "httpUrl": "http://b/"}}}, environ={}
    )
    assert servers["s"].transport == "http" and servers["s"].endpoint == "http://b/"
    assert problems == ["MCP server 's': both 'httpUrl' and 'url' are set; 'httpUrl' is used"]


@pytest.mark.parametrize(
    ("raw", "line"),
    [
        ("python srv.py", "MCP server 'bad': its configuration must be an object, not a string"),
        ({}, "MCP server 'bad': no 'command' (stdio), 'url' (SSE or HTTP) or 'httpUrl' (HTTP)"),
        ({"command": 3}, "MCP server 'bad': 'command' must be a string, not a number"),
        ({"command": "x", "args": "-v"}, "MCP server 'bad': 'args' must be an array of strings, not a string"),
        ({"command": "x", "args": ["-p", 8080]}, "MCP server 'bad': 'args[1]' must be a string, not a number"),
        ({"command": "x", "env": {"PORT": 8080}}, "MCP server 'bad': 'env.PORT' must be a string, not a number"),
        ({"command": "x", "timeout": "30s"}, "MCP server 'bad': 'timeout' must be a number of milliseconds, not a string"),
        ({"command": "x", "timeout": -1}, "MCP server 'bad': 'timeout' must be a positive number of milliseconds, not -1"),
        ({"command": "x", "trust": "yes"}, "MCP server 'bad': 'trust' must be true or false, not a string"),
        ({"url": "http://h/", "type": "ws"}, "MCP server 'bad': 'type' must be \"stdio\", \"sse\" or \"http\", not 'ws'"),
        ({"url": "localhost:3000"}, "MCP server 'bad': 'url' is not an http(s) URL: 'localhost:3000'"),
        ({"url": "http://h/", "headers": ["X: 1"]}, "MCP server 'bad': 'headers' must be an object of strings, not an array"),
    ],
)
def test_a_bad_server_is_one_line_naming_it_and_the_key_and_the_others_are_kept(raw: Any, line: str) -> None:
    settings = {"mcpServers": {"good": {"command": "srv"}, "bad": raw, "also": {"url": "http://h/"}}}
    servers, problems = mcp_servers(settings, environ={})
    assert problems == [line]
    assert list(servers) == ["good", "also"]


def test_an_unknown_key_is_reported_and_the_server_kept() -> None:
    servers, problems = mcp_servers({"mcpServers": {"s": {"command": "x", "comand": "y"}}}, environ={})
    assert list(servers) == ["s"]
    assert problems == ["MCP server 's': unknown key 'comand' ignored"]


def test_mcp_servers_that_is_not_an_object_is_one_line() -> None:
    assert mcp_servers({"mcpServers": ["x"]}, environ={}) == ({}, [
        "Setting 'mcpServers' must be an object of servers, not an array; ignored"
    ])


def test_settings_strings_of_a_server_are_expanded() -> None:
    settings = {"mcpServers": {"s": {"command": "$HOME/bin/srv", "args": ["${MISSING:-a}"], "env": {"T": "$MISSING"}}}}
    (config,) = mcp_servers(settings, environ={"HOME": "/h"})[0].values()
    assert (config.command, config.args, dict(config.env)) == ("/h/bin/srv", ("a",), {"T": "$MISSING"})


# --- which servers run --------------------------------------------------------------------

THREE = {"mcpServers": {"a": {"command": "x"}, "b": {"command": "x"}, "c": {"command": "x"}}}


def _names(settings: dict[str, Any], **kw: Any) -> list[str]:
    servers, _ = mcp_servers(settings, environ={}, **kw)
    return list(servers)


def test_mcp_allowed_and_excluded() -> None:
    assert _names({**THREE, "mcp": {"allowed": ["a", "c"]}}) == ["a", "c"]
    assert _names({**THREE, "mcp": {"allowed": []}}) == ["a", "b", "c"]  # empty: no list
    assert _names({**THREE, "mcp": {"excluded": ["b"]}}) == ["a", "c"]
    assert _names({**THREE, "mcp": {"allowed": ["A"]}}) == []  # exact names


def test_the_flag_replaces_the_allow_list_and_switches_exclusion_off() -> None:
    settings = {**THREE, "mcp": {"allowed": ["a"], "excluded": ["b"]}}
    assert _names(settings, allowed_names=["b", "c"]) == ["b", "c"]
    assert _names(settings, allowed_names=split_server_names([""])) == []


def test_the_flag_values_split_on_commas() -> None:
    assert split_server_names(["a, b", "c", ",,"]) == ["a", "b", "c"]
    assert split_server_names([""]) == [""]


def test_scopes_intersect_allow_lists_and_join_exclude_lists() -> None:
    scopes = [{"mcp": {"allowed": ["a", "B", "c"], "excluded": ["c"]}}, {"mcp": {"allowed": ["b ", "a"]}}]
    assert _names(THREE, scopes=scopes) == ["a"]  # ["a", "B"]: "B" matches no server exactly
    assert _names(THREE, scopes=[{}, {"mcp": {"excluded": ["a"]}}, {"mcp": {"excluded": ["b"]}}]) == ["c"]


def test_mcp_server_command_adds_a_server_named_mcp() -> None:
    settings = {"mcpServers": {"mcp": {"url": "http://h/"}}, "mcp": {"serverCommand": "node 'my srv.js' --port $PORT"}}
    servers, problems = mcp_servers(settings, environ={"PORT": "9"})
    assert problems == []
    assert (servers["mcp"].command, servers["mcp"].args, servers["mcp"].transport) == ("node", ("my srv.js", "--port", "9"), "stdio")


@pytest.mark.parametrize("command", ["srv | tee log", "srv *.js", "srv ${}"])
def test_a_server_command_that_is_not_plain_words_is_one_line(command: str) -> None:
    servers, problems = mcp_servers({**THREE, "mcp": {"serverCommand": command}}, environ={})
    assert list(servers) == ["a", "b", "c"]
    assert len(problems) == 1 and problems[0].startswith("Setting 'mcp.serverCommand': ")


def test_extra_servers_replace_configured_ones_and_are_filtered_too() -> None:
    extra = [McpServerConfig(name="b", url="http://acp/"), McpServerConfig(name="z", command="y")]
    servers, _ = mcp_servers({**THREE, "mcp": {"excluded": ["z"]}}, environ={}, extra=extra)
    assert list(servers) == ["a", "b", "c"]
    assert servers["b"].url == "http://acp/"


# --- settings files -----------------------------------------------------------------------


def test_the_workspace_replaces_a_user_server_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    (home / ".gemini").mkdir(parents=True)
    (work / ".gemini").mkdir(parents=True)
    monkeypatch.setenv("GEMINI_CLI_HOME", str(home))
    user = {
        "mcpServers": {"s": {"command": "user-srv", "trust": True}, "u": {"command": "x"}},
        "mcp": {"allowed": ["s", "u", "w"]},
    }
    (home / ".gemini" / "settings.json").write_text(json.dumps(user))
    workspace = {"mcpServers": {"s": {"url": "http://w/"}, "w": {"command": "y"}}, "mcp": {"allowed": ["s", "w"]}}
    (work / ".gemini" / "settings.json").write_text(json.dumps(workspace))
    merged = _settings.load_settings(work)
    servers, problems = mcp_servers(merged, scopes=settings_scopes(work), environ={})
    assert problems == []
    assert list(servers) == ["s", "w"]
    assert (servers["s"].command, servers["s"].url, servers["s"].trust) == (None, "http://w/", False)


def test_configured_servers_keeps_servers_the_filter_drops() -> None:
    servers, _ = configured_servers({**THREE, "mcp": {"allowed": ["a"]}}, environ={})
    assert list(servers) == ["a", "b", "c"]


# --- ACP's mcpServers -----------------------------------------------------------------------


def test_acp_servers_become_configs_as_gemini_makes_them() -> None:
    servers = acp_mcp_servers(
        [
            {"name": "h", "type": "http", "url": "http://127.0.0.1:1/mcp", "headers": [{"name": "A", "value": "b"}]},
            {"name": "s", "type": "sse", "url": "http://127.0.0.1:1/sse", "headers": []},
            {"name": "p", "command": "/bin/srv", "args": ["-v"], "env": [{"name": "K", "value": "$HOME"}]},
        ],
        "/work",
    )
    h, s, p = servers
    assert (h.transport, h.endpoint, dict(h.headers)) == ("http", "http://127.0.0.1:1/mcp", {"A": "b"})
    assert (s.transport, s.endpoint, s.sse_fallback) == ("sse", "http://127.0.0.1:1/sse", False)
    assert (p.transport, p.command, p.args, dict(p.env), p.cwd) == ("stdio", "/bin/srv", ("-v",), {"K": "$HOME"}, "/work")
    assert not p.trust and p.timeout_ms is None


@pytest.mark.parametrize(
    ("servers", "message"),
    [
        ({}, "mcpServers must be an array"),
        (["x"], "mcpServers[0] must be an object, not a string"),
        ([{"command": "x"}], "mcpServers[0].name must be a string, not null"),
        ([{"name": "a", "command": "x", "env": [{"name": "K"}]}], "mcpServers[0].env[0].value must be a string, not null"),
        ([{"name": "a", "type": "http", "url": "ftp://x"}], "MCP server 'a': 'url' is not an http(s) URL: 'ftp://x'"),
        ([{"name": "a", "type": "acp", "id": "x"}], "mcpServers[0].type 'acp' is not supported (http, sse or a stdio server)"),
        ([{"name": "a", "command": "x", "args": [1]}], "mcpServers[0].args must be an array of strings"),
    ],
)
def test_a_malformed_acp_server_is_named_with_its_field(servers: Any, message: str) -> None:
    with pytest.raises(McpConfigError) as info:
        acp_mcp_servers(servers, "/work")
    assert str(info.value) == message


def test_a_value_that_repeats_its_own_reference_ends() -> None:
    # Gemini CLI's dotenv-expand loops for ever on these (JavaScript reads "$&" and "$'"
    # in the value as the match and the text after it); here expansion stops.
    assert expand_env_vars("$A", {"A": "$&"}) == "$A"
    assert len(expand_env_vars("$A-tail", {"A": "$'$&"})) < 200_000
