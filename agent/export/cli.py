"""``python -m agent export {sft,grpo,stats}``: recorded episodes → TRL datasets, and what they hold."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agent.config import Settings

SOURCE_HELP = "eval results folder (one JSON per episode), one episode .json, or a trajectories .sqlite log"


def add_parser(subparsers: Any, parents: list[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    """The ``export`` subcommand and its three actions."""
    export = subparsers.add_parser(
        "export", parents=parents, help="turn recorded episodes into training data (SFT, GRPO) and report on them",
        description="Turn recorded, verified episodes into datasets TRL reads directly, and report what they hold.",
    )
    actions = export.add_subparsers(dest="export_command", metavar="ACTION", required=True)

    sft = actions.add_parser(
        "sft", parents=parents, help="verified episodes -> messages/tools rows for SFTTrainer",
        description="Select episodes by verifier outcome, drop identical conversations, and write OUT/sft.jsonl "
                    "(messages in OpenAI chat format + tools column) and OUT/dataset (a datasets.DatasetDict by "
                    "split, when `datasets` is installed).",
    )
    sft.add_argument("--from", dest="sources", required=True, type=Path, action="append", metavar="PATH",
                     help=SOURCE_HELP + "; repeat it to export several as one set")
    sft.add_argument("--out", required=True, type=Path, metavar="DIR", help="output folder (created)")
    sft.add_argument("--min-reward", type=float, metavar="X", help="keep episodes whose reward is at least X")
    sft.add_argument("--success-only", action="store_true", help="keep only episodes the verifier marked successful and that broke no rule (policy_ok)")
    sft.add_argument("--per-template-cap", type=int, metavar="N", help="at most N episodes per template (best rewards first)")
    sft.add_argument("--split", help="keep only this scenario split (train, dev, test); default: all, kept apart")
    sft.add_argument(
        "--assistant-format", choices=("auto", "exact", "structured"), default="auto",
        help="structured: content without call blocks + tool_calls, for templates that render tools (Qwen3); "
             "exact: the model's raw text in content, tool block in the system message and results as "
             "<tool_response> user turns, for templates that ignore tools (SmolLM2 ChatML). auto (default): "
             "check the chat template of the model the runtime would load (--model, AGENT_MODEL_PATH, a pulled "
             "model, --demo), else structured",
    )

    grpo = actions.add_parser(
        "grpo", parents=parents, help="scenario prompts for GRPOTrainer with the calendar environment",
        description="Write OUT/grpo.jsonl (and OUT/grpo_dataset): one row per scenario with its id, template, index, "
                    "seed and split, and the prompt (system + the user's opening message). Use with "
                    "GRPOTrainer(environment_factory=tools.calendar.lab.grpo_env.CalendarGRPOEnv, "
                    "reward_funcs=tools.calendar.lab.grpo_env.reward_func).",
    )
    grpo.add_argument("--out", required=True, type=Path, metavar="DIR", help="output folder (created)")
    grpo.add_argument("--split", default="train", help="scenario split: train (default), dev, test or all")
    grpo.add_argument("--per-template", type=int, metavar="N", help="scenarios generated per template (generator default if unset)")
    grpo.add_argument("--seed", type=int, default=0, help="generator seed (default 0)")
    grpo.add_argument("--templates", nargs="+", metavar="T", help="only these scenario templates")
    grpo.add_argument("--include-dialogue", action="store_true",
                      help="also scenarios that need a second user message (the environment cannot send one)")

    stats = actions.add_parser(
        "stats", parents=parents, help="counts per template and outcome, reward histogram, calls, GRPO signal",
        description="Report on recorded episodes: outcomes per template, reward histogram, mean tool calls, and the "
                    "share of groups (same scenario, several samples) whose rewards differ.",
    )
    stats.add_argument("--from", dest="source", required=True, type=Path, metavar="PATH",
                       help=SOURCE_HELP + "; or an export sft folder / sft.jsonl: then row lengths in the model's tokens "
                            "(the model from --model, AGENT_MODEL_PATH, a pulled model or --demo)")
    stats.add_argument("--json", action="store_true", help="print the report as JSON")
    return export


def _default_tools(settings: Settings) -> list[dict[str, Any]]:
    """The domain's tool schemas, for episodes that did not record the tools they saw."""
    from agent.eval.suite import load_eval_suite

    suite = load_eval_suite(settings)
    environment = suite.make_environment(suite.scenarios(per_template=1)[0])
    try:
        return environment.registry.schemas()
    finally:
        environment.close()


