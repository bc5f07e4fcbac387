"""Sampling you can control: per-sample seeds that make k samples differ, each re-runnable exactly.

The SmolLM2 run samples at temperature 5: the distribution over the 49k-token vocabulary is then
nearly flat, so four 12-token samples that coincide would take odds no CPU's float rounding can
produce, while the same seed re-drawing the same tokens is what the seeding guarantees.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agent.backends.base import Completion
from agent.backends.openai import OpenAIBackend
from agent.backends.sampling import Sampling, derive_seed
from agent.backends.seeded import SeededBackend


def test_derived_seeds_are_stable_distinct_and_fit_31_bits() -> None:
    base = Sampling(temperature=0.7, top_p=0.9, seed=3)
    samples = [base.for_sample("create_event-0007", k) for k in range(4)]
    assert len({s.seed for s in samples}) == 4
    assert all(s.temperature == 0.7 and s.top_p == 0.9 for s in samples)
    # the same inputs give the same seed in any process (sha256, not Python's salted hash)
    assert samples[2].seed == derive_seed(3, "create_event-0007", 2) == base.for_sample("create_event-0007", 2).seed
    assert all(0 <= s.seed < 2**31 for s in samples)
    assert samples[0].for_step(0).seed != samples[0].for_step(1).seed


@pytest.mark.parametrize("kwargs", [{"temperature": -0.1}, {"top_p": 0.0}, {"top_p": 1.5}])
def test_sampling_refuses_out_of_range_settings(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        Sampling(**kwargs)


class _Recorder:
    """Records the sampling each completion was asked for (the wrapper's contract, nothing else)."""

    name = "recorder"

    def __init__(self) -> None:
        self.seen: list[Sampling | None] = []

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], **kw: Any) -> Completion:
        self.seen.append(kw.get("sampling"))
        return Completion(text="ok")

    def identity(self) -> dict[str, Any]:
        return {"backend": "recorder"}


def test_seeded_backend_gives_each_step_its_own_seed_and_records_the_episode_seed() -> None:
    inner = _Recorder()
    episode = Sampling(temperature=1.0, seed=42)
    wrapped = SeededBackend(inner, episode)
    for _ in range(3):
        wrapped.complete([], [], session_id="s", max_tokens=8)
    assert [s.seed for s in inner.seen if s] == [episode.for_step(i).seed for i in range(3)]
    assert wrapped.identity() == {"backend": "recorder", "sampling": {"temperature": 1.0, "top_p": 1.0, "seed": 42}}


def test_openai_body_carries_temperature_top_p_and_seed_only_when_sampling() -> None:
    backend = OpenAIBackend("http://127.0.0.1:9/v1", "m")
    try:
        plain = backend.request_body([{"role": "user", "content": "hi"}], [])
        sampled = backend.request_body([{"role": "user", "content": "hi"}], [],
                                       sampling=Sampling(temperature=0.7, top_p=0.9, seed=11))
    finally:
        backend.close()
    assert plain["temperature"] == 0.0 and "seed" not in plain and "top_p" not in plain
    assert (sampled["temperature"], sampled["top_p"], sampled["seed"]) == (0.7, 0.9, 11)


