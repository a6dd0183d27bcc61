"""Gemini CLI's conformance corpus (../shared/conformance), run with compare.py.

Every scenario must pass but those in ``expected.EXPECTED_DIFFERENCES`` (the one list,
with the reasons, which ``make conformance`` judges by too); the DNS-shim one passes
with the test resolver, run separately below.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from .expected import EXPECTED_DIFFERENCES

ROOT = Path(__file__).resolve().parents[2]
COMPARE = ROOT.parent / "shared" / "conformance" / "compare.py"
AGENTBUS = Path(sys.executable).parent / "agentbus"

SCENARIOS = COMPARE.parent / "scenarios"
PASSING = sorted(
    p.name
    for p in (SCENARIOS.iterdir() if SCENARIOS.is_dir() else [])
    if (p / "scenario.json").exists() and p.name not in EXPECTED_DIFFERENCES
)


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
