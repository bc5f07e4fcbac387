"""GRPO export: one prompt row per scenario, for TRL ``GRPOTrainer`` with the domain's environment.

A row names its scenario (``scenario_id``, ``template``, ``index``, generator ``seed``, and the
scenario's own ``scenario_seed`` as a check) so the environment can rebuild the store with the
generator; it never carries the expected answer. ``prompt`` is the system message the eval
uses (the scenario's fixed "now", the domain prompt) and the user's opening message, stamped with
that "now" as the eval and the runtime stamp it (``[HH:MM] text``).

Domain-free: scenarios come from the configured domain's eval suite.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

from agent.eval.suite import SPLITS, EvalSuite, Scenario
from agent.eval.dialogue import system_message, user_message
from agent.prompt import PromptSettings


def needs_dialogue(scenario: Scenario) -> bool:
    """True when the task needs a second user message, which a GRPO environment cannot send."""
    return scenario.mutation_after > 1 or (scenario.consent_after or 0) > 1


def prompt_rows(suite: EvalSuite, *, split: str | None = None, per_template: int | None = None, seed: int = 0,
                templates: list[str] | None = None, include_dialogue: bool = False,
                prompt_settings: PromptSettings = PromptSettings()) -> list[dict[str, Any]]:
    """Rows for the chosen scenarios. ``index`` is the scenario's position within its template;
    ``prompt_settings`` are the runtime's, so a row's prompt is the one serving would show."""
    if split not in (None, "all", *SPLITS):
        raise ValueError(f"unknown split {split!r}; use one of {', '.join(SPLITS)} or all")
    rows: list[dict[str, Any]] = []
    position: Counter[str] = Counter()
    for scenario in suite.scenarios(split=None, per_template=per_template, seed=seed, templates=templates):
        index = position[scenario.template]
        position[scenario.template] += 1
        if split not in (None, "all") and scenario.split != split:
            continue
        if needs_dialogue(scenario) and not include_dialogue:
            continue
        environment = replace(suite.make_environment(scenario), prompt_settings=prompt_settings)
        try:
            prompt = [system_message(scenario, environment), user_message(scenario, environment, scenario.opening)]
        finally:
            environment.close()
        rows.append({
            "prompt": prompt,
            "scenario_id": scenario.id,
            "template": scenario.template,
            "index": index,
            "seed": seed,
            "scenario_seed": scenario.seed,
            "split": scenario.split,
            "language": scenario.language,
            "needs_dialogue": needs_dialogue(scenario),
        })
    return rows


def write_grpo(rows: list[dict[str, Any]], out: Path) -> dict[str, Any]:
    """``out/grpo.jsonl``, and ``out/grpo_dataset`` (DatasetDict by split) when ``datasets`` is installed."""
    out.mkdir(parents=True, exist_ok=True)
    with (out / "grpo.jsonl").open("w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    summary: dict[str, Any] = {
        "rows": len(rows),
        "per_split": dict(Counter(r["split"] for r in rows)),
        "per_template": dict(Counter(r["template"] for r in rows)),
    }
    try:
        import datasets
    except ImportError:
        summary["dataset"] = None
    else:
        by_split: dict[str, list[dict[str, Any]]] = {}
        for row in rows:
            by_split.setdefault(row["split"], []).append(row)
        datasets.DatasetDict({s: datasets.Dataset.from_list(r) for s, r in by_split.items()}).save_to_disk(
            str(out / "grpo_dataset"))
        summary["dataset"] = str(out / "grpo_dataset")
    (out / "grpo_summary.json").write_text(json.dumps(summary, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    return summary
