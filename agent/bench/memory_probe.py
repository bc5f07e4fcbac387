"""The child process behind the memory and start-up figures: one fresh process, one job.

Peak RSS can only be attributed in a process that holds nothing else, so the bench starts this
module twice, one after the other (``agent.bench.memory`` does):

- ``runtime``: the scripted episode through the runtime as ``python -m agent`` builds it (model
  checks, ``build_llama_backend``, ``build_runtime`` on a temp data dir: SQLite calendar,
  sessions, trajectory log), one conversation. Writes the token steps llama.cpp evaluated and
  sampled to ``--steps``; times process start → first sampled token.
- ``bare``: ``llama_cpp.Llama`` alone, same model, n_ctx and threads, replaying those steps
  (same reused prefixes, same prompt tokens, same greedy tokens).

Each prints one JSON line on stdout: its peak RSS (see ``peak_rss_bytes``), and peak RSS and
seconds since process start at named stages. Run by hand, e.g.::

    python -m agent.bench.memory_probe runtime --model M.gguf --ctx 4096 --steps /tmp/steps.json
    python -m agent.bench.memory_probe bare --model M.gguf --ctx 4096 --steps /tmp/steps.json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable


def process_started_at() -> float:
    """Wall-clock time this process started (``/proc``); the bench package's import time elsewhere."""
    try:
        ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
        btime = next(int(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines()
                     if line.startswith("btime"))
        return btime + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        from agent.bench import _IMPORTED_AT

        return _IMPORTED_AT


def peak_rss_bytes() -> int:
    """This process's peak resident set size.

    On Linux ``VmHWM`` (``/proc/self/status``), the high-water mark of this process's own memory
    map, and not ``ru_maxrss``: the kernel carries the parent's RSS across fork+exec into the
    child's ``ru_maxrss``, so a child of the bench (~330 MB) reported at least that. Elsewhere
    ``ru_maxrss``: bytes on macOS, KiB on other systems.
    """
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024  # "VmHWM:   123456 kB"
    except (OSError, ValueError, IndexError):
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


class Stages:
    """Peak RSS (MiB) and seconds since process start at named points: where the memory went."""

    def __init__(self) -> None:
        self.started_at = process_started_at()
        self.rss_mb: dict[str, float] = {}
        self.seconds: dict[str, float] = {}

    def mark(self, name: str) -> int:
        """Records the stage; returns the peak RSS so far in bytes."""
        peak = peak_rss_bytes()
        self.rss_mb[name] = round(peak / 2**20, 2)
        self.seconds[name] = round(time.time() - self.started_at, 4)
        return peak


class FirstSample:
    """Calls ``on_first`` when llama.cpp first samples a token in this process, then unhooks.

    Wraps ``LlamaSampler.sample`` on its class, as ``recording.LlamaClock`` does: both the
    runtime's sampling (free or grammar) and the bare replay go through it.
    """

    def __init__(self, on_first: Callable[[], None]) -> None:
        from llama_cpp import _internals

        self._owner = _internals.LlamaSampler
        self._original = self._owner.sample
        original, hook = self._original, self

        def sample(sampler: Any, *args: Any, **kwargs: Any) -> Any:
            token = original(sampler, *args, **kwargs)
            hook.close()
            on_first()
            return token

        self._owner.sample = sample  # type: ignore[method-assign]

    def close(self) -> None:
        self._owner.sample = self._original  # type: ignore[method-assign]


def kv_bytes_per_token(metadata: dict[str, str]) -> int | None:
    """K and V of one token over all layers at llama.cpp's default f16 cache type, from GGUF
    metadata; None when the architecture does not say it plainly (e.g. per-layer head counts)."""
    arch = metadata.get("general.architecture", "")
    try:
        layers = int(metadata[f"{arch}.block_count"])
        heads = int(metadata[f"{arch}.attention.head_count"])
        heads_kv = int(metadata.get(f"{arch}.attention.head_count_kv", heads))
        head_dim = int(metadata[f"{arch}.embedding_length"]) // heads
        k_len = int(metadata.get(f"{arch}.attention.key_length", head_dim))
        v_len = int(metadata.get(f"{arch}.attention.value_length", head_dim))
    except (KeyError, ValueError, ZeroDivisionError):
        return None
    return layers * heads_kv * (k_len + v_len) * 2


def run_runtime(args: argparse.Namespace) -> dict[str, Any]:
    """The bench's scripted episode through the runtime users run, then its steps to ``args.steps``."""
    stages = Stages()
    import llama_cpp  # noqa: F401  (its import belongs to the "imports" stage, as in the bare run)

    from agent.app import build_llama_backend
    from agent.bench.episode import run_episode
    from agent.bench.recording import RecordingBackend
    from agent.bench.context import Bench, BenchConfig
    from agent.config import load_settings

    stages.mark("imports")
    settings = load_settings({"model_path": args.model, "no_adapter": True, "n_ctx": args.ctx,
                              "n_threads": args.threads, "tz": args.tz, "tool_block": args.tool_block})
    backend = build_llama_backend(settings)  # the model checks, then the load, as users get it
    stages.mark("model_loaded")
    bench = Bench(BenchConfig(model_path=args.model, n_ctx=args.ctx, n_threads=args.threads,
                              quick=args.quick, settings=settings))  # temp data dirs under $TMPDIR
    recorder = RecordingBackend(backend)
    hook = FirstSample(lambda: stages.mark("first_token"))
    try:
        seconds, steps, turn = run_episode(bench, recorder)
    finally:
        hook.close()
    peak = stages.mark("end")  # before the bench's own bookkeeping below
    Path(args.steps).write_text(json.dumps([asdict(s) for s in steps]))
    engine = backend.engine
    return {
        "mode": "runtime", "tool_block": settings.tool_block, "peak_rss_bytes": peak, "stages_rss_mb": stages.rss_mb,
        "stages_s": stages.seconds, "episode_s": seconds, "steps": len(steps),
        "first_prompt_tokens": steps[0].evaluated if steps else 0,
        "stop": turn.stop_reason.value, "n_ctx": engine.n_ctx, "n_tokens": engine.n_tokens,
        "state_bytes": engine.state_size(),
        "kv_bytes_per_token": kv_bytes_per_token(engine.metadata),
        "saved_states": backend.saved_sessions, "max_saved_sessions": backend.max_saved_sessions,
        "max_saved_state_bytes": backend.max_saved_state_bytes,
    }


def run_bare(args: argparse.Namespace) -> dict[str, Any]:
    """llama.cpp alone replaying the runtime's steps from ``args.steps``."""
    stages = Stages()
    from agent.bench.recording import BareLlama, StepTrace

    stages.mark("imports")
    bare = BareLlama(args.model, args.ctx, args.threads)
    stages.mark("model_loaded")
    steps = [StepTrace(**s) for s in json.loads(Path(args.steps).read_text())]
    hook = FirstSample(lambda: stages.mark("first_token"))
    t = time.perf_counter()
    try:
        for step in steps:
            bare.prepare(step)
            bare.replay(step)
    finally:
        hook.close()
    seconds = time.perf_counter() - t
    peak = stages.mark("end")
    return {"mode": "bare", "peak_rss_bytes": peak, "stages_rss_mb": stages.rss_mb,
            "stages_s": stages.seconds, "replay_s": seconds, "steps": len(steps), "n_tokens": bare.llm.n_tokens}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agent.bench.memory_probe", description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", choices=("runtime", "bare"))
    parser.add_argument("--model", required=True, help="GGUF file")
    parser.add_argument("--ctx", type=int, required=True, help="n_ctx")
    parser.add_argument("--threads", type=int, default=None, help="llama.cpp threads (default: its own)")
    parser.add_argument("--steps", required=True, help="JSON file: the runtime writes its steps, bare replays them")
    parser.add_argument("--tz", default=None, help="runtime: the user's time zone (default: settings)")
    parser.add_argument("--quick", action="store_true", help="runtime: the bench's --quick reply budget")
    parser.add_argument("--tool-block", default=None, help="runtime: full or compact (default: settings)")
    args = parser.parse_args(argv)
    result = run_runtime(args) if args.mode == "runtime" else run_bare(args)
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
