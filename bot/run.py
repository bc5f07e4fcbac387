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

from agent.config import Settings
from bot.config import ConfigProblem, load_bot_config, settings_or_problem
from bot.inbox import Inbox

log = logging.getLogger("bot")


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--api-base-url", help="Bot API server (default https://api.telegram.org; env TELEGRAM_API_BASE_URL)")
    parser.add_argument("--data-dir", help="where sessions, calendar and the update inbox live (env AGENT_DATA_DIR)")
    parser.add_argument("--demo", action="store_true", help="use the small SmolLM2 demo model")
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
        {"telegram_api_base_url": args.api_base_url, "data_dir": args.data_dir}
    )
    if isinstance(settings, ConfigProblem):
        print(f"python -m bot: {settings.message}", file=sys.stderr)
        return 2
    config = load_bot_config(settings)
    if isinstance(config, ConfigProblem):
        print(f"python -m bot: {config.message}", file=sys.stderr)
        return 2
    _setup_logging(settings)

    from agent.app import build_llama_backend, build_runtime

    if args.scripted is not None:
        from bot.scripted import load_scripted_backend

        backend = load_scripted_backend(args.scripted)
    else:
        backend = build_llama_backend(settings, demo=args.demo)  # exits 2 on a bad model path
    runtime = build_runtime(settings, backend)
    inbox = Inbox(settings.data_dir / "telegram_inbox.sqlite3")
    log.info("model ready (%s); starting the bot", backend.name)

    from bot.app import serve
    from bot.reminders import REAL_TICK_S, TEST_TICK_S, file_clock, system_clock

    clock, tick_s = (file_clock(args.clock_file), TEST_TICK_S) if args.clock_file else (system_clock, REAL_TICK_S)
    try:
        return asyncio.run(serve(config, runtime, settings.approval_timeout_s, inbox, clock, tick_s))
    finally:
        inbox.close()
        runtime.close()
