"""Memory and start-up: model check time (in the bench process), and, each in a fresh process of
its own, the runtime's peak RSS against llama.cpp alone's and its time from process start to
the first token.

The bench process cannot measure either: it holds a second llama.cpp context (the bare
baseline), the peers' model and saved session states, and its start-up is the bench's. So
``isolated`` starts ``agent.bench.memory_probe`` twice, one after the other: the runtime running
the scripted episode, then a bare ``llama_cpp.Llama`` replaying the tokens it evaluated.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent.bench.recording import RecordingBackend
from agent.bench.report import Report, progress

if TYPE_CHECKING:
    from agent.bench.context import Bench

MB = 2**20
CHILD_TIMEOUT_S = 1800  # one episode on a loaded 2-core machine takes minutes


class ProbeFailed(RuntimeError):
    """A child process did not produce its JSON line; the message says why, in one line."""


def startup(bench: Bench) -> Any:
    """Checks and loads the model, answers one prompt; returns the backend every figure shares.

    The one-token turn is the warm-up the other figures start from (weights paged in, the
    system prompt's prefix in the KV cache); start-up itself is timed in ``isolated``.
    """
    from agent.approval import DenyAll
    from agent.loop import Budgets
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
    runtime = bench.build_runtime(RecordingBackend(backend), max_steps=1)
    runtime.agent.budgets = Budgets(max_steps=1, max_tokens=1)
    runtime.handle("startup", "Hello", DenyAll())
    runtime.close()
    report.add("check_ms", "model check (check_pair), ms", statistics.median(checks) * 1000, "<= 50")
    report.info["threads"] = backend.engine.n_threads
    return backend


def run_probe(bench: Bench, mode: str, steps_file: Path) -> dict[str, Any]:
    """Runs ``memory_probe`` in a fresh interpreter on this checkout; returns its JSON line."""
    config = bench.config
    workdir = bench.tmp / f"probe-{mode}"
    workdir.mkdir(parents=True, exist_ok=True)
    root = str(Path(__file__).resolve().parents[2])  # the child imports the code this process runs
    env = dict(os.environ, TMPDIR=str(workdir),  # the runtime's temp data dirs land here
               PYTHONPATH=os.pathsep.join([root, *filter(None, [os.environ.get("PYTHONPATH")])]))
    cmd = [sys.executable, "-m", "agent.bench.memory_probe", mode, "--model", config.model_path,
           "--ctx", str(config.n_ctx), "--steps", str(steps_file)]
    if config.n_threads:
        cmd += ["--threads", str(config.n_threads)]
    if mode == "runtime":
        cmd += ["--tz", config.settings.tz, "--tool-block", bench.tool_block] + (["--quick"] if config.quick else [])
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=CHILD_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise ProbeFailed(f"{mode} process timed out after {CHILD_TIMEOUT_S} s") from None
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        why = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise ProbeFailed(f"{mode} process exited {done.returncode}: {why}")
    try:
        return json.loads(lines[-1])
    except json.JSONDecodeError:
        raise ProbeFailed(f"{mode} process printed no JSON line: {lines[-1][:200]}") from None


def isolated(bench: Bench) -> None:
    """The runtime and llama.cpp alone, each in a process of its own, one after the other."""
    config = bench.config
    steps_file = bench.tmp / "memory-steps.json"
    runtime = bare = None
    skipped = {"runtime": "", "bare": ""}
    try:
        progress("memory: the runtime's episode in a process of its own")
        runtime = run_probe(bench, "runtime", steps_file)
        progress("memory: llama.cpp alone replaying its tokens in a process of its own")
        bare = run_probe(bench, "bare", steps_file)
    except ProbeFailed as exc:
        skipped["bare" if runtime else "runtime"] = f"skipped: {exc}"
    skipped["bare"] = skipped["bare"] or skipped["runtime"]
    bench.report.info["memory_processes"] = {"runtime": runtime, "bare": bare}
    add_figures(bench.report, runtime, bare, Path(config.model_path).stat().st_size, config.n_ctx, skipped)


def add_figures(report: Report, runtime: dict[str, Any] | None, bare: dict[str, Any] | None,
                model_size: int, n_ctx: int, skipped: dict[str, str]) -> None:
    """The start-up and memory figures from the two processes' JSON lines.

    A figure whose process failed is None with the ``skipped: ...`` reason as its note.
    """
    per_token = runtime.get("kv_bytes_per_token") if runtime else None
    kv_mb = per_token * n_ctx / MB if per_token else None
    kv = f"{kv_mb:.0f} MB for n_ctx={n_ctx}" if kv_mb is not None else f"size unknown for n_ctx={n_ctx}"
    state_kb = runtime["state_bytes"] / runtime["n_tokens"] / 1024 if runtime and runtime["n_tokens"] else None
    if runtime is None:
        report.add("start_to_first_token_s", "process start to first token, s", None, note=skipped["runtime"])
        report.add("rss_runtime_minus_model_mb", "peak RSS of the runtime process − model file, MB", None,
                   note=skipped["runtime"])
    else:
        report.add("start_to_first_token_s", "process start to first token, s", runtime["stages_s"]["first_token"],
                   note="fresh process: python start, imports, model checks, model load, runtime build, "
                   f"first step's prompt eval ({runtime['first_prompt_tokens']} tokens) + 1 token")
        report.add("rss_runtime_minus_model_mb", "peak RSS of the runtime process − model file, MB",
                   (runtime["peak_rss_bytes"] - model_size) / MB,
                   note=f"includes llama.cpp's own KV cache ({kv}) and compute buffers, and python + numpy + "
                   f"llama_cpp (model file {model_size / MB:.0f} MB, mmapped: its pages count once touched)")
    if runtime is None or bare is None:
        report.add("rss_overhead_mb", "peak RSS: runtime process − llama.cpp-alone process, MB", None, "<= 150",
                   note=skipped["bare"])
        report.add("rss_bare_minus_model_mb", "peak RSS of llama.cpp alone − model file, MB", None,
                   note=skipped["bare"])
    else:
        report.add("rss_overhead_mb", "peak RSS: runtime process − llama.cpp-alone process, MB",
                   (runtime["peak_rss_bytes"] - bare["peak_rss_bytes"]) / MB, "<= 150",
                   note=f"what the runtime adds to llama.cpp: each in a fresh process, same model, n_ctx, threads "
                   f"and tokens ({runtime['steps']}-step episode). One conversation: each other conversation "
                   f"kept costs a saved state of ~{state_kb:.1f} KB/token ({saved_cap(runtime)}). "
                   f"Runtime − bare by stage, MB: {stage_deltas(runtime, bare)}")
        report.add("rss_bare_minus_model_mb", "peak RSS of llama.cpp alone − model file, MB",
                   (bare["peak_rss_bytes"] - model_size) / MB,
                   note=f"llama_cpp.Llama only: KV cache ({kv}), compute buffers, python + numpy + llama_cpp "
                   f"({bare['stages_rss_mb']['imports']:.0f} MB after imports)")
    report.add("kv_cache_mb", "llama.cpp KV cache at this n_ctx (f16, from GGUF metadata), MB", kv_mb,
               note=f"{per_token} bytes/token × n_ctx {n_ctx}" if kv_mb is not None
               else skipped["runtime"] or "skipped: the GGUF metadata gives no plain layer/head counts")
    report.add("state_kb_per_token", "saved session state per context token, KB", state_kb,
               note=f"llama_state_seq_get_size ÷ {runtime['n_tokens']} tokens after the episode; a kept "
               "conversation costs this × its tokens" if state_kb is not None
               else skipped["runtime"] or "skipped: no tokens in context after the episode")


def stage_deltas(runtime: dict[str, Any], bare: dict[str, Any]) -> str:
    """Where the runtime's extra peak RSS appeared: the growth of (runtime − bare) per stage."""
    parts, before = [], 0.0
    for stage in ("imports", "model_loaded", "first_token", "end"):
        gap = runtime["stages_rss_mb"][stage] - bare["stages_rss_mb"][stage]
        parts.append(f"{stage} {gap - before:+.1f}")
        before = gap
    return ", ".join(parts)


def saved_cap(runtime: dict[str, Any]) -> str:
    """The backend's limits on saved session states, as the runtime process reported them."""
    return (f"up to max_saved_sessions={runtime['max_saved_sessions']} "
            f"and {runtime['max_saved_state_bytes'] / MB:.0f} MB in all")
