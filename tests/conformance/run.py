"""``make conformance``: compare.py over the corpus, judged against the expected differences.

    python -m tests.conformance.run COMPARE_PY [compare.py options...]

Runs ``COMPARE_PY`` with the options (its output as it comes), then says which of the
scenarios that differed were expected (``expected.EXPECTED_DIFFERENCES``, with the
reason) and which were not. Exit 0 when exactly the expected ones among the selected
scenarios differ; 1 when another differs or an expected one now passes (the list is
then out of date); compare.py's own exit code when it ran nothing (bad options,
``--list``).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from .expected import EXPECTED_DIFFERENCES


def judge(results: Sequence[dict[str, object]]) -> tuple[list[str], list[str], list[str]]:
    """(expected differences seen, unexpected differences, expected ones that passed)."""
    failed = {str(r["name"]) for r in results if r.get("status") != "PASS"}
    selected = {str(r["name"]) for r in results}
    expected = set(EXPECTED_DIFFERENCES) & selected
    return sorted(failed & expected), sorted(failed - expected), sorted(expected - failed)


def main(argv: Sequence[str]) -> int:
    if not argv:
        sys.stderr.write("usage: python -m tests.conformance.run COMPARE_PY [compare.py options...]\n")
        return 2
    compare, *args = argv
    if "--list" in args or "-h" in args or "--help" in args:
        return subprocess.run([sys.executable, compare, *args]).returncode
    with tempfile.TemporaryDirectory(prefix="agentbus-conformance-") as tmp:
        report = Path(tmp) / "report.json"
        if "--json" in args:
            report = Path(args[args.index("--json") + 1])
        else:
            args = [*args, "--json", str(report)]
        code = subprocess.run([sys.executable, compare, *args]).returncode
        if not report.exists():
            return code or 1
        results = json.loads(report.read_text(encoding="utf-8"))["results"]
    seen, unexpected, now_passing = judge(results)
    for name in seen:
        print(f"expected difference: {name} ({EXPECTED_DIFFERENCES[name]})")
    for name in now_passing:
        print(f"now passing, remove it from tests/conformance/expected.py: {name}")
    for name in unexpected:
        print(f"UNEXPECTED difference: {name}")
    ok = not unexpected and not now_passing
    print(
        f"conformance: {len(results) - len(seen) - len(unexpected)} passed, "
        f"{len(seen)} expected differences, {len(unexpected)} unexpected"
        + ("" if ok else " (FAILED)")
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
