"""Runs scenarios × samples through a backend, scores each episode, writes one JSON per episode.

Resumable by construction: an episode whose JSON exists is loaded, not re-run; files are
written atomically, and an episode cut short by Ctrl-C is not written at all.
"""

from __future__ import annotations

import json
import os
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from agent.backends.base import Backend
from agent.backends.sampling import Sampling, SeededBackend
from agent.eval.dialogue import DEFAULT_MAX_USER_TURNS, run_episode
from agent.eval.suite import EvalSuite, Scenario, Verifier
from agent.loop import Budgets

EPISODES_DIR = "episodes"
# Builds (or shares) the backend for one episode: scripted policies need the scenario.
BackendFor = Callable[[Scenario, int], Backend]


@dataclass
class RunOptions:
    out_dir: Path
    samples: int = 1
    concurrency: int = 1
    max_user_turns: int = DEFAULT_MAX_USER_TURNS
    budgets: Budgets = field(default_factory=Budgets)
    progress: bool = True
    # None: the backend's default (greedy). Otherwise each (scenario, sample) decodes with its own
    # seed derived from ``sampling.seed`` (see agent.backends.sampling), recorded in the episode.
    sampling: Sampling | None = None


def episode_key(scenario_id: str, sample: int) -> str:
    return f"{scenario_id}__s{sample}"


def episode_path(out_dir: Path, key: str) -> Path:
    return out_dir / EPISODES_DIR / f"{key}.json"


def write_json_atomic(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + f".tmp{os.getpid()}.{threading.get_ident()}")
    tmp.write_text(json.dumps(data, ensure_ascii=False, indent=1, default=str), encoding="utf-8")
    os.replace(tmp, path)


