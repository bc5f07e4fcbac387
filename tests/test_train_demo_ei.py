"""``train demo-ei``: the demo adapter's expert-iteration recipe. ``--dry-run`` prints one valid ``train ei`` command with the
recipe's settings in the demo's serving settings and runs nothing; the best dev round is chosen,
and none is when no round beat the start; a wrong start file is refused before anything runs."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

from agent.__main__ import build_parser
from agent.train.demo_ei import EI_RECIPE, EI_START, best_round
from models.demo import DEMO_DIR, DEMO_PROMPT_STYLE, DEMO_TOOL_BLOCK


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "agent", "train", "demo-ei", *args], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "HF_HUB_OFFLINE": "1"})


def test_the_recipe_prints_one_valid_train_ei_command_with_its_settings_and_runs_none(smollm2: Path,
                                                                                     tmp_path: Path) -> None:
    out = tmp_path / "ei"
    run = _cli("--dry-run", "--out", str(out))
    assert run.returncode == 0, run.stderr
    (step,) = [shlex.split(line[2:]) for line in run.stdout.splitlines() if line.startswith("$ ")]
    assert step[:3] == [f"AGENT_TOOL_BLOCK={DEMO_TOOL_BLOCK}", f"AGENT_PROMPT_STYLE={DEMO_PROMPT_STYLE}",
                        "AGENT_DATE_GROUNDING=false"]
    args = build_parser().parse_args(step[step.index("python") + 3:])  # after "python -m agent"
    r = EI_RECIPE
    assert (args.command, args.train_command, args.base, args.out) == ("train", "ei", smollm2, out)
    assert args.start_adapter == DEMO_DIR / EI_START["file"] and args.continue_adapter and args.weigh_templates
    assert (args.samples, args.temperature, args.train_limit, args.dev_limit, args.fallback_policy, args.policy_mix,
            args.policy_templates, args.policy_template_rows, args.lr, args.dropout, args.grad_accum, args.bf16,
            args.n_threads) == (r["samples"], r["temperature"], r["train_limit"], r["dev_limit"], r["fallback_policy"],
                                r["policy_mix"], r["policy_templates"], r["policy_template_rows"], r["lr"],
                                r["dropout"], r["grad_accum"], r["bf16"], r["threads"])
    assert args.stop_when_flat and args.rounds == r["rounds"]
    assert not out.exists()  # a dry run writes nothing


def test_a_start_that_is_not_the_sft_adapter_is_refused_before_anything_runs(smollm2: Path, tmp_path: Path) -> None:
    other = tmp_path / "other.gguf"
    other.write_bytes(b"GGUF" + b"\0" * 64)
    run = _cli("--start", str(other), "--out", str(tmp_path / "ei"))
    assert run.returncode == 2 and "not the SFT adapter" in run.stderr and len(run.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "ei").exists()


def test_the_best_dev_round_is_chosen_and_none_that_did_not_beat_the_start() -> None:
    rounds = [{"round": 1, "dev_success": 30.0, "adapter": "r1.gguf"}, {"round": 2, "dev_success": 34.0, "adapter": "r2.gguf"},
              {"round": 3, "dev_success": 34.0, "adapter": "r3.gguf"}]
    assert best_round({"start_dev": {"success": 26.4}, "rounds": rounds})["round"] == 2  # the earlier on a tie
    assert best_round({"start_dev": {"success": 34.0}, "rounds": rounds}) is None
    assert best_round({"start_dev": None, "rounds": rounds[:1]})["round"] == 1
    assert best_round({"start_dev": {"success": 10.0}, "rounds": [{"round": 1, "dev_success": 50.0, "adapter": None}]}) is None
