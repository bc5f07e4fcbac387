"""``python -m agent train ei`` for real: one round on 2 train scenarios × 2 samples with SmolLM2.

Round 1 samples a scripted policy, so what it keeps is known: ``guesses_missing_time`` books a
made-up time on the ``missing_info`` scenario (the verifier fails it, as it must every broken
policy on its target template) and plays the oracle on the ``delete_request`` one (a verified
success). The rest is real: the selection, SFT of a LoRA on SmolLM2 (transformers + peft),
conversion to a llama.cpp adapter, a greedy dev eval with that adapter loaded in llama.cpp, the
summary, and the resume after a finished round.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import model_fixtures as mf

POLICY = "guesses_missing_time"  # fails missing_info (its target), plays the oracle elsewhere


def _run(smollm2: Path, tmp_path: Path, out: Path) -> subprocess.CompletedProcess[str]:
    data = tmp_path / "data"
    data.mkdir(exist_ok=True)
    # short episodes: two model steps per turn, one thread (faster than two on a loaded machine)
    (data / "config.toml").write_text('n_ctx = 4096\nn_threads = 1\nmax_steps = 2\ntool_block = "compact"\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_", "HF_"))}
    env.update(AGENT_DATA_DIR=str(data), AGENT_NO_ADAPTER="1", HF_HUB_OFFLINE="1",
               ILJEONG_TRAIN_CACHE=str(mf.cache_root() / "train-bases"))
    return subprocess.run(
        [sys.executable, "-m", "agent", "train", "ei", "--base", str(smollm2), "--out", str(out), "--rounds", "1",
         "--samples", "2", "--train-limit", "2", "--dev-limit", "1", "--start-policy", POLICY,
         "--sft-max-steps", "1", "--lr", "1e-3", "--max-tokens", "32", "--max-user-turns", "2",
         "--max-length", "2048", "--no-progress"],
        capture_output=True, text=True, env=env, timeout=1400,
    )


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_one_round_keeps_verified_successes_trains_converts_and_evals_on_dev(smollm2: Path, tmp_path: Path) -> None:
    from safetensors.numpy import load_file

    from models.check import check_pair

    out = tmp_path / "ei"
    result = _run(smollm2, tmp_path, out)
    assert result.returncode == 0, result.stderr[-3000:]
    round1 = out / "round-1"
    info = json.loads((round1 / "round.json").read_text(encoding="utf-8"))
    samples = [json.loads(p.read_text(encoding="utf-8")) for p in sorted((round1 / "samples" / "episodes").glob("*.json"))]
    assert len(samples) == 4 == info["episodes"]
    verified = [s for s in samples if s["verdict"]["success"] and s["verdict"]["policy_ok"]]
    rejected = [s for s in samples if s not in verified]
    assert {s["template"] for s in verified} == {"delete_request"}  # the oracle's part
    assert {s["template"] for s in rejected} == {"missing_info"}  # the broken part, caught by the verifier
    assert info["sampled_from"] == f"policy {POLICY}" and info["sample_success"] == 50.0
    rows = [json.loads(line) for line in (round1 / "data" / "sft.jsonl").read_text(encoding="utf-8").splitlines()]
    # only verified successes became rows; the two samples of a script are one conversation: kept once
    assert info["rows_kept"] == len(rows) == len({s["scenario_id"] for s in verified}) == 1
    (row,) = rows
    (source,) = {s["scenario_id"]: s for s in verified}.values()
    assert row["scenario_id"] == source["scenario_id"] and row["success"] is True
    assert row["reward"] == source["verdict"]["reward"]
    assert row["messages"][-1]["content"] == source["messages"][-1]["content"]  # the episode's own final reply
    assert not {r["scenario_id"] for r in rows} & {s["scenario_id"] for s in rejected}

    # the adapter trained (peft starts lora_B at zero; one SFT step moves it) and converts
    weights = load_file(str(round1 / "adapter" / "adapter_model.safetensors"))
    lora_b = [v for k, v in weights.items() if "lora_B" in k]
    assert lora_b and all(abs(v).max() > 0 for v in lora_b)
    adapter = round1 / "adapter" / "adapter.gguf"
    assert info["adapter"] == str(adapter) and check_pair(str(smollm2), str(adapter)).ok
    # ... and the dev eval ran with it in llama.cpp
    dev = [json.loads(p.read_text(encoding="utf-8")) for p in (round1 / "dev" / "episodes").glob("*.json")]
    assert len(dev) == 1 and dev[0]["split"] == "dev"
    assert dev[0]["backend"]["adapter_sha256"] == hashlib.sha256(adapter.read_bytes()).hexdigest()

    summary = json.loads((out / "ei_summary.json").read_text(encoding="utf-8"))
    assert [(r["round"], r["rows_kept"]) for r in summary["rounds"]] == [(1, info["rows_kept"])]
    assert summary["rounds"][0]["dev_success"] == info["dev"]["success"]

    # a finished round is not redone: nothing in it is written again (samples, rows, adapter, dev)
    files = sorted(p for p in round1.rglob("*") if p.is_file())
    stamps = {p: p.stat().st_mtime_ns for p in files}
    again = _run(smollm2, tmp_path, out)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "resuming after round 1" in again.stdout and "round 1: sampling" not in again.stdout
    assert sorted(p for p in round1.rglob("*") if p.is_file()) == files
    assert {p: p.stat().st_mtime_ns for p in files} == stamps
    assert not (out / "round-2").exists()


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_a_scenario_failed_in_every_sample_gets_the_fallback_policys_row_and_policy_rows_are_mixed_in(
        smollm2: Path, tmp_path: Path) -> None:
    """The demo-ei round: the scripted start fails ``missing_info`` in both samples, so the oracle's episode of that same
    scenario is its row; ``--policy-mix 1`` adds the oracle's rows of one other train scenario per
    solved one, and ``--policy-templates time_drill`` one scenario of the train-only time drill; the
    on-policy success (``delete_request``) stays a row."""
    out = tmp_path / "ei"
    data = tmp_path / "data"
    data.mkdir()
    (data / "config.toml").write_text('n_ctx = 4096\nn_threads = 1\nmax_steps = 2\ntool_block = "compact"\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_", "HF_"))}
    env.update(AGENT_DATA_DIR=str(data), AGENT_NO_ADAPTER="1", HF_HUB_OFFLINE="1",
               ILJEONG_TRAIN_CACHE=str(mf.cache_root() / "train-bases"))
    result = subprocess.run(
        [sys.executable, "-m", "agent", "train", "ei", "--base", str(smollm2), "--out", str(out), "--rounds", "1",
         "--samples", "2", "--train-limit", "2", "--dev-limit", "1", "--start-policy", POLICY,
         "--fallback-policy", "oracle", "--policy-mix", "1",
         "--policy-templates", "time_drill", "--policy-template-rows", "1",
         "--sft-max-steps", "1", "--lr", "1e-3", "--max-tokens", "32", "--max-user-turns", "2",
         "--max-length", "2048", "--no-progress"],
        capture_output=True, text=True, env=env, timeout=1400,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    info = json.loads((out / "round-1" / "round.json").read_text(encoding="utf-8"))
    samples = [json.loads(p.read_text(encoding="utf-8"))
               for p in sorted((out / "round-1" / "samples" / "episodes").glob("*.json"))]
    failed = {s["scenario_id"] for s in samples if s["template"] == "missing_info"}
    solved = {s["scenario_id"] for s in samples if s["verdict"]["success"] and s["verdict"]["policy_ok"]}
    assert len(failed) == 1 and len(solved) == 1 and not failed & solved
    policy = {json.loads(p.read_text(encoding="utf-8"))["scenario_id"]
              for p in (out / "round-1" / "policy" / "episodes").glob("*.json")}
    drill = {p for p in policy if p.startswith("time_drill-")}
    assert failed <= policy and len(drill) == 1 and len(policy - failed - drill) == 1  # fallback, drill, one mixed
    (mixed,) = policy - failed - drill
    assert mixed not in {s["scenario_id"] for s in samples}  # from the rest of the pool, not this round's
    rows = [json.loads(line) for line in (out / "round-1" / "data" / "sft.jsonl").read_text(encoding="utf-8").splitlines()]
    assert {r["scenario_id"] for r in rows} == solved | failed | {mixed} | drill
    assert all(r["success"] for r in rows)
    assert (info["rows_on_policy"], info["policy_fallback_scenarios"], info["policy_mixed_scenarios"],
            info["policy_named_scenarios"]) == (1, 1, 1, 1)
    assert info["rows_kept"] == 4
    assert info["mixed_taken"] == 1 and json.loads((out / "ei_options.json").read_text(encoding="utf-8"))["policy_mix"] == 1


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "agent", "train", "ei", *args], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "HF_HUB_OFFLINE": "1"})


@pytest.mark.parametrize("flags, says", [
    (["--policy-mix", "0.5"], "need --fallback-policy"),
    (["--fallback-policy", "oracle", "--policy-templates", "time_drill"], "go together"),
    (["--fallback-policy", "oracle", "--policy-template-rows", "5"], "go together"),
    (["--start-peft", "."], "needs both and --continue"),
    (["--weigh-templates", "--weight-floor", "0"], "--weight-floor must be in (0, 1]"),
])
def test_options_that_would_be_ignored_or_meaningless_are_refused_in_one_line(smollm2: Path, tmp_path: Path,
                                                                              flags: list[str], says: str) -> None:
    peft = tmp_path / "peft"
    peft.mkdir()
    (peft / "adapter_config.json").write_text("{}")
    flags = [str(peft) if f == "." else f for f in flags]
    run = _cli("--base", str(smollm2), "--out", str(tmp_path / "ei"), *flags)
    assert run.returncode == 2 and says in run.stderr and len(run.stderr.strip().splitlines()) == 1, run.stderr
    assert not (tmp_path / "ei").exists()


def test_a_wrong_policy_template_and_a_scripted_start_with_round_0_fail_before_any_sampling(smollm2: Path,
                                                                                           tmp_path: Path) -> None:
    for flags, says in ((["--fallback-policy", "oracle", "--policy-templates", "time_probe", "--policy-template-rows", "2"],
                         "--policy-templates"),
                        (["--start-policy", "oracle", "--weigh-templates"], "a scripted --start-policy has none")):
        run = _cli("--base", str(smollm2), "--out", str(tmp_path / "ei"), *flags)
        assert run.returncode == 2 and says in run.stderr, run.stderr
        assert not (tmp_path / "ei" / "round-1").exists()


def test_a_rerun_with_other_options_is_refused_and_with_the_same_ones_accepted(smollm2: Path, tmp_path: Path) -> None:
    from agent.train.ei_runs import EiOptions, check_same_run
    from agent.train.trainer import TrainError

    opts = EiOptions(base=smollm2, out=tmp_path / "ei", samples=2, policy_mix=0.5, fallback_policy="oracle")
    check_same_run(opts)  # first start: writes ei_options.json
    check_same_run(EiOptions(base=smollm2, out=tmp_path / "ei", samples=2, policy_mix=0.5, fallback_policy="oracle",
                             rounds=5, test_limit=10))  # more rounds, a test eval: the same run
    with pytest.raises(TrainError, match=r"other options \(samples, policy_mix\)"):
        check_same_run(EiOptions(base=smollm2, out=tmp_path / "ei", samples=3, policy_mix=1.0, fallback_policy="oracle"))


def test_a_run_saved_before_the_notes_existed_resumes_only_without_them(smollm2: Path, tmp_path: Path) -> None:
    # Its rows were made without time or date notes; a resume that turns one on would mix the two.
    import json

    from agent.prompt import PromptSettings
    from agent.train.ei_runs import OPTIONS, EiOptions, check_same_run, run_identity
    from agent.train.trainer import TrainError

    opts = EiOptions(base=smollm2, out=tmp_path / "ei")
    old = {k: v for k, v in run_identity(opts).items() if k not in ("time_notes", "date_notes")}
    opts.out.mkdir()
    (opts.out / OPTIONS).write_text(json.dumps(old), encoding="utf-8")
    check_same_run(opts)  # notes off, as the old run was
    with pytest.raises(TrainError, match=r"other options \(date_notes\)"):
        check_same_run(EiOptions(base=smollm2, out=tmp_path / "ei", prompt_settings=PromptSettings(date_notes=True)))
