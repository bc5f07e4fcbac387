"""Paired comparison of two eval runs with an exact McNemar test (binomial, stdlib only).

Episodes are paired by key (scenario id + sample). Only discordant pairs carry evidence: under
"no difference" a flip is equally likely either way, so the count of one kind is Binomial(n, ½).

McNemar counts every episode as independent evidence. The calendar's scenarios are not: all
those of one wording (a scenario's ``variant``, one template's phrasing in one language) are the
same sentence with other titles, dates and times, and a small model reads the sentence right or
wrong for all of them together (on the test split 48–66 % of the variance in success lies between
wordings). Five or ten episodes of one wording are then closer to one observation, and a
McNemar p on episodes overstates the evidence. So the comparison also pairs the runs wording by
wording, each wording one vote (better, worse or the same success rate), with the same exact
binomial test on the votes (a sign test). Neither test says whether a gain carries to wordings
that neither run was scored on, so a held split should hold several per template and language (the
calendar's dev and test hold three each since 2026-12-06; one before).
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
class WordingChange:
    """One wording whose success rate differs between the runs: successes of ``n`` paired episodes."""

    wording: str
    n: int
    a: int
    b: int


@dataclass
class WordingComparison:
    """The runs paired wording by wording: where B's success rate is higher, lower or the same."""

    wordings: int
    better: list[WordingChange] = field(default_factory=list)
    worse: list[WordingChange] = field(default_factory=list)

    @property
    def same(self) -> int:
        return self.wordings - len(self.better) - len(self.worse)

    @property
    def p_value(self) -> float:
        return mcnemar_exact(len(self.worse), len(self.better))


@dataclass
class Comparison:
    paired: int
    both_success: int
    both_failure: int
    gained: list[str] = field(default_factory=list)  # failed in A, succeeded in B
    lost: list[str] = field(default_factory=list)  # succeeded in A, failed in B
    only_in_a: int = 0
    only_in_b: int = 0
    wordings: WordingComparison | None = None  # None: no vote to give (see compare_wordings)

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


def compare_wordings(a: dict[str, bool], b: dict[str, bool], wording_of: dict[str, str]) -> WordingComparison | None:
    """Pair the runs by wording (``wording_of``: episode key → its scenario's variant). None when no
    wording has two paired episodes (the votes would be McNemar's pairs again) or all are one
    wording (a benchmark whose variant is its version, as BFCL's: one vote says nothing)."""
    groups: dict[str, list[str]] = {}
    for key in sorted(a.keys() & b.keys()):
        groups.setdefault(wording_of[key], []).append(key)
    if len(groups) < 2 or all(len(keys) < 2 for keys in groups.values()):
        return None
    result = WordingComparison(wordings=len(groups))
    for wording, keys in sorted(groups.items()):
        change = WordingChange(wording, len(keys), sum(a[k] for k in keys), sum(b[k] for k in keys))
        if change.b != change.a:
            (result.better if change.b > change.a else result.worse).append(change)
    return result


def compare_dirs(a: Path, b: Path) -> Comparison:
    records_a, records_b = load_episodes(a), load_episodes(b)
    outcomes_a, outcomes_b = outcomes(records_a), outcomes(records_b)
    result = compare_outcomes(outcomes_a, outcomes_b)
    result.wordings = compare_wordings(outcomes_a, outcomes_b, {r.key: r.variant for r in (*records_a, *records_b)})
    return result


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
    w = result.wordings
    if w is not None:
        lines += [
            f"by wording ({w.wordings} wordings, each one vote; its episodes succeed or fail mostly together): "
            f"better in {len(w.better)}, worse in {len(w.worse)}, the same in {w.same}",
            f"exact sign test p = {w.p_value:.4g}",
        ]
        for title, changes in (("better", w.better), ("worse", w.worse)):
            if changes:
                lines.append(f"{title}: " + ", ".join(f"{c.wording} {c.a}/{c.n}→{c.b}/{c.n}" for c in changes))
    return "\n".join(lines)
