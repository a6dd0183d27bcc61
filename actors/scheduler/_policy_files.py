"""Policy TOML files: reading, Gemini CLI's schema, warnings, and a parse cache.

A file holds ``[[rule]]`` tables (and ``[[safety_checker]]`` tables, which we read and
ignore with a warning). A schema error rejects the whole file, with its file and line;
doubtful tool names and unsafe regexes are warnings. The only I/O of the policy is here.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any, Final

from actors.common import LazyPattern, compile_js_regex

from . import _policy_cache
from ._policy_args import build_args_patterns, is_safe_regexp
from ._policy_messages import levenshtein, tool_suggestion
from ._policy_rules import (
    APPROVAL_MODES,
    BUILTIN_TOOL_NAMES,
    DECISIONS,
    DISCOVERED_PREFIX,
    LEGACY_ALIASES,
    MCP_PREFIX,
    SHELL_TOOL_NAME,
    USER_POLICY_TIER,
    PolicyFileError,
    Rule,
    format_mcp_name,
    is_mcp_name,
)

TIER_NAMES: Final[Mapping[int, str]] = {
    1: "default",
    2: "extension",
    3: "workspace",
    4: "user",
    5: "admin",
}


_RULE_HEADER = LazyPattern(r"^[ \t]*\[\[[ \t]*(?:rule|\"rule\"|'rule')\s*\]\]", re.MULTILINE)
_CHECKER_HEADER = LazyPattern(
    r"^[ \t]*\[\[[ \t]*(?:safety_checker|\"safety_checker\"|'safety_checker')\s*\]\]", re.MULTILINE
)
_TOML_LOCATION = LazyPattern(r"\(at line (\d+), column \d+\)|\(at end of document\)")


def _header_lines(pattern: LazyPattern, text: str) -> list[int]:
    return [text.count("\n", 0, m.start()) + 1 for m in pattern.finditer(text)]


def _line_of_key(text: str, key: str) -> int:
    match = re.search(rf"^[ \t]*{key}[ \t]*=", text, re.MULTILINE)
    return text.count("\n", 0, match.start()) + 1 if match else 1


def _is_str_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _validate_rule(raw: Any) -> str | None:
    """Gemini's schema for one ``[[rule]]`` table; the first problem, or None."""
    if not isinstance(raw, dict):
        return "each rule must be a table"
    if "toolName" not in raw:
        return 'field "toolName": required (use "*" for all tools)'
    if not isinstance(raw["toolName"], str) and not _is_str_list(raw["toolName"]):
        return 'field "toolName": must be a string or an array of strings'
    for key in ("subagent", "mcpName", "argsPattern", "commandRegex", "denyMessage", "deny_message"):
        if key in raw and not isinstance(raw[key], str):
            return f'field "{key}": must be a string'
    if "commandPrefix" in raw and not (
        isinstance(raw["commandPrefix"], str) or _is_str_list(raw["commandPrefix"])
    ):
        return 'field "commandPrefix": must be a string or an array of strings'
    if "decision" not in raw:
        return 'field "decision": required (allow, deny or ask_user)'
    if raw["decision"] not in DECISIONS:
        return f'field "decision": must be allow, deny or ask_user, not {raw["decision"]!r}'
    if "priority" not in raw:
        return 'field "priority": priority is required'
    priority = raw["priority"]
    if isinstance(priority, bool) or not isinstance(priority, int | float):
        return 'field "priority": priority must be a number'
    if isinstance(priority, float) and not priority.is_integer():
        return 'field "priority": priority must be an integer'
    if priority < 0:
        return 'field "priority": priority must be >= 0'
    if priority > 999:
        return (
            'field "priority": priority must be <= 999 to prevent tier overflow. '
            "Priorities >= 1000 would jump to the next tier."
        )
    if "modes" in raw:
        modes = raw["modes"]
        if not isinstance(modes, list):
            return 'field "modes": must be an array'
        for mode in modes:
            if mode not in APPROVAL_MODES:
                hint = ' (write "autoEdit")' if mode == "auto_edit" else ""
                return (
                    f'field "modes": {mode!r} is not one of default, autoEdit, yolo, plan{hint}'
                )
    for key in ("interactive", "allowRedirection", "allow_redirection"):
        if key in raw and not isinstance(raw[key], bool):
            return f'field "{key}": must be a boolean'
    if "toolAnnotations" in raw and not isinstance(raw["toolAnnotations"], dict):
        return 'field "toolAnnotations": must be a table'
    return None


