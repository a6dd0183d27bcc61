"""The README's runnable commands run as written in a fresh copy of the repository.

A block is runnable when its fence reads ```` ```sh runnable ```` (``needs-shared``
after it: it uses ``../shared``, and is skipped, saying so, when that is absent). Each
command of such a block (a line with its backslash continuations) runs with bash from
the copy's root, in README order, as a newcomer would after ``make demo`` and
``. .venv/bin/activate``: the project's ``.venv`` (linked, not reinstalled) first on
``PATH``, the copy's code on ``PYTHONPATH``, a ``HOME``, data and runtime directory of its
own, and no API key. Each must exit and print as ``EXPECT`` says, and afterwards ``git
status --porcelain`` of the copy must be empty: no README command changes the checkout.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
VENV = Path(sys.prefix)

# A runnable command (its start, spaces collapsed) -> its exit code and what it prints.
EXPECT: dict[str, tuple[int, tuple[str, ...]]] = {
    'agentbus -p "Summarise README.md"': (
        0,
        ('"type":"init"', '"tool_name":"read_file"', '"type":"tool_result"', '"type":"result","timestamp"', '"status":"success"'),
    ),
    "AGENTBUS_FAKE_RESPONSES_OVER_HTTP=1 agentbus -p hi": (0, ("Hello! How can I help you today?",)),
    "python3 ../shared/conformance/compare.py": (0, ("PASS simple-headless",)),
    "agentbus tool read_file": (0, ("# agentbus",)),
    "agentbus tool run_shell_command": (0, ('"tool": "run_shell_command"', '"status": "success"', "README.md")),
    "agentbus tool --list": (0, ("read_file", "run_shell_command")),
    "agentbus explore scenarios/explore/join": (0, ("20 run(s)", "every run kept every invariant")),
    "agentbus agents": (0, ("codebase_investigator", "generalist")),
    "echo hi | agentbus chat": (0, ("Hello! How can I help you today?", "stays in the daemon")),
    "agentbus daemon status": (0, ("agentbus daemon: running", "sessions: 1")),
    "agentbus daemon stop": (0, ("stopped",)),
    "ACP_PYTHON=$PWD/.venv/bin/python ../shared/tools/acp/run_agent.sh read_file": (0, ("(rc=0)",)),
    "agentbus --list-sessions": (0, ("sessions for this project",)),
    "agentbus replay scenarios/recorded/waves-read-write #": (0, ("> read_file a.txt", "c.txt now holds both words.")),
    "agentbus replay scenarios/recorded/waves-read-write --check": (0, ("check OK: 65 messages in 1 process",)),
    "agentbus replay scenarios/demo-fix-mean --tools live": (0, ("`python3 -m unittest`: OK",)),
    "agentbus replay scenarios/recorded/waves-read-write --trace": (
        0,
        ("wrote /tmp/waves-read-write.trace.json: 36 slices on 10 tracks, 1 process",),
    ),
}


@attrs.frozen
class Block:
    line: int
    needs_shared: bool
    commands: tuple[str, ...]


def runnable_blocks(text: str) -> list[Block]:
    blocks = []
    for m in re.finditer(r"^```sh runnable( needs-shared)?\n(.*?)^```$", text, re.M | re.S):
        commands = tuple(c.strip() for c in re.split(r"(?<!\\)\n", m.group(2)) if c.strip())
        blocks.append(Block(text.count("\n", 0, m.start()) + 1, bool(m.group(1)), commands))
    return blocks


BLOCKS = runnable_blocks((ROOT / "README.md").read_text(encoding="utf-8"))


def expectation(command: str) -> str:
    flat = " ".join(command.replace("\\\n", " ").split())
    keys = [k for k in EXPECT if flat.startswith(k)]
    assert len(keys) == 1, f"README command {flat!r} matches {keys} in EXPECT: say what it must print"
    return keys[0]


def test_every_runnable_command_has_one_expectation_and_every_expectation_a_command() -> None:
    used = [expectation(c) for b in BLOCKS for c in b.commands]
    assert sorted(set(EXPECT) - set(used)) == []


def fresh_copy(into: Path) -> Path:
    """The working tree's tracked files (as they are now), committed in a new repository."""
    repo = into / "repo"
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached"], cwd=ROOT, capture_output=True, check=True
    ).stdout.split(b"\0")
    for name in filter(None, listed):
        source = ROOT / os.fsdecode(name)
        if source.is_file():
            (repo / os.fsdecode(name)).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, repo / os.fsdecode(name))
    git = ["git", "-c", "user.name=readme", "-c", "user.email=readme@test", "-c", "commit.gpgsign=false"]
    subprocess.run([*git, "init", "-q"], cwd=repo, check=True)
    subprocess.run([*git, "add", "-A"], cwd=repo, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "copy"], cwd=repo, check=True)
    (repo / ".venv").symlink_to(VENV)  # a link: .gitignore's ".venv/" matches directories only
    (repo / ".git" / "info" / "exclude").write_text(".venv\n")
    if SHARED.is_dir():
        (into / "shared").symlink_to(SHARED)
    return repo


@attrs.frozen
class Copy:
    repo: Path
    env: dict[str, str]


@pytest.fixture(scope="module")
def copy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Copy]:
    if VENV == Path(sys.base_prefix) or not (VENV / "bin" / "agentbus").exists():
        pytest.skip("not run from the project's .venv with agentbus installed (make test installs it)")
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs git and a git checkout (the copy is made from its tracked files)")
    root = tmp_path_factory.mktemp("readme")
    repo = fresh_copy(root)
    keep = ("PATH", "LANG", "LC_ALL", "TMPDIR", "TERM")
    env = {k: v for k, v in os.environ.items() if k in keep}
    env.update(
        PATH=f"{repo / '.venv' / 'bin'}{os.pathsep}{os.environ['PATH']}",
        VIRTUAL_ENV=str(repo / ".venv"),
        PYTHONPATH=str(repo),
        HOME=str(root / "home"),
        XDG_DATA_HOME=str(root / "data"),
        XDG_RUNTIME_DIR=str(root / "run"),
        NO_COLOR="1",
    )
    (root / "home").mkdir()
    (root / "run").mkdir(mode=0o700)
    try:
        yield Copy(repo, env)
    finally:  # a daemon a failed block left running
        subprocess.run(["agentbus", "daemon", "stop"], cwd=repo, env=env, capture_output=True, timeout=30)


@pytest.mark.parametrize("block", BLOCKS, ids=lambda b: f"README.md:{b.line}")
def test_runnable_block(block: Block, copy: Copy) -> None:
    if block.needs_shared and not SHARED.is_dir():
        pytest.skip(f"needs ../shared, which is not present at {SHARED}")
    for command in block.commands:
        code, needles = EXPECT[expectation(command)]
        proc = subprocess.run(
            ["bash", "-c", command],
            cwd=copy.repo,
            env=copy.env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=120,
        )
        said = proc.stdout + proc.stderr
        assert proc.returncode == code, f"{command}\nexit {proc.returncode}\n{said[-3000:]}"
        for needle in needles:
            assert needle in said, f"{command}\ndoes not print {needle!r}:\n{said[-3000:]}"
        assert "Traceback" not in said, said[-3000:]


def test_the_commands_changed_nothing_tracked(copy: Copy) -> None:
    status = subprocess.run(
        ["git", "status", "--porcelain"], cwd=copy.repo, capture_output=True, text=True, check=True
    ).stdout
    assert status == ""
