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


# --- SFT rows: how long they are in the model's own tokens ------------------------------------

TOKEN_BIN = 250  # width of a row-length histogram bin, in tokens
TYPICAL_TARGET = 900  # what a CPU can afford per row (the demo's training budget)


@dataclass
class RowStats:
    rows: int = 0
    lengths: list[int] = field(default_factory=list)  # tokens per row, sorted
    per_template: dict[str, list[int]] = field(default_factory=dict)

    def percentile(self, q: float) -> int:
        return self.lengths[min(len(self.lengths) - 1, int(q * len(self.lengths)))] if self.lengths else 0

    def histogram(self) -> dict[str, int]:
        bins: Counter[int] = Counter(n // TOKEN_BIN for n in self.lengths)
        return {f"{b * TOKEN_BIN}-{(b + 1) * TOKEN_BIN - 1}": bins[b] for b in range(min(bins, default=0), max(bins, default=-1) + 1)}

    def to_dict(self) -> dict[str, Any]:
        return {
            "rows": self.rows,
            "tokens": {"median": self.percentile(0.5), "p90": self.percentile(0.9), "max": self.percentile(1.0),
                       "total": sum(self.lengths)},
            f"rows_within_{TYPICAL_TARGET}": sum(n <= TYPICAL_TARGET for n in self.lengths),
            "token_histogram": self.histogram(),
            "median_per_template": {t: sorted(v)[len(v) // 2] for t, v in sorted(self.per_template.items())},
        }


def row_text(renderer: Any, row: dict[str, Any]) -> str:
    """The training text of a row, as the model's template renders it for the runtime.

    ``exact`` rows already hold the runtime's messages (tool block in the system message);
    ``structured`` rows get their calls back as the canonical text the runtime keeps."""
    import json as _json

    from agent.export.sft import canonical_text

    tools = row.get("tools")
    if isinstance(tools, str):
        tools = _json.loads(tools)
    messages = []
    for m in row["messages"]:
        if m.get("tool_calls"):
            calls = [(c["function"]["name"], c["function"]["arguments"]) for c in m["tool_calls"]]
            m = {"role": "assistant", "content": canonical_text(m.get("content") or "", calls, renderer.chat_format)}
        messages.append(m)
    return str(renderer.render(messages, tools if renderer.native_tools else None, add_generation_prompt=False))


def compute_rows(rows: list[dict[str, Any]], model_path: Any) -> RowStats:
    """Token counts of SFT rows with the tokenizer and chat template inside the GGUF (no weights loaded)."""
    from agent.backends.llama.engine import Engine, ModelFiles  # its load prints only llama.cpp's errors
    from agent.prompt import PromptRenderer

    llm = Engine(ModelFiles(str(model_path)), n_ctx=512, vocab_only=True).llm
    try:
        def token_text(i: int) -> str:
            return llm.detokenize([i], special=True).decode("utf-8", errors="replace")

        renderers: dict[str, Any] = {}
        stats = RowStats()
        for row in rows:
            block = str(row.get("tool_block", "full"))
            if block not in renderers:
                renderers[block] = PromptRenderer.from_metadata(llm.metadata, token_text, tool_block=block)
            n = len(llm.tokenize(row_text(renderers[block], row).encode("utf-8"), add_bos=False, special=True))
            stats.lengths.append(n)
            stats.per_template.setdefault(str(row.get("template", "?")), []).append(n)
        stats.rows = len(rows)
        stats.lengths.sort()
        return stats
    finally:
        llm.close()


def render_rows(stats: RowStats, model_name: str) -> str:
    d = stats.to_dict()
    t = d["tokens"]
    within = d[f"rows_within_{TYPICAL_TARGET}"]
    lines = [f"rows: {stats.rows}    tokens ({model_name}): median {t['median']}, p90 {t['p90']}, max {t['max']}, "
             f"total {t['total']}    within {TYPICAL_TARGET}: {within} ({100 * within / max(1, stats.rows):.0f}%)", "",
             "token histogram:"]
    peak = max(d["token_histogram"].values(), default=0) or 1
    for label, n in d["token_histogram"].items():
        lines.append(f"  {label:>11} {n:>6} {'#' * round(30 * n / peak)}")
    lines.append("")
    lines.append(f"{'template':<24}{'median tokens':>14}")
    for template, median in d["median_per_template"].items():
        lines.append(f"{template:<24}{median:>14}")
    return "\n".join(lines)
