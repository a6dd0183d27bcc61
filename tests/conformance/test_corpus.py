"""Gemini CLI's conformance corpus (../shared/conformance), run with compare.py.

``PASSING`` lists the scenarios agentbus must pass; it grows as features land. The full
corpus count is reported by ``make conformance``. Not listed, with the reason:

- ``hooks-ask-decision-headless``, ``hooks-after-model-replace-response``: deliberate
  differences (docs/differences.md);
- ``concurrency-limit-web-fetch-dns-shim``: needs the test resolver, run separately below.
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
    "policy-headless-shell-denied-default",
    "user-policy-absent-sanity",
    "agent-flow-after-agent-clear-context",
    "agent-flow-after-agent-input",
    "agent-flow-before-agent-context",
    "agent-flow-multistep-once-per-turn",
    "api-resilience-metadata-only",
    "concurrency-limit-web-fetch",
    "control-france-gemini-2.5-flash",
    "google-web-search-fixture-exhausted",
    "hooks-after-tool-context",
    "hooks-after-tool-tail-call",
    "hooks-allow-tool",
    "hooks-before-agent-context",
    "hooks-before-model-block",
    "hooks-before-model-deny",
    "hooks-before-model-modify-request",
    "hooks-before-tool-input-override",
    "hooks-before-tool-selection",
    "hooks-before-tool-stop",
    "hooks-block-tool-decision",
    "hooks-block-tool-exit2-stderr",
    "hooks-disabled-multiple-runs",
    "hooks-disabled-via-settings",
    "hooks-error-handling",
    "hooks-input-validation",
    "hooks-mixed-stdout-allows",
    "hooks-multiple-events",
    "hooks-precompress-auto",
    "hooks-sequential-execution",
    "hooks-session-end-on-exit",
    "hooks-session-start",
    "hooks-session-start-context",
    "hooks-telemetry",
    "json-output-auth-mismatch",
    "json-output-error",
    "json-output-france",
    "json-output-session-id",
    "memory-idle-startup",
    "memory-multi-function-call",
    "memory-multi-turn-stdin",
    "memory-simple-prompt",
    "parallel-waves-headless-default",
    "parallel-waves-headless-yolo",
    "parallel-waves-headless-yolo-core-only",
    "perf-asian-language",
    "perf-cold-startup",
    "perf-high-volume-shell",
    "perf-idle-cpu",
    "perf-skill-loading",
    "policy-headless-readonly-default",
    "policy-headless-shell-allowed-policy",
    "policy-headless-shell-prefix-allow",
    "policy-headless-shell-prefix-deny",
    "resume-latest",
    "shell-background-headless-turn1",
    "simple-headless",
    "stdout-stderr-missing-at-file",
    "stdout-stderr-say-hello",
    "steering-headless",
    "user-policy-allowed-tools-toml",
    "write-file-fixture-exhausted",
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


@pytest.mark.skipif(not COMPARE.exists(), reason="../shared/conformance is not present beside the project")
@pytest.mark.skipif(not AGENTBUS.exists(), reason="agentbus is not installed in this environment (make test installs it)")
def test_dns_shim_scenario_with_the_test_resolver() -> None:
    """The corpus' DNS shim is a Node preload; ours is AGENTBUS_TEST_DNS_OVERRIDES."""
    proc = subprocess.run(
        [
            sys.executable,
            str(COMPARE),
            "--impl",
            str(AGENTBUS),
            "--only",
            "concurrency-limit-web-fetch-dns-shim",
            "--impl-env",
            "AGENTBUS_TEST_DNS_OVERRIDES=example.com=93.184.215.14,www.example.com=93.184.215.14",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:]
