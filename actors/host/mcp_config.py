"""The MCP servers of a session, read from settings as Gemini CLI 0.61.0 reads them, and
the names their tools are registered under.

Facts carried over from Gemini CLI (``packages/core/src/tools/mcp-client.ts``,
``mcp-client-manager.ts``, ``mcp-tool.ts``, ``packages/cli/src/config/``):

* ``mcpServers`` of the user's and the workspace's settings merge *per server*: a server
  the workspace names replaces the user's entry of that name whole (the setting's
  ``SHALLOW_MERGE``; ``settings.deep_merge`` does it).
* Every string of a settings file is expanded when the file is read: ``$VAR``,
  ``${VAR}``, ``${VAR:-default}`` from the environment; an unset variable without a
  default stays as written (``resolve_settings_vars``). A stdio server's ``env`` values
  are expanded once more when it starts, with ``dotenv-expand`` against the whole
  environment (an unset variable becomes empty), and an HTTP server's ``headers``
  against the redacted environment (``expand_env_vars``, ``server_environment``,
  ``server_headers``).
* ``mcp.serverCommand`` adds a stdio server named ``mcp`` (its words read by
  shell-quote, ``$VAR`` from the environment), replacing a configured one of that name.
* ``mcp.allowed`` (the intersection of every scope's list, compared without case) keeps
  only the servers it names exactly; ``mcp.excluded`` (every scope's lists together)
  drops the ones it names; an empty allow list allows all. ``--allowed-mcp-server-names``
  replaces the allow list and switches the exclude list off.
* The transport: ``httpUrl`` is streamable HTTP; ``url`` with ``type`` ``sse`` is SSE,
  with ``type`` ``http`` (or none) streamable HTTP — without a type, a failed HTTP
  connection is retried as SSE; otherwise ``command`` is stdio. A URL wins over a command.
* A tool is registered as ``mcp_<server>_<tool>``, sanitised to the Gemini API's
  function-name alphabet and cut to 63 characters (``mcp_tool_name``).

Bad configuration is one line naming the server and the key; that server is left out,
the others are kept (Gemini CLI logs a schema warning and fails the server later, or
skips it silently).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final, Literal
from urllib.parse import urlsplit

import attrs
from frozendict import frozendict

from actors.common import ShellQuoteError, env_redacted, shell_quote_parse
from actors.host import settings as _settings
from actors.host.flags import split_server_names as split_server_names  # re-exported

McpTransport = Literal["stdio", "sse", "http"]

MCP_DEFAULT_TIMEOUT_MS: Final = 10 * 60 * 1000
"""A request's timeout when the server names none (Gemini CLI's ``MCP_DEFAULT_TIMEOUT_MSEC``)."""

MCP_LIST_DEFAULT_TIMEOUT_MS: Final = 5000
"""``gemini mcp list``'s connection check when the server names no timeout."""

MCP_TOOL_PREFIX: Final = "mcp_"
MAX_FUNCTION_NAME_LENGTH: Final = 64

SERVER_COMMAND_NAME: Final = "mcp"
"""The server ``mcp.serverCommand`` adds."""

AUTH_PROVIDER_TYPES: Final = ("dynamic_discovery", "google_credentials", "service_account_impersonation")


def _freeze_str_map(value: Mapping[str, str]) -> frozendict[str, str]:
    return frozendict(value)


