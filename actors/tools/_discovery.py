"""Which files the file tools skip: Gemini CLI's ``FileDiscoveryService``.

``.gitignore`` files (nested, plus ``.git/info/exclude``) in a git repository,
``.geminiignore`` and the ``context.fileFiltering.customIgnoreFilePaths`` files, each
honoured or not per call (``respect_git_ignore``, ``respect_gemini_ignore``), a symbolic
link judged by its target too; on top of the npm ``ignore`` port (:mod:`._ignore`). Also
``fs.readdir``'s order. Everything here reads the disk: tools call it from worker threads
(``read_file``'s ``validate``, run in the scheduler's task, is the exception).
"""

from __future__ import annotations

import os
import posixpath
import re
import stat
from collections.abc import Iterable
from typing import Any

from actors.common import (
    is_within_root,
    js_trim,
    js_trim_start,
    node_join,
    node_relative,
    node_resolve,
)

from ._base import ToolEnv, setting
from ._fs_errors import NodeFsError
from ._ignore import IgnoreRules
from ._paths import resolve_to_real_path


def filtering_setting(env: ToolEnv, key: str, default: Any) -> Any:
    """``context.fileFiltering.<key>`` from the merged settings."""
    value = setting(env.settings, "context", "fileFiltering", key)
    return default if value is None else value


def normalized_relative_path(project_root: str, file_path: str, is_directory: bool) -> str | None:
    """Gemini's ``getNormalizedRelativePath`` (None when outside the root)."""
    if not file_path:
        return None
    absolute = node_resolve(project_root, file_path)
    if not is_within_root(absolute, project_root):
        return None
    normalized = node_relative(project_root, absolute).replace("\\", "/")
    if is_directory and not normalized.endswith("/") and normalized != "":
        normalized += "/"
    if normalized == "":
        return "/" if is_directory else ""
    if normalized.startswith("/") and normalized != "/":
        normalized = normalized[1:]
    return normalized


