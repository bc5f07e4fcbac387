"""``python -m agent train sft|grpo|ei``: LoRA SFT on an export, GRPO with the domain's environment, expert
iteration in rounds; from the GGUF base to a PEFT adapter (and GGUF).

Exit status: 0 done, 2 bad input (one ``error:`` line), 1 interrupted (re-run with --resume).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

if TYPE_CHECKING:
    from agent.config import Settings

DEFAULT_TARGETS = "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj"


BF16_HELP = ("frozen base in bfloat16 with bf16 autocast (LoRA and optimizer in float32): half the base's memory, "
             "1.7x the trained tokens/s of float32 on a CPU with AMX (SmolLM2 SFT, docs/training.md); without native bf16 "
             "it is emulated and slower")


def add_parser(subparsers: Any, parents: Sequence[argparse.ArgumentParser] = ()) -> argparse.ArgumentParser:
    """The ``train`` subcommand and its ``sft`` action."""
    train = subparsers.add_parser(
        "train", parents=list(parents), help="post-train the model on exported trajectories (needs the train extra)",
        description="Post-train the model on verified trajectories. Needs pip install -e '.[train]'.",
    )
    actions = train.add_subparsers(dest="train_command", metavar="ACTION", required=True)
    sft = actions.add_parser(
        "sft", parents=list(parents), help="LoRA SFT (TRL SFTTrainer + peft) on an export sft folder",
        description="Load the base weights from the GGUF through transformers (converted once to a cached folder), "
                    "train a LoRA with TRL's SFTTrainer on the rows of `python -m agent export sft` with the loss on "
                    "the assistant turns only, save checkpoints, and write the PEFT adapter to OUT "
                    "(with --convert also OUT/adapter.gguf for llama.cpp).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    sft.add_argument("--base", type=Path, help="base model GGUF (default: --model / the model the runtime resolves)")
    sft.add_argument("--data", type=Path, required=True, help="export sft folder (with sft.jsonl) or an sft.jsonl file")
    sft.add_argument("--out", type=Path, required=True, help="output folder: PEFT adapter, checkpoints/, train_summary.json")
    sft.add_argument("--split", default="train", help="rows of this scenario split ('all' for every row)")
    sft.add_argument("--limit", type=int, help="use at most this many rows")
    _add_lora_arguments(sft)
    sft.add_argument("--epochs", type=float, default=1.0, help="passes over the data")
    sft.add_argument("--max-steps", type=int, default=-1, help="stop after N optimizer steps (overrides --epochs)")
    sft.add_argument("--stop-after", type=int, metavar="K",
                     help="stop after K steps while the learning-rate schedule runs towards --max-steps "
                          "(reproduces checkpoint K of a longer run)")
    sft.add_argument("--lr", type=float, default=2e-4, help="learning rate")
    sft.add_argument("--batch-size", type=int, default=1, help="rows per device step")
    sft.add_argument("--grad-accum", type=int, default=1, help="gradient accumulation steps")
    sft.add_argument("--max-length", type=int, default=4096, help="truncate rows to this many tokens")
    sft.add_argument("--save-steps", type=int, default=50, help="checkpoint every N steps (the last 2 are kept)")
    sft.add_argument("--seed", type=int, default=0, help="random seed")
    sft.add_argument("--resume", action="store_true", help="continue from the last checkpoint in OUT/checkpoints")
    sft.add_argument("--convert", action="store_true", help="also write OUT/adapter.gguf (python -m models convert-lora)")
    sft.add_argument("--bf16", action="store_true", help=BF16_HELP)
    sft.add_argument("--no-progress", action="store_true", help="no progress bars")
    demo = actions.add_parser(
        "demo", parents=list(parents), help="train a demo adapter from scratch (fixed seeds; SmolLM2 or --base gemma3-270m)",
        description="Oracle episodes on the train split -> export sft (exact format, compact tool block) -> "
                    "train sft with the recipe's settings -> convert, each step printed as the CLI "
                    "command it runs; prints the adapter's record (sha256, command).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    from agent.train.demo import add_arguments

    add_arguments(demo)
    demo_ei = actions.add_parser(
        "demo-ei", parents=list(parents), help="the demo adapter's second stage: expert iteration from the SFT adapter",
        description="train ei from the shipped SFT demo adapter with the recipe's settings (templates weighted by "
                    "dev failures, the oracle's row for scenarios failed in every sample, oracle rows mixed in, "
                    "continued training, stop once dev stops rising), printed as the CLI command it runs; prints "
                    "the best dev round's adapter record. The test split is not looked at.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    from agent.train.demo_ei import add_arguments as add_ei_arguments

    add_ei_arguments(demo_ei)
    _add_grpo(actions, parents)
    _add_ei(actions, parents)
    return train


def _add_lora_arguments(parser: argparse.ArgumentParser) -> None:
    """The LoRA flags ``train sft`` and ``train grpo`` share (both build ``trainer.lora_config`` from them)."""
    parser.add_argument("--rank", type=int, default=16, help="LoRA rank r")
    parser.add_argument("--alpha", type=float, default=32.0, help="LoRA alpha (scale alpha/r)")
    parser.add_argument("--dropout", type=float, default=0.05, help="LoRA dropout")
    parser.add_argument("--targets", default=DEFAULT_TARGETS, help="comma-separated modules (attention and MLP projections)")


def _add_ei(actions: Any, parents: Sequence[argparse.ArgumentParser]) -> None:
    """``train ei``: expert iteration in rounds (agent/train/ei.py)."""
    e = actions.add_parser(
        "ei", parents=list(parents), help="expert iteration: sample k, keep verified successes, SFT, eval on dev",
        description="Rounds of: sample K episodes per train scenario at --temperature with the current adapter, "
                    "keep the verified successes, LoRA SFT (from the base on all rows so far, or --continue), convert, "
                    "eval on dev. Each round in OUT/round-N/; a re-run resumes after the last finished round; "
                    "OUT/ei_summary.json has each round's rows kept and dev success (--test-limit adds the test split).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    e.add_argument("--base", type=Path, help="base model GGUF (default: --model / the model the runtime resolves)")
    e.add_argument("--out", type=Path, required=True, help="output folder (round-N/, ei_summary.json)")
    e.add_argument("--rounds", type=int, default=3, help="rounds in all (a re-run adds the missing ones)")
    e.add_argument("--samples", type=int, default=4, help="episodes per train scenario per round (k)")
    e.add_argument("--temperature", type=float, default=0.7, help="sampling temperature")
    e.add_argument("--top-p", type=float, default=1.0, help="nucleus sampling mass")
    e.add_argument("--seed", type=int, default=0, help="scenario generator seed; round n samples with seed+n")
    e.add_argument("--per-template", type=int, help="scenarios generated per template")
    e.add_argument("--train-limit", type=int, help="train scenarios per round at most (round-robin over templates)")
    e.add_argument("--dev-limit", type=int, help="dev scenarios at most")
    e.add_argument("--test-limit", type=int, help="also eval the start and the last round on this many test scenarios")
    e.add_argument("--best-only", action="store_true", help="keep only the best-reward success per scenario")
    e.add_argument("--continue", dest="continue_adapter", action="store_true",
                   help="continue the previous round's adapter on this round's rows (default: from the base, all rows)")
    e.add_argument("--start-adapter", type=Path, help="LoRA GGUF that samples round 1 (default: the bare base)")
    e.add_argument("--start-policy", help="round 1 samples a scripted policy instead (e.g. oracle: bootstrap data)")
    e.add_argument("--start-peft", type=Path,
                   help="--start-adapter as a PEFT folder (python -m models lora-to-peft): with --continue, round 1 "
                        "keeps training it")
    e.add_argument("--weigh-templates", action="store_true",
                   help="first eval the start on dev (OUT/round-0), then sample each template in proportion to its "
                        "failure rate there")
    e.add_argument("--weight-floor", type=float, default=0.2, help="smallest template weight with --weigh-templates")
    e.add_argument("--fallback-policy",
                   help="a scripted policy (e.g. oracle) whose episode is the row of a scenario failed in every sample")
    e.add_argument("--policy-mix", type=float, default=0.0,
                   help="with --fallback-policy: that policy's rows for this many other train scenarios per solved one")
    e.add_argument("--policy-templates", default="",
                   help="with --fallback-policy: also that policy's rows of these train templates, comma-separated "
                        "(train-only sets the domain serves only by name, such as a drill)")
    e.add_argument("--policy-template-rows", type=int, default=0,
                   help="how many scenarios of --policy-templates per round (new ones each round)")
    e.add_argument("--stop-when-flat", action="store_true",
                   help="stop once a round's dev success does not beat the best before it (the start's included)")
    e.add_argument("--max-user-turns", type=int, default=4, help="user messages per episode at most")
    e.add_argument("--max-tokens", type=int, default=512, help="generated tokens per model step")
    e.add_argument("--rank", type=int, default=16, help="LoRA rank r")
    e.add_argument("--alpha", type=float, default=32.0, help="LoRA alpha")
    e.add_argument("--epochs", type=float, default=1.0, help="SFT passes over the rows per round")
    e.add_argument("--sft-max-steps", type=int, default=-1, help="SFT steps per round (overrides --epochs)")
    e.add_argument("--lr", type=float, default=2e-4, help="SFT learning rate")
    e.add_argument("--dropout", type=float, default=0.05, help="LoRA dropout")
    e.add_argument("--grad-accum", type=int, default=1, help="SFT gradient accumulation steps (rows per step)")
    e.add_argument("--save-steps", type=int, default=50, help="SFT checkpoint every N steps")
    e.add_argument("--max-length", type=int, default=4096, help="truncate SFT rows to this many tokens")
    e.add_argument("--bf16", action="store_true", help="each round's SFT as train sft --bf16: " + BF16_HELP)
    e.add_argument("--no-progress", action="store_true", help="no progress bars")


def _add_grpo(actions: Any, parents: Sequence[argparse.ArgumentParser]) -> None:
    """``train grpo``: TRL GRPOTrainer with the domain's environment (agent/train/grpo.py says what TRL does)."""
    g = actions.add_parser(
        "grpo", parents=list(parents), help="LoRA GRPO (TRL GRPOTrainer) with the domain's environment and reward",
        description="Roll out the model on the domain's scenario prompts with TRL's GRPOTrainer "
                    "(environment_factory = the domain's GRPO environment, whose tools run through the runtime's "
                    "call gate; reward = the verifier's), log every reward component, and write the PEFT adapter "
                    "to OUT (with --convert also OUT/adapter.gguf). Needs a Qwen3-family base (a chat template "
                    "that renders tool calls).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    g.add_argument("--base", type=Path, help="base model GGUF (default: --model / the model the runtime resolves)")
    g.add_argument("--data", type=Path, help="export grpo folder (grpo.jsonl) or file; default: the domain's scenarios")
    g.add_argument("--out", type=Path, required=True, help="output folder: PEFT adapter, checkpoints/, grpo_summary.json")
    g.add_argument("--split", default="train", help="scenario split of the prompts")
    g.add_argument("--per-template", type=int, help="scenarios generated per template (without --data)")
    g.add_argument("--limit", type=int, help="use at most this many prompts")
    g.add_argument("--num-generations", type=int, default=4, help="rollouts per prompt (GRPO's group size G)")
    g.add_argument("--max-steps", type=int, default=100, help="optimizer steps")
    g.add_argument("--max-completion-length", type=int, default=256, help="tokens per rollout (all its turns)")
    g.add_argument("--max-tool-calls", type=int, default=8, help="tool-calling rounds per rollout")
    g.add_argument("--temperature", type=float, default=1.0, help="rollout sampling temperature")
    g.add_argument("--top-p", type=float, default=1.0, help="rollout nucleus mass")
    g.add_argument("--beta", type=float, default=0.0, help="KL coefficient against the base (0: no reference model)")
    _add_lora_arguments(g)
    g.add_argument("--lr", type=float, default=1e-5, help="learning rate")
    g.add_argument("--batch-size", type=int, help="rollouts per device step (default: --num-generations)")
    g.add_argument("--grad-accum", type=int, default=1, help="gradient accumulation steps")
    g.add_argument("--save-steps", type=int, default=50, help="checkpoint every N steps (the last 2 are kept)")
    g.add_argument("--seed", type=int, default=0, help="random seed (also the scenario generator seed)")
    g.add_argument("--resume", action="store_true", help="continue from the last checkpoint in OUT/checkpoints")
    g.add_argument("--convert", action="store_true", help="also write OUT/adapter.gguf")
    g.add_argument("--use-vllm", action="store_true", help="generate with vLLM (GPU; TRL's use_vllm)")
    g.add_argument("--vllm-mode", default="server", choices=("server", "colocate"), help="TRL's vllm_mode")
    g.add_argument("--bf16", action="store_true", help=BF16_HELP)
    g.add_argument("--config-json", help="further GRPOConfig fields as JSON, e.g. '{\"warmup_steps\": 10}'")
    g.add_argument("--no-progress", action="store_true", help="no progress bars")


def _base(args: argparse.Namespace, settings: Settings) -> Path | None:
    if args.base is not None:
        return args.base
    if settings.model_path:
        return Path(settings.model_path)
    from models.resolve import resolve

    return resolve(settings.model_choice()).model_path


def run(args: argparse.Namespace, settings: Settings) -> int:
    """Run ``train sft``, ``train demo``, ``train grpo`` or ``train ei``; errors become one line and exit status 2."""
    from models.check import check_model

    if args.train_command == "demo":
        from agent.train.demo import run as run_demo

        return run_demo(args)
    if args.train_command == "demo-ei":
        from agent.train.demo_ei import run as run_demo_ei

        return run_demo_ei(args)

    base = _base(args, settings)
    if base is None:
        print("error: no base model: pass --base GGUF (or --model / AGENT_MODEL_PATH)", file=sys.stderr)
        return 2
    check = check_model(base)
    if not check.ok:
        print(check.error_line(), file=sys.stderr)
        return 2
    targets = tuple(t.strip() for t in getattr(args, "targets", DEFAULT_TARGETS).split(",") if t.strip())
    refused = [t for t in targets if t in ("embed_tokens", "lm_head")]
    if refused:
        print(f"error: --targets {','.join(refused)}: embeddings/output head cannot be converted to a llama.cpp LoRA", file=sys.stderr)
        return 2
    if args.train_command == "grpo":
        return _run_grpo(args, settings, base, targets)
    if args.train_command == "ei":
        return _run_ei(args, settings, base)
    try:
        from agent.train.sft import SftOptions, train_sft
        from agent.train.trainer import TrainError
    except ImportError as exc:
        print(f"error: train needs the train extra (pip install -e '.[train]'): {exc}", file=sys.stderr)
        return 2
    opts = SftOptions(
        base=base, data=args.data, out=args.out, rank=args.rank, alpha=args.alpha, dropout=args.dropout, targets=targets,
        epochs=args.epochs, max_steps=args.max_steps, stop_after=args.stop_after, lr=args.lr, batch_size=args.batch_size, grad_accum=args.grad_accum,
        max_length=args.max_length, split=args.split, limit=args.limit, save_steps=args.save_steps, seed=args.seed,
        resume=args.resume, convert=args.convert, progress=not args.no_progress, tool_block=settings.tool_block,
        prompt_style=settings.prompt_style, date_grounding=settings.date_grounding, bf16=args.bf16,
        enable_thinking=settings.enable_thinking,
    )
    try:
        result = train_sft(opts)
    except TrainError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"interrupted: re-run with --resume to continue from the last checkpoint in {args.out / 'checkpoints'}", file=sys.stderr)
        return 1
    loss = f", final loss {result.final_loss:.3f}" if result.final_loss is not None else ""
    print(f"trained {result.steps} steps on {result.examples} rows in {result.seconds:.0f} s "
          f"(~{result.approx_tokens_seen} tokens{loss}); adapter: {result.adapter_dir}")
    if result.dropped:
        print(f"rows dropped: {result.dropped}")
    if result.gguf is not None:
        print(f"llama.cpp adapter: {result.gguf}")
    return 0


