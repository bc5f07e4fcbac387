"""BFCL v4 multi-turn as an eval suite: what ``python -m agent eval --domain bfcl`` gets.

A case is a ``Scenario``: its ``question`` list is the opening and the script, played in order
whatever the agent says (``fixed_turns``); ``initial`` holds what BFCL's checker needs to rebuild
the world (``initial_config``, ``involved_classes``) and the tools left out; ``expected`` holds
the ground truth. The template is the category, so ``--category``/``--templates`` choose among
``CATEGORIES`` and the summary has a row per category; without one, ``multi_turn_base`` (200).
Every case is test data (``split`` is ``test``): nothing here is ever trained on.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from agent.eval.suite import Environment, EvalSuite, Scenario
from tools.bfcl.checker import BfclVerifier, turns_report
from tools.bfcl.data import CATEGORIES, DEFAULT_CATEGORY, BFCL_VERSION, Case, load_cases
from tools.bfcl.oracle import POLICIES
from tools.bfcl.world import build_world

if TYPE_CHECKING:
    from agent.config import Settings

# BFCL's cases have no clock; the episode's "now" is fixed only because the runtime wants one.
EPOCH = "2024-01-01T00:00:00+00:00"


def system_text() -> str:
    """The system message: BFCL's own words for the task and the multi-turn behaviour (its
    ``classic`` prompt style, less the output-format part: our format is Hermes tool calls, which
    the tool block beneath explains, as in BFCL's Qwen handler)."""
    from bfcl_eval.constants.default_prompts import PROMPT_STYLE_TEMPLATES

    style = PROMPT_STYLE_TEMPLATES["classic"]
    return f"{style['persona']} {style['task']}\n\n{style['multiturn_behavior']}"


def scenario_of(case: Case) -> Scenario:
    return Scenario(
        id=case.id, template=case.category, variant=f"bfcl-v4-{BFCL_VERSION}", split="test", seed=0,
        language="en", now=EPOCH, tz="UTC", opening=case.turns[0], user_script=case.turns[1:],
        fixed_turns=True, needs_tools=any(case.ground_truth),
        call_budget=sum(len(t) for t in case.ground_truth),
        initial={"initial_config": case.initial_config, "involved_classes": list(case.involved_classes),
                 "excluded_function": list(case.excluded_function), "long_context": case.long_context,
                 "missed_function": {k: list(v) for k, v in case.missed_function.items()}},
        expected={"ground_truth": [list(t) for t in case.ground_truth]},
    )


def scenarios(split: str | None = None, per_template: int | None = None, seed: int = 0,
              templates: list[str] | None = None) -> list[Scenario]:
    """The cases of the chosen categories (default ``multi_turn_base``), BFCL's order; BFCL is all
    test data, so a ``train`` or ``dev`` split is an error, not an empty run."""
    if split not in (None, "all", "test"):
        raise ValueError(f"BFCL is test data only: --split {split} has no cases (use test or all)")
    out: list[Scenario] = []
    for category in templates or [DEFAULT_CATEGORY]:
        cases = load_cases(category)
        out += [scenario_of(c) for c in cases[: per_template if per_template is not None else len(cases)]]
    return out


def make_environment(scenario: Scenario) -> Environment:
    """BFCL's classes loaded with the case's ``initial_config``, and the case's tools bound to them
    (a miss_func case's held-out ones join the registry at their turn)."""
    initial: dict[str, Any] = scenario.initial
    case = Case(id=scenario.id, category=scenario.template, turns=(), involved_classes=tuple(initial["involved_classes"]),
                initial_config=initial["initial_config"], excluded_function=tuple(initial["excluded_function"]),
                ground_truth=(), missed_function={k: tuple(v) for k, v in initial.get("missed_function", {}).items()})
    world = build_world(case)
    text = system_text()
    return Environment(registry=world.registry, prompt=text, now=datetime.fromisoformat(EPOCH).astimezone(timezone.utc),
                       snapshot=world.snapshot, system_prompt=text, on_user_turn=world.on_user_turn)


def load_eval_suite(settings: Settings | None = None) -> EvalSuite:
    return EvalSuite(name="bfcl", scenarios=scenarios, make_environment=make_environment, verifier=BfclVerifier(),
                     policies=dict(POLICIES), templates=CATEGORIES, reference_templates=(DEFAULT_CATEGORY,),
                     reports=(turns_report,))
