"""What llama.cpp writes to stderr while the runtime loads a model: its errors, nothing else.

llama-cpp-python 0.3.36 filters llama.cpp's log by an older numbering of ggml's levels, so with
``verbose=False`` every warning still reaches the terminal as if it were an error. The demo's
Gemma pair showed it: one ``cannot use buft 'CPU_REPACK'`` line per adapted tensor, 28 lines
before the first prompt.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from agent.backends.llama.engine import GGML_LOG_LEVEL_CONT, GGML_LOG_LEVEL_ERROR, errors_only
from models import demo

WARN, INFO = 3, 2  # ggml.h of the llama.cpp this package builds: DEBUG 1, INFO 2, WARN 3, ERROR 4, CONT 5

LOAD = """
import sys
from pathlib import Path
if sys.argv[3] == "engine":  # importing the engine is what replaces the package's log callback
    from agent.backends.llama.engine import Engine, ModelFiles
    Engine(ModelFiles.check(Path(sys.argv[1]), Path(sys.argv[2])), n_ctx=512, n_threads=1)
else:
    from llama_cpp import Llama
    Llama(sys.argv[1], lora_path=sys.argv[2], n_ctx=512, n_threads=1, verbose=False)
print("loaded")
"""


def test_warnings_and_their_continued_lines_are_dropped_and_errors_kept() -> None:
    last = [0]
    assert errors_only(WARN, b"lora for 'blk.0' cannot use buft\n", last) == b""
    assert errors_only(GGML_LOG_LEVEL_CONT, b"...more of that warning\n", last) == b""
    assert errors_only(INFO, b"loading model\n", last) == b""
    assert errors_only(GGML_LOG_LEVEL_ERROR, b"failed to load model\n", last) == b"failed to load model\n"
    assert errors_only(GGML_LOG_LEVEL_CONT, b"  at tensor 3\n", last) == b"  at tensor 3\n"
    assert errors_only(WARN, b"next warning\n", last) == b""


def _load(how: str, model: Path, adapter: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", LOAD, str(model), str(adapter), how], capture_output=True, text=True,
                          timeout=300)


def test_the_gemma_demo_loads_without_a_line_of_llama_cpp_warnings(gemma3: Path) -> None:
    """Through the runtime's engine stderr stays empty. The same load through llama-cpp-python
    alone prints llama.cpp's warnings on this CPU (x86 repacks Q4_K weights, so every adapted
    tensor gets one), which is what makes the first assertion mean something here; a CPU with
    nothing to repack has fewer warnings to drop, and the engine's stderr is still empty."""
    adapter = demo.demo_adapter_path("gemma3-270m")
    bare = _load("bare", gemma3, adapter)
    assert bare.returncode == 0 and "loaded" in bare.stdout, bare.stderr[-2000:]
    ours = _load("engine", gemma3, adapter)
    assert ours.returncode == 0 and "loaded" in ours.stdout, ours.stderr[-2000:]
    assert ours.stderr == ""
    print(f"llama-cpp-python alone printed {len(bare.stderr.splitlines())} lines")
    assert bare.stderr.strip(), "llama-cpp-python printed nothing: the sliding-window warning at least is expected"


def test_token_counts_of_rows_read_the_gemma_vocabulary_without_a_line_of_warnings(gemma3: Path) -> None:
    """``export stats`` loads only a GGUF's vocabulary (the engine's ``vocab_only`` load); Gemma's
    still makes llama.cpp warn (a vocabulary-only load has no training context to compare n_ctx
    with), which must not reach the terminal either."""
    count = ("import sys\nfrom agent.export.stats import compute_rows\n"
             "rows = [{'messages': [{'role': 'user', 'content': 'hi'}, {'role': 'assistant', 'content': 'hello'}]}]\n"
             "print(compute_rows(rows, sys.argv[1]).rows)")
    run = subprocess.run([sys.executable, "-c", count, str(gemma3)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip() == "1" and run.stderr == ""
