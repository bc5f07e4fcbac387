"""Memory and start-up: model check time, process start to first token, and peak RSS beyond
the model file.
"""

from __future__ import annotations

import os
import resource
import statistics
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent.bench.recording import RecordingBackend
from agent.bench.report import progress

if TYPE_CHECKING:
    from agent.bench.runner import Bench


def process_started_at() -> float:
    """Wall-clock time this process started (``/proc``); the package's import time elsewhere."""
    try:
        ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
        btime = next(int(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines()
                     if line.startswith("btime"))
        return btime + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        from agent.bench import _IMPORTED_AT

        return _IMPORTED_AT


def peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # kB on Linux


def startup(bench: Bench) -> Any:
    """Checks and loads the model, answers one prompt; returns the backend every figure shares."""
    from agent.approval import DenyAll
    from models.check import check_pair

    config, report = bench.config, bench.report
    checks = []
    for _ in range(3 if config.quick else 7):
        t = time.perf_counter()
        result = check_pair(config.model_path, None)
        checks.append(time.perf_counter() - t)
    if not result.ok:
        raise SystemExit(f"error: {result.error_line()}")
    progress("loading the model")
    backend = bench.build_backend(config.model_path)
    recorder = RecordingBackend(backend)
    runtime = bench.build_runtime(recorder, max_steps=1)
    from agent.loop import Budgets

    runtime.agent.budgets = Budgets(max_steps=1, max_tokens=1)
    runtime.handle("startup", "Hello", DenyAll())
    first_token = time.time() - process_started_at()
    runtime.close()
    report.add("check_ms", "model check (check_pair), ms", statistics.median(checks) * 1000, "<= 50")
    report.add("start_to_first_token_s", "process start to first token, s", first_token,
               note="python start, imports, checks, model load, runtime build, one prompt eval + 1 token")
    report.info["threads"] = backend._llm.context_params.n_threads
    return backend


def rss_overhead(bench: Bench) -> None:
    """Run after the episodes: peak RSS then holds the runtime and the bare baseline Llama
    (which mmaps the same file)."""
    config = bench.config
    model_size = Path(config.model_path).stat().st_size
    bench.report.add("rss_overhead_mb", "peak RSS − model file size, MB", (peak_rss_bytes() - model_size) / 2**20,
                     "<= 150", note=f"after the episodes; includes the KV cache of n_ctx={config.n_ctx} twice "
                     "(runtime + bare baseline)")
