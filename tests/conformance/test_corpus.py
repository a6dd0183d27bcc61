"""Gemini CLI's conformance corpus (../shared/conformance), run with compare.py.

``PASSING`` lists the scenarios agentbus must pass; it grows as features land. The full
corpus count is reported by ``make conformance``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
COMPARE = ROOT.parent / "shared" / "conformance" / "compare.py"
AGENTBUS = Path(sys.executable).parent / "agentbus"

PASSING = [
    # foundation: headless output, exit codes, file tools
    "api-resilience-metadata-only",
    "control-france-gemini-2.5-flash",
    "json-output-auth-mismatch",
    "json-output-error",
    "json-output-france",
    "json-output-session-id",
    "simple-headless",
    "stdout-stderr-missing-at-file",
    "stdout-stderr-say-hello",
    "steering-headless",
    "write-file-fixture-exhausted",
    # router: the classifier call is consumed
    "memory-idle-startup",
    "memory-multi-function-call",
    "memory-multi-turn-stdin",
    "memory-simple-prompt",
    "perf-asian-language",
    "perf-cold-startup",
    "perf-high-volume-shell",
    "perf-idle-cpu",
    "perf-skill-loading",
    # scheduler: waves and policy
    "parallel-waves-headless-default",
    "parallel-waves-headless-yolo",
    "parallel-waves-headless-yolo-core-only",
    "policy-headless-readonly-default",
    "policy-headless-shell-allowed-policy",
    "policy-headless-shell-prefix-allow",
    "policy-headless-shell-prefix-deny",
    "user-policy-allowed-tools-toml",
]


@pytest.mark.skipif(not COMPARE.exists(), reason="../shared/conformance is not present beside the project")
@pytest.mark.skipif(not AGENTBUS.exists(), reason="agentbus is not installed in this environment (make test installs it)")
def test_conformance_scenarios_pass() -> None:
    proc = subprocess.run(
        [sys.executable, str(COMPARE), "--impl", str(AGENTBUS), "--only", ",".join(PASSING), "-j", "2"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    failures = [line for line in proc.stdout.splitlines() if line.startswith("FAIL")]
    assert proc.returncode == 0 and not failures, "\n".join(failures) or proc.stdout[-3000:]
