"""Which train scenarios an expert-iteration round samples, and which episodes it keeps.

Sampling is spread over the templates (round-robin, as eval's ``balanced``), or weighted
towards the templates the start adapter fails on dev (``weigh_templates``), so samples go where
the adapter is weak; of a scenario's successful samples, ``best_only`` keeps the best-reward one.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agent.eval.record import EpisodeRecord


def best_per_scenario(records: list[EpisodeRecord]) -> list[EpisodeRecord]:
    """The highest-reward record of each scenario (the first sample wins a tie)."""
    best: dict[str, EpisodeRecord] = {}
    for r in records:
        if r.scenario_id not in best or r.verdict.reward > best[r.scenario_id].verdict.reward:
            best[r.scenario_id] = r
    return list(best.values())


def round_robin(scenarios: list[Any]) -> list[Any]:
    """All of ``scenarios``, templates taken in turn (``balanced`` without a limit)."""
    queues: dict[str, list[Any]] = {}
    for s in scenarios:
        queues.setdefault(s.template, []).append(s)
    out: list[Any] = []
    while any(queues.values()):
        for queue in queues.values():
            if queue:
                out.append(queue.pop(0))
    return out


def success_by_template(records: list[EpisodeRecord]) -> dict[str, float]:
    """Task success in percent per template (each template's share of successful episodes)."""
    runs: dict[str, list[bool]] = {}
    for r in records:
        runs.setdefault(r.template, []).append(bool(r.verdict.success))
    return {t: 100.0 * sum(v) / len(v) for t, v in runs.items()}


def template_weights(success: dict[str, float], floor: float) -> dict[str, float]:
    """A template's sampling weight: its failure rate (0..1), at least ``floor``, so a template the
    adapter already gets right keeps a few samples instead of none."""
    return {t: max(1.0 - s / 100.0, floor) for t, s in success.items()}


def weighted_pick(pool: list[Any], weights: dict[str, float], total: int) -> list[Any]:
    """``total`` scenarios of ``pool``, each template's count in proportion to its weight (a template
    without a weight gets the mean weight), each template's first scenarios in pool order,
    interleaved round-robin as ``balanced`` does.

    Counts by largest remainder: each template gets the floor of its quota, and the seats left go one
    each to the largest fractional parts (ties: pool order). A template whose quota exceeds what the
    pool has takes all it has, and the rest is shared among the others again."""
    queues: dict[str, list[Any]] = {}
    for s in pool:
        queues.setdefault(s.template, []).append(s)
    mean = sum(weights.values()) / len(weights) if weights else 1.0
    w = {t: weights.get(t, mean) for t in queues}
    remaining = min(total, len(pool))
    counts: dict[str, int] = {}
    active = list(queues)
    while active:
        mass = sum(w[t] for t in active) or 1.0
        quota = {t: remaining * w[t] / mass for t in active}
        full = [t for t in active if quota[t] >= len(queues[t])]
        if not full:
            floors = {t: math.floor(quota[t]) for t in active}
            left = remaining - sum(floors.values())
            for t in sorted(active, key=lambda t: quota[t] - floors[t], reverse=True)[:left]:
                floors[t] += 1
            counts.update(floors)
            break
        for t in full:
            counts[t] = len(queues[t])
            remaining -= len(queues[t])
            active.remove(t)
    picked = {t: queues[t][:counts.get(t, 0)] for t in queues}
    out: list[Any] = []
    while any(picked.values()):
        for t in queues:
            if picked[t]:
                out.append(picked[t].pop(0))
    return out