def _run_eval(tmp_path: Path, smollm2: Path, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    data = tmp_path / "data"
    data.mkdir(exist_ok=True)
    # one model step of at most 12 tokens per episode, a short prompt: four episodes stay cheap; one
    # thread, because two spinning threads on a loaded 2-core machine decode 30x slower than one
    (data / "config.toml").write_text('n_ctx = 4096\nn_threads = 1\nmax_steps = 1\ntool_block = "compact"\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_", "HF_"))}
    env.update(AGENT_DATA_DIR=str(data), AGENT_NO_ADAPTER="1", HF_HUB_OFFLINE="1")
    return subprocess.run(
        [sys.executable, "-m", "agent", "eval", "--model", str(smollm2), "--split", "dev", "--limit", "1",
         "--samples", "4", "--max-user-turns", "1", "--max-tokens", "12", "--no-progress", "--out", str(out), *extra],
        capture_output=True, text=True, env=env, timeout=600,
    )


def _episodes(out: Path) -> dict[str, dict[str, Any]]:
    return {p.name: json.loads(p.read_text(encoding="utf-8")) for p in sorted((out / "episodes").glob("*.json"))}


def _first_output(record: dict[str, Any]) -> str:
    return record["exchanges"][0]["turn"]["steps"][0]["raw_output"]


@pytest.mark.slow
def test_eval_samples_differ_at_temperature_and_one_episode_reruns_exactly(smollm2: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = _run_eval(tmp_path, smollm2, out, "--temperature", "5", "--top-p", "1", "--seed", "0")
    assert result.returncode == 0, result.stderr
    assert "pass^4" in result.stdout and "temperature 5" in result.stdout
    episodes = _episodes(out)
    assert len(episodes) == 4
    seeds = [e["sampling"]["seed"] for e in episodes.values()]
    scenario = next(iter(episodes.values()))["scenario_id"]
    assert seeds == [derive_seed(0, scenario, k) for k in range(4)]
    assert all(e["sampling"]["temperature"] == 5.0 and e["backend"]["sampling"] == e["sampling"]
               for e in episodes.values())
    outputs = [_first_output(e) for e in episodes.values()]
    assert all(len(o) > 0 for o in outputs) and len(set(outputs)) == 4
    run = json.loads((out / "run.json").read_text(encoding="utf-8"))
    assert run["sampling"] == {"temperature": 5.0, "top_p": 1.0, "seed": 0}

    # Re-run one sample alone (the runner resumes: only the missing episode is decoded again). The
    # first sample: it was decoded from an empty context, as the re-run is. A later sample of the
    # same scenario reused the first one's prompt (1 token evaluated, not the whole prompt), and
    # llama.cpp's logits for that last token are not bit-equal between the two paths: at
    # temperature 5 its re-run alone may draw other tokens (seen since the tool block grew).
    name = sorted(episodes)[0]
    (out / "episodes" / name).unlink()
    again = _run_eval(tmp_path, smollm2, out, "--temperature", "5", "--top-p", "1", "--seed", "0")
    assert again.returncode == 0, again.stderr
    redone = _episodes(out)[name]
    assert redone["sampling"] == episodes[name]["sampling"]
    assert _first_output(redone) == _first_output(episodes[name])

    # Resuming into the folder with other sampling settings would mix two runs: refused.
    clash = _run_eval(tmp_path, smollm2, out, "--temperature", "0.7")
    assert clash.returncode == 2 and "sampling" in clash.stderr


def test_greedy_samples_are_reported_as_one_decode_repeated(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_", "HF_"))}
    env.update(AGENT_DATA_DIR=str(tmp_path / "data"), HF_HUB_OFFLINE="1")
    out = tmp_path / "greedy"
    result = subprocess.run(
        [sys.executable, "-m", "agent", "eval", "--policy", "oracle", "--limit", "2", "--samples", "3",
         "--no-progress", "--out", str(out)], capture_output=True, text=True, env=env, timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert "greedy (the 3 samples repeat one decode: pass^3 is not a sampled estimate)" in result.stdout
    # greedy episodes are written as before sampling existed: no sampling field (None when read)
    assert all("sampling" not in e for e in _episodes(out).values()) and len(_episodes(out)) == 6
    assert json.loads((out / "run.json").read_text(encoding="utf-8"))["sampling"] is None


def test_a_scripted_policy_refuses_a_temperature(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_", "HF_"))}
    env.update(AGENT_DATA_DIR=str(tmp_path / "data"), HF_HUB_OFFLINE="1")
    result = subprocess.run([sys.executable, "-m", "agent", "eval", "--policy", "oracle", "--temperature", "0.7",
                             "--out", str(tmp_path / "x")], capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and "nothing to sample" in result.stderr


@pytest.mark.slow
def test_sampled_tool_calls_stay_inside_the_grammar(smollm2: Path) -> None:
    """At temperature 5 nearly every token the free sampler draws is one the call grammar rejects:
    the constrained path must then sample among the allowed tokens only, so the call still parses
    and validates, for each seed."""
    from agent.backends.llama import LlamaBackend
    from agent.formats import HERMES, parse_reply
    from agent.formats.gbnf import max_text_bytes
    from tools.calendar.lab.grpo_env import tool_schemas

    schemas = tool_schemas()
    budget = int(max_text_bytes(HERMES.call_gbnf(schemas)))
    backend = LlamaBackend(smollm2, n_ctx=8192, n_threads=1, tool_block="compact")
    messages = [{"role": "user", "content": "Book lunch with Mina tomorrow at noon."}]
    for seed in (1, 2):
        completion = backend.complete(messages, schemas, max_tokens=budget, assistant_prefix=HERMES.call_open,
                                      stop_after_call=True, sampling=Sampling(temperature=5.0, seed=seed))
        assert completion.error is None
        reply = parse_reply(completion.text)
        assert reply.tool_calls and not reply.problems, completion.text
        assert reply.tool_calls[0].name in {s["function"]["name"] for s in schemas}
    assert backend.grammar_paths["full_mask"] > 0  # the rejected free samples went through the mask
