"""``python -m bot``: run the Telegram bot, or manage its launchd service."""

from __future__ import annotations

import argparse
import sys

from bot import launchd_cli
from bot.run import add_run_arguments, run


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bot",
        description="Run iljeong's Telegram bot (long polling), or manage it as a macOS LaunchAgent.",
    )
    sub = parser.add_subparsers(dest="command")
    add_run_arguments(sub.add_parser("run", help="run the bot in the foreground (the default)"))
    launchd_cli.add_subcommands(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "launchd":
        return launchd_cli.run(args)
    if args.command is None:  # bare `python -m bot` means `run` with defaults
        args = build_parser().parse_args(["run"])
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