def _read_text(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace", newline="") as handle:
            return handle.read()
    except OSError:
        return None


class GitIgnoreParser:
    """Gemini's ``GitIgnoreParser``: nested ``.gitignore`` files plus extra patterns."""

    def __init__(self, project_root: str, extra_patterns: list[str] | None = None) -> None:
        self._root = node_resolve(project_root)
        self._cache: dict[str, IgnoreRules] = {}
        self._global: IgnoreRules | None = None
        self._extra = IgnoreRules()
        if extra_patterns:
            self._extra.add(self._process_patterns(extra_patterns, "."))

    def _load_patterns_for_file(self, patterns_file: str) -> IgnoreRules:
        content = _read_text(patterns_file)
        if content is None:
            return IgnoreRules()
        if patterns_file.endswith("/.git/info/exclude"):
            base = "."
        else:
            base = posixpath.dirname(node_relative(self._root, patterns_file))
        raw = re.split(r"\r\n|\n|\r", content)
        return IgnoreRules().add(self._process_patterns(raw, base))

    @staticmethod
    def _process_patterns(raw_patterns: Iterable[str], base: str) -> list[str]:
        out: list[str] = []
        for raw in raw_patterns:
            p = js_trim_start(raw)
            if p == "" or p.startswith("#"):
                continue
            negative = p.startswith("!")
            if negative:
                p = p[1:]
            anchored = p.startswith("/")
            if anchored:
                p = p[1:]
            if p == "":
                continue
            pattern = p
            if base and base != ".":
                if not anchored and "/" not in p:
                    pattern = posixpath.normpath(posixpath.join("**", p))
                pattern = node_join(base, pattern)
                if not pattern.startswith("/"):
                    pattern = "/" + pattern
            if anchored and not pattern.startswith("/"):
                pattern = "/" + pattern
            if negative:
                pattern = "!" + pattern
            out.append(pattern)
        return out

    def is_ignored(self, file_path: str, is_directory: bool) -> bool:
        normalized = normalized_relative_path(self._root, file_path, is_directory)
        if normalized is None or normalized in ("", "/"):
            return False
        try:
            ig = IgnoreRules().add([".git"])
            if self._global is None:
                exclude = node_join(self._root, ".git", "info", "exclude")
                self._global = (
                    self._load_patterns_for_file(exclude)
                    if os.path.exists(exclude)
                    else IgnoreRules()
                )
            ig.add(self._global)
            parts = normalized.split("/")
            current = self._root
            dirs = [self._root]
            for part in parts[:-1]:
                current = node_join(current, part)
                dirs.append(current)
            # One probe (and its cache of ancestors' answers) while the rules stay the
            # same: a directory without a .gitignore adds none. A new probe for each
            # ancestor made a path of n components cost n^2 rule tests.
            probe: IgnoreRules | None = None
            probe_rules = -1
            for directory in dirs:
                if node_relative(self._root, directory):
                    parent_rel = normalized_relative_path(self._root, directory, True)
                    if probe is None or probe_rules != len(ig._rules):
                        probe = IgnoreRules().add(ig).add(self._extra)
                        probe_rules = len(ig._rules)
                    if parent_rel and probe.ignores(parent_rel):
                        break
                patterns = self._cache.get(directory)
                if patterns is None:
                    gitignore = node_join(directory, ".gitignore")
                    patterns = (
                        self._load_patterns_for_file(gitignore)
                        if os.path.exists(gitignore)
                        else IgnoreRules()
                    )
                    self._cache[directory] = patterns
                ig.add(patterns)
            return ig.add(self._extra).ignores(normalized)
        except ValueError:
            return False


class IgnoreFileParser:
    """Gemini's ``IgnoreFileParser`` (``.geminiignore`` and custom ignore files)."""

    def __init__(self, project_root: str, source: list[str], *, is_patterns: bool = False) -> None:
        self._root = node_resolve(project_root)
        self.patterns: list[str] = []
        self._ig = IgnoreRules()
        if is_patterns:
            self.patterns.extend(source)
            self._ig.add(source)
        else:
            for name in reversed(source):
                content = _read_text(node_join(self._root, name))
                if content is None:
                    continue
                found = [
                    js_trim(p)
                    for p in re.split(r"\r\n|\n|\r", content)
                    if js_trim(p) and not js_trim(p).startswith("#")
                ]
                self.patterns.extend(found)
                self._ig.add(found)

    def is_ignored(self, file_path: str, is_directory: bool) -> bool:
        if not self.patterns:
            return False
        normalized = normalized_relative_path(self._root, file_path, is_directory)
        if normalized is None or normalized in ("", "/"):
            return False
        try:
            return self._ig.ignores(normalized)
        except ValueError:
            return False


def is_git_repository(directory: str) -> bool:
    """Gemini's ``isGitRepository``: a ``.git`` entry here or in an ancestor."""
    current = node_resolve(directory)
    while True:
        if os.path.exists(node_join(current, ".git")):
            return True
        parent = posixpath.dirname(current)
        if parent == current:
            return False
        current = parent


class FileDiscovery:
    """Gemini's ``FileDiscoveryService`` for one call (built fresh; tools keep no state)."""

    def __init__(self, project_root: str, custom_ignore_files: list[str] | None = None) -> None:
        self.root = node_resolve(project_root)
        self._git: GitIgnoreParser | None = (
            GitIgnoreParser(self.root) if is_git_repository(self.root) else None
        )
        self._gemini = IgnoreFileParser(self.root, [".geminiignore"])
        self._custom = (
            IgnoreFileParser(self.root, list(custom_ignore_files)) if custom_ignore_files else None
        )
        extra = self._gemini.patterns + (self._custom.patterns if self._custom else [])
        self._combined: GitIgnoreParser | IgnoreFileParser
        if self._git is not None:
            self._combined = GitIgnoreParser(self.root, extra)
        else:
            self._combined = IgnoreFileParser(self.root, extra, is_patterns=True)

    @classmethod
    def for_env(cls, env: ToolEnv) -> FileDiscovery:
        custom = filtering_setting(env, "customIgnoreFilePaths", [])
        paths = [str(p) for p in custom] if isinstance(custom, list | tuple) else []
        return cls(str(env.workspace), paths)

    def _check_filters(self, path: str, is_dir: bool, git: bool, gemini: bool) -> bool:
        if git and gemini:
            return self._combined.is_ignored(path, is_dir)
        if self._custom is not None and self._custom.is_ignored(path, is_dir):
            return True
        if git and self._git is not None and self._git.is_ignored(path, is_dir):
            return True
        return gemini and self._gemini.is_ignored(path, is_dir)

    def should_ignore(
        self,
        path: str,
        *,
        is_directory: bool = False,
        respect_git_ignore: bool = True,
        respect_gemini_ignore: bool = True,
        is_symbolic_link: bool | None = None,
    ) -> bool:
        """``_shouldIgnore``: the path itself, then a symlink's target."""
        if self._check_filters(path, is_directory, respect_git_ignore, respect_gemini_ignore):
            return True
        try:
            absolute = path if path.startswith("/") else node_resolve(self.root, path)
            is_link = is_symbolic_link
            if is_link is None:
                try:
                    is_link = stat.S_ISLNK(os.lstat(absolute).st_mode)
                except OSError:
                    is_link = False
            if is_link:
                real = resolve_to_real_path(absolute)
                target_is_dir = is_directory
                try:
                    target_is_dir = os.path.isdir(real)
                except OSError:
                    pass
                if self._check_filters(
                    real, target_is_dir, respect_git_ignore, respect_gemini_ignore
                ):
                    return True
        except (OSError, NodeFsError, ValueError):
            pass
        return False

    def filter_with_report(
        self, paths: list[str], *, respect_git_ignore: bool, respect_gemini_ignore: bool
    ) -> tuple[list[str], int]:
        """``filterFilesWithReport``: kept paths and how many were ignored."""
        kept = [
            p
            for p in paths
            if not self.should_ignore(
                p,
                is_directory=p.endswith(("/", "\\")),
                respect_git_ignore=respect_git_ignore,
                respect_gemini_ignore=respect_gemini_ignore,
            )
        ]
        return kept, len(paths) - len(kept)


def respect_flags(
    env: ToolEnv, git_param: object = None, gemini_param: object = None
) -> tuple[bool, bool]:
    """Tool parameter, else ``context.fileFiltering`` setting, else true."""
    git = (
        git_param
        if isinstance(git_param, bool)
        else filtering_setting(env, "respectGitIgnore", True)
    )
    gemini = (
        gemini_param
        if isinstance(gemini_param, bool)
        else filtering_setting(env, "respectGeminiIgnore", True)
    )
    return bool(git), bool(gemini)


def readdir_sorted(path: str) -> list[str]:
    """``fs.readdir`` order: libuv's scandir sorts names with ``strcmp``."""
    return sorted(os.listdir(path), key=lambda n: n.encode("utf-8", "surrogateescape"))
