"""One row per flood of the fairness benchmarks, and the table they print together.

A row holds the victim's latencies alone and under the flood and the flood's fair share
(what the victim may legitimately wait for: one render limit for a render flood, nothing
for the others). Issue 24's target: the victim's p99 under the flood <= 2 x its p99 alone +
the fair share; ``of_target`` <= 1 meets it.

Data: none (a helper of ``bench/fairness.py``).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Row:
    flood: str
    alone_p50_s: float
    alone_p99_s: float
    loaded_p50_s: float
    loaded_p99_s: float
    fair_share_s: float = 0.0
    note: str = ""

    @property
    def ratio(self) -> float:
        return self.loaded_p99_s / self.alone_p99_s

    @property
    def target_s(self) -> float:
        return 2 * self.alone_p99_s + self.fair_share_s

    @property
    def of_target(self) -> float:
        return self.loaded_p99_s / self.target_s


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:,.1f}" if seconds < 1 else f"{seconds * 1000:,.0f}"


def table(rows: list[Row]) -> str:
    """The rows as one markdown table (milliseconds)."""
    lines = [
        "| flood | alone p50 / p99 ms | under the flood p50 / p99 ms | p99 ratio "
        "| fair share ms | target ms | of the target | |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        verdict = "met" if r.of_target <= 1 else "MISSED"
        lines.append(
            f"| {r.flood} | {_ms(r.alone_p50_s)} / {_ms(r.alone_p99_s)} "
            f"| {_ms(r.loaded_p50_s)} / {_ms(r.loaded_p99_s)} | {r.ratio:.2f} "
            f"| {_ms(r.fair_share_s)} | {_ms(r.target_s)} | {r.of_target:.2f} ({verdict}) "
            f"| {r.note} |"
        )
    return "\n".join(lines)