def _validate_checker(raw: Any) -> str | None:
    if not isinstance(raw, dict):
        return "each safety_checker must be a table"
    if "toolName" not in raw or not (
        isinstance(raw["toolName"], str) or _is_str_list(raw["toolName"])
    ):
        return 'field "toolName": required (a string or an array of strings)'
    checker = raw.get("checker")
    if not isinstance(checker, dict) or checker.get("type") not in ("in-process", "external"):
        return 'field "checker": must be a table with type "in-process" or "external"'
    if not isinstance(checker.get("name"), str):
        return 'field "checker.name": must be a string'
    return None


def _is_valid_tool_name(name: str, known: Collection[str]) -> bool:
    if name in known or name in BUILTIN_TOOL_NAMES or name in LEGACY_ALIASES:
        return True
    if name.startswith(DISCOVERED_PREFIX) or name == "*":
        return True
    if is_mcp_name(name):
        if name == f"{MCP_PREFIX}*":
            return True
        if name.startswith(f"{MCP_PREFIX}_"):
            return False
        match = re.fullmatch(r"([^_]+)_(.+)", name[len(MCP_PREFIX) :], re.DOTALL)
        if not match:
            return False
        server, tool = match.groups()
        slug = re.compile(r"[a-z0-9_.:-]+", re.IGNORECASE)
        if not slug.fullmatch(server):
            return False
        if tool == "*":
            return True
        if re.fullmatch("_*", tool):
            return False
        return slug.fullmatch(tool) is not None
    return False


def _tool_name_warning(name: str, known: Collection[str]) -> str | None:
    if "__" in name:
        return (
            f'tool name "{name}": the "__" syntax for MCP tools is deprecated; use '
            'mcpName = "..." or the mcp_<server>_<tool> form'
        )
    if _is_valid_tool_name(name, known):
        return None
    candidates = list(dict.fromkeys([*BUILTIN_TOOL_NAMES, *known]))
    # A distance is at least the difference in length: names longer or shorter by more
    # than 3 need no distance worked out (the default policies' subagent names did).
    if not any(abs(len(name) - len(c)) <= 3 and levenshtein(name, c) <= 3 for c in candidates):
        return None  # far from every known name: probably a dynamic tool, not a typo
    return f'unrecognized tool name "{name}".{tool_suggestion(name, candidates)}'


def load_policy_file(
    path: Path | str,
    *,
    tier: int = USER_POLICY_TIER,
    known_tools: Collection[str] = (),
) -> tuple[list[Rule], list[str]]:
    """Read one policy TOML file: its rules (priorities already tiered) and warnings.

    Raises :class:`PolicyFileError` (file and line) for unreadable files, TOML syntax
    errors, schema errors (Gemini rejects the whole file then) and empty tool names.
    Warnings (the rule is still loaded unless said otherwise): tool names that look like
    typos of known tools, ``commandPrefix``/``commandRegex`` misuse, invalid or unsafe
    regexes (that rule is dropped), safety checkers (not supported: ignored).
    """
    path = Path(path)
    try:
        info = path.stat()
    except OSError as exc:
        raise PolicyFileError(path, 1, f"cannot read policy file: {exc}") from exc
    # ctime and the inode too: a same-size copy that keeps the old mtime (cp -p) is new.
    key = (
        str(path),
        info.st_dev,
        info.st_ino,
        info.st_mtime_ns,
        info.st_ctime_ns,
        info.st_size,
        tier,
        tuple(known_tools),
    )
    cached = _PARSED_POLICY_FILES.get(key)
    if cached is None:
        cached = _policy_cache.lookup(key)
    if cached is None:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise PolicyFileError(path, 1, f"cannot read policy file: {exc}") from exc
        cached = _parse_policy_text(text, path, tier=tier, known_tools=known_tools)
        _policy_cache.store(key, cached)
    if key not in _PARSED_POLICY_FILES:
        if len(_PARSED_POLICY_FILES) >= _PARSED_POLICY_FILES_MAX:
            del _PARSED_POLICY_FILES[next(iter(_PARSED_POLICY_FILES))]
        _PARSED_POLICY_FILES[key] = cached
    rules, warnings_out = cached
    return list(rules), list(warnings_out)


