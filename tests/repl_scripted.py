"""``python -m tests.repl_scripted SCRIPT.json``: the REPL of ``python -m agent`` with a scripted model.

For tests on a real pseudo-terminal whose model output must be forced (the receipt cases): the
same settings (``AGENT_DATA_DIR``, ``AGENT_RECEIPT``, the config file), the same runtime and
``run_repl``, only the backend replays ``bot.scripted`` rules instead of loading a GGUF.
"""

from __future__ import annotations

import sys
from pathlib import Path

from agent.app import build_runtime
from agent.config import load_settings
from agent.repl import run_repl
from bot.scripted import load_scripted_backend


def main(argv: list[str]) -> int:
    settings = load_settings()
    runtime = build_runtime(settings, load_scripted_backend(Path(argv[0])))
    try:
        return run_repl(runtime, tz=settings.tz)
    finally:
        runtime.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