def load_episode(path: Path) -> dict[str, Any] | None:
    """A finished episode, or None if the file is missing or half-written (then it is re-run)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and "verdict" in data else None


def load_episodes(out_dir: Path) -> list[dict[str, Any]]:
    folder = Path(out_dir) / EPISODES_DIR
    found = (load_episode(p) for p in sorted(folder.glob("*.json")))
    return [e for e in found if e is not None]


def run_one(
    suite: EvalSuite, verifier: Verifier, scenario: Scenario, sample: int, backend: Backend,
    options: RunOptions, cancel: threading.Event | None = None,
) -> dict[str, Any]:
    """One episode from a fresh environment to its record; a crash is recorded, not raised."""
    started = time.perf_counter()
    environment = suite.make_environment(scenario)
    key = episode_key(scenario.id, sample)
    sampling = options.sampling.for_sample(scenario.id, sample) if options.sampling is not None else None
    if sampling is not None:
        backend = SeededBackend(backend, sampling)
    try:
        try:
            trace = run_episode(
                scenario, backend, environment, budgets=options.budgets, max_user_turns=options.max_user_turns,
                session_id=f"eval-{key}", cancel=cancel,
            )
        except Exception as exc:  # a runtime bug must cost one episode, not the whole run
            from agent.eval.trace import EpisodeTrace

            snapshot = environment.snapshot()
            trace = EpisodeTrace(scenario, [], snapshot, snapshot, tuple(environment.registry.names),
                                 error=f"{type(exc).__name__}: {exc}")
        verdict = verifier.verify(trace)
    finally:
        environment.close()
    calls = [
        {**asdict(c), "status": c.status.value} for c in trace.calls()
    ]
    return {
        "key": key,
        "scenario_id": scenario.id,
        "template": scenario.template,
        "variant": scenario.variant,
        "split": scenario.split,
        "language": scenario.language,
        "sample": sample,
        "scenario": scenario.to_dict(),
        "messages": trace.messages,
        "exchanges": [{"user": e.user_text, "script_line": e.script_line, "turn": e.turn.to_dict()}
                      for e in trace.exchanges],
        "stop_reasons": [e.turn.stop_reason.value for e in trace.exchanges],
        "calls": calls,
        "final_snapshot": trace.final,
        "verdict": verdict.to_dict(),
        "backend": backend.identity(),
        "sampling": sampling.to_dict() if sampling is not None else None,  # this episode's own seed
        "error": trace.error,
        "seconds": time.perf_counter() - started,
    }


def run_eval(
    suite: EvalSuite,
    scenarios: Iterable[Scenario],
    backend_for: BackendFor,
    options: RunOptions,
    verifier: Verifier | None = None,
    cancel: threading.Event | None = None,
) -> list[dict[str, Any]]:
    """Every (scenario, sample) episode, resumed from ``out_dir`` where finished before."""
    verifier = verifier or suite.verifier
    cancel = cancel or threading.Event()
    jobs = [(s, k) for s in scenarios for k in range(options.samples)]
    records: dict[str, dict[str, Any]] = {}
    todo: list[tuple[Scenario, int]] = []
    for scenario, sample in jobs:
        key = episode_key(scenario.id, sample)
        done = load_episode(episode_path(options.out_dir, key))
        if done is not None:
            records[key] = done
        else:
            todo.append((scenario, sample))
    bar = _Progress(len(jobs), list(records.values()), options.progress)

    def finish(record: dict[str, Any]) -> None:
        if cancel.is_set():
            return  # cut short: not a real result, run it again next time
        write_json_atomic(episode_path(options.out_dir, record["key"]), record)
        records[record["key"]] = record
        bar.add(record)

    try:
        if options.concurrency <= 1:
            for scenario, sample in todo:
                finish(run_one(suite, verifier, scenario, sample, backend_for(scenario, sample), options, cancel))
        else:
            _run_parallel(suite, verifier, todo, backend_for, options, cancel, finish)
    except KeyboardInterrupt:
        cancel.set()
        raise
    finally:
        bar.close()
    return [records[episode_key(s.id, k)] for s, k in jobs if episode_key(s.id, k) in records]


def _run_parallel(suite: EvalSuite, verifier: Verifier, todo: list[tuple[Scenario, int]], backend_for: BackendFor,
                  options: RunOptions, cancel: threading.Event, finish: Callable[[dict[str, Any]], None]) -> None:
    """``concurrency`` episodes in flight at once, for servers that batch requests."""
    pending = iter(todo)
    with ThreadPoolExecutor(max_workers=options.concurrency) as pool:
        running: set[Future[dict[str, Any]]] = set()

        def submit_next() -> None:
            job = next(pending, None)
            if job is not None and not cancel.is_set():
                scenario, sample = job
                running.add(pool.submit(run_one, suite, verifier, scenario, sample,
                                        backend_for(scenario, sample), options, cancel))

        for _ in range(options.concurrency):
            submit_next()
        try:
            while running:
                finished, _ = wait(running, return_when=FIRST_COMPLETED)
                for future in finished:
                    running.discard(future)
                    finish(future.result())
                    submit_next()
        except KeyboardInterrupt:
            cancel.set()
            for future in running:
                future.cancel()
            raise


class _Progress:
    """tqdm bar with the running success rate (resumed episodes count from the start)."""

    def __init__(self, total: int, done: list[dict[str, Any]], enabled: bool) -> None:
        self.successes = sum(1 for r in done if r["verdict"]["success"])
        self.count = len(done)
        self.bar = None
        if enabled:
            from tqdm import tqdm

            self.bar = tqdm(total=total, initial=self.count, unit="ep", desc="eval", dynamic_ncols=True, mininterval=1.0)
            self._postfix()

    def _postfix(self) -> None:
        if self.bar is not None and self.count:
            self.bar.set_postfix_str(f"success {100 * self.successes / self.count:.1f}%")

    def add(self, record: dict[str, Any]) -> None:
        self.count += 1
        self.successes += bool(record["verdict"]["success"])
        if self.bar is not None:
            self.bar.update(1)
            self._postfix()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
