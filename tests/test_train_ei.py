"""``python -m agent train ei`` for real: one round on 2 train scenarios × 2 samples with SmolLM2.

Round 1 samples the oracle policy (``--start-policy oracle``), so verified successes exist by
construction; the rest is real: SFT of a LoRA on SmolLM2 (transformers + peft), conversion to a
llama.cpp adapter, a greedy dev eval with that adapter loaded in llama.cpp, the summary, and the
resume after a finished round.
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
         "--samples", "2", "--train-limit", "2", "--dev-limit", "1", "--start-policy", "oracle",
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
    successes = [s for s in samples if s["verdict"]["success"] and s["verdict"]["policy_ok"]]
    assert successes  # the oracle solves its tasks
    rows = [json.loads(line) for line in (round1 / "data" / "sft.jsonl").read_text(encoding="utf-8").splitlines()]
    # the two samples of a scripted policy are one conversation: kept once
    assert info["rows_kept"] == len(rows) == len({s["scenario_id"] for s in successes})
    assert {r["scenario_id"] for r in rows} <= {s["scenario_id"] for s in successes}

    # the adapter trained (peft starts lora_B at zero; one SFT step moves it) and converts
    weights = load_file(str(round1 / "adapter" / "adapter_model.safetensors"))
    assert any(abs(v).sum() > 0 for k, v in weights.items() if "lora_B" in k)
    adapter = round1 / "adapter" / "adapter.gguf"
    assert info["adapter"] == str(adapter) and check_pair(str(smollm2), str(adapter)).ok
    # ... and the dev eval ran with it in llama.cpp
    dev = [json.loads(p.read_text(encoding="utf-8")) for p in (round1 / "dev" / "episodes").glob("*.json")]
    assert len(dev) == 1 and dev[0]["split"] == "dev"
    assert dev[0]["backend"]["adapter_sha256"] == hashlib.sha256(adapter.read_bytes()).hexdigest()

    summary = json.loads((out / "ei_summary.json").read_text(encoding="utf-8"))
    assert [(r["round"], r["rows_kept"]) for r in summary["rounds"]] == [(1, info["rows_kept"])]
    assert summary["rounds"][0]["dev_success"] == info["dev"]["success"]

    # a finished round is not redone
    stamp = (round1 / "round.json").stat().st_mtime_ns
    again = _run(smollm2, tmp_path, out)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "resuming after round 1" in again.stdout
    assert (round1 / "round.json").stat().st_mtime_ns == stamp