def _grpo_rows(args: argparse.Namespace, settings: Settings) -> list[dict[str, Any]]:
    """Prompt rows: an ``export grpo`` file, or made from the domain's scenarios now."""
    import json

    from agent.train.trainer import TrainError

    if args.data is not None:
        path = args.data / "grpo.jsonl" if args.data.is_dir() else args.data
        if not path.is_file():
            raise TrainError(f"{args.data}: no grpo.jsonl (pass the folder python -m agent export grpo wrote)")
        rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        rows = [r for r in rows if args.split in ("all", None) or r.get("split") == args.split]
    else:
        from agent.eval.suite import load_eval_suite
        from agent.export.grpo import prompt_rows

        # The prompts as the runtime renders them with these settings, as `export grpo` writes them.
        rows = prompt_rows(load_eval_suite(settings), split=args.split, per_template=args.per_template, seed=args.seed,
                           prompt_settings=settings.prompt_settings)
    return rows[: args.limit] if args.limit else rows


def grpo_options(args: argparse.Namespace, settings: Settings, base: Path, targets: tuple[str, ...]) -> Any:
    """The ``GrpoOptions`` of ``train grpo``'s flags (a TrainError for a bad --config-json or --data)."""
    import json

    from agent.train.grpo import GrpoOptions
    from agent.train.trainer import TrainError

    try:
        extra = json.loads(args.config_json) if args.config_json else {}
    except json.JSONDecodeError as exc:
        raise TrainError(f"--config-json is not JSON: {exc}") from None
    if not isinstance(extra, dict):
        raise TrainError("--config-json must be a JSON object")
    return GrpoOptions(
        base=base, out=args.out, rows=_grpo_rows(args, settings), domain=settings.domain,
        num_generations=args.num_generations, max_steps=args.max_steps,
        max_completion_length=args.max_completion_length, max_tool_calls=args.max_tool_calls,
        rank=args.rank, alpha=args.alpha, dropout=args.dropout, targets=targets, lr=args.lr,
        batch_size=args.batch_size, grad_accum=args.grad_accum, temperature=args.temperature, top_p=args.top_p,
        beta=args.beta, save_steps=args.save_steps, seed=args.seed, resume=args.resume, convert=args.convert,
        use_vllm=args.use_vllm, vllm_mode=args.vllm_mode, progress=not args.no_progress, bf16=args.bf16, extra=extra,
        enable_thinking=settings.enable_thinking,
    )


