"""Real episodes for the export tests: scripted policies through the real eval runner, and the CLI parser.

The SFT, stats and GRPO export tests all read episodes that the runner wrote (loop, simulated
user, verifier), so they share how those are made: ``run`` plays the oracle, or for one sample
of a template in ``BROKEN`` the policy that breaks its rule; ``parse`` builds the
``python -m agent`` parser with only the export subcommand on it.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from agent.backends.scripted import ScriptedBackend
from agent.config import Settings
from agent.eval.record import EpisodeRecord
from agent.eval.runner import RunOptions, run_eval
from agent.eval.suite import EvalSuite, Scenario, load_eval_suite
from agent.export import cli


def suite() -> EvalSuite:
    return load_eval_suite(Settings())


BROKEN = {"delete_request": "deletes_without_asking", "missing_info": "guesses_missing_time",
          "conflict_create": "ignores_conflicts", "no_tool": "tools_for_greetings"}
BROKEN_SAMPLE = 2  # samples 0 and 1 are the oracle (deterministic: sample 1 repeats sample 0)


def run(suite: EvalSuite, out: Path, scenarios: list[Scenario], samples: int = 1) -> list[EpisodeRecord]:
    """Episodes through the real eval runner (loop, simulated user, verifier, one JSON each).

    Sample ``BROKEN_SAMPLE`` of a template in ``BROKEN`` runs the policy that breaks its rule;
    every other sample runs the oracle."""

    def backend_for(scenario: Scenario, sample: int) -> ScriptedBackend:
        policy = BROKEN[scenario.template] if sample == BROKEN_SAMPLE else "oracle"
        return ScriptedBackend(suite.policies[policy](scenario))

    return run_eval(suite, scenarios, backend_for, RunOptions(out_dir=out, samples=samples, progress=False))


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m agent")
    cli.add_parser(parser.add_subparsers(dest="command"), parents=[])
    return parser.parse_args(argv)
