"""The calendar domain's eval suite: what ``python -m agent eval`` gets through the domain module."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

from agent.eval.suite import Environment, EvalSuite, Scenario
from tools.calendar.lab.adversaries import ADVERSARIES
from tools.calendar.language import CALENDAR_LANGUAGE
from tools.calendar.lab.policies import POLICIES
from tools.calendar.receipt import CalendarReceipt
from tools.calendar.lab.rewritten import REWRITTEN_SPLITS, rewritten_scenarios
from tools.calendar.lab.boundary_drill import TEMPLATE as BOUNDARY_DRILL
from tools.calendar.lab.boundary_drill import drill_scenarios as boundary_scenarios
from tools.calendar.lab.continued import MAX_EARLIER, chat_store, continue_scenarios
from tools.calendar.lab.continued_policies import last_task_only, meddles
from tools.calendar.lab.policies import oracle
from tools.calendar.lab.scenarios import CORE_TEMPLATES, TEMPLATES, generate
from tools.calendar.lab.time_drill import TEMPLATE as TIME_DRILL
from tools.calendar.lab.time_drill import drill_scenarios
from tools.calendar.lab.time_probe import TEMPLATE as TIME_PROBE
from tools.calendar.lab.time_probe import probe_scenarios
from tools.calendar.lab.time_probe import report as time_probe_report
from tools.calendar.prompt_text import DOMAIN_PROMPT, DOMAIN_PROMPT_SHORT
from tools.calendar.tools import build_registry
from tools.calendar.lab.verify import CalendarVerifier, RewardWeights
from tools.calendar.lab.wording_drill import TEMPLATE as WORDING_DRILL
from tools.calendar.lab.wording_drill import wording_scenarios

if TYPE_CHECKING:
    from agent.config import Settings


def make_environment(scenario: Scenario) -> Environment:
    """A private in-memory store filled with the scenario's initial state, clock frozen at its now;
    in a continued chat, with what the earlier tasks did to it (``continued.chat_store``)."""
    store = chat_store(scenario)
    now = scenario.now_datetime()
    return Environment(
        registry=build_registry(store, now=lambda: now),
        prompt=DOMAIN_PROMPT,
        short_prompt=DOMAIN_PROMPT_SHORT,
        now=now,
        snapshot=lambda: store.snapshot(with_ids=True),  # ids: a deleted and re-created event is a change
        close=store.close,
        receipt=CalendarReceipt(store),
        language=CALENDAR_LANGUAGE,
    )


def scenarios(split: str | None = None, per_template: int | None = None, seed: int = 0,
              templates: Iterable[str] | None = None) -> list[Scenario]:
    """The generator's scenarios of a phrasing split, or a rewritten set (``tools.calendar.lab.rewritten``);
    and, only when ``templates`` names them, the fixed time probe (test only) and the time,
    wording and boundary drills (the training rows; train only, ``per_template`` of them,
    default 200, the boundary drill 100): none is ever part of the default set."""
    if split in REWRITTEN_SPLITS:
        return rewritten_scenarios(split, per_template=per_template, seed=seed, templates=templates)
    chosen = list(templates) if templates else []
    named = (TIME_PROBE, TIME_DRILL, WORDING_DRILL, BOUNDARY_DRILL)
    if not any(t in named for t in chosen):
        return generate(split, per_template, seed, chosen or None)
    unknown = [t for t in chosen if t not in TEMPLATES and t not in named]
    if unknown:
        raise ValueError(f"unknown templates {unknown}; known: {', '.join((*TEMPLATES, *named))}")
    out: list[Scenario] = []
    for template in chosen:
        if template == TIME_PROBE:
            out += probe_scenarios(split, per_template)
        elif template == TIME_DRILL:
            out += drill_scenarios(split, per_template, seed)
        elif template == WORDING_DRILL:
            out += wording_scenarios(split, per_template, seed)
        elif template == BOUNDARY_DRILL:
            out += boundary_scenarios(split, per_template, seed)
        else:
            out += generate(split, per_template, seed, [template])
    return out


def load_eval_suite(settings: Settings | None = None) -> EvalSuite:
    # Every scripted policy plays only the last task of a continued chat; the two meddling ones
    # change an earlier task's event on purpose (the "unasked %" column must see them).
    policies = {name: last_task_only(factory) for name, factory in {**POLICIES, **ADVERSARIES}.items()}
    policies.update({"deletes_earlier_event": meddles("delete", oracle), "moves_earlier_event": meddles("move", oracle)})
    return EvalSuite(
        name="calendar",
        scenarios=scenarios,
        make_environment=make_environment,
        verifier=CalendarVerifier(),
        policies=policies,
        templates=TEMPLATES,
        reference_templates=CORE_TEMPLATES,
        reweight=lambda weights: CalendarVerifier(RewardWeights.from_dict(weights)),
        reports=(time_probe_report,),
        extra_splits=REWRITTEN_SPLITS,
        continued=continue_scenarios,
        most_earlier=MAX_EARLIER,
    )
