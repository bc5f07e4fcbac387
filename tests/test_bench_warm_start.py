"""The warm-start figure alone: three real processes (cold, first, warm start) on SmolLM2 with the
toy domain's short prompt. Only that the figures exist and what the warm start evaluated are
checked, never a time (the machine is shared)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

KEYS = {"warm_start_ratio", "start_first_token_cold_s", "start_first_token_first_s", "start_first_token_warm_s",
        "warm_start_evaluated_tokens", "warm_start_same_tokens"}


def test_the_warm_start_figure_has_its_fields_and_the_warm_start_loads_the_prefix(smollm2: Path) -> None:
    from agent.bench import warm_start
    from agent.bench.context import Bench, BenchConfig
    from agent.config import load_settings

    settings = replace(load_settings({}, environ={}), domain="tests.toy_domain")
    bench = Bench(BenchConfig(model_path=str(smollm2), n_ctx=2048, n_threads=1, quick=True, settings=settings))
    warm_start.figure(bench)
    report = bench.report.as_json()
    assert KEYS <= set(report["figures"])
    assert all(isinstance(report["figures"][k], float) for k in KEYS), report["notes"]
    assert report["targets"]["warm_start_ratio"] == "<= 0.3"
    starts = report["info"]["warm_start_processes"]
    assert [starts[m]["warm_up"] for m in ("cold", "first", "warm")] == [None, "built", "loaded"]
    warm, cold = starts["warm"], starts["cold"]
    assert warm["prompt_tokens"] == cold["prompt_tokens"]  # the same prompt in every start
    assert warm["reused_tokens"] == warm["prefix_tokens"] > 100
    assert warm["evaluated_tokens"] == warm["prompt_tokens"] - warm["prefix_tokens"] < cold["evaluated_tokens"]