def _model_to_check(settings: Settings, demo: bool = False) -> Path | None:
    """The model the export is for: --demo's base if installed, else the runtime's resolved model."""
    if demo:
        from models.demo import demo_pair

        return demo_pair(settings.demo).locate()
    from models.resolve import resolve

    return resolve(settings.model_choice()).model_path


def _assistant_format(choice: str, settings: Settings, demo: bool = False) -> tuple[str, str]:
    """The format and why it was chosen."""
    if choice != "auto":
        return choice, "as asked"
    model = _model_to_check(settings, demo)
    if model is not None and model.is_file():
        from agent.export.sft import template_renders_tools

        try:
            native = template_renders_tools(model)
        except Exception as exc:  # an unreadable model must not block an export
            return "structured", f"could not read the chat template of {model} ({exc})"
        if native:
            return "structured", f"the chat template of {model} renders tools"
        return "exact", f"the chat template of {model} ignores tools"
    return "structured", "no model found (--model, AGENT_MODEL_PATH, a pulled model or --demo) to check"


def _row_stats(args: argparse.Namespace, settings: Settings, rows_file: Path) -> int:
    """``export stats`` on SFT rows: their length in the tokens of the model they are for."""
    from agent.export.stats import compute_rows, render_rows
    from agent.train.rows import read_rows
    from agent.train.trainer import TrainError

    model = _model_to_check(settings, bool(getattr(args, "demo", False)))
    if model is None or not model.is_file():
        print("error: row lengths need the model's tokenizer: pass --model GGUF (or --demo)", file=sys.stderr)
        return 2
    try:
        rows = read_rows(rows_file, split=None)
    except TrainError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    stats = compute_rows(rows, model)
    print(json.dumps(stats.to_dict(), ensure_ascii=False, indent=2) if args.json else render_rows(stats, model.name))
    return 0


def _read(source: Path, settings: Settings) -> list[Any] | None:
    from agent.export.episodes import read_episodes

    try:  # eval records and log turns name their window; the runtime's is for log turns that do not
        return read_episodes(source, settings.history_turns, settings.history_block)
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return None


def run(args: argparse.Namespace, settings: Settings) -> int:
    if args.export_command == "stats":
        from agent.export.stats import compute, render

        rows_file = args.source / "sft.jsonl" if args.source.is_dir() else args.source
        if rows_file.suffix == ".jsonl" and rows_file.is_file():
            return _row_stats(args, settings, rows_file)
        episodes = _read(args.source, settings)
        if episodes is None:
            return 2
        stats = compute(episodes)
        print(json.dumps(stats.to_dict(), ensure_ascii=False, indent=2) if args.json else render(stats))
        return 0

    if args.export_command == "grpo":
        from agent.eval.suite import load_eval_suite
        from agent.export.grpo import prompt_rows, write_grpo

        try:
            rows = prompt_rows(load_eval_suite(settings), split=args.split, per_template=args.per_template,
                               seed=args.seed, templates=args.templates, include_dialogue=args.include_dialogue,
                               prompt_settings=settings.prompt_settings)
        except (LookupError, ValueError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        summary = write_grpo(rows, args.out)
        print(json.dumps(summary, ensure_ascii=False, indent=2))
        return 0 if rows else 1

    from agent.export.sft import Selection, build_rows, write_sft

    episodes: list[Any] = []
    for source in args.sources:  # several sources are one set: identical conversations are dropped across them
        read = _read(source, settings)
        if read is None:
            return 2
        episodes += read
    fmt, why = _assistant_format(args.assistant_format, settings, demo=bool(getattr(args, "demo", False)))
    print(f"assistant format: {fmt} ({why})", file=sys.stderr)
    selection = Selection(min_reward=args.min_reward, success_only=args.success_only, split=args.split,
                          per_template_cap=args.per_template_cap)
    if not selection.wants_outcome():
        print("note: no --success-only or --min-reward: failed episodes are exported too", file=sys.stderr)
    tools = _default_tools(settings) if any(e.tools is None for e in episodes) else None
    report = build_rows(episodes, selection, fmt, default_tools=tools, progress=True, tool_block=settings.tool_block)
    summary = write_sft(report, args.out)
    print(json.dumps(summary, ensure_ascii=False, indent=2))
    return 0 if report.rows else 1
