"""Test scenarios with hand-rewritten openings: is success robust to wordings the
generator never uses?

``data/rewritten_openings.json`` holds, for test-split scenarios of every template (seed 0),
an opening written by hand (casual, formal, with typos, reordered, Korean and English mixed)
that asks for exactly the task of the generator's opening, which is recorded beside it. Two
named sets serve them, with the generator's scenario ids, so ``eval compare`` pairs them:

- ``rewritten``: the generated scenario with only ``opening`` replaced by the rewrite;
- ``rewritten-original``: the same scenarios as generated (the generator's wording).

Both are built by ``build_scenario`` from the ids in the file, and each is checked against the
recorded original opening, so a generator change that alters a scenario is an error, never a
silent mismatch. They are test data: ``generate`` (train, dev, test, all) never serves them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Iterable

from agent.eval.suite import Scenario
from tools.calendar.lab.scenarios import CORE_TEMPLATES, DEFAULT_PER_TEMPLATE, TEMPLATES, build_scenario

DATA = Path(__file__).with_name("data") / "rewritten_openings.json"
REWRITTEN = "rewritten"
REWRITTEN_ORIGINAL = "rewritten-original"
REWRITTEN_SPLITS: tuple[str, ...] = (REWRITTEN, REWRITTEN_ORIGINAL)
STYLES: tuple[str, ...] = ("casual", "formal", "typo", "reordered", "mixed")


@dataclass(frozen=True)
class Rewrite:
    id: str
    template: str
    index: int
    seed: int
    language: str
    style: str
    original: str  # the generator's opening, as it was when the rewrite was written
    rewritten: str


def parse_id(scenario_id: str) -> tuple[str, int, int]:
    """``delete_request-s0-007`` → (template, seed, index), the inverse of ``build_scenario``'s ids."""
    template, seed_part, index = scenario_id.rsplit("-", 2)
    if not seed_part.startswith("s") or not seed_part[1:].isdigit() or not index.isdigit():
        raise ValueError(f"{scenario_id!r} is not a generated scenario id")
    return template, int(seed_part[1:]), int(index)


@lru_cache(maxsize=4)
def load_rewrites(path: Path = DATA) -> dict[str, Rewrite]:
    """The file's entries by scenario id; ValueError (naming the file and entry) if one is malformed."""
    data = json.loads(path.read_text(encoding="utf-8"))
    out: dict[str, Rewrite] = {}
    for scenario_id, entry in data["entries"].items():
        template, seed, index = parse_id(scenario_id)
        if entry.get("template") != template or template not in TEMPLATES:
            raise ValueError(f"{path}: {scenario_id}: template {entry.get('template')!r} does not match the id")
        if entry.get("style") not in STYLES:
            raise ValueError(f"{path}: {scenario_id}: style {entry.get('style')!r}; use one of {', '.join(STYLES)}")
        out[scenario_id] = Rewrite(id=scenario_id, template=template, index=index, seed=seed,
                                   language=entry["language"], style=entry["style"], original=entry["original"],
                                   rewritten=entry["rewritten"])
    return out


def rewritten_scenarios(split: str, per_template: int | None = None, seed: int = 0,
                        templates: Iterable[str] | None = None, path: Path = DATA) -> list[Scenario]:
    """The scenarios of the file, in ``generate``'s order (template, then index), with the rewritten
    opening (``rewritten``) or as generated (``rewritten-original``). ``per_template`` and
    ``templates`` select as in ``generate`` (a scenario index past the count is left out)."""
    if split not in REWRITTEN_SPLITS:
        raise ValueError(f"unknown split {split!r}; the rewritten sets are {', '.join(REWRITTEN_SPLITS)}")
    rewrites = load_rewrites(path)
    seeds = {r.seed for r in rewrites.values()}
    if seed not in seeds:
        raise ValueError(f"the rewritten openings were written for the scenarios of --seed "
                         f"{', '.join(map(str, sorted(seeds)))}, not --seed {seed}")
    chosen = tuple(templates) if templates else TEMPLATES
    unknown = [t for t in chosen if t not in TEMPLATES]
    if unknown:
        raise ValueError(f"unknown templates {unknown}; known: {', '.join(TEMPLATES)}")
    count = DEFAULT_PER_TEMPLATE if per_template is None else per_template
    out: list[Scenario] = []
    for template in chosen:
        n = count if template in CORE_TEMPLATES else max(1, count // 2)
        for rewrite in sorted((r for r in rewrites.values() if r.template == template and r.seed == seed),
                              key=lambda r: r.index):
            if rewrite.index >= n:
                continue
            scenario = build_scenario(template, rewrite.index, seed)
            if scenario.split != "test" or scenario.opening != rewrite.original:
                raise ValueError(
                    f"{path.name}: {rewrite.id}: the generator now makes a different scenario "
                    f"(split {scenario.split}, opening {scenario.opening!r}; the file recorded {rewrite.original!r}); "
                    "rewrite that opening again")
            out.append(replace(scenario, opening=rewrite.rewritten) if split == REWRITTEN else scenario)
    return out
