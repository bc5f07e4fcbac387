"""Paired comparison of two eval runs with an exact McNemar test (binomial, stdlib only).

Episodes are paired by key (scenario id + sample). Only discordant pairs carry evidence: under
"no difference" a flip is equally likely either way, so the count of one kind is Binomial(n, ½).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from math import comb
from pathlib import Path
from agent.eval.record import EpisodeRecord
from agent.eval.runner import load_episodes


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact p-value for b vs c discordant pairs: 2·P(X ≤ min(b, c)), X ~ Bin(b+c, ½), capped at 1."""
    if b < 0 or c < 0:
        raise ValueError("counts must be non-negative")
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(comb(n, i) for i in range(min(b, c) + 1)) / 2**n
    return min(1.0, 2 * tail)


@dataclass
class Comparison:
    paired: int
    both_success: int
    both_failure: int
    gained: list[str] = field(default_factory=list)  # failed in A, succeeded in B
    lost: list[str] = field(default_factory=list)  # succeeded in A, failed in B
    only_in_a: int = 0
    only_in_b: int = 0

    @property
    def p_value(self) -> float:
        return mcnemar_exact(len(self.lost), len(self.gained))


def outcomes(records: list[EpisodeRecord]) -> dict[str, bool]:
    return {r.key: bool(r.verdict.success) for r in records}


def compare_outcomes(a: dict[str, bool], b: dict[str, bool]) -> Comparison:
    keys = sorted(a.keys() & b.keys())
    return Comparison(
        paired=len(keys),
        both_success=sum(1 for k in keys if a[k] and b[k]),
        both_failure=sum(1 for k in keys if not a[k] and not b[k]),
        gained=[k for k in keys if not a[k] and b[k]],
        lost=[k for k in keys if a[k] and not b[k]],
        only_in_a=len(a.keys() - b.keys()),
        only_in_b=len(b.keys() - a.keys()),
    )


def compare_dirs(a: Path, b: Path) -> Comparison:
    return compare_outcomes(outcomes(load_episodes(a)), outcomes(load_episodes(b)))


def format_comparison(result: Comparison, name_a: str = "A", name_b: str = "B", show: int = 20) -> str:
    n = result.paired
    a_rate = 100 * (result.both_success + len(result.lost)) / n if n else 0.0
    b_rate = 100 * (result.both_success + len(result.gained)) / n if n else 0.0
    lines = [
        f"paired episodes: {n}" + (f" (unpaired: {result.only_in_a} only in {name_a}, {result.only_in_b} only in {name_b})"
                                   if result.only_in_a or result.only_in_b else ""),
        f"success: {name_a} {a_rate:.1f}%  →  {name_b} {b_rate:.1f}%",
        f"both succeed {result.both_success}, both fail {result.both_failure}, "
        f"fail→success {len(result.gained)}, success→fail {len(result.lost)}",
        f"exact McNemar p = {result.p_value:.4g}",
    ]
    for title, keys in (("fail → success", result.gained), ("success → fail", result.lost)):
        if keys:
            more = f" … and {len(keys) - show} more" if len(keys) > show else ""
            lines.append(f"{title}: " + ", ".join(keys[:show]) + more)
    return "\n".join(lines)
