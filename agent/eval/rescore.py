"""``python -m agent eval rescore DIR``: the verifier of today, run again over a results folder.

An episode file keeps everything the verifier reads (the scenario, each turn with its calls,
the final store) except the store before the first message, which the domain's environment
rebuilds from the scenario. So a figure the verifier learned after a run was made (e.g. the
false-claim share, ``reply_false_claim``) is computed from the folder without running a model.
Nothing in the folder is written.
"""

from __future__ import annotations

from pathlib import Path

from agent.eval.record import EpisodeRecord
from agent.eval.runner import load_episodes
from agent.eval.suite import EvalSuite, Verifier
from agent.eval.trace import EpisodeTrace, Exchange


def trace_of(record: EpisodeRecord, suite: EvalSuite) -> EpisodeTrace:
    """The episode's trace as the runner had it, from its file and a fresh environment."""
    environment = suite.make_environment(record.scenario)
    try:
        initial = environment.snapshot()
        tool_names = tuple(environment.registry.names)
    finally:
        environment.close()
    return EpisodeTrace(
        scenario=record.scenario,
        exchanges=[Exchange(user_text=e.user, turn=e.turn, script_line=e.script_line) for e in record.exchanges],
        initial=initial, final=record.final_snapshot, tool_names=tool_names, error=record.error,
        messages=list(record.messages),
    )


def rescore(out_dir: Path, suite: EvalSuite, verifier: Verifier | None = None) -> list[EpisodeRecord]:
    """Every episode of ``out_dir`` with a fresh verdict (files untouched)."""
    judge = verifier or suite.verifier
    return [record.model_copy(update={"verdict": judge.verify(trace_of(record, suite))})
            for record in load_episodes(out_dir)]
