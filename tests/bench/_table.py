"""The benchmark table shared by every benchmark module (one list per run).

A row has its value; optionally a baseline measured in the same run (``ratio`` =
value / baseline) and Gemini CLI's value for the same scenario, measured in the same
run when ``gemini`` is on PATH (``vs_gemini`` = value / Gemini CLI's).
"""

from __future__ import annotations

from typing import Any

RESULTS: list[dict[str, Any]] = []


def record(
    name: str,
    value: float | None,
    unit: str,
    *,
    baseline: float | None = None,
    target: str = "",
    gemini: float | None = None,
) -> None:
    row: dict[str, Any] = {"name": name, "value": None if value is None else round(value, 4), "unit": unit, "target": target}
    if baseline and value is not None:
        row["baseline"] = round(baseline, 4)
        row["ratio"] = round(value / baseline, 2)
    if gemini is not None:
        row["gemini"] = round(gemini, 4)
        if value is not None and gemini:
            row["vs_gemini"] = round(value / gemini, 3)
    RESULTS.append(row)
    shown = "-" if value is None else f"{value:12.4f}"
    ratio = f"  ({row['ratio']}x baseline {row['baseline']} {unit})" if "ratio" in row else ""
    theirs = f"  [Gemini CLI {row['gemini']} {unit}: {row.get('vs_gemini', '-')}x]" if gemini is not None else ""
    print(f"{name:58} {shown:>12} {unit:6}{ratio}{theirs}  {target}", flush=True)


def markdown(results: list[dict[str, Any]]) -> str:
    """The rows as the markdown table of ``docs/performance.md``
    (``python -m tests.bench._table bench-results.json``)."""

    def num(v: Any) -> str:
        return "-" if v is None else f"{v:g}"

    lines = [
        "| benchmark | agentbus | unit | ratio (baseline) | Gemini CLI | agentbus / Gemini CLI | target / note |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        ratio = f"{r['ratio']}x ({num(r['baseline'])})" if "ratio" in r else ""
        gemini = num(r["gemini"]) if "gemini" in r else ""
        versus = f"{r['vs_gemini']}x" if "vs_gemini" in r else ""
        lines.append(
            f"| {r['name']} | {num(r['value'])} | {r['unit']} | {ratio} | {gemini} | {versus} | {r.get('target', '')} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    import json
    import sys
    from pathlib import Path

    print(markdown(json.loads(Path(sys.argv[1]).read_text())["results"]))
