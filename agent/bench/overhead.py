"""Loop overhead: the scripted episode through ``Runtime.handle`` ÷ llama.cpp's own work for the
same tokens (timed inside llama.cpp, and replayed on a bare Llama).
"""

from __future__ import annotations

import statistics
import time
from typing import TYPE_CHECKING, Any

from agent.bench.episode import run_episode
from agent.bench.recording import BareLlama, LlamaClock, RecordingBackend, StepTrace
from agent.bench.report import progress

if TYPE_CHECKING:
    from agent.bench.context import Bench


def loop_overhead(bench: Bench, backend: Any) -> list[StepTrace]:
    """Adds the overhead figures; returns the last episode's steps for the prefix-reuse figure."""
    config, report = bench.config, bench.report
    recorder = RecordingBackend(backend)
    bare = None
    if not config.quick:  # the replay doubles the time and is the noisiest figure
        progress("loading a bare llama.cpp for the baseline")
        bare = BareLlama(config.model_path, config.n_ctx, config.n_threads)
    ratios, inner, walls, direct, save_share, steps, turn = [], [], [], [], [], [], None
    if not config.quick:
        run_episode(bench, recorder)  # warm-up: page in the weights, fill the system prompt's prefix
    for i in range(config.repeats):
        progress(f"loop overhead: episode {i + 1}/{config.repeats} and its bare replay")
        clock = LlamaClock()
        try:
            seconds, steps, turn = run_episode(bench, recorder)
        finally:
            clock.close()
        direct.append(seconds / clock.seconds)
        save_share.append(sum(s.timings.get("save_state_s", 0.0) + s.timings.get("load_state_s", 0.0)
                              for s in turn.steps) / seconds)
        inner.append(seconds / sum(s.llama_seconds for s in steps))
        walls.append(seconds)
        if bare is None:
            continue
        baseline = 0.0
        for step in steps:
            bare.prepare(step)
            t = time.perf_counter()
            bare.replay(step)
            baseline += time.perf_counter() - t
        ratios.append(seconds / baseline)
    assert turn is not None
    statuses = [c.status.value for s in turn.steps for c in s.calls]
    report.add("loop_overhead", "loop overhead: episode ÷ time inside llama.cpp eval+sample",
               statistics.median(direct), "<= 1.02",
               note=f"{len(steps)} steps, calls {statuses}, stop {turn.stop_reason.value}")
    report.add("loop_overhead_replay", "loop overhead: episode ÷ bare llama.cpp replay",
               statistics.median(ratios) if ratios else None, "<= 1.02",
               note="episode-level interleaving; very noisy on a shared machine" if ratios
               else "skipped with --quick")
    report.add("loop_overhead_vs_backend_timings", "episode ÷ backend's prompt_eval_s + generate_s",
               statistics.median(inner))
    report.add("save_state_share", "share of the episode spent saving/loading session states",
               statistics.median(save_share))
    report.add("episode_s", "episode wall time, s", statistics.median(walls))
    del bare
    return steps
