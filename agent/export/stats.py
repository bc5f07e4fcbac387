"""What a set of recorded episodes holds before training on it: outcomes, rewards, calls, GRPO signal.

"Groups" are episodes of the same scenario (k samples of one prompt). GRPO learns only from
groups whose rewards differ (the advantage of an all-equal group is zero), so the share of
mixed groups says how much signal a GRPO run on these scenarios would get.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any, Iterable

from agent.export.episodes import Episode

BINS = 10  # reward histogram over [0, 1]


def outcome(episode: Episode) -> str:
    if episode.success is None and episode.reward is None:
        return "unscored"
    return "success" if episode.success else "failure"


@dataclass
class Stats:
    episodes: int = 0
    per_template: dict[str, Counter[str]] = field(default_factory=dict)
    histogram: list[int] = field(default_factory=lambda: [0] * BINS)
    mean_calls: float = 0.0
    mean_reward: float | None = None
    groups: int = 0  # scenarios with at least two scored samples
    mixed_groups: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "episodes": self.episodes,
            "per_template": {t: dict(c) for t, c in sorted(self.per_template.items())},
            "reward_histogram": {f"{i / BINS:.1f}-{(i + 1) / BINS:.1f}": n for i, n in enumerate(self.histogram)},
            "mean_calls": round(self.mean_calls, 3),
            "mean_reward": None if self.mean_reward is None else round(self.mean_reward, 4),
            "groups": self.groups,
            "mixed_groups": self.mixed_groups,
            "mixed_share": round(self.mixed_groups / self.groups, 4) if self.groups else None,
        }


def compute(episodes: Iterable[Episode]) -> Stats:
    stats = Stats()
    rewards_by_group: dict[str, list[float]] = defaultdict(list)
    total_calls = 0
    rewards: list[float] = []
    for e in episodes:
        stats.episodes += 1
        stats.per_template.setdefault(e.template, Counter())[outcome(e)] += 1
        total_calls += e.calls
        if e.reward is not None:
            rewards.append(e.reward)
            stats.histogram[min(BINS - 1, max(0, int(e.reward * BINS)))] += 1
            rewards_by_group[e.scenario_id].append(e.reward)
    if stats.episodes:
        stats.mean_calls = total_calls / stats.episodes
    if rewards:
        stats.mean_reward = sum(rewards) / len(rewards)
    for values in rewards_by_group.values():
        if len(values) >= 2:
            stats.groups += 1
            if max(values) - min(values) > 1e-9:
                stats.mixed_groups += 1
    return stats


def render(stats: Stats) -> str:
    """A plain-text report for the terminal."""
    lines = [f"episodes: {stats.episodes}    mean calls: {stats.mean_calls:.2f}    mean reward: "
             + ("-" if stats.mean_reward is None else f"{stats.mean_reward:.3f}")]
    lines.append("")
    lines.append(f"{'template':<24}{'success':>9}{'failure':>9}{'unscored':>10}{'total':>7}")
    for template, counts in sorted(stats.per_template.items()):
        lines.append(f"{template:<24}{counts['success']:>9}{counts['failure']:>9}{counts['unscored']:>10}"
                     f"{sum(counts.values()):>7}")
    lines.append("")
    lines.append("reward histogram:")
    peak = max(stats.histogram) or 1
    for i, n in enumerate(stats.histogram):
        lines.append(f"  {i / BINS:.1f}-{(i + 1) / BINS:.1f} {n:>6} {'#' * round(30 * n / peak)}")
    lines.append("")
    if stats.groups:
        lines.append(f"groups (same scenario, >=2 scored samples): {stats.groups}; with mixed rewards: "
                     f"{stats.mixed_groups} ({100 * stats.mixed_groups / stats.groups:.0f}%)")
    else:
        lines.append("groups: none (no scenario has two scored samples; run eval with several samples per scenario)")
    return "\n".join(lines)
