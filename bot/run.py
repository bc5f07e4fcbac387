"""``python -m bot run``: check the configuration, load the model once, then serve.

Order matters: a bad configuration exits 2 before anything loads; the model loads before
polling starts, so no update waits on a model that might still fail to load.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import stat
import sys
from pathlib import Path

from agent.config import Settings, with_model_flag
from bot.config import ConfigProblem, bot_settings, load_bot_config, settings_or_problem
from bot import masking
from bot.inbox import Inbox
from bot.timing import TIME

log = logging.getLogger("bot")


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--api-base-url", help="Bot API server (default https://api.telegram.org; env TELEGRAM_API_BASE_URL)")
    parser.add_argument("--data-dir", help="where sessions, calendar and the update inbox live (env AGENT_DATA_DIR)")
    parser.add_argument("--demo", action="store_true", help="use the small demo pair (AGENT_DEMO chooses which)")
    parser.add_argument("--backend", choices=("llama", "openai"),
                        help="llama: a GGUF in-process (default); openai: an OpenAI-compatible API (env AGENT_BACKEND)")
    parser.add_argument("--base-url", help="the OpenAI-compatible server (env AGENT_BASE_URL)")
    parser.add_argument("--model", dest="model_path",
                        help="GGUF file (env AGENT_MODEL_PATH); with --backend openai the served model's name (env AGENT_REMOTE_MODEL)")
    parser.add_argument("--scripted", type=Path, help=argparse.SUPPRESS)  # tests: replay model outputs
    # tests: "now" is the ISO instant in this file, re-read on every reminder tick (bot.reminders)
    parser.add_argument("--clock-file", type=Path, help=argparse.SUPPRESS)
    # tests: every retry/backoff wait is multiplied by this (bot.timing)
    parser.add_argument("--time-scale", type=float, default=1.0, help=argparse.SUPPRESS)


def _setup_logging(settings: Settings, token: str) -> None:
    try:
        from bot.log_file import configure_log_file
        from launchd.logs import default_log_dir
    except ImportError:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    else:
        path = configure_log_file(default_log_dir(settings.data_dir))
        print(f"python -m bot: logging to {path}", file=sys.stderr)
    masking.mask_handlers(token)


def secure_data_dir(data_dir: Path, log_dir: Path | None = None) -> None:
    """A private calendar: the data dir and the log dir are 0700, the files in them 0600.

    The log dir is ``<data_dir>/logs``, or (macOS) ``~/Library/Logs/iljeong`` -- outside the
    data dir, so it is tightened on its own. The umask makes everything created from here on
    (databases, their WAL files, logs) owner-only; what an older version left 0755/0644 is
    tightened once.
    """
    os.umask(0o077)
    log_dir = log_dir or data_dir / "logs"
    for directory in (data_dir, log_dir):
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        if stat.S_IMODE(directory.stat().st_mode) & 0o077:
            directory.chmod(0o700)
            log.info("made %s private (0700)", directory)
    for path in [*data_dir.iterdir(), *log_dir.iterdir()]:
        try:
            info = path.lstat()
        except FileNotFoundError:
            continue
        if stat.S_ISREG(info.st_mode) and info.st_mode & 0o077:
            path.chmod(0o600)


def log_dir_for(settings: Settings) -> Path:
    """Where the bot logs (launchd.logs decides; it is optional for a plain ``bot run``)."""
    try:
        from launchd.logs import default_log_dir
    except ImportError:
        return settings.data_dir / "logs"
    return default_log_dir(settings.data_dir)


def run(args: argparse.Namespace) -> int:
    settings = settings_or_problem(
        {"telegram_api_base_url": args.api_base_url, "data_dir": args.data_dir,
         "backend": args.backend, "base_url": args.base_url, "model_path": args.model_path}
    )
    if isinstance(settings, ConfigProblem):
        print(f"python -m bot: {settings.message}", file=sys.stderr)
        return 2
    settings = with_model_flag(settings, args.model_path)
    if args.demo:
        from agent.app import demo_settings

        settings = demo_settings(settings)  # the tool block and prompt the demo recipe trains with
    config = load_bot_config(settings)
    if isinstance(config, ConfigProblem):
        print(f"python -m bot: {config.message}", file=sys.stderr)
        return 2
    masking.install(config.token)  # before anything can print the token: logs, tracebacks, PTB
    secure_data_dir(settings.data_dir, log_dir_for(settings))
    _setup_logging(settings, config.token)
    if args.time_scale != 1.0:
        TIME.set_scale(args.time_scale)
    from agent.app import build_backend, build_runtime, openai_problem

    remote_problem = openai_problem(settings) if settings.backend == "openai" and args.scripted is None else None
    if remote_problem:
        print(f"python -m bot: {remote_problem}", file=sys.stderr)
        return 2
    if settings.backend == "openai" and args.scripted is None:
        from agent.apikey import read_api_key

        masking.add_secret(read_api_key(settings))  # masked like the token from here on

    try:
        if args.scripted is not None:
            from bot.scripted import load_scripted_backend

            backend = load_scripted_backend(args.scripted)
        else:
            backend = build_backend(settings, demo=args.demo, keep_states=True)  # exits 2 on a bad model path
        runtime = build_runtime(settings, backend)
        runtime.warm_up()  # the static prefix from disk (or evaluated and saved) while the bot connects
    except KeyboardInterrupt:  # Ctrl-C while the model loads: nothing has started yet
        print("python -m bot: stopped while loading the model", file=sys.stderr)
        return 0
    inbox = Inbox(settings.data_dir / "telegram_inbox.sqlite3")
    log.info("model ready (%s%s); starting the bot", backend.name,
             f" {settings.remote_model} at {settings.base_url}" if backend.name == "openai" else "")

    from telegram.error import InvalidToken, TelegramError

    from bot.app import ShutdownGuard, report_refused_token, serve
    from bot.reminders import REAL_TICK_S, TEST_TICK_S, file_clock, system_clock

    clock, tick_s = (file_clock(args.clock_file), TEST_TICK_S) if args.clock_file else (system_clock, REAL_TICK_S)
    guard = ShutdownGuard()  # armed by SIGTERM/SIGINT; it also covers the closing below
    try:
        return asyncio.run(serve(config, runtime, bot_settings(settings).approval_timeout_s, inbox, clock, tick_s, guard))
    except InvalidToken:  # at start-up (getMe); while running, serve reports it the same way
        return report_refused_token(config)
    except TelegramError as exc:  # e.g. deleteWebhook refused at start-up: one line, launchd retries
        line = f"stopped: the Bot API failed ({type(exc).__name__}: {exc})"
        log.error("%s", line, exc_info=exc)
        print(f"python -m bot: {masking.mask(line, config.token)}", file=sys.stderr)
        return 1
    finally:
        inbox.close()
        runtime.close()
