"""Summary figures from episode records: per template and overall, in the reference columns.

Columns: valid tool calls % (calls that named a known tool with arguments that validated, of all
attempted, unreadable blocks included), policy compliance %, task success %, mean tool calls,
plus incorrect-action % (a store change that was not wanted), false claims % (episodes whose final
reply states a change the store did not undergo, or denies one it did: the verifier's
``reply_false_claim`` component; "—" for episodes scored before it existed, which
``eval rescore`` scores again), unasked changes % (of the episodes that continue a chat with
earlier tasks, ``Scenario.history``: those that changed something an earlier task left behind,
the verifier's ``Verdict.unasked_changes``; "—" when no episode continued a chat), mean reward
and pass^k (share of scenarios where all k samples succeeded; equals success % when k = 1).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass
from typing import Any, Iterable

from agent.eval.record import EpisodeRecord

OVERALL = "overall"
FALSE_CLAIM = "reply_false_claim"  # the verifier's component (1.0: the reply claims what did not happen)
REFERENCE = "reference"  # the reference templates only (e.g. the 400 core calendar scenarios)


@dataclass(frozen=True)
class Row:
    group: str
    episodes: int
    scenarios: int
    valid_tool_calls: float | None  # percent; None when no call was attempted
    policy_compliance: float
    task_success: float
    mean_tool_calls: float
    incorrect_action: float
    mean_reward: float
    pass_k: float
    k: int
    false_claims: float | None = None  # percent of the episodes scored for it; None: none was
    unasked_changes: float | None = None  # percent of the episodes with earlier tasks; None: none had any


def _pct(part: float, whole: float) -> float:
    return 100.0 * part / whole if whole else 0.0


def summarize_group(group: str, records: list[EpisodeRecord]) -> Row:
    verdicts = [r.verdict for r in records]
    attempted = sum(v.attempted_calls for v in verdicts)
    by_scenario: dict[str, list[bool]] = defaultdict(list)
    for r in records:
        by_scenario[r.scenario_id].append(bool(r.verdict.success))
    n = len(records)
    claims = [v.components[FALSE_CLAIM] for v in verdicts if FALSE_CLAIM in v.components]
    unasked = [v.unasked_changes for v in verdicts if v.unasked_changes is not None]
    return Row(
        group=group,
        episodes=n,
        scenarios=len(by_scenario),
        valid_tool_calls=_pct(sum(v.valid_calls for v in verdicts), attempted) if attempted else None,
        policy_compliance=_pct(sum(v.policy_ok for v in verdicts), n),
        task_success=_pct(sum(v.success for v in verdicts), n),
        mean_tool_calls=(attempted / n) if n else 0.0,
        incorrect_action=_pct(sum(v.incorrect_action for v in verdicts), n),
        mean_reward=(sum(v.reward for v in verdicts) / n) if n else 0.0,
        pass_k=_pct(sum(all(s) for s in by_scenario.values()), len(by_scenario)),
        k=max((len(s) for s in by_scenario.values()), default=0),
        false_claims=_pct(sum(1 for c in claims if c >= 1.0), len(claims)) if claims else None,
        unasked_changes=_pct(sum(1 for u in unasked if u > 0), len(unasked)) if unasked else None,
    )


def summarize(records: Iterable[EpisodeRecord], reference: tuple[str, ...] = ()) -> list[Row]:
    """One row per template (in first-seen order), then the summary rows: the reference
    templates together (the suite the published figures use), when the run has others too,
    and the overall row."""
    records = list(records)
    groups: dict[str, list[EpisodeRecord]] = defaultdict(list)
    for r in records:
        groups[r.template].append(r)
    rows = [summarize_group(t, rs) for t, rs in groups.items()]
    core = [r for r in records if r.template in reference]
    if core and len(core) < len(records):
        rows.append(summarize_group(REFERENCE, core))
    return rows + [summarize_group(OVERALL, records)]


HEADERS = ("template", "n", "valid calls %", "policy %", "success %", "mean calls", "incorrect %", "false claims %",
           "unasked %", "reward", "pass^k")


def format_table(rows: list[Row]) -> str:
    """Plain fixed-width table for the terminal and summary.txt."""
    k = rows[-1].k if rows else 1
    headers = HEADERS[:-1] + (f"pass^{k}",)
    body = [
        (
            r.group, str(r.episodes),
            "—" if r.valid_tool_calls is None else f"{r.valid_tool_calls:.1f}",
            f"{r.policy_compliance:.1f}", f"{r.task_success:.1f}", f"{r.mean_tool_calls:.2f}",
            f"{r.incorrect_action:.1f}", "—" if r.false_claims is None else f"{r.false_claims:.1f}",
            "—" if r.unasked_changes is None else f"{r.unasked_changes:.1f}",
            f"{r.mean_reward:.3f}", f"{r.pass_k:.1f}",
        )
        for r in rows
    ]
    widths = [max(len(h), *(len(line[i]) for line in body)) for i, h in enumerate(headers)]

    def line(cells: tuple[str, ...]) -> str:
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))

    out = [line(headers), "  ".join("-" * w for w in widths)]
    summary_from = next((i for i, r in enumerate(rows) if r.group in (REFERENCE, OVERALL)), len(rows))
    out += [line(cells) for cells in body[:summary_from]]
    if body:
        out += ["  ".join("-" * w for w in widths)] + [line(cells) for cells in body[summary_from:]]
    return "\n".join(out)


def rows_to_json(rows: list[Row]) -> list[dict[str, Any]]:
    return [asdict(r) for r in rows]