@attrs.frozen(kw_only=True)
class McpServerConfig:
    """One MCP server as Gemini CLI reads it (``MCPServerConfig``)."""

    name: str
    """The key under ``mcpServers`` (or ``mcp`` for ``mcp.serverCommand``, or the ACP name)."""
    command: str | None = None
    """stdio: the program (run without a shell)."""
    args: tuple[str, ...] = ()
    env: frozendict[str, str] = attrs.field(factory=frozendict, converter=_freeze_str_map)
    """stdio: variables set for the server, not yet expanded with ``dotenv-expand``
    (``server_environment`` does it)."""
    cwd: str | None = None
    url: str | None = None
    """SSE (``type: "sse"``) or streamable HTTP (``type: "http"`` or no type)."""
    http_url: str | None = None
    """``httpUrl``: streamable HTTP (Gemini's older key; wins over ``url``)."""
    headers: frozendict[str, str] = attrs.field(factory=frozendict, converter=_freeze_str_map)
    """HTTP and SSE: extra request headers (``server_headers`` expands them)."""
    type: McpTransport | None = None
    """The transport asked for with ``url``."""
    tcp: str | None = None
    """Read, as Gemini CLI reads it, but no transport uses it (Gemini 0.61.0 neither)."""
    timeout_ms: float | None = None
    """Each request's timeout; ``None``: ``MCP_DEFAULT_TIMEOUT_MS``."""
    trust: bool = False
    """Its tools run without asking (in a trusted folder)."""
    description: str | None = None
    include_tools: tuple[str, ...] | None = None
    """``None``: every tool; else only these (``name`` or ``name(...)``; the connection
    applies both lists: ``actors.mcp.is_enabled``)."""
    exclude_tools: tuple[str, ...] = ()
    """Never these, whatever ``include_tools`` says."""
    oauth: frozendict[str, Any] | None = None
    """The ``oauth`` object as written (OAuth itself is not implemented)."""
    auth_provider_type: str | None = None
    target_audience: str | None = None
    target_service_account: str | None = None

    @property
    def transport(self) -> McpTransport:
        """Gemini's order: ``httpUrl``, then ``url`` (by ``type``; HTTP without one), then
        ``command``."""
        if self.http_url:
            return "http"
        if self.url:
            return "sse" if self.type == "sse" else "http"
        return "stdio"

    @property
    def endpoint(self) -> str | None:
        """The URL connected to (``httpUrl`` before ``url``), or ``None`` for stdio."""
        return self.http_url or self.url or None

    @property
    def sse_fallback(self) -> bool:
        """A ``url`` without ``type``: when HTTP fails (not on a 401), SSE is tried."""
        return bool(self.url) and self.type is None and not self.http_url

    @property
    def request_timeout_ms(self) -> float:
        return MCP_DEFAULT_TIMEOUT_MS if self.timeout_ms is None else self.timeout_ms

    def tool_name(self, tool: str) -> str:
        return mcp_tool_name(self.name, tool)


class McpConfigError(ValueError):
    """One server's configuration is unusable; ``str()`` is the one line to show."""


# --- names ------------------------------------------------------------------------------

_NAME_CHAR = re.compile(r"[a-zA-Z0-9_\-.:]", re.ASCII)


def valid_function_name(name: str) -> str:
    """Gemini's ``generateValidName``: ``mcp_`` in front unless already there, every UTF-16
    unit outside ``[a-zA-Z0-9_.:-]`` an ``_`` (a character beyond the BMP is two), and a
    name over 63 units becomes its first 30, ``...``, its last 30."""
    text = name if name.startswith(MCP_TOOL_PREFIX) else MCP_TOOL_PREFIX + name
    text = "".join(
        c if _NAME_CHAR.fullmatch(c) else ("__" if ord(c) > 0xFFFF else "_") for c in text
    )
    if not re.match(r"[a-zA-Z_]", text):
        text = "_" + text
    if len(text) > MAX_FUNCTION_NAME_LENGTH - 1:  # ASCII now: one unit a character
        text = text[:30] + "..." + text[-30:]
    return text


def mcp_tool_name(server: str, tool: str) -> str:
    """The name a server's tool is registered and declared to the model under:
    ``valid_function_name(f"{server}_{tool}")`` (a server named ``mcp`` gets no second
    prefix, as in Gemini)."""
    return valid_function_name(f"{server}_{tool}")


def mcp_server_prefix(server: str) -> str:
    """The prefix of a server's tool names (Gemini's ``getFullyQualifiedPrefix``)."""
    return valid_function_name(f"{server}_")


# --- $VAR expansion ---------------------------------------------------------------------

_SETTINGS_VAR = re.compile(r"\$(?:(\w+)|\{([^}]+?)(?::-([^}]*))?\})", re.ASCII)


