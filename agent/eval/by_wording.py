"""Success by wording: a run's episodes grouped by their scenario's ``variant`` (one template's
phrasing in one language), written beside the per-episode summary as ``by_wording.txt`` and
``by_wording.json``.

Why: a small model reads a sentence right or wrong for all its scenarios together, so the episodes
of one wording are closer to one observation than to many (docs/evaluation.md). A split that holds
several wordings per template and language is then best read wording by wording as well as episode
by episode: per template, how many wordings, the mean of their success rates (each wording weighs
the same, however many episodes it had) and the worst one; per wording, its successes. ``eval
compare`` votes wording by wording between two runs; this is the same grouping for one run.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterable

from agent.eval.record import EpisodeRecord

BY_WORDING_TXT = "by_wording.txt"
BY_WORDING_JSON = "by_wording.json"
ALL = "all"  # the row over every wording of the run


@dataclass(frozen=True)
class WordingRow:
    """One wording's episodes: how many, how many succeeded."""

    template: str
    wording: str  # the scenario's variant
    episodes: int
    successes: int

    @property
    def success(self) -> float:
        return 100.0 * self.successes / self.episodes if self.episodes else 0.0


@dataclass(frozen=True)
class TemplateByWording:
    """A template's wordings at one weight each: their count, the mean and the lowest of their
    success rates (percent), and the episodes' own success rate beside them."""

    template: str
    wordings: int
    episodes: int
    mean_of_wordings: float
    worst_wording: float
    episode_success: float


def wording_rows(records: Iterable[EpisodeRecord]) -> list[WordingRow]:
    """One row per (template, variant), in first-seen order of templates and sorted variants."""
    grouped: dict[str, dict[str, list[bool]]] = defaultdict(lambda: defaultdict(list))
    for r in records:
        grouped[r.template][r.variant].append(bool(r.verdict.success))
    return [WordingRow(template, wording, len(outcomes), sum(outcomes))
            for template, by_variant in grouped.items() for wording, outcomes in sorted(by_variant.items())]


def _summary(name: str, rows: list[WordingRow]) -> TemplateByWording:
    rates = [r.success for r in rows]
    episodes = sum(r.episodes for r in rows)
    return TemplateByWording(
        template=name, wordings=len(rows), episodes=episodes, mean_of_wordings=sum(rates) / len(rates),
        worst_wording=min(rates), episode_success=100.0 * sum(r.successes for r in rows) / episodes)


def template_rows(rows: list[WordingRow]) -> list[TemplateByWording]:
    """Per template (in the rows' order), then the ``all`` row over every wording of the run."""
    by_template: dict[str, list[WordingRow]] = defaultdict(list)
    for row in rows:
        by_template[row.template].append(row)
    out = [_summary(template, group) for template, group in by_template.items()]
    return out + [_summary(ALL, rows)] if rows else out


def format_by_wording(rows: list[WordingRow]) -> str:
    """The per-template table, then every wording's successes, as plain fixed-width text."""
    summary = template_rows(rows)
    head = ("template", "wordings", "n", "mean of wordings %", "worst wording %", "episodes %")
    body = [(s.template, str(s.wordings), str(s.episodes), f"{s.mean_of_wordings:.1f}", f"{s.worst_wording:.1f}",
             f"{s.episode_success:.1f}") for s in summary]
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(head)]

    def line(cells: tuple[str, ...]) -> str:
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))

    out = [line(head), "  ".join("-" * w for w in widths), *(line(b) for b in body), "", "by wording:"]
    width = max((len(r.wording) for r in rows), default=0)
    out += [f"  {r.wording.ljust(width)}  {r.successes}/{r.episodes}  {r.success:.0f} %" for r in rows]
    return "\n".join(out)


def write_by_wording(out_dir: Path, records: Iterable[EpisodeRecord]) -> list[WordingRow]:
    """Write ``by_wording.txt`` and ``by_wording.json`` into ``out_dir`` (nothing for no records)."""
    rows = wording_rows(records)
    if not rows:
        return rows
    (out_dir / BY_WORDING_TXT).write_text(format_by_wording(rows) + "\n", encoding="utf-8")
    data = {"templates": [asdict(s) for s in template_rows(rows)],
            "wordings": [{**asdict(r), "success": r.success} for r in rows]}
    (out_dir / BY_WORDING_JSON).write_text(json.dumps(data, ensure_ascii=False, indent=1), encoding="utf-8")
    return rows