_PARSED_POLICY_FILES: dict[tuple[Any, ...], tuple[list[Rule], list[str]]] = {}
"""Parsed policy files by (path, mtime, size, tier, known tools): a process that builds
many engines (the daemon starts a session per request, each with the default policies)
parses each file once. Rules are frozen, so engines can share them; a file that changes
gets a new mtime or size and is parsed again. Files that fail to parse are not kept."""
_PARSED_POLICY_FILES_MAX = 256


def _parse_policy_text(
    text: str, path: Path, *, tier: int, known_tools: Collection[str]
) -> tuple[list[Rule], list[str]]:
    import tomllib  # here: a run whose policy files all come from the cache never needs it

    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        location = _TOML_LOCATION.search(message)
        if location and location.group(1):
            line = int(location.group(1))
        else:
            line = max(1, text.count("\n") + (0 if text.endswith("\n") else 1))
        detail = _TOML_LOCATION.sub("", message).strip()
        raise PolicyFileError(path, line, f"TOML parsing failed: {detail}") from exc
    except RecursionError:  # arrays or tables nested past the parser
        raise PolicyFileError(path, 1, "TOML parsing failed: nested too deep") from None
    except ValueError:  # (not a TOMLDecodeError: Python's integer-conversion limit)
        raise PolicyFileError(path, 1, "TOML parsing failed: an integer of more than 4,300 digits") from None

    raw_rules = data.get("rule", [])
    if not isinstance(raw_rules, list):
        raise PolicyFileError(path, _line_of_key(text, "rule"), '"rule" must be [[rule]] tables')
    raw_checkers = data.get("safety_checker", [])
    if not isinstance(raw_checkers, list):
        raise PolicyFileError(
            path, _line_of_key(text, "safety_checker"), '"safety_checker" must be tables'
        )
    rule_lines = _header_lines(_RULE_HEADER, text)
    checker_lines = _header_lines(_CHECKER_HEADER, text)

    def rule_line(index: int) -> int:
        return rule_lines[index] if index < len(rule_lines) else _line_of_key(text, "rule")

    for index, raw in enumerate(raw_rules):
        problem = _validate_rule(raw)
        if problem:
            raise PolicyFileError(path, rule_line(index), f"rule #{index + 1}: {problem}")
    for index, raw in enumerate(raw_checkers):
        problem = _validate_checker(raw)
        if problem:
            line = checker_lines[index] if index < len(checker_lines) else 1
            raise PolicyFileError(path, line, f"safety_checker #{index + 1}: {problem}")

    warnings_out: list[str] = []
    rules: list[Rule] = []
    for index, raw in enumerate(raw_rules):
        line = rule_line(index)
        where = f"{path}:{line}"
        tool_names: list[str] = (
            [raw["toolName"]] if isinstance(raw["toolName"], str) else list(raw["toolName"])
        )
        if any(name == "" for name in tool_names):
            raise PolicyFileError(
                path, line, f'rule #{index + 1}: toolName cannot be empty (use "*" for all tools)'
            )
        has_prefix = "commandPrefix" in raw
        has_regex = "commandRegex" in raw
        if has_prefix or has_regex:
            if raw["toolName"] != SHELL_TOOL_NAME:
                warnings_out.append(
                    f"{where}: rule #{index + 1}: commandPrefix and commandRegex can only be "
                    'used with toolName = "run_shell_command"'
                )
            elif "argsPattern" in raw:
                warnings_out.append(
                    f"{where}: rule #{index + 1}: commandPrefix/commandRegex and argsPattern "
                    "are mutually exclusive"
                )
            elif has_prefix and has_regex:
                warnings_out.append(
                    f"{where}: rule #{index + 1}: commandPrefix and commandRegex are mutually "
                    "exclusive"
                )
        for name in tool_names:
            warning = _tool_name_warning(name, known_tools)
            if warning:
                warnings_out.append(f"{where}: rule #{index + 1}: {warning}")

        patterns = build_args_patterns(
            raw.get("argsPattern"), raw.get("commandPrefix"), raw.get("commandRegex")
        )
        modes = tuple(raw["modes"]) if "modes" in raw else None
        annotations = raw.get("toolAnnotations")
        allow_redirection = raw.get("allowRedirection", raw.get("allow_redirection"))
        deny_message = raw.get("denyMessage", raw.get("deny_message"))
        mcp_name = raw.get("mcpName")
        for pattern_source in patterns:
            compiled: re.Pattern[str] | None = None
            if pattern_source:
                try:
                    compiled = compile_js_regex(pattern_source)
                except (re.error, RecursionError, OverflowError) as exc:
                    warnings_out.append(
                        f"{where}: rule #{index + 1}: invalid regex {pattern_source!r} ({exc}); "
                        "rule ignored"
                    )
                    continue
                if not is_safe_regexp(pattern_source):
                    warnings_out.append(
                        f"{where}: rule #{index + 1}: unsafe regex {pattern_source!r} (nested "
                        "quantifiers or too long); rule ignored"
                    )
                    continue
            for name in tool_names:
                rules.append(
                    Rule(
                        tool_name=format_mcp_name(mcp_name, name) if mcp_name else name,
                        decision=raw["decision"],
                        priority=tier + raw["priority"] / 1000,
                        modes=modes,
                        interactive=raw.get("interactive"),
                        args_pattern=compiled,
                        args_pattern_source=pattern_source if compiled is not None else None,
                        allow_redirection=bool(allow_redirection),
                        deny_message=deny_message,
                        source=where,
                        subagent=raw.get("subagent"),
                        mcp_name=mcp_name,
                        tool_annotations=(
                            tuple(annotations.items()) if isinstance(annotations, dict) else None
                        ),
                        name=raw.get("name") if isinstance(raw.get("name"), str) else None,
                    )
                )
    for index, _raw in enumerate(raw_checkers):
        line = checker_lines[index] if index < len(checker_lines) else 1
        warnings_out.append(
            f"{path}:{line}: safety_checker #{index + 1}: safety checkers are not supported; "
            "ignored"
        )
    return rules, warnings_out


def named_path_problem(location: Path) -> str | None:
    """Why a path the user named (``--policy``, ``policyPaths``, ``adminPolicyPaths``)
    holds no policy: Gemini CLI skips such a path without a word."""
    if location.is_dir():
        return None
    if not location.exists():
        return "no such file or directory"
    if not (location.is_file() and location.name.endswith(".toml")):
        return "not a .toml file or a directory of them"
    return None


def policy_files_in(location: Path) -> list[Path]:
    """A directory's ``*.toml`` files (sorted), a single ``.toml`` file, or nothing."""
    if location.is_dir():
        return sorted(p for p in location.iterdir() if p.suffix == ".toml" and p.is_file())
    if location.is_file() and location.name.endswith(".toml"):
        return [location]
    return []
