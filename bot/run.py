"""``python -m bot run``: check the configuration, load the model once, then serve.

Order matters: a bad configuration exits 2 before anything loads; the model loads before
polling starts, so no update waits on a model that might still fail to load.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from pathlib import Path

from agent.config import Settings, with_model_flag
from bot.config import ConfigProblem, load_bot_config, settings_or_problem
from bot.inbox import Inbox

log = logging.getLogger("bot")


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--api-base-url", help="Bot API server (default https://api.telegram.org; env TELEGRAM_API_BASE_URL)")
    parser.add_argument("--data-dir", help="where sessions, calendar and the update inbox live (env AGENT_DATA_DIR)")
    parser.add_argument("--demo", action="store_true", help="use the small SmolLM2 demo model")
    parser.add_argument("--backend", choices=("llama", "openai"),
                        help="llama: a GGUF in-process (default); openai: an OpenAI-compatible API (env AGENT_BACKEND)")
    parser.add_argument("--base-url", help="the OpenAI-compatible server (env AGENT_BASE_URL)")
    parser.add_argument("--model", dest="model_path",
                        help="GGUF file (env AGENT_MODEL_PATH); with --backend openai the served model's name (env AGENT_REMOTE_MODEL)")
    parser.add_argument("--scripted", type=Path, help=argparse.SUPPRESS)  # tests: replay model outputs
    # tests: "now" is the ISO instant in this file, re-read on every reminder tick (bot.reminders)
    parser.add_argument("--clock-file", type=Path, help=argparse.SUPPRESS)


def _setup_logging(settings: Settings) -> None:
    try:
        from launchd.logs import configure_logging, default_log_dir
    except ImportError:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        return
    path = configure_logging(default_log_dir(settings.data_dir))
    print(f"python -m bot: logging to {path}", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    settings = settings_or_problem(
        {"telegram_api_base_url": args.api_base_url, "data_dir": args.data_dir,
         "backend": args.backend, "base_url": args.base_url, "model_path": args.model_path}
    )
    if isinstance(settings, ConfigProblem):
        print(f"python -m bot: {settings.message}", file=sys.stderr)
        return 2
    settings = with_model_flag(settings, args.model_path)
    config = load_bot_config(settings)
    if isinstance(config, ConfigProblem):
        print(f"python -m bot: {config.message}", file=sys.stderr)
        return 2
    from agent.app import build_backend, build_runtime, openai_problem

    remote_problem = openai_problem(settings) if settings.backend == "openai" and args.scripted is None else None
    if remote_problem:
        print(f"python -m bot: {remote_problem}", file=sys.stderr)
        return 2
    _setup_logging(settings)

    if args.scripted is not None:
        from bot.scripted import load_scripted_backend

        backend = load_scripted_backend(args.scripted)
    else:
        backend = build_backend(settings, demo=args.demo)  # exits 2 on a bad model path
    runtime = build_runtime(settings, backend)
    inbox = Inbox(settings.data_dir / "telegram_inbox.sqlite3")
    log.info("model ready (%s%s); starting the bot", backend.name,
             f" {settings.remote_model} at {settings.base_url}" if backend.name == "openai" else "")

    from bot.app import serve
    from bot.reminders import REAL_TICK_S, TEST_TICK_S, file_clock, system_clock

    clock, tick_s = (file_clock(args.clock_file), TEST_TICK_S) if args.clock_file else (system_clock, REAL_TICK_S)
    try:
        return asyncio.run(serve(config, runtime, settings.approval_timeout_s, inbox, clock, tick_s))
    finally:
        inbox.close()
        runtime.close()
