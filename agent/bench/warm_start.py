"""Process start → first token of the first reply: cold, and with the persisted prefix.

After a restart (launchd restarts the bot on a crash, at login, after an update) the first
message used to evaluate the whole system prompt and tool block. With states on disk
(``agent.backends.llama.disk_states``) the prefix is loaded instead. Start-up can only be timed
in a process that starts for it, so ``figure`` runs this module three times, one after the other,
each a fresh interpreter as ``python -m agent`` builds the runtime (model checks, backend,
calendar, sessions, trajectory log), each answering one message (``REPLY_TOKENS`` greedy tokens;
the time is to the first):

- ``cold``: no states on disk (today's first start without the feature, or ``AGENT_STATE_DISK_MB=0``);
- ``first``: states on, an empty state dir: the prefix is evaluated and saved at start-up;
- ``warm``: states on, the dir ``first`` left: the prefix is loaded.

All three see the same instant (``--now``), so their prompts are the same text. Each prints one
JSON line: seconds since process start at each stage (``memory_probe.Stages``), what the
warm-up did and how long its parts took, and the first step's token counts. Run by hand::

    python -m agent.bench.warm_start all --model M.gguf --ctx 8192 --threads 1   # the figure alone
    python -m agent.bench.warm_start warm --model M.gguf --ctx 8192 --data-dir D --now 2026-12-01T05:00:00+00:00
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent.bench.memory_probe import FirstSample, Stages

if TYPE_CHECKING:
    from agent.bench.context import Bench

MODES = ("cold", "first", "warm")
MESSAGE = "What is on my calendar tomorrow?"
REPLY_TOKENS = 8  # enough to compare the starts' replies token for token
CHILD_TIMEOUT_S = 1800


def run_child(args: argparse.Namespace) -> dict[str, Any]:
    """One start: build the runtime as the REPL does, warm up, answer ``MESSAGE``."""
    stages = Stages()
    from datetime import datetime

    from agent.app import build_llama_backend, build_runtime
    from agent.approval import DenyAll
    from agent.config import load_settings
    from agent.loop import Budgets

    stages.mark("imports")
    # no environment: the parent's variables are not this start's settings; what the bench
    # measures (the tool block among them) comes as flags
    flags = {"model_path": args.model, "no_adapter": True, "n_ctx": args.ctx, "n_threads": args.threads,
             "data_dir": args.data_dir, "tz": args.tz, "domain": args.domain, "tool_block": args.tool_block}
    settings = load_settings({k: v for k, v in flags.items() if v is not None}, environ={})
    backend = build_llama_backend(settings, keep_states=args.mode != "cold")
    stages.mark("model_loaded")
    now = datetime.fromisoformat(args.now)
    runtime = build_runtime(settings, backend, clock=lambda: now)
    runtime.agent.budgets = Budgets(max_steps=1, max_tokens=REPLY_TOKENS)
    runtime.warm_up()  # in the background, as the REPL and the bot do; the turn waits on the lock
    hook = FirstSample(lambda: stages.mark("first_token"))
    try:
        turn = runtime.handle("warm-start", MESSAGE, DenyAll())
    finally:
        hook.close()
    step = turn.steps[0] if turn.steps else None
    stamped = runtime.stamp_user(MESSAGE) if runtime.stamp_user else MESSAGE
    state_dir = backend.state_dir
    context = backend.engine.tokens()
    result = {
        "mode": args.mode, "tool_block": settings.tool_block, "stages_s": stages.seconds,
        "warm_up": backend.warm_up_result,
        "warm_up_s": backend.cache.prefix_timings,
        "prefix_tokens": len(backend.cache.static),
        "prompt_tokens": step.prompt_tokens if step else None,
        "evaluated_tokens": step.evaluated_tokens if step else None,
        "reused_tokens": step.reused_tokens if step else None,
        "stamped_message_tokens": len(backend.tokenize(stamped, add_bos=False)),
        "prefix_file_bytes": (state_dir / "prefix.kvstate").stat().st_size
        if state_dir and (state_dir / "prefix.kvstate").exists() else None,
        "threads": backend.engine.n_threads,
        # what the model saw and wrote, to compare the starts: the prompt's tokens (hashed) and the reply's
        "prompt_sha256": hashlib.sha256(json.dumps(context[: step.prompt_tokens] if step else []).encode()).hexdigest(),
        "reply_tokens": context[step.prompt_tokens:] if step else [],
        "reply": step.raw_output if step else None,
    }
    runtime.close()
    return result


def run_start(bench: Bench, mode: str, data_dir: Path) -> dict[str, Any] | str:
    """One child process; its JSON line, or the reason it failed (one line)."""
    config = bench.config
    root = str(Path(__file__).resolve().parents[2])
    cmd = [sys.executable, "-m", "agent.bench.warm_start", mode, "--model", config.model_path,
           "--ctx", str(config.n_ctx), "--data-dir", str(data_dir), "--now", bench.now.isoformat(),
           "--tz", config.settings.tz, "--domain", config.settings.domain, "--tool-block", bench.tool_block]
    if config.n_threads:
        cmd += ["--threads", str(config.n_threads)]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([root, *filter(None, [os.environ.get("PYTHONPATH")])]))
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=CHILD_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return f"skipped: the {mode} start timed out after {CHILD_TIMEOUT_S} s"
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        why = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return f"skipped: the {mode} start exited {done.returncode}: {why}"
    try:
        return json.loads(lines[-1])
    except json.JSONDecodeError:
        return f"skipped: the {mode} start printed no JSON line"


def figure(bench: Bench) -> None:
    from agent.bench.report import progress

    starts: dict[str, dict[str, Any] | str] = {}
    for mode in MODES:
        data_dir = bench.tmp / f"start-{mode}"  # each a new user's data: the message is a chat's first
        (data_dir / "states").mkdir(parents=True, exist_ok=True)
        if mode == "warm":  # only the prefix the first start saved (not that chat's state)
            saved = bench.tmp / "start-first" / "states" / "prefix.kvstate"
            if saved.exists():
                shutil.copy2(saved, data_dir / "states" / saved.name)
        progress(f"start-up: the {mode} start in a process of its own")
        starts[mode] = run_start(bench, mode, data_dir)
    bench.report.info["warm_start_processes"] = starts
    add_figures(bench.report, starts)


def add_figures(report: Any, starts: dict[str, dict[str, Any] | str]) -> None:
    """The ratio (target ≤ 0.3), each start's seconds, and the warm start's evaluated tokens."""
    def seconds(mode: str) -> float | None:
        start = starts.get(mode)
        return start["stages_s"].get("first_token") if isinstance(start, dict) else None

    def why(mode: str) -> str:
        start = starts.get(mode)
        return start if isinstance(start, str) else f"skipped: the {mode} start sampled no token"

    cold, first, warm = seconds("cold"), seconds("first"), seconds("warm")
    w = starts.get("warm") if isinstance(starts.get("warm"), dict) else {}
    c = starts.get("cold") if isinstance(starts.get("cold"), dict) else {}
    same = all(w.get(k) == c.get(k) for k in ("prompt_sha256", "reply_tokens", "reply")) if w and c else None
    ratio_note = (f"fresh processes, process start to first token of the first reply; warm {warm:.2f} s "
                  f"(prefix {w.get('warm_up')}: {w.get('prefix_tokens')} tokens, "
                  f"{(w.get('prefix_file_bytes') or 0) / 2**20:.0f} MB file) vs cold {cold:.2f} s "
                  f"({c.get('evaluated_tokens')} prompt tokens evaluated); {w.get('threads')} thread(s); the same prompt "
                  f"tokens and greedy reply tokens as cold: {'yes' if same else 'NO'}"
                  if cold and warm is not None else why("cold" if not cold else "warm"))
    report.add("warm_start_ratio", "first reply after a restart: with the persisted prefix ÷ cold",
               warm / cold if cold and warm is not None else None, "<= 0.3", note=ratio_note)
    for mode, value, label in (("cold", cold, "no states on disk"), ("first", first, "states on, none saved yet"),
                               ("warm", warm, "prefix loaded from disk")):
        report.add(f"start_first_token_{mode}_s", f"process start to first token, {label}, s", value,
                   note="" if value is not None else why(mode))
    report.add("warm_start_same_tokens", "warm start: same prompt tokens and greedy reply as cold (1 yes, 0 no)",
               None if same is None else float(same),
               note=f"{REPLY_TOKENS} greedy tokens; cold evaluates the whole prompt in one go, warm the prefix "
                    "state and then the message, so the batches differ (float results may, on some CPU)"
               if same is not None else why("cold" if not c else "warm"))
    evaluated = w.get("evaluated_tokens")
    report.add("warm_start_evaluated_tokens", "prompt tokens evaluated by the first reply after a warm start",
               evaluated,
               note=(f"the stamped message is {w.get('stamped_message_tokens')} tokens, the rest the template's "
                     f"turn framing; {w.get('reused_tokens')} reused from the prefix state")
               if evaluated is not None else why("warm"))


def figure_alone(args: argparse.Namespace) -> dict[str, Any]:
    """``all``: the three starts and the figures, as the bench runs them, without the rest of it."""
    from agent.bench.context import Bench, BenchConfig
    from agent.config import load_settings

    flags = {"tz": args.tz, "domain": args.domain, "tool_block": args.tool_block}
    settings = load_settings({k: v for k, v in flags.items() if v is not None}, environ={})
    bench = Bench(BenchConfig(model_path=args.model, n_ctx=args.ctx, n_threads=args.threads, quick=False,
                              settings=settings))
    figure(bench)
    return bench.report.as_json()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agent.bench.warm_start", description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", choices=(*MODES, "all"), help="one start (a child of the bench), or all three")
    parser.add_argument("--model", required=True, help="GGUF file")
    parser.add_argument("--ctx", type=int, required=True, help="n_ctx")
    parser.add_argument("--threads", type=int, default=None, help="llama.cpp threads (default: its own)")
    parser.add_argument("--data-dir", help="one start: the runtime's data dir (states under it)")
    parser.add_argument("--now", help="one start: the ISO instant every start sees (same prompt text)")
    parser.add_argument("--tz", default=None)
    parser.add_argument("--domain", default=None, help="the domain module (default: settings)")
    parser.add_argument("--tool-block", default=None, help="full or compact (default: full, as the settings')")
    args = parser.parse_args(argv)
    if args.mode == "all":
        print(json.dumps(figure_alone(args), ensure_ascii=False, indent=1), flush=True)
        return 0
    if not args.data_dir or not args.now:
        parser.error("one start needs --data-dir and --now")
    print(json.dumps(run_child(args)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
