"""``python -m agent train sft``: LoRA SFT on an export, from the GGUF base, to a PEFT adapter (and GGUF).

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
    sft.add_argument("--rank", type=int, default=16, help="LoRA rank r")
    sft.add_argument("--alpha", type=float, default=32.0, help="LoRA alpha (scale alpha/r)")
    sft.add_argument("--dropout", type=float, default=0.05, help="LoRA dropout")
    sft.add_argument("--targets", default=DEFAULT_TARGETS, help="comma-separated modules (attention and MLP projections)")
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
    sft.add_argument("--no-progress", action="store_true", help="no progress bars")
    demo = actions.add_parser(
        "demo", parents=list(parents), help="train a SmolLM2 demo adapter from scratch (fixed seeds)",
        description="Oracle episodes on the train split -> export sft (exact format, compact tool block) -> "
                    "train sft with the recipe's settings -> convert, each step printed as the CLI "
                    "command it runs; prints the adapter's record (sha256, command).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    from agent.train.demo import add_arguments

    add_arguments(demo)
    return train


def _base(args: argparse.Namespace, settings: Settings) -> Path | None:
    if args.base is not None:
        return args.base
    if settings.model_path:
        return Path(settings.model_path)
    from models.resolve import resolve

    return resolve(settings.model_choice()).model_path


def run(args: argparse.Namespace, settings: Settings) -> int:
    """Run ``train sft`` (or ``train demo``); errors become one line and exit status 2."""
    from models.check import check_model

    if args.train_command == "demo":
        from agent.train.demo import run as run_demo

        return run_demo(args)

    base = _base(args, settings)
    if base is None:
        print("error: no base model: pass --base GGUF (or --model / AGENT_MODEL_PATH)", file=sys.stderr)
        return 2
    check = check_model(base)
    if not check.ok:
        print(check.error_line(), file=sys.stderr)
        return 2
    targets = tuple(t.strip() for t in args.targets.split(",") if t.strip())
    refused = [t for t in targets if t in ("embed_tokens", "lm_head")]
    if refused:
        print(f"error: --targets {','.join(refused)}: embeddings/output head cannot be converted to a llama.cpp LoRA", file=sys.stderr)
        return 2
    try:
        from agent.train.sft import SftOptions, TrainError, train_sft
    except ImportError as exc:
        print(f"error: train needs the train extra (pip install -e '.[train]'): {exc}", file=sys.stderr)
        return 2
    opts = SftOptions(
        base=base, data=args.data, out=args.out, rank=args.rank, alpha=args.alpha, dropout=args.dropout, targets=targets,
        epochs=args.epochs, max_steps=args.max_steps, stop_after=args.stop_after, lr=args.lr, batch_size=args.batch_size, grad_accum=args.grad_accum,
        max_length=args.max_length, split=args.split, limit=args.limit, save_steps=args.save_steps, seed=args.seed,
        resume=args.resume, convert=args.convert, progress=not args.no_progress, tool_block=settings.tool_block,
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
