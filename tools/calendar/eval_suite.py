"""The calendar domain's eval suite: what ``python -m agent eval`` gets through the domain module."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

from agent.eval.suite import Environment, EvalSuite, Scenario
from tools.calendar.adversaries import ADVERSARIES
from tools.calendar.policies import POLICIES
from tools.calendar.receipt import CalendarReceipt
from tools.calendar.rewritten import REWRITTEN_SPLITS, rewritten_scenarios
from tools.calendar.scenario_state import load_state
from tools.calendar.scenarios import CORE_TEMPLATES, TEMPLATES, generate
from tools.calendar.store import CalendarStore
from tools.calendar.tools import DOMAIN_PROMPT, DOMAIN_PROMPT_SHORT, build_registry
from tools.calendar.verify import CalendarVerifier, RewardWeights

if TYPE_CHECKING:
    from agent.config import Settings


def make_environment(scenario: Scenario) -> Environment:
    """A private in-memory store filled with the scenario's initial state, clock frozen at its now."""
    store = CalendarStore(":memory:", tz=scenario.tz)
    load_state(store, scenario.initial)
    now = scenario.now_datetime()
    return Environment(
        registry=build_registry(store, now=lambda: now),
        prompt=DOMAIN_PROMPT,
        short_prompt=DOMAIN_PROMPT_SHORT,
        now=now,
        snapshot=lambda: store.snapshot(with_ids=True),  # ids: a deleted and re-created event is a change
        close=store.close,
        receipt=CalendarReceipt(store),
    )


def scenarios(split: str | None = None, per_template: int | None = None, seed: int = 0,
              templates: Iterable[str] | None = None) -> list[Scenario]:
    """The generated scenarios of a phrasing split, or a rewritten set (``tools.calendar.rewritten``)."""
    if split in REWRITTEN_SPLITS:
        return rewritten_scenarios(split, per_template=per_template, seed=seed, templates=templates)
    return generate(split, per_template=per_template, seed=seed, templates=templates)


def load_eval_suite(settings: Settings | None = None) -> EvalSuite:
    return EvalSuite(
        name="calendar",
        scenarios=scenarios,
        make_environment=make_environment,
        verifier=CalendarVerifier(),
        policies={**POLICIES, **ADVERSARIES},
        templates=TEMPLATES,
        reference_templates=CORE_TEMPLATES,
        reweight=lambda weights: CalendarVerifier(RewardWeights.from_dict(weights)),
        extra_splits=REWRITTEN_SPLITS,
    )
