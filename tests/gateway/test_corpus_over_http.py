"""The conformance scenarios agentbus passes, run twice: with ``--fake-responses`` (the
fake backend in process) and with the same fixture served by the fake Gemini server and
reached through the real google-genai SDK over HTTP (``AGENTBUS_FAKE_RESPONSES_OVER_HTTP=1``).

Both passes must pass the same scenarios. By default only the ``stream-json`` mode runs
(the model traffic is the same in every mode, and each run over HTTP pays google-genai's
import); ``AGENTBUS_CORPUS_ALL_MODES=1`` runs all three.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conformance.test_corpus import AGENTBUS, COMPARE, PASSING


def run_corpus(report: Path, *impl_env: str) -> dict[str, str]:
    modes = [] if os.environ.get("AGENTBUS_CORPUS_ALL_MODES") == "1" else ["--modes", "stream-json"]
    env_args = [arg for kv in impl_env for arg in ("--impl-env", kv)]
    proc = subprocess.run(
        [sys.executable, str(COMPARE), "--impl", str(AGENTBUS), *env_args, *modes, "--only", ",".join(PASSING), "-j", "2", "--json", str(report)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    results: dict[str, str] = {}
    for line in proc.stdout.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0] in ("PASS", "FAIL"):
            results[parts[1]] = line
    assert results, proc.stdout[-3000:] + proc.stderr[-3000:]
    return results


@pytest.mark.slow
@pytest.mark.skipif(not COMPARE.exists(), reason="../shared/conformance is not present beside the project")
@pytest.mark.skipif(not AGENTBUS.exists(), reason="agentbus is not installed in this environment (make test installs it)")
def test_corpus_passes_with_fake_responses_and_over_http(tmp_path: Path) -> None:
    in_process = run_corpus(tmp_path / "fake.json")
    over_http = run_corpus(tmp_path / "http.json", "AGENTBUS_FAKE_RESPONSES_OVER_HTTP=1")
    assert set(in_process) == set(over_http) == set(PASSING)
    failures = [line for line in [*in_process.values(), *over_http.values()] if line.startswith("FAIL")]
    assert not failures, "\n".join(failures)
    report = json.loads((tmp_path / "http.json").read_text())
    assert report  # compare.py wrote its report for the HTTP pass