def resolve_settings_vars(value: str, environ: Mapping[str, str] | None = None) -> str:
    """Gemini's ``resolveEnvVarsInString``, applied to every string of a settings file:
    ``$VAR``, ``${VAR}``, ``${VAR:-default}``; unset without a default: left as written."""
    env = os.environ if environ is None else environ

    def one(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2) or ""
        if not name:
            return m.group(0)
        if name in env:
            return env[name]
        if m.group(3) is not None:
            return m.group(3)
        return m.group(0)

    return _SETTINGS_VAR.sub(one, value)


def resolve_settings_tree(value: Any, environ: Mapping[str, str] | None = None) -> Any:
    """``resolve_settings_vars`` on every string of a JSON value (Gemini's
    ``resolveEnvVarsInObject``: values, not keys)."""
    if isinstance(value, str):
        return resolve_settings_vars(value, environ)
    if isinstance(value, Mapping):
        return {k: resolve_settings_tree(v, environ) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [resolve_settings_tree(v, environ) for v in value]
    return value


_DOTENV_VAR = re.compile(r"(?<!\\)\$\{([^{}]+)\}|(?<!\\)\$([A-Za-z_][A-Za-z0-9_]*)")
_DOTENV_OP = re.compile(r":\+|\+|:-|-")
_MAX_EXPANSIONS = 10_000
"""dotenv-expand loops until no ``$`` is left; a value that refers to itself through
others could loop for ever there — here it stops."""


def _js_replace_first(text: str, pattern: str, replacement: str) -> str:
    """``text.replace(pattern, replacement)`` with a string pattern: the first occurrence,
    and the replacement's ``$$``, ``$&``, ``$``` and ``$'`` read as JavaScript does."""
    at = text.find(pattern)
    if at < 0:
        return text
    before, after = text[:at], text[at + len(pattern) :]
    out: list[str] = []
    i = 0
    while i < len(replacement):
        c = replacement[i]
        nxt = replacement[i + 1] if i + 1 < len(replacement) else ""
        if c == "$" and nxt in ("$", "&", "`", "'"):
            out.append({"$": "$", "&": pattern, "`": before, "'": after}[nxt])
            i += 2
            continue
        out.append(c)
        i += 1
    return before + "".join(out) + after


def _js_split(text: str, sep: str | None) -> list[str]:
    # ``String.prototype.split(null)`` splits on the text "null".
    return text.split("null" if sep is None else sep)


def expand_env_vars(text: str, environ: Mapping[str, str]) -> str:
    """Gemini's ``expandEnvVars`` (``dotenv-expand`` 12.0.3 on one value): ``$VAR``,
    ``${VAR}``, ``${VAR:-default}``, ``${VAR-default}``, ``${VAR:+alt}``, ``${VAR+alt}``;
    an unset or empty variable becomes the default or ``""``; ``\\$`` is a ``$``."""
    if not text:
        return text
    result = text
    seen: set[str] = set()
    for _ in range(_MAX_EXPANSIONS):
        m = _DOTENV_VAR.search(result)
        if m is None:
            break
        seen.add(result)
        template = m.group(0)
        expression = m.group(1) or m.group(2)
        op = _DOTENV_OP.search(expression)
        splitter = op.group(0) if op else None
        parts = _js_split(expression, splitter)
        key = parts.pop(0)
        joiner = "null" if splitter is None else splitter
        value: str | None
        if splitter in (":+", "+"):
            default = joiner.join(parts) if environ.get(key) else ""
            value = None
        else:
            default = joiner.join(parts)
            value = environ.get(key)
        if value:
            result = _js_replace_first(result, template, default if value in seen else value)
        else:
            result = _js_replace_first(result, template, default)
    return result.replace("\\$", "$")


# --- the environment a stdio server gets ---------------------------------------------------

IDENTIFICATION_VARIABLE: Final = ("GEMINI_CLI", "1")
"""Set for every stdio server, as Gemini CLI sets it (servers may look for it)."""


def redacted_environment(
    environ: Mapping[str, str], *, allowed: Sequence[str] = (), blocked: Sequence[str] = ()
) -> dict[str, str]:
    """Gemini's ``sanitizeEnvironment`` with redaction on (as for MCP servers): drops
    variables whose value looks like a secret, then those named like one (``*TOKEN*``,
    ``*KEY*``...), keeps ``allowed``, drops ``blocked`` (names without case); on GitHub
    Actions (``GITHUB_SHA`` or ``SURFACE=Github``) keeps only the always-allowed ones."""
    strict = bool(environ.get("GITHUB_SHA")) or environ.get("SURFACE") == "Github"
    allow = frozenset(k.upper() for k in allowed)
    block = frozenset(k.upper() for k in blocked)
    return {k: v for k, v in environ.items() if not env_redacted(k, v, allow, block, strict)}


def redaction_lists(settings: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """``security.environmentVariableRedaction.allowed`` and ``.blocked``."""
    node = _settings.get(settings, "security.environmentVariableRedaction", {})
    return (_str_items(_settings.get(node, "allowed")), _str_items(_settings.get(node, "blocked")))


def _str_items(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list | tuple) else []


def server_environment(
    config: McpServerConfig,
    environ: Mapping[str, str] | None = None,
    *,
    allowed: Sequence[str] = (),
    blocked: Sequence[str] = (),
) -> dict[str, str]:
    """The environment a stdio server starts with: ``GEMINI_CLI=1``, the redacted
    environment, then the server's ``env``, each value expanded against the whole
    (unredacted) environment."""
    env = dict(os.environ if environ is None else environ)
    out = dict([IDENTIFICATION_VARIABLE])
    out.update(redacted_environment(env, allowed=allowed, blocked=blocked))
    for key, value in config.env.items():
        out[key] = expand_env_vars(value, env)
    return out


def server_headers(
    config: McpServerConfig,
    environ: Mapping[str, str] | None = None,
    *,
    allowed: Sequence[str] = (),
    blocked: Sequence[str] = (),
) -> dict[str, str]:
    """An HTTP or SSE server's headers, expanded against the redacted environment."""
    env = redacted_environment(os.environ if environ is None else environ, allowed=allowed, blocked=blocked)
    return {key: expand_env_vars(value, env) for key, value in config.headers.items()}


# --- reading one server ------------------------------------------------------------------

_KEYS: Final = {
    "command": "command",
    "args": "args",
    "env": "env",
    "cwd": "cwd",
    "url": "url",
    "httpUrl": "http_url",
    "headers": "headers",
    "tcp": "tcp",
    "type": "type",
    "timeout": "timeout_ms",
    "trust": "trust",
    "description": "description",
    "includeTools": "include_tools",
    "excludeTools": "exclude_tools",
    "oauth": "oauth",
    "authProviderType": "auth_provider_type",
    "targetAudience": "target_audience",
    "targetServiceAccount": "target_service_account",
    "extension": None,  # an extension's metadata: agentbus loads no extensions
}


def _where(name: str) -> str:
    return f"MCP server {name!r}"


def _check_url(name: str, key: str, value: str) -> None:
    parts = urlsplit(value)
    if parts.scheme.lower() not in ("http", "https") or not parts.netloc:
        raise McpConfigError(f"{_where(name)}: {key!r} is not an http(s) URL: {value!r}")


def parse_server(name: str, raw: Any) -> tuple[McpServerConfig, list[str]]:
    """One ``mcpServers`` entry (its strings already expanded). Raises
    :class:`McpConfigError` for a value of the wrong type or a server that names no
    command or URL; keys it does not know are returned as warnings."""
    if not isinstance(raw, Mapping):
        raise McpConfigError(f"{_where(name)}: its configuration must be an object, not {_js_type(raw)}")
    fields: dict[str, Any] = {}
    warnings: list[str] = []
    for key, value in raw.items():
        if key not in _KEYS:
            warnings.append(f"{_where(name)}: unknown key {key!r} ignored")
            continue
        attr = _KEYS[key]
        if attr is None or value is None:
            continue
        fields[attr] = _read_value(name, key, value)
    if not (fields.get("command") or fields.get("url") or fields.get("http_url")):
        raise McpConfigError(f"{_where(name)}: no 'command' (stdio), 'url' (SSE or HTTP) or 'httpUrl' (HTTP)")
    for key, attr in (("url", "url"), ("httpUrl", "http_url")):
        if fields.get(attr):
            _check_url(name, key, fields[attr])
    if fields.get("http_url") and fields.get("url"):
        warnings.append(f"{_where(name)}: both 'httpUrl' and 'url' are set; 'httpUrl' is used")
    return McpServerConfig(name=name, **fields), warnings


def _js_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple):
        return "an array"
    return "an object"


def _read_value(name: str, key: str, value: Any) -> Any:
    def bad(expected: str, where: str = key) -> McpConfigError:
        return McpConfigError(f"{_where(name)}: {where!r} must be {expected}, not {_js_type(value)}")

    if key in ("command", "cwd", "url", "httpUrl", "tcp", "description", "targetAudience", "targetServiceAccount"):
        if not isinstance(value, str):
            raise bad("a string")
        return value
    if key in ("args", "includeTools", "excludeTools"):
        if not isinstance(value, list | tuple):
            raise bad("an array of strings")
        for i, item in enumerate(value):
            if not isinstance(item, str):
                raise McpConfigError(
                    f"{_where(name)}: '{key}[{i}]' must be a string, not {_js_type(item)}"
                )
        return tuple(value)
    if key in ("env", "headers"):
        if not isinstance(value, Mapping):
            raise bad("an object of strings")
        for k, v in value.items():
            if not isinstance(v, str):
                raise McpConfigError(f"{_where(name)}: '{key}.{k}' must be a string, not {_js_type(v)}")
        return dict(value)
    if key == "type":
        if value not in ("stdio", "sse", "http"):
            raise McpConfigError(f"{_where(name)}: 'type' must be \"stdio\", \"sse\" or \"http\", not {value!r}")
        return None if value == "stdio" else value
    if key == "timeout":
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise bad("a number of milliseconds")
        if value <= 0:
            raise McpConfigError(f"{_where(name)}: 'timeout' must be a positive number of milliseconds, not {value!r}")
        return value
    if key == "trust":
        if not isinstance(value, bool):
            raise bad("true or false")
        return value
    if key == "oauth":
        if not isinstance(value, Mapping):
            raise bad("an object")
        return frozendict(value)
    if key == "authProviderType":
        if value not in AUTH_PROVIDER_TYPES:
            raise McpConfigError(
                f"{_where(name)}: 'authProviderType' must be one of {', '.join(AUTH_PROVIDER_TYPES)}, not {value!r}"
            )
        return value
    raise AssertionError(key)  # pragma: no cover - _KEYS lists every key


# --- the servers of a session ------------------------------------------------------------


def settings_scopes(workspace: Path) -> list[dict[str, Any]]:
    """The user's and the workspace's settings files, each on its own (for ``mcp.allowed``
    and ``mcp.excluded``, which Gemini consolidates across scopes); an unreadable file is
    ``{}`` here (``settings.load_settings`` reports it)."""
    scopes: list[dict[str, Any]] = []
    for path in _settings.settings_paths(workspace):
        try:
            scopes.append(_settings.load_settings_file(path))
        except _settings.SettingsFileError:
            scopes.append({})
    return scopes


def _list_setting(settings: Mapping[str, Any], dotted: str, problems: list[str]) -> list[str] | None:
    value = _settings.get(settings, dotted)
    if value is None:
        return None
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        problems.append(f"Setting {dotted!r} must be an array of server names; ignored")
        return None
    return list(value)


def server_filter(
    settings: Mapping[str, Any],
    *,
    allowed_names: Sequence[str] | None = None,
    scopes: Sequence[Mapping[str, Any]] | None = None,
    problems: list[str] | None = None,
) -> tuple[list[str] | None, list[str]]:
    """The allow list (``None``: no list) and the exclude list, as Gemini CLI computes
    them: the flag's names, else the scopes' ``mcp.allowed`` intersected (case-blind,
    the first list's spelling) and ``mcp.excluded`` concatenated; without ``scopes``
    the merged ``settings``' lists."""
    out = [] if problems is None else problems
    if allowed_names is not None:
        return list(allowed_names), []
    if scopes is None:
        return _list_setting(settings, "mcp.allowed", out), _list_setting(settings, "mcp.excluded", out) or []
    lists = [a for a in (_list_setting(s, "mcp.allowed", out) for s in scopes) if a is not None]
    allowed: list[str] | None = None
    if lists:
        allowed = lists[0]
        for current in lists[1:]:
            names = {item.lower().strip() for item in current}
            allowed = [item for item in allowed if item.lower().strip() in names]
    excluded = [x for s in scopes for x in (_list_setting(s, "mcp.excluded", out) or [])]
    return allowed, excluded


def blocked_by_settings(name: str, allowed: Sequence[str] | None, excluded: Sequence[str]) -> bool:
    """Gemini's ``isBlockedBySettings``: names compared exactly; an empty allow list
    allows every server."""
    if allowed and name not in allowed:
        return True
    return bool(excluded) and name in excluded


def server_command_config(command: str, environ: Mapping[str, str] | None = None) -> McpServerConfig:
    """``mcp.serverCommand`` as the ``mcp`` stdio server: its words read by shell-quote
    with ``$VAR`` from the environment. Raises :class:`McpConfigError` for an operator,
    a glob, a comment or a bad substitution in it."""
    env = os.environ if environ is None else environ
    where = "Setting 'mcp.serverCommand'"
    try:
        entries = shell_quote_parse(command, lambda name: env.get(name, ""))
    except ShellQuoteError as exc:
        raise McpConfigError(f"{where}: failed to parse {command!r}: {exc}") from None
    words = [e for e in entries if isinstance(e, str)]
    if len(words) != len(entries):
        raise McpConfigError(f"{where}: failed to parse {command!r}: only words are allowed (no operators, globs or comments)")
    if not words or not words[0]:
        raise McpConfigError(f"{where}: no command in {command!r}")
    return McpServerConfig(name=SERVER_COMMAND_NAME, command=words[0], args=tuple(words[1:]))


def configured_servers(
    settings: Mapping[str, Any], environ: Mapping[str, str] | None = None
) -> tuple[dict[str, McpServerConfig], list[str]]:
    """Every server of the merged settings (``mcpServers`` and ``mcp.serverCommand``),
    allowed or not, with one line per problem; a bad server is left out."""
    problems: list[str] = []
    servers: dict[str, McpServerConfig] = {}
    raw_servers = settings.get("mcpServers")
    if raw_servers is not None and not isinstance(raw_servers, Mapping):
        problems.append(f"Setting 'mcpServers' must be an object of servers, not {_js_type(raw_servers)}; ignored")
        raw_servers = None
    for name, raw in (raw_servers or {}).items():
        try:
            config, warnings = parse_server(str(name), resolve_settings_tree(raw, environ))
        except McpConfigError as exc:
            problems.append(str(exc))
            continue
        problems.extend(warnings)
        servers[config.name] = config
    command = _settings.get(settings, "mcp.serverCommand")
    if command is not None and not isinstance(command, str):
        problems.append(f"Setting 'mcp.serverCommand' must be a string, not {_js_type(command)}; ignored")
    elif command:
        try:
            servers[SERVER_COMMAND_NAME] = server_command_config(resolve_settings_vars(command, environ), environ)
        except McpConfigError as exc:
            problems.append(str(exc))
    return servers, problems


def mcp_servers(
    settings: Mapping[str, Any],
    *,
    allowed_names: Sequence[str] | None = None,
    scopes: Sequence[Mapping[str, Any]] | None = None,
    environ: Mapping[str, str] | None = None,
    extra: Sequence[McpServerConfig] = (),
) -> tuple[dict[str, McpServerConfig], list[str]]:
    """The servers Gemini CLI 0.61.0 would start for these merged settings, in settings
    order, and one line per configuration problem (a bad server is left out, the others
    kept). ``allowed_names``: ``--allowed-mcp-server-names`` (already split on commas);
    ``scopes``: the settings files one by one (``settings_scopes``), for Gemini's
    consolidation of ``mcp.allowed``/``mcp.excluded`` across them; ``extra``: servers
    from elsewhere (ACP's ``session/new``), each replacing a configured one of its name
    and filtered like them."""
    servers, problems = configured_servers(settings, environ)
    for config in extra:
        servers[config.name] = config
    allowed, excluded = server_filter(settings, allowed_names=allowed_names, scopes=scopes, problems=problems)
    return {n: c for n, c in servers.items() if not blocked_by_settings(n, allowed, excluded)}, problems


def acp_mcp_servers(servers: Any, cwd: str) -> list[McpServerConfig]:
    """ACP's ``mcpServers`` (``session/new``, ``session/load``) as Gemini CLI's ACP agent
    turns them into servers: ``http`` → ``httpUrl``, ``sse`` → ``url``, headers and env
    from ``{name, value}`` lists, a stdio server run in the session's ``cwd``. Raises
    :class:`McpConfigError` naming the entry and the field of a malformed one (``acp``
    servers are refused: agentbus does not offer ``mcpCapabilities.acp``)."""
    if not isinstance(servers, list | tuple):
        raise McpConfigError("mcpServers must be an array")
    out: list[McpServerConfig] = []
    for i, raw in enumerate(servers):
        where = f"mcpServers[{i}]"
        if not isinstance(raw, Mapping):
            raise McpConfigError(f"{where} must be an object, not {_js_type(raw)}")

        def text(key: str, *, at: str = where, node: Mapping[str, Any] = raw) -> str:
            value = node.get(key)
            if not isinstance(value, str):
                raise McpConfigError(f"{at}.{key} must be a string, not {_js_type(value)}")
            return value

        def pairs(key: str, *, at: str = where, node: Mapping[str, Any] = raw) -> dict[str, str]:
            items = node.get(key, [])
            if not isinstance(items, list | tuple):
                raise McpConfigError(f"{at}.{key} must be an array of {{name, value}}, not {_js_type(items)}")
            result: dict[str, str] = {}
            for j, item in enumerate(items):
                if not isinstance(item, Mapping):
                    raise McpConfigError(f"{at}.{key}[{j}] must be an object, not {_js_type(item)}")
                result[text("name", at=f"{at}.{key}[{j}]", node=item)] = text("value", at=f"{at}.{key}[{j}]", node=item)
            return result

        name = text("name")
        kind = raw.get("type")
        if kind in ("http", "sse"):
            url = text("url")
            _check_url(name, "url", url)
            headers = pairs("headers")
            if kind == "http":
                out.append(McpServerConfig(name=name, http_url=url, headers=headers))
            else:
                out.append(McpServerConfig(name=name, url=url, type="sse", headers=headers))
        elif kind is None or kind == "stdio":
            command = text("command")
            if not command:
                raise McpConfigError(f"{where}.command is empty")
            args = raw.get("args", [])
            if not isinstance(args, list | tuple) or not all(isinstance(a, str) for a in args):
                raise McpConfigError(f"{where}.args must be an array of strings")
            out.append(McpServerConfig(name=name, command=command, args=tuple(args), env=pairs("env"), cwd=cwd))
        else:
            raise McpConfigError(f"{where}.type {kind!r} is not supported (http, sse or a stdio server)")
    return out


__all__ = [
    "MCP_DEFAULT_TIMEOUT_MS",
    "MCP_LIST_DEFAULT_TIMEOUT_MS",
    "MCP_TOOL_PREFIX",
    "McpConfigError",
    "McpServerConfig",
    "McpTransport",
    "acp_mcp_servers",
    "blocked_by_settings",
    "configured_servers",
    "expand_env_vars",
    "mcp_server_prefix",
    "mcp_servers",
    "mcp_tool_name",
    "parse_server",
    "redacted_environment",
    "redaction_lists",
    "resolve_settings_tree",
    "resolve_settings_vars",
    "server_command_config",
    "server_environment",
    "server_filter",
    "server_headers",
    "settings_scopes",
    "split_server_names",
    "valid_function_name",
]
