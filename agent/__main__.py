"""``python -m agent``: the REPL by default, plus eval, export, bench and doctor."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from agent.config import Settings, load_settings

NOT_YET = {
    "export": "issue 8 (training-side export)",
    "train": "issue 8 (training-side export)",
}


def model_flags() -> argparse.ArgumentParser:
    """Flags shared by every subcommand that loads a model; they override the environment."""
    p = argparse.ArgumentParser(add_help=False)
    g = p.add_argument_group("model and data")
    g.add_argument("--model", dest="model_path", metavar="GGUF", help="base model file (env AGENT_MODEL_PATH)")
    g.add_argument("--adapter", dest="lora_path", metavar="GGUF", help="LoRA adapter file (env AGENT_LORA_PATH)")
    g.add_argument("--no-adapter", action="store_true", default=None, help="run the base model without an adapter")
    g.add_argument("--lora-scale", type=float, help="adapter strength (default 1.0)")
    g.add_argument("--demo", action="store_true", help="try it with the small SmolLM2-135M model (installed on demand)")
    g.add_argument("--data-dir", help="where the calendar, sessions and trajectories live (env AGENT_DATA_DIR)")
    g.add_argument("--tz", help="your time zone, IANA name (env AGENT_TZ, default Asia/Seoul)")
    g.add_argument("--ctx", dest="n_ctx", type=int, help="context length in tokens (default 8192)")
    g.add_argument("--threads", dest="n_threads", type=int, help="CPU threads for llama.cpp")
    return p


def settings_from(args: argparse.Namespace) -> Settings:
    keys = ("model_path", "lora_path", "no_adapter", "lora_scale", "data_dir", "tz", "n_ctx", "n_threads")
    overrides: dict[str, Any] = {k: getattr(args, k, None) for k in keys}
    if getattr(args, "demo", False):
        overrides["no_adapter"] = True
    return load_settings(overrides)


def build_parser() -> argparse.ArgumentParser:
    shared = model_flags()
    parser = argparse.ArgumentParser(
        prog="python -m agent",
        description="iljeong: a private calendar assistant running a local model. Without a subcommand, starts the chat.",
        parents=[shared],
    )
    parser.add_argument("--yes", action="store_true", help="approve destructive actions without asking (scripts only)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    chat = sub.add_parser("chat", parents=[shared], help="talk to your calendar in the terminal (the default)")
    chat.add_argument("--yes", action="store_true", help="approve destructive actions without asking")
    doctor = sub.add_parser("doctor", parents=[shared], help="show the configuration, check the model, run one generation")
    doctor.add_argument("--no-generate", action="store_true", help="skip the smoke generation")
    try:
        from agent.eval import cli as eval_cli

        eval_cli.add_parser(sub, parents=[shared])
    except ImportError:
        sub.add_parser("eval", help="score a model on calendar scenarios (not yet available)")
    bench = sub.add_parser("bench", parents=[shared], help="measure the runtime against llama.cpp itself and a peer (ratios)")
    from agent import bench as bench_module

    bench_module.add_arguments(bench)
    for name, where in NOT_YET.items():
        sub.add_parser(name, help=f"not yet available: {where}")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    command = args.command or "chat"
    if command in NOT_YET:
        print(f"python -m agent {command}: not yet available ({NOT_YET[command]}).", file=sys.stderr)
        return 2
    try:
        settings = settings_from(args)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if command == "eval":
        from agent.eval import cli as eval_cli

        return eval_cli.run(args, settings)
    if command == "bench":
        from agent.bench import run as run_bench

        return run_bench(args, settings)
    if command == "doctor":
        from agent.doctor import run_doctor

        return run_doctor(settings, demo=args.demo, generate=not args.no_generate)
    from agent.app import build_llama_backend, build_runtime
    from agent.repl import run_repl

    runtime = build_runtime(settings, build_llama_backend(settings, demo=args.demo))
    try:
        return run_repl(runtime, yes=args.yes)
    finally:
        runtime.close()


if __name__ == "__main__":
    sys.exit(main())
