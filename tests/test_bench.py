"""``python -m agent bench --quick --json`` runs end to end on SmolLM2 and emits every figure.

No timing assertions: the figures are ratios on a shared machine; only their presence and type
are checked, and that the tool block the settings chose is the one every process measured.

It runs with ``AGENT_TOOL_BLOCK=compact`` (a setting users serve, the demo adapter's): SmolLM2
evaluates prompts at ~60 tok/s per thread here, and each fresh start (the main process, the memory
probe and its bare replay, the cold and first starts, the jump-forward prompts) evaluates the
whole system prompt; with the compact block that is ~1.2k tokens instead of ~3.9k. Every figure
is still measured end to end, the tool-block sizes (full and compact) among them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

EXPECTED = {
    "check_ms", "start_to_first_token_s", "loop_overhead", "loop_overhead_replay", "loop_overhead_vs_backend_timings",
    "save_state_share", "episode_s", "prefix_reuse", "episode_steps", "rss_overhead_mb", "state_mb", "state_get_s",
    "state_bytes_slice_s", "state_string_at_s", "interleaved_reuse", "interleaved_reuse_naive", "naive_factor",
    "grammar_full_mask_49k", "grammar_lazy_49k", "unconstrained_tok_s_49k", "grammar_lazy_151k",
    "grammar_same_tokens_49k", "grammar_cost_ms_49k", "grammar_valid_writer_49k", "grammar_valid_writer_151k",
    "grammar_index_build_s_49k", "tool_block_full_tokens_49k", "tool_block_compact_tokens_49k",
    "tool_block_compact_share_49k", "tool_block_full_tokens_151k", "tool_block_compact_tokens_151k",
    "tool_block_compact_share_151k",
    "valid_call_rate_runtime", "valid_call_rate_chatml_fc", "seconds_per_episode_ratio",
    "valid_call_rate_server", "seconds_per_episode_ratio_server", "seconds_per_episode_runtime",
    "seconds_per_episode_chatml_fc", "seconds_per_episode_server", "calls_per_episode_runtime",
    "calls_per_episode_chatml_fc", "calls_per_episode_server", "success_rate_runtime", "success_rate_chatml_fc",
    "success_rate_server",
    "rss_runtime_minus_model_mb", "rss_bare_minus_model_mb", "kv_cache_mb", "state_kb_per_token",
    "long_chat_reuse", "long_chat_reuse_sliding", "jump_forward_49k", "jump_forward_same_text_49k",
    "jump_forward_151k", "jump_forward_same_text_151k", "jump_forward_cpu_49k", "jump_forward_decodes_49k",
    "jump_forward_floor_49k", "jump_forward_floor_151k",
    "valid_call_rate_llama_server", "seconds_per_episode_llama_server", "seconds_per_episode_ratio_llama_server",
    "calls_per_episode_llama_server", "success_rate_llama_server", "evaluated_per_step_runtime",
    "evaluated_after_call_runtime", "evaluated_per_step_llama_server", "evaluated_after_call_llama_server",
    "evaluated_after_call_ratio_llama_server", "reevaluated_after_call_runtime", "reevaluated_after_call_llama_server",
    "warm_start_ratio", "start_first_token_cold_s", "start_first_token_first_s", "start_first_token_warm_s",
    "warm_start_evaluated_tokens", "warm_start_same_tokens",
}


def test_bench_quick_json_has_every_figure(tmp_path: Path, smollm2: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("AGENT_MODEL_PATH", "AGENT_LORA_PATH", "AGENT_CONFIG")}
    env["AGENT_DATA_DIR"] = str(tmp_path / "data")
    env["AGENT_TOOL_BLOCK"] = "compact"
    done = subprocess.run(
        [sys.executable, "-m", "agent", "bench", "--quick", "--json", "--ctx", "8192"],
        capture_output=True, text=True, env=env, timeout=1800, cwd=Path(__file__).resolve().parents[1],
    )
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout)
    figures = report["figures"]
    assert EXPECTED <= set(figures), EXPECTED - set(figures)
    for key, value in figures.items():
        if value is None:  # only a figure the bench could not measure, and it says why
            assert "skipped" in report["notes"].get(key, ""), key
        else:
            assert isinstance(value, (int, float)), (key, value)
    assert set(report["met"]) == set(report["targets"])
    assert report["info"]["nproc"] and report["info"]["model"].endswith(".gguf")
    assert "SmolLM2" in report["info"]["model"]
    # the setting reached the bench and every child that renders a prompt, and they used it: a cold
    # prompt smaller than the full block alone could not hold that block
    info = report["info"]
    assert info["tool_block"] == "compact"
    starts, probe = info["warm_start_processes"], info["memory_processes"]["runtime"]
    assert [starts[m]["tool_block"] for m in ("cold", "first", "warm")] + [probe["tool_block"]] == ["compact"] * 4
    full = figures["tool_block_full_tokens_49k"]
    assert starts["cold"]["evaluated_tokens"] < full and probe["first_prompt_tokens"] < full


def test_the_figures_backend_renders_the_tool_block_the_settings_choose(tmp_path: Path, smollm2: Path) -> None:
    from agent.bench.context import Bench, BenchConfig
    from agent.config import load_settings

    def bench(settings: object) -> Bench:
        return Bench(BenchConfig(model_path=str(smollm2), n_ctx=512, n_threads=1, quick=True, settings=settings))

    compact = load_settings({"data_dir": str(tmp_path), "tool_block": "compact"}, environ={})
    assert bench(compact).build_backend(str(smollm2)).renderer.tool_block == "compact"
    assert bench(load_settings({"data_dir": str(tmp_path)}, environ={})).tool_block == "full"  # the default
