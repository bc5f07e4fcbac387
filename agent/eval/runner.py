"""Runs scenarios × samples through a backend, scores each episode, writes one JSON per episode
(an ``EpisodeRecord``, see ``agent.eval.record``).

Resumable by construction: an episode whose JSON exists is loaded, not re-run; files are
written atomically, and an episode cut short by Ctrl-C is not written at all.
"""

from __future__ import annotations

import json
import os
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterable

from agent.backends.base import Backend
from agent.backends.sampling import Sampling
from agent.backends.seeded import SeededBackend
from agent.eval.dialogue import DEFAULT_MAX_USER_TURNS, run_episode
from agent.eval.record import EPISODES_DIR, EpisodeFileError, EpisodeRecord, read_episode
from agent.eval.suite import EvalSuite, Scenario, Verifier
from agent.eval.trace import EpisodeTrace
from agent.history import DEFAULT_HISTORY_TURNS
from agent.loop import Budgets
from agent.prompt import PromptSettings

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
    # The runtime's history window (Settings.history_turns / history_block, ``agent.history``):
    # each turn is shown the earlier turns the runtime would show, and the record keeps the
    # window, so that export cuts the conversation where serving did.
    history_turns: int = DEFAULT_HISTORY_TURNS
    history_block: int | None = None
    prompt_settings: PromptSettings = PromptSettings()  # the runtime's: each episode is shown what serving shows


def episode_key(scenario_id: str, sample: int) -> str:
    return f"{scenario_id}__s{sample}"


def episode_path(out_dir: Path, key: str) -> Path:
    return out_dir / EPISODES_DIR / f"{key}.json"


def write_json_atomic(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + f".tmp{os.getpid()}.{threading.get_ident()}")
    tmp.write_text(json.dumps(data, ensure_ascii=False, indent=1, default=str), encoding="utf-8")
    os.replace(tmp, path)


def load_episode(path: Path) -> EpisodeRecord | None:
    """A finished episode, or None if it has to be run: no file, or a file cut short before it
    was valid JSON. A file that is JSON but not an episode record is an ``EpisodeFileError``:
    it is someone's data, so it is reported, not overwritten."""
    try:
        return read_episode(path)
    except FileNotFoundError:
        return None
    except EpisodeFileError as exc:
        if exc.cut_short:
            return None
        raise


def load_episodes(out_dir: Path) -> list[EpisodeRecord]:
    """Every episode of a results folder; ``EpisodeFileError`` names a file that is not one."""
    return [read_episode(p) for p in sorted((Path(out_dir) / EPISODES_DIR).glob("*.json"))]


def run_one(
    suite: EvalSuite, verifier: Verifier, scenario: Scenario, sample: int, backend: Backend,
    options: RunOptions, cancel: threading.Event | None = None,
) -> EpisodeRecord:
    """One episode from a fresh environment to its record; a crash is recorded, not raised."""
    started = time.perf_counter()
    environment = replace(suite.make_environment(scenario), prompt_settings=options.prompt_settings)
    key = episode_key(scenario.id, sample)
    sampling = options.sampling.for_sample(scenario.id, sample) if options.sampling is not None else None
    if sampling is not None:
        backend = SeededBackend(backend, sampling)
    try:
        try:
            trace = run_episode(
                scenario, backend, environment, budgets=options.budgets, max_user_turns=options.max_user_turns,
                session_id=f"eval-{key}", cancel=cancel, history_turns=options.history_turns,
                history_block=options.history_block,
            )
        except Exception as exc:  # a runtime bug must cost one episode, not the whole run
            snapshot = environment.snapshot()
            trace = EpisodeTrace(scenario, [], snapshot, snapshot, tuple(environment.registry.names),
                                 error=f"{type(exc).__name__}: {exc}")
        verdict = verifier.verify(trace)
    finally:
        environment.close()
    return EpisodeRecord.of(key, sample, trace, verdict, backend.identity(), time.perf_counter() - started,
                            sampling, options.history_turns, options.history_block)


def run_eval(
    suite: EvalSuite,
    scenarios: Iterable[Scenario],
    backend_for: BackendFor,
    options: RunOptions,
    verifier: Verifier | None = None,
    cancel: threading.Event | None = None,
) -> list[EpisodeRecord]:
    """Every (scenario, sample) episode, resumed from ``out_dir`` where finished before."""
    verifier = verifier or suite.verifier
    cancel = cancel or threading.Event()
    jobs = [(s, k) for s in scenarios for k in range(options.samples)]
    records: dict[str, EpisodeRecord] = {}
    todo: list[tuple[Scenario, int]] = []
    for scenario, sample in jobs:
        key = episode_key(scenario.id, sample)
        done = load_episode(episode_path(options.out_dir, key))
        if done is not None:
            records[key] = done
        else:
            todo.append((scenario, sample))
    bar = _Progress(len(jobs), list(records.values()), options.progress)

    def finish(record: EpisodeRecord) -> None:
        if cancel.is_set():
            return  # cut short: not a real result, run it again next time
        write_json_atomic(episode_path(options.out_dir, record.key), record.to_json())
        records[record.key] = record
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
                  options: RunOptions, cancel: threading.Event, finish: Callable[[EpisodeRecord], None]) -> None:
    """``concurrency`` episodes in flight at once, for servers that batch requests."""
    pending = iter(todo)
    with ThreadPoolExecutor(max_workers=options.concurrency) as pool:
        running: set[Future[EpisodeRecord]] = set()

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

    def __init__(self, total: int, done: list[EpisodeRecord], enabled: bool) -> None:
        self.successes = sum(1 for r in done if r.verdict.success)
        self.count = len(done)
        self.bar = None
        if enabled:
            from tqdm import tqdm

            self.bar = tqdm(total=total, initial=self.count, unit="ep", desc="eval", dynamic_ncols=True, mininterval=1.0)
            self._postfix()

    def _postfix(self) -> None:
        if self.bar is not None and self.count:
            self.bar.set_postfix_str(f"success {100 * self.successes / self.count:.1f}%")

    def add(self, record: EpisodeRecord) -> None:
        self.count += 1
        self.successes += bool(record.verdict.success)
        if self.bar is not None:
            self.bar.update(1)
            self._postfix()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
