"""The benchmark table shared by every benchmark module (one list per run)."""

from __future__ import annotations

from typing import Any

RESULTS: list[dict[str, Any]] = []


def record(name: str, value: float, unit: str, *, baseline: float | None = None, target: str = "") -> None:
    row: dict[str, Any] = {"name": name, "value": round(value, 4), "unit": unit, "target": target}
    if baseline:
        row["baseline"] = round(baseline, 4)
        row["ratio"] = round(value / baseline, 2)
    RESULTS.append(row)
    ratio = f"  ({row['ratio']}x baseline {row['baseline']} {unit})" if baseline else ""
    print(f"{name:58} {value:12.4f} {unit:6}{ratio}  {target}", flush=True)


