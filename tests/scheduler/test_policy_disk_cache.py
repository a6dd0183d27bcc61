"""Parsed policy files kept on disk for the next process (``_policy_cache``): a process
that finds a file there gets the rules and warnings a parse gives, without parsing; a
changed file, another parser, or a cache that cannot be read or written: parsed afresh.
The entry point turns the cache on for a headless run of its own."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from actors.common import LazyJsRegex
from actors.scheduler import _policy_cache, _policy_files
from actors.scheduler._policy import PolicyEngine
from actors.scheduler._policy_files import load_policy_file

ROOT = Path(__file__).resolve().parents[2]

POLICY = """[[rule]]
toolName = "run_shell_command"
commandPrefix = ["git status", "ls"]
decision = "allow"
priority = 100
modes = ["default", "autoEdit"]
toolAnnotations = { readOnlyHint = true }

[[rule]]
toolName = "read_fiel"
argsPattern = '"file_path":"[^"]*\\.env"'
decision = "deny"
priority = 200
denyMessage = "no secrets"
"""


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, list[Path]]:
    """The cache file, on; and the files parsed (not served by a cache) meanwhile. Each
    ``new_process()`` forgets what this process holds, as the next process would."""
    path = tmp_path / "cache" / "policies.marshal"
    parsed: list[Path] = []
    real = _policy_files._parse_policy_text

    def counting(text: str, file: Path, **kw: object) -> object:
        parsed.append(file)
        return real(text, file, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(_policy_files, "_parse_policy_text", counting)
    monkeypatch.setattr(_policy_files, "_PARSED_POLICY_FILES", {})
    monkeypatch.setattr(_policy_cache, "_path", None)
    monkeypatch.setattr(_policy_cache, "_stored", None)
    _policy_cache.reuse_parsed_policies(str(path))
    return path, parsed


def policy_file(tmp_path: Path, text: str = POLICY) -> Path:
    policy = tmp_path / "p.toml"
    policy.write_text(text)
    return policy


def new_process() -> None:
    _policy_files._PARSED_POLICY_FILES.clear()
    _policy_cache._stored = None


def test_the_next_process_gets_what_a_parse_gives_without_parsing(
    tmp_path: Path, cache: tuple[Path, list[Path]]
) -> None:
    path, parsed = cache
    policy = policy_file(tmp_path)
    first = load_policy_file(policy, tier=4, known_tools=("read_file",))
    assert path.exists() and parsed == [policy]
    new_process()
    again = load_policy_file(policy, tier=4, known_tools=("read_file",))
    assert parsed == [policy]
    pattern = again[0][-1].args_pattern
    assert isinstance(pattern, LazyJsRegex) and pattern._compiled is None  # compiled by its first use
    assert again == first  # a pattern equal to the one the parse compiled
    rules, warnings = again
    assert any("read_fiel" in w for w in warnings)  # the typo warning, kept
    assert pattern.search('"file_path":"a/.env"') and not pattern.search('"file_path":"a/env"')
    assert rules[0].tool_annotations == (("readOnlyHint", True),)
    # The default policies, as a session builds them.
    engine, _ = PolicyEngine.build(approval_mode="default", interactive=False, settings={})
    new_process()
    count = len(parsed)
    cached, _ = PolicyEngine.build(approval_mode="default", interactive=False, settings={})
    assert len(parsed) == count and cached.rules == engine.rules


def test_a_changed_file_or_parser_is_parsed_afresh(
    tmp_path: Path, cache: tuple[Path, list[Path]], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, parsed = cache
    policy = policy_file(tmp_path)
    load_policy_file(policy, tier=4)
    policy.write_text(POLICY.replace('decision = "deny"', 'decision = "ask_user"'))
    new_process()
    assert [r.decision for r in load_policy_file(policy, tier=4)[0]][-1] == "ask_user"
    assert len(parsed) == 2
    new_process()
    monkeypatch.setattr(_policy_cache, "_parser_stamp", lambda: ("another parser",))
    load_policy_file(policy, tier=4)
    assert len(parsed) == 3


def test_a_parser_without_its_sources_caches_nothing(
    tmp_path: Path, cache: tuple[Path, list[Path]], monkeypatch: pytest.MonkeyPatch
) -> None:
    path, parsed = cache
    monkeypatch.setattr(_policy_cache, "_parser_stamp", lambda: ())
    policy = policy_file(tmp_path)
    for _ in range(2):
        new_process()
        load_policy_file(policy, tier=4)
    assert len(parsed) == 2 and not path.exists()


def test_two_installs_sharing_the_cache_keep_their_entries(
    tmp_path: Path, cache: tuple[Path, list[Path]], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, parsed = cache
    policy = policy_file(tmp_path)
    for install in ("one", "two", "one", "two"):
        new_process()
        monkeypatch.setattr(_policy_cache, "_parser_stamp", lambda install=install: (install,))
        load_policy_file(policy, tier=4)
    assert len(parsed) == 2


def test_rules_marshal_cannot_hold_are_parsed_each_time(
    tmp_path: Path, cache: tuple[Path, list[Path]]
) -> None:
    _, parsed = cache
    policy = policy_file(tmp_path, POLICY.replace("readOnlyHint = true", "since = 2026-01-01"))
    first = load_policy_file(policy, tier=4)
    new_process()
    assert load_policy_file(policy, tier=4) == first
    assert len(parsed) == 2


def test_a_cache_that_cannot_be_read_or_written_is_as_good_as_none(
    tmp_path: Path, cache: tuple[Path, list[Path]]
) -> None:
    path, parsed = cache
    policy = policy_file(tmp_path)
    path.parent.mkdir()
    path.write_bytes(b"\x00not marshal data")
    first = load_policy_file(policy, tier=4)
    new_process()
    assert load_policy_file(policy, tier=4) == first  # the file was rewritten
    assert len(parsed) == 1
    blocked = tmp_path / "file"
    blocked.write_text("a file where the cache's directory would be")
    _policy_cache.reuse_parsed_policies(str(blocked / "policies.marshal"))
    new_process()
    assert load_policy_file(policy, tier=4) == first
    assert len(parsed) == 2


def test_a_headless_run_of_its_own_keeps_its_parsed_policies(tmp_path: Path) -> None:
    """... and the next one reads them from the cache: no TOML parser imported."""
    hi = ROOT / "scenarios" / "bench" / "hi.responses"
    args = ["-p", "hi", "-m", "gemini-2.5-flash", "--fake-responses", str(hi)]
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "HOME": str(tmp_path),
        "GEMINI_CLI_HOME": str(tmp_path),
        "AGENTBUS_DATA_DIR": str(tmp_path / "data"),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
    }
    for code in (f"from actors.frontends import main; main({args!r})", "from actors.frontends import main; main()"):
        done = subprocess.run(
            [sys.executable, "-c", code, *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr
        # Called with arguments (tests, embedding): no cache; a process of its own: one.
        kept = list((tmp_path / "cache" / "agentbus").glob("policies-*.marshal"))
        assert len(kept) == (0 if "main(" in code and "main()" not in code else 1)
    tells = (
        "import sys\n"
        "import actors.frontends._exit as leaving\n"
        "leaving.exit_without_teardown = lambda status: print('tomllib' in sys.modules)\n"
        "from actors.frontends import main\n"
        "main()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", tells, *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.stdout.splitlines()[-1] == "False", done.stderr