def _run_grpo(args: argparse.Namespace, settings: Settings, base: Path, targets: tuple[str, ...]) -> int:
    try:
        from agent.train.grpo import train_grpo
        from agent.train.trainer import TrainError
    except ImportError as exc:
        print(f"error: train needs the train extra (pip install -e '.[train]'): {exc}", file=sys.stderr)
        return 2
    try:
        result = train_grpo(grpo_options(args, settings, base, targets))
    except (TrainError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"interrupted: re-run with --resume to continue from the last checkpoint in {args.out / 'checkpoints'}",
              file=sys.stderr)
        return 1
    spread = f" ± {result.reward_std:.3f}" if result.reward_std is not None else ""
    reward = f"{result.reward_mean:.3f}{spread}" if result.reward_mean is not None else "n/a"
    parts = ", ".join(f"{k} {v:.3f}" for k, v in result.components.items() if v is not None)
    print(f"trained {result.steps} GRPO steps in {result.seconds:.0f} s ({result.seconds_per_step:.1f} s/step); "
          f"last reward {reward} ({parts}); adapter: {result.adapter_dir}")
    if result.gguf is not None:
        print(f"llama.cpp adapter: {result.gguf}")
    return 0


def _run_ei(args: argparse.Namespace, settings: Settings, base: Path) -> int:
    try:
        from agent.train.ei import run_ei
        from agent.train.ei_runs import EiOptions
        from agent.train.trainer import TrainError
    except ImportError as exc:
        print(f"error: train needs the train extra (pip install -e '.[train]'): {exc}", file=sys.stderr)
        return 2
    if args.rounds < 1 or args.samples < 1 or args.temperature < 0:
        print("error: --rounds and --samples must be at least 1, --temperature >= 0", file=sys.stderr)
        return 2
    if args.start_adapter is not None and not args.start_adapter.is_file():
        print(f"error: --start-adapter {args.start_adapter}: no such file", file=sys.stderr)
        return 2
    if args.start_peft is not None and not (args.start_peft / "adapter_config.json").is_file():
        print(f"error: --start-peft {args.start_peft}: no adapter_config.json there "
              "(make it with python -m models lora-to-peft)", file=sys.stderr)
        return 2
    problem = None
    if args.fallback_policy is None and (args.policy_mix or args.policy_templates):
        problem = "--policy-mix and --policy-templates need --fallback-policy (whose rows they add)"
    elif bool(args.policy_templates) != bool(args.policy_template_rows):
        problem = "--policy-templates and --policy-template-rows go together (which sets, how many a round)"
    elif args.start_peft is not None and not (args.start_adapter and args.continue_adapter):
        problem = "--start-peft is the --start-adapter that round 1 keeps training: it needs both and --continue"
    elif not 0 < args.weight_floor <= 1 or args.policy_mix < 0 or args.policy_template_rows < 0:
        problem = "--weight-floor must be in (0, 1], --policy-mix and --policy-template-rows at least 0"
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    opts = EiOptions(
        base=base, out=args.out, rounds=args.rounds, samples=args.samples, temperature=args.temperature,
        top_p=args.top_p, seed=args.seed, per_template=args.per_template, train_limit=args.train_limit,
        dev_limit=args.dev_limit, test_limit=args.test_limit, best_only=args.best_only,
        continue_adapter=args.continue_adapter, adapter=args.start_adapter, policy=args.start_policy,
        max_user_turns=args.max_user_turns, max_steps_per_turn=settings.max_steps, max_tool_calls=settings.max_tool_calls,
        max_tokens=args.max_tokens, n_ctx=settings.n_ctx, n_threads=settings.n_threads, tool_block=settings.tool_block,
        prompt_settings=settings.prompt_settings,
        rank=args.rank, alpha=args.alpha, epochs=args.epochs, sft_max_steps=args.sft_max_steps, lr=args.lr,
        max_length=args.max_length, progress=not args.no_progress, bf16=args.bf16, start_peft=args.start_peft,
        weigh_templates=args.weigh_templates, weight_floor=args.weight_floor, fallback_policy=args.fallback_policy,
        policy_mix=args.policy_mix, stop_when_flat=args.stop_when_flat,
        policy_templates=tuple(t.strip() for t in args.policy_templates.split(",") if t.strip()),
        policy_template_rows=args.policy_template_rows, dropout=args.dropout,
        grad_accum=args.grad_accum, save_steps=args.save_steps,
    )
    try:
        summary = run_ei(opts, settings)
    except (TrainError, ValueError, LookupError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"interrupted: run the same command again to resume after the last finished round in {args.out}",
              file=sys.stderr)
        return 1
    for r in summary["rounds"]:
        print(f"round {r['round']}: {r['rows_kept']} rows kept, dev success {r['dev_success']:.1f}%, "
              f"adapter {r['adapter']}")
    if summary["test"]:
        t = summary["test"]
        print(f"test: start {t['start']['success']:.1f}% -> last round {t['last_round']['success']:.1f}%")
    print(f"summary: {args.out / 'ei_summary.json'}")
    return 0
