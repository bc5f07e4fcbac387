"""A real model through the whole eval: SmolLM2-135M in llama.cpp on two dev scenarios.

Scores are expected to be low; the test checks that the run finishes, is scored and leaves
its files, not how good the model is. Budgets are cut so it stays well under a minute.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from agent.eval.cli import balanced
from agent.eval.report import ERRORS_CSV, write_reports
from agent.eval.runner import RunOptions, load_episodes, run_eval
from agent.loop import Budgets
from tools.calendar.lab.eval_suite import load_eval_suite


@pytest.mark.slow
def test_smollm2_dev_run_finishes_and_is_scored(smollm2: Path, tmp_path: Path) -> None:
    from agent.backends.llama import LlamaBackend

    suite = load_eval_suite()
    scenarios = balanced(suite.scenarios(split="dev", per_template=8), 2)
    # The compact tool block: ~1,100 prompt tokens a step instead of ~3,300, so the run stays well
    # inside the suite's timeout on a busy machine; what is checked (finishes, scored) is the same.
    backend = LlamaBackend(smollm2, n_ctx=4096, n_threads=2, tool_block="compact")
    options = RunOptions(out_dir=tmp_path, max_user_turns=2, progress=False,
                         budgets=Budgets(max_steps=3, max_tool_calls=4, max_tokens=96))
    records = run_eval(suite, scenarios, lambda s, k: backend, options)

    assert [r.scenario_id for r in records] == [s.id for s in scenarios]
    assert len(load_episodes(tmp_path)) == 2
    for record in records:
        verdict = record.verdict
        assert record.error is None
        assert 0.0 <= verdict.reward <= 1.0 and verdict.components["total"] == verdict.reward
        assert record.exchanges and record.exchanges[0].turn.steps[0].generated_tokens > 0
        assert record.backend["backend"] == "llama"
    rows = write_reports(tmp_path, records, "smollm2")
    assert rows[-1].group == "overall" and rows[-1].episodes == 2
    with (tmp_path / ERRORS_CSV).open(encoding="utf-8") as fh:
        assert len(list(csv.DictReader(fh))) >= 2
