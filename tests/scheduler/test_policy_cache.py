"""Parsed policy files are cached by (path, mtime, size): building many engines in one
process (the daemon, one per session) parses each file once, and a changed file is
parsed again."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from actors.scheduler import _policy_files
from actors.scheduler._policy import PolicyEngine
from actors.scheduler._policy_files import load_policy_file
from actors.scheduler._policy_rules import PolicyFileError

RULE = """[[rule]]
toolName = "{tool}"
decision = "{decision}"
priority = {priority}
"""


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The files parsed (not served from the cache) while the test runs."""
    seen: list[Path] = []
    real = _policy_files._parse_policy_text
    monkeypatch.setattr(_policy_files, "_PARSED_POLICY_FILES", {})

    def counting(text: str, path: Path, **kw: object) -> object:
        seen.append(path)
        return real(text, path, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(_policy_files, "_parse_policy_text", counting)
    return seen


def test_a_file_is_parsed_once_until_it_changes(tmp_path: Path, parses: list[Path]) -> None:
    path = tmp_path / "p.toml"
    path.write_text(RULE.format(tool="read_file", decision="allow", priority=100))
    first, _ = load_policy_file(path, tier=4)
    again, _ = load_policy_file(path, tier=4)
    assert parses == [path]
    assert again == first and [r.decision for r in again] == ["allow"]
    again.clear()  # callers get their own lists
    assert load_policy_file(path, tier=4)[0] == first

    # Another tier or other known tools: other rules (priorities, warnings).
    assert load_policy_file(path, tier=3)[0][0].priority == 3.1
    assert len(parses) == 2

    # Same size, new mtime: parsed again.
    path.write_text(RULE.format(tool="read_file", decision="allow", priority=200))
    os.utime(path, ns=(1, 1))
    assert [r.priority for r in load_policy_file(path, tier=4)[0]] == [4.2]
    # New size, whatever the mtime: parsed again.
    path.write_text(RULE.format(tool="glob", decision="ask_user", priority=200))
    os.utime(path, ns=(1, 1))
    assert [r.tool_name for r in load_policy_file(path, tier=4)[0]] == ["glob"]
    assert len(parses) == 4


def test_a_broken_file_is_not_cached(tmp_path: Path, parses: list[Path]) -> None:
    path = tmp_path / "p.toml"
    path.write_text("[[rule]\n")
    for _ in range(2):
        with pytest.raises(PolicyFileError):
            load_policy_file(path)
    assert len(parses) == 2
    path.unlink()
    with pytest.raises(PolicyFileError, match="cannot read"):
        load_policy_file(path)


def test_engines_built_one_after_another_share_the_parsed_default_policies(
    tmp_path: Path, parses: list[Path]
) -> None:
    def build() -> PolicyEngine:
        engine, warnings = PolicyEngine.build(approval_mode="default", interactive=True, settings={})
        assert warnings == []
        return engine

    first = build()
    defaults = len(parses)
    assert defaults > 0
    second = build()
    assert len(parses) == defaults
    assert second.rules == first.rules


def test_a_same_size_copy_with_the_old_mtime_is_read_again(tmp_path: Path) -> None:
    import os
    import shutil

    allow = tmp_path / "allow.toml"
    deny = tmp_path / "deny.toml"
    allow.write_text('[[rule]]\ntoolName = "glob"\ndecision = "allow"\npriority = 100\n')
    deny.write_text('[[rule]]\ntoolName = "glob"\ndecision = "deny"\npriority = 100\n')
    stat = allow.stat()
    os.utime(deny, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # same size, same mtime
    target = tmp_path / "policy.toml"
    shutil.copy2(allow, target)
    first = load_policy_file(target, tier=2, known_tools=("glob",))
    shutil.copy2(deny, target)  # what `cp -p` does
    second = load_policy_file(target, tier=2, known_tools=("glob",))
    assert [r.decision for r in first[0]] == ["allow"]
    assert [r.decision for r in second[0]] == ["deny"]
