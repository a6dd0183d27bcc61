"""settings.json: the user's (``~/.gemini``) and the workspace's (``.gemini``), merged.

Workspace values win over user values; objects merge key by key, except ``mcpServers``,
which merges server by server (``SHALLOW_MERGED``). A file that cannot be
read or parsed is a ``FatalConfigError`` naming it.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from actors.host.errors import FatalConfigError


def gemini_home() -> Path:
    """``$GEMINI_CLI_HOME`` or the home directory (Gemini CLI's global dir parent)."""
    return Path(os.environ.get("GEMINI_CLI_HOME") or os.path.expanduser("~"))


def settings_paths(workspace: Path) -> list[Path]:
    user = gemini_home() / ".gemini" / "settings.json"
    project = workspace / ".gemini" / "settings.json"
    paths = [user]
    if project.resolve() != user.resolve():
        paths.append(project)
    return paths


SHALLOW_MERGED = frozenset({"mcpServers"})
"""Top-level settings merged one level deep (Gemini CLI's ``SHALLOW_MERGE``): a server the
workspace names replaces the user's entry of that name whole."""


def deep_merge(base: Mapping[str, Any], over: Mapping[str, Any], *, top: bool = True) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        if top and key in SHALLOW_MERGED and isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = {**out[key], **value}
        elif isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = deep_merge(out[key], value, top=False)
        else:
            out[key] = value
    return out


def _strip_comments(text: str) -> str:
    """settings.json may hold // and /* */ comments (Gemini CLI strips them)."""
    out: list[str] = []
    i, n = 0, len(text)
    in_str = False
    while i < n:
        c = text[i]
        if in_str:
            out.append(c)
            if c == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 2
                continue
            if c == '"':
                in_str = False
        elif c == '"':
            in_str = True
            out.append(c)
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j == -1 else j
            continue
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            i = n if j == -1 else j + 2
            continue
        else:
            out.append(c)
        i += 1
    return "".join(out)


class SettingsFileError(Exception):
    """One settings file is unusable; ``str()`` is ``Error in <path>: <reason>``."""


class _NotFinite(Exception):
    pass


def _finite(text: str) -> float:
    """A JSON number with a fraction or exponent; one past a double (``1e400``, which
    JSON.parse makes Infinity) is refused: no setting takes it."""
    value = float(text)
    if math.isinf(value):
        raise _NotFinite(text)
    return value


def load_settings_file(path: Path) -> dict[str, Any]:
    """One settings file ({} when absent). An empty file is an error, as in Gemini CLI."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise SettingsFileError(f"Error in {path}: {reason}") from None
    try:
        data = json.loads(_strip_comments(text), parse_float=_finite)
    except _NotFinite:
        raise SettingsFileError(f"Error in {path}: a number beyond 1e308 (it would be Infinity)") from None
    except json.JSONDecodeError as exc:
        raise SettingsFileError(
            f"Error in {path}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
        ) from None
    except RecursionError:  # nested past the parser, as V8's stack is for Gemini CLI's
        raise SettingsFileError(f"Error in {path}: Maximum call stack size exceeded") from None
    except ValueError:  # (not a JSONDecodeError: Python's integer-conversion limit)
        raise SettingsFileError(f"Error in {path}: an integer of more than 4,300 digits") from None
    if not isinstance(data, dict):
        raise SettingsFileError(f"Error in {path}: Settings file is not a valid JSON object.")
    return data


def load_settings(workspace: Path) -> dict[str, Any]:
    """User then workspace settings, merged; every broken file is named in one error."""
    merged: dict[str, Any] = {}
    problems: list[str] = []
    for path in settings_paths(workspace):
        try:
            merged = deep_merge(merged, load_settings_file(path))
        except SettingsFileError as exc:
            problems.append(str(exc))
    if problems:
        raise FatalConfigError(
            "\n".join(problems) + "\nPlease fix the configuration file(s) and try again."
        )
    return merged


def get(settings: Mapping[str, Any], dotted: str, default: Any = None) -> Any:
    node: Any = settings
    for key in dotted.split("."):
        if not isinstance(node, Mapping) or key not in node:
            return default
        node = node[key]
    return node


def workspace_settings() -> dict[str, Any]:
    return load_settings(Path(os.getcwd()).resolve())
