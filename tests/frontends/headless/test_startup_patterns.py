"""What a headless run compiles (issue #20): the regular expressions of the modules it
imports are compiled by their first use (``actors.common.LazyPattern``), so a ``-p hi``
run compiles none of those that only a tool's output, an API error, a policy file's TOML
error or a shell command would need."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
LAZY = (
    "actors.common._ansi",
    "actors.common._js",
    "actors.common._net",
    "actors.common._truncation",
    "actors.gateway._errors",
    "actors.gateway._retry",
    "actors.hooks._config",
    "actors.scheduler._policy_args",
    "actors.scheduler._policy_files",
    "actors.scheduler._policy_settings",
    "actors.tools._agent_defs",
    "actors.tools._glob",
    "actors.tools._grep",
    "actors.tools._paths",
    "actors.tools._replace",
    "actors.tools._update_topic",
)

CODE = """
import re, sys
compiled = set()
_compile = re.compile
def compile(pattern, flags=0):
    frame = sys._getframe(1)
    if frame.f_code.co_name == "<module>":
        compiled.add(frame.f_globals.get("__name__"))
    return _compile(pattern, flags)
re.compile = compile
from actors.frontends import main
status = main(["-p", "hi", "-m", "gemini-2.5-flash", "--fake-responses", sys.argv[1]])
print(status, *sorted(name for name in sys.argv[2:] if name in compiled))
imported = [name for name in sys.argv[2:] if name not in sys.modules]
assert not imported, f"not imported any more (take them off the list): {imported}"
"""


def test_a_headless_run_compiles_no_pattern_at_import_in_these_modules(tmp_path: Path) -> None:
    env = {**os.environ, "HOME": str(tmp_path), "GEMINI_CLI_HOME": str(tmp_path),
           "AGENTBUS_DATA_DIR": str(tmp_path / "data")}
    done = subprocess.run(
        [sys.executable, "-c", CODE, str(ROOT / "scenarios" / "bench" / "hi.responses"), *LAZY],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "0", done.stdout
