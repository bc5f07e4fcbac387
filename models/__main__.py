"""``python -m models``: pull, verify, list and convert models."""

from __future__ import annotations

import argparse
import sys


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m models", description="Pull, verify and inspect GGUF models and LoRA adapters.")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("pull", help="download the default model and adapter")
    sub.add_parser("verify", help="check a model and adapter before llama.cpp loads them")
    sub.add_parser("list", help="show models present locally")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    print(f"python -m models {args.command}: not yet available (issue 3).", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
