"""``python -m bot``: run the Telegram bot, or manage its launchd service."""

from __future__ import annotations

import argparse
import sys

from launchd import cli as launchd_cli


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bot",
        description="Run iljeong's Telegram bot (long polling), or manage it as a macOS LaunchAgent.",
    )
    sub = parser.add_subparsers(dest="command")
    sub.add_parser("run", help="run the bot in the foreground (the default)")
    launchd_cli.add_subcommands(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "launchd":
        return launchd_cli.run(args)
    print(f"python -m bot {args.command or 'run'}: not yet available (issue 5).", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
