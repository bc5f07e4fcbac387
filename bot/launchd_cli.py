"""``python -m bot launchd print|install|uninstall|status|logs``: argument parsing only."""

from __future__ import annotations

import argparse
from typing import Any

from agent.config import with_model_flag
from bot import launchd_service
from bot.config import ConfigProblem, settings_or_problem
from launchd import service
from launchd.service import Host


def _settings_options() -> argparse.ArgumentParser:
    """Flags that override the environment and config file for what goes into the plist."""
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument("--model", dest="model_path",
                        help="base model GGUF (else AGENT_MODEL_PATH, config, pulled default); "
                             "with --backend openai the served model's name (else AGENT_REMOTE_MODEL)")
    parent.add_argument("--adapter", "--lora", dest="lora_path",
                        help="LoRA adapter GGUF (else AGENT_LORA_PATH, config, pulled default); --adapter as everywhere else")
    parent.add_argument("--no-adapter", action="store_true", default=None, help="run the base model without an adapter")
    parent.add_argument("--data-dir", help="store, sessions, token file (else AGENT_DATA_DIR)")
    parent.add_argument("--tz", help="time zone (else AGENT_TZ)")
    parent.add_argument("--backend", choices=("llama", "openai"),
                        help="llama (a GGUF in-process) or openai (an OpenAI-compatible API; else AGENT_BACKEND)")
    parent.add_argument("--base-url", help="the OpenAI-compatible server (else AGENT_BASE_URL)")
    return parent


def add_subcommands(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``launchd`` and its commands to ``python -m bot``'s subparsers."""
    parser = subparsers.add_parser(
        "launchd", help="print, install, uninstall or inspect the macOS LaunchAgent",
        description="Keep the bot running as a per-user LaunchAgent (macOS).",
    )
    commands = parser.add_subparsers(dest="launchd_command", required=True)
    options = _settings_options()
    commands.add_parser("print", parents=[options], help="show the plist that install would write")
    commands.add_parser("install", parents=[options], help="check the configuration, write the plist, load it")
    commands.add_parser("uninstall", help="unload the agent and remove its plist")
    commands.add_parser("status", help="launchctl print: state, pid, last exit status")
    logs = commands.add_parser("logs", parents=[options], help="tail the bot's log and launchd's stderr")
    logs.add_argument("-n", "--lines", type=int, default=50, help="lines to show from each file")
    logs.add_argument("-f", "--follow", action="store_true", help="keep following, across log rotation")
    return parser


def run(args: argparse.Namespace, host: Host | None = None, environ: Any = None) -> int:
    """Carry out the parsed ``launchd`` command; the exit status (2: refused, 1: failed)."""
    host = host or Host.current()
    command = args.launchd_command
    if command == "uninstall":
        return service.uninstall(host)
    if command == "status":
        return service.status(host)

    names = ("model_path", "lora_path", "no_adapter", "data_dir", "tz", "backend", "base_url")
    overrides = {name: getattr(args, name, None) for name in names}
    settings = settings_or_problem(overrides, environ)
    if isinstance(settings, ConfigProblem):
        host.complain(settings.message)
        return 2
    settings = with_model_flag(settings, getattr(args, "model_path", None))
    if command == "print":
        return launchd_service.print_plist(settings, host)
    if command == "install":
        return launchd_service.install(settings, host, environ)
    if command == "logs":
        return service.logs(host, settings.data_dir, lines=args.lines, follow=args.follow)
    raise AssertionError(f"unknown launchd command {command!r}")
