"""``python -m agent bench``: the runtime measured against llama.cpp itself, in one process.

Why ratios: the machines are shared and noisy, so every timing figure is the runtime divided
by a baseline run side by side in the same process (interleaved, repeated, median). Token
counts (prefix reuse) are exact and need no repetition.

What is measured (docs/performance.md has the figures and the exact definitions):

1. loop overhead: one 6-step episode through ``Runtime.handle`` (render, parse, validate,
   approval, tools on a temp SQLite calendar, session store, trajectory log) ÷ a bare
   ``llama_cpp.Llama`` replaying exactly the token sequences that episode evaluated and sampled.
   The episode is made deterministic by starting each reply with a fixed ``assistant_prefix``
   (step 0: ``<tool_call>`` and the model writes the call under the grammar; steps 1-4: whole
   scripted calls; step 5: free text), greedy sampling.
2. prefix reuse: evaluated ÷ new prompt tokens per step, alone and for two interleaved chats
   with and without per-session saved states.
3. constrained decoding: tokens/s with the tool-call grammar (llama-cpp-python's full-vocabulary
   mask, and the runtime's sample-then-check path) ÷ unconstrained, same prompt, same length.
4. peers: llama-cpp-python's ``chatml-function-calling`` handler on the same prompts.
5. memory and start-up.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

from agent.backends.llama import common_prefix

# Taken at import, before llama.cpp loads: "process start" is read from /proc when available.
_IMPORTED_AT = time.time()

DAY = "2026-12-01"
USER_TEXT = "Book a dentist appointment on 2026-12-01 at 15:00 for an hour, then show me that day."

# The episode's replies start with these (one per step); the model writes the rest.
EPISODE_PREFIXES: list[str] = [
    "<tool_call>\n",
    '<tool_call>\n{"name": "search_events", "arguments": {"date": "%s"}}\n</tool_call>' % DAY,
    '<tool_call>\n{"name": "create_event", "arguments": {"title": "Dentist", "date": "%s", '
    '"start_time": "15:00", "duration_minutes": 60}}\n</tool_call>' % DAY,
    '<tool_call>\n{"name": "find_free_slots", "arguments": {"date": "%s", "duration_minutes": 30}}\n</tool_call>' % DAY,
    '<tool_call>\n{"name": "search_events", "arguments": {"date": "%s", "query": "Dentist"}}\n</tool_call>' % DAY,
    "",
]

# Two chats interleaved turn by turn; each turn is one scripted call and one free reply.
CHAT_TURNS: dict[str, list[tuple[str, str]]] = {
    "chat-a": [
        ("What do I have on 2026-12-01?", EPISODE_PREFIXES[1]),
        ("Add 'Dentist' at 15:00 for an hour that day.", EPISODE_PREFIXES[2]),
        ("Any 30 minutes free that day?", EPISODE_PREFIXES[3]),
    ],
    "chat-b": [
        ("Is there anything called Dentist on 2026-12-01?", EPISODE_PREFIXES[4]),
        ("Add 'Team sync' at 10:00 that day, 30 minutes.",
         '<tool_call>\n{"name": "create_event", "arguments": {"title": "Team sync", "date": "%s", '
         '"start_time": "10:00", "duration_minutes": 30}}\n</tool_call>' % DAY),
        ("What is on that day now?", EPISODE_PREFIXES[1]),
    ],
}

PEER_PROMPTS = [
    "What is on my calendar on 2026-12-01?",
    "Add 'Dentist' on 2026-12-01 at 15:00 for 60 minutes.",
    "Find a free hour on 2026-12-02.",
]


# ----------------------------------------------------------------------------- figures


@dataclass
class Figure:
    key: str
    label: str
    value: float | None
    target: str = ""  # e.g. "<= 1.02"; empty when the figure is informative only
    note: str = ""

    @property
    def met(self) -> bool | None:
        if self.value is None or not self.target:
            return None
        op, bound = self.target.split()
        return self.value <= float(bound) if op == "<=" else self.value >= float(bound)


@dataclass
class Report:
    figures: list[Figure] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)

    def add(self, key: str, label: str, value: float | None, target: str = "", note: str = "") -> None:
        self.figures.append(Figure(key, label, None if value is None else round(float(value), 4), target, note))

    def as_json(self) -> dict[str, Any]:
        return {
            "figures": {f.key: f.value for f in self.figures},
            "targets": {f.key: f.target for f in self.figures if f.target},
            "met": {f.key: f.met for f in self.figures if f.target},
            "notes": {f.key: f.note for f in self.figures if f.note},
            "info": self.info,
        }

    def table(self) -> str:
        rows = [("figure", "value", "target", "met?")]
        for f in self.figures:
            met = {True: "yes", False: "NO", None: "-"}[f.met]
            value = "not measured" if f.value is None else f"{f.value:g}"
            rows.append((f.label, value, f.target or "-", met))
        widths = [max(len(r[i]) for r in rows) for i in range(4)]
        lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
        lines.insert(1, "  ".join("-" * w for w in widths))
        notes = [f"  {f.label}: {f.note}" for f in self.figures if f.note]
        return "\n".join(lines + (["", "notes:"] + notes if notes else []))


def progress(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def process_started_at() -> float:
    """Wall-clock time this process started (``/proc``); the import time elsewhere."""
    try:
        ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
        btime = next(int(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines()
                     if line.startswith("btime"))
        return btime + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return _IMPORTED_AT


def peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # kB on Linux


def machine() -> dict[str, Any]:
    cpu = platform.processor() or ""
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                   if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return {"nproc": os.cpu_count(), "cpu": cpu, "python": platform.python_version()}


# ----------------------------------------------------------------------------- recording backend


@dataclass
class StepTrace:
    """What llama.cpp did in one step, enough to replay it on a bare Llama."""

    session_id: str | None
    prompt: list[int]  # the rendered prompt's tokens
    reused: int  # prompt tokens served from the KV cache / saved state
    evaluated: int
    new: int  # prompt tokens no earlier context (engine's or the session's) held
    generated: list[int]  # sampled tokens that were then evaluated
    samples: int  # sampler calls (generated + the final one that stopped)
    llama_seconds: float  # prompt eval + generation, as the backend timed them


class RecordingBackend:
    """Wraps a LlamaBackend: starts each reply with a scripted prefix and records the tokens.

    Reads the backend's llama.cpp context (``_llm``) after each step: the bench measures the
    backend, it does not change it.
    """

    name = "llama"

    def __init__(self, backend: Any) -> None:
        self.backend = backend
        self.prefixes: list[str] = []
        self.steps: list[StepTrace] = []
        self._last_by_session: dict[str, list[int]] = {}

    def _context(self) -> list[int]:
        llm = self.backend._llm
        return llm.input_ids[: llm.n_tokens].tolist()

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], *,
                 session_id: str | None = None, max_tokens: int = 512) -> Any:
        prefix = self.prefixes.pop(0) if self.prefixes else ""
        before = self._context()
        result = self.backend.complete(messages, tools, session_id=session_id, max_tokens=max_tokens,
                                       assistant_prefix=prefix)
        after = self._context()
        prompt = after[: result.prompt_tokens] if len(after) >= result.prompt_tokens else []
        if not prompt:  # the step failed before evaluating; nothing to replay
            return result
        known = max(common_prefix(prompt, before), common_prefix(prompt, self._last_by_session.get(session_id or "", [])))
        generated = after[result.prompt_tokens:]
        self.steps.append(StepTrace(
            session_id=session_id, prompt=prompt, reused=result.reused_tokens, evaluated=result.evaluated_tokens,
            new=len(prompt) - known, generated=generated, samples=len(generated) + 1,
            llama_seconds=result.timings.get("prompt_eval_s", 0.0) + result.timings.get("generate_s", 0.0),
        ))
        if session_id:
            self._last_by_session[session_id] = after
        return result

    def identity(self) -> dict[str, Any]:
        return self.backend.identity()


class LlamaClock:
    """Accumulates wall time spent inside ``Llama.eval`` and ``LlamaSampler.sample``.

    Installed by wrapping the two methods on their classes for the bench process only: that is
    exactly the work a bare llama.cpp needs for the same tokens (decode + greedy sample).
    """

    def __init__(self) -> None:
        from llama_cpp import Llama, _internals

        self.seconds = 0.0
        self._originals = [(Llama, "eval", Llama.eval), (_internals.LlamaSampler, "sample", _internals.LlamaSampler.sample)]
        for owner, name, original in self._originals:
            setattr(owner, name, self._timed(original))

    def _timed(self, original: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            t = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - t

        return wrapper

    def close(self) -> None:
        for owner, name, original in self._originals:
            setattr(owner, name, original)


# ----------------------------------------------------------------------------- bare llama.cpp


class BareLlama:
    """llama.cpp alone: evaluates and samples given token sequences, nothing else."""

    def __init__(self, model_path: str, n_ctx: int, n_threads: int | None) -> None:
        from llama_cpp import Llama

        self.llm = Llama(model_path, n_ctx=n_ctx, n_batch=min(512, n_ctx), n_threads=n_threads,
                         n_threads_batch=n_threads, seed=0, verbose=False)

    def prepare(self, step: StepTrace) -> None:
        """Untimed: make the KV cache hold the step's reused prefix, as the runtime's did."""
        llm = self.llm
        have = common_prefix(llm.input_ids[: llm.n_tokens].tolist(), step.prompt[: step.reused])
        llm._ctx.kv_cache_seq_rm(-1, have, -1)
        llm.n_tokens = have
        if have < step.reused:
            llm.eval(step.prompt[have: step.reused])

    def replay(self, step: StepTrace) -> None:
        """Timed part: evaluate the step's new prompt tokens, then sample and evaluate its tokens."""
        from llama_cpp import _internals

        llm = self.llm
        sampler = _internals.LlamaSampler()
        sampler.add_greedy()
        llm.eval(step.prompt[step.reused:])
        for token in step.generated:
            sampler.sample(llm._ctx, -1)
            llm.eval([token])
        sampler.sample(llm._ctx, -1)


# ----------------------------------------------------------------------------- the bench


@dataclass
class BenchConfig:
    model_path: str
    n_ctx: int
    n_threads: int | None
    quick: bool
    settings: Any  # agent.config.Settings (data_dir replaced by temp dirs)

    @property
    def repeats(self) -> int:
        return 1 if self.quick else 3

    @property
    def max_tokens(self) -> int:
        return 24 if self.quick else 48


class Bench:
    def __init__(self, config: BenchConfig) -> None:
        self.config = config
        self.report = Report()
        self.tmp = Path(tempfile.mkdtemp(prefix="iljeong-bench-"))
        self._runs = 0

    # -- building -------------------------------------------------------------------------

    def build_backend(self, model_path: str, n_ctx: int | None = None) -> Any:
        from agent.backends.llama import LlamaBackend

        return LlamaBackend(model_path, n_ctx=n_ctx or self.config.n_ctx, n_threads=self.config.n_threads)

    def build_runtime(self, backend: Any, max_steps: int) -> Any:
        """A fresh runtime on a fresh temp calendar, sessions and trajectory log; frozen clock."""
        from agent.app import build_runtime
        from agent.loop import Budgets

        self._runs += 1
        settings = replace(self.config.settings, data_dir=self.tmp / f"run{self._runs}")
        runtime = build_runtime(settings, backend)
        runtime.agent.budgets = Budgets(max_steps=max_steps, max_tool_calls=16, max_tokens=self.config.max_tokens)
        prompt = runtime.system_prompt()
        runtime.system_prompt = lambda: prompt  # a minute ticking over must not change the prefix mid-bench
        return runtime

    # -- 5. start-up ----------------------------------------------------------------------

    def startup(self) -> Any:
        from agent.approval import DenyAll
        from models.check import check_pair

        checks = []
        for _ in range(3 if self.config.quick else 7):
            t = time.perf_counter()
            result = check_pair(self.config.model_path, None)
            checks.append(time.perf_counter() - t)
        if not result.ok:
            raise SystemExit(f"error: {result.error_line()}")
        progress("loading the model")
        backend = self.build_backend(self.config.model_path)
        recorder = RecordingBackend(backend)
        runtime = self.build_runtime(recorder, max_steps=1)
        from agent.loop import Budgets

        runtime.agent.budgets = Budgets(max_steps=1, max_tokens=1)
        runtime.handle("startup", "Hello", DenyAll())
        first_token = time.time() - process_started_at()
        runtime.close()
        self.report.add("check_ms", "model check (check_pair), ms", statistics.median(checks) * 1000, "<= 50")
        self.report.add("start_to_first_token_s", "process start to first token, s", first_token,
                        note="python start, imports, checks, model load, runtime build, one prompt eval + 1 token")
        self.report.info["threads"] = backend._llm.context_params.n_threads
        return backend

    # -- 1 and 2. loop overhead, prefix reuse ---------------------------------------------

    def episode(self, recorder: RecordingBackend) -> tuple[float, list[StepTrace], Any]:
        from agent.approval import ApproveAll

        runtime = self.build_runtime(recorder, max_steps=len(EPISODE_PREFIXES))
        recorder.prefixes = list(EPISODE_PREFIXES)
        first = len(recorder.steps)
        t = time.perf_counter()
        turn = runtime.handle(f"episode{self._runs}", USER_TEXT, ApproveAll())
        seconds = time.perf_counter() - t
        runtime.close()
        return seconds, recorder.steps[first:], turn

    def loop_overhead(self, backend: Any) -> None:
        recorder = RecordingBackend(backend)
        bare = None
        if not self.config.quick:  # the replay doubles the time and is the noisiest figure
            progress("loading a bare llama.cpp for the baseline")
            bare = BareLlama(self.config.model_path, self.config.n_ctx, self.config.n_threads)
        ratios, inner, walls, direct, save_share, steps, turn = [], [], [], [], [], [], None
        if not self.config.quick:
            self.episode(recorder)  # warm-up: page in the weights, fill the system prompt's prefix
        for i in range(self.config.repeats):
            progress(f"loop overhead: episode {i + 1}/{self.config.repeats} and its bare replay")
            clock = LlamaClock()
            try:
                seconds, steps, turn = self.episode(recorder)
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
        self.report.add("loop_overhead", "loop overhead: episode ÷ time inside llama.cpp eval+sample",
                        statistics.median(direct), "<= 1.02",
                        note=f"{len(steps)} steps, calls {statuses}, stop {turn.stop_reason.value}")
        self.report.add("loop_overhead_replay", "loop overhead: episode ÷ bare llama.cpp replay",
                        statistics.median(ratios) if ratios else None, "<= 1.02",
                        note="episode-level interleaving; very noisy on a shared machine" if ratios
                        else "skipped with --quick")
        self.report.add("loop_overhead_vs_backend_timings", "episode ÷ backend's prompt_eval_s + generate_s",
                        statistics.median(inner))
        self.report.add("save_state_share", "share of the episode spent saving/loading session states",
                        statistics.median(save_share))
        self.report.add("episode_s", "episode wall time, s", statistics.median(walls))
        evaluated = sum(s.evaluated for s in steps)
        new = sum(s.new for s in steps)
        self.report.add("prefix_reuse", "prefix reuse: evaluated ÷ new prompt tokens (6-step episode)",
                        evaluated / max(1, new), "<= 1.05", note=f"{evaluated} evaluated, {new} new, "
                        f"{sum(len(s.prompt) for s in steps)} prompt tokens over {len(steps)} steps")
        self.report.add("episode_steps", "episode steps", len(steps))
        del bare

    def interleaved(self, backend: Any) -> None:
        from agent.approval import ApproveAll

        results: dict[str, tuple[int, int]] = {}
        for mode, keep in (("with", 4), ("without", 0)):
            progress(f"two interleaved chats, {mode} per-session saved states")
            backend.max_saved_sessions = keep
            recorder = RecordingBackend(backend)
            runtime = self.build_runtime(recorder, max_steps=2)
            for a, b in zip(CHAT_TURNS["chat-a"], CHAT_TURNS["chat-b"]):
                for chat, (text, call) in (("chat-a", a), ("chat-b", b)):
                    recorder.prefixes = [call, ""]
                    runtime.handle(f"{chat}-{mode}-{self._runs}", text, ApproveAll())
            runtime.close()
            results[mode] = (sum(s.evaluated for s in recorder.steps), sum(s.new for s in recorder.steps))
        backend.max_saved_sessions = 4
        (ev_with, new_with), (ev_without, new_without) = results["with"], results["without"]
        self.report.add("interleaved_reuse", "two chats: evaluated ÷ new, with saved states", ev_with / max(1, new_with),
                        "<= 1.1", note=f"{ev_with} evaluated / {new_with} new")
        self.report.add("interleaved_reuse_naive", "two chats: evaluated ÷ new, without saved states",
                        ev_without / max(1, new_without), note=f"{ev_without} evaluated / {new_without} new")
        self.report.add("naive_factor", "naive way evaluates this many times more tokens", ev_without / max(1, ev_with))

    def state_copy(self, backend: Any) -> None:
        """The session-state save, split: llama.cpp's copy vs turning the ctypes buffer into bytes."""
        import ctypes

        import llama_cpp

        ctx = backend._llm._ctx.ctx
        size = llama_cpp.llama_state_seq_get_size(ctx, 0)
        buf = (ctypes.c_uint8 * size)()
        t = time.perf_counter()
        written = llama_cpp.llama_state_seq_get_data(ctx, buf, size, 0)
        t_get = time.perf_counter() - t
        t = time.perf_counter()
        bytes(buf[:written])  # what LlamaBackend._save_state does: a Python list of ints first
        t_slice = time.perf_counter() - t
        t = time.perf_counter()
        ctypes.string_at(buf, written)
        t_direct = time.perf_counter() - t
        self.report.add("state_mb", "saved session state, MB", written / 2**20,
                        note=f"{backend._llm.n_tokens} tokens in context")
        self.report.add("state_get_s", "state save: llama_state_seq_get_data, s", t_get)
        self.report.add("state_bytes_slice_s", "state save: bytes(buf[:n]) (as now), s", t_slice)
        self.report.add("state_string_at_s", "state save: ctypes.string_at(buf, n), s", t_direct)

    # -- 3. constrained decoding ----------------------------------------------------------

    def constrained(self, backend: Any, tag: str, label: str) -> None:
        """Tokens/s of the three samplers on the backend's own context, same prompt and length."""
        import llama_cpp

        from agent.grammar import tool_call_gbnf
        from tools.calendar.store import CalendarStore
        from tools.calendar.tools import build_registry

        tools = build_registry(CalendarStore(self.tmp / f"constrained-{tag}.sqlite3")).schemas()
        messages = [{"role": "system", "content": "You manage a calendar."}, {"role": "user", "content": USER_TEXT}]
        prompt = backend.tokenize(backend.render(messages, tools) + "<tool_call>\n")
        gbnf = tool_call_gbnf(tools)
        llm = backend._llm
        cap = 48 if self.config.quick else 96

        def prime() -> None:
            have = min(common_prefix(llm.input_ids[: llm.n_tokens].tolist(), prompt), len(prompt) - 1)
            llm._ctx.kv_cache_seq_rm(-1, have, -1)
            llm.n_tokens = have
            llm.eval(prompt[have:])

        def run(mode: str, length: int) -> tuple[float, int, int]:
            prime()
            free, _ = backend._sampler()
            chain, grammar = backend._sampler(gbnf)
            fallbacks = backend.grammar_fallbacks
            n = 0
            t = time.perf_counter()
            while n < length:
                if mode == "free":
                    token = free.sample(llm._ctx, -1)
                elif mode == "full_mask":
                    token = chain.sample(llm._ctx, -1)
                else:
                    token = backend._sample_constrained(free, chain, grammar)
                if mode != "free" and llama_cpp.llama_vocab_is_eog(backend._vocab, token):
                    break
                llm.eval([token])
                n += 1
            return time.perf_counter() - t, n, backend.grammar_fallbacks - fallbacks

        _, length, _ = run("full_mask", cap)  # the call's length under the grammar sets the length for all
        length = max(length, 1)
        full, lazy, free_rates, fallbacks = [], [], [], 0
        for i in range(self.config.repeats + 1):
            progress(f"constrained decoding ({label}): round {i + 1}/{self.config.repeats + 1}, {length} tokens")
            t_free, n_free, _ = run("free", length)
            t_full, n_full, _ = run("full_mask", length)
            t_lazy, n_lazy, fb = run("lazy", length)
            free_rate = n_free / t_free
            free_rates.append(free_rate)
            full.append((n_full / t_full) / free_rate)
            lazy.append((n_lazy / t_lazy) / free_rate)
            fallbacks = fb
        self.report.add(f"grammar_full_mask_{tag}", f"{label}: tok/s full-vocab grammar ÷ unconstrained",
                        statistics.median(full), note="llama-cpp-python's default path (grammar sampler in the chain)")
        self.report.add(f"grammar_lazy_{tag}", f"{label}: tok/s runtime grammar ÷ unconstrained",
                        statistics.median(lazy), ">= 0.9",
                        note=f"{length} tokens, {fallbacks} needed the full mask")
        self.report.add(f"unconstrained_tok_s_{tag}", f"{label}: unconstrained tok/s", statistics.median(free_rates))

    # -- 4. peers -------------------------------------------------------------------------

    def peers(self, backend: Any) -> None:
        from llama_cpp import Llama

        from agent.approval import DenyAll
        from agent.loop import Budgets

        prompts = PEER_PROMPTS[:1] if self.config.quick else PEER_PROMPTS
        runtime = self.build_runtime(backend, max_steps=1)
        runtime.agent.budgets = Budgets(max_steps=1, max_tokens=96)
        registry = runtime.domain.registry
        progress("peers: loading llama-cpp-python's chatml-function-calling handler")
        peer = Llama(self.config.model_path, n_ctx=self.config.n_ctx, n_batch=min(512, self.config.n_ctx),
                     n_threads=self.config.n_threads, n_threads_batch=self.config.n_threads, seed=0,
                     verbose=False, chat_format="chatml-function-calling")
        ours: list[tuple[bool, float]] = []
        theirs: list[tuple[bool, float]] = []
        for i, text in enumerate(prompts):
            progress(f"peers: prompt {i + 1}/{len(prompts)}")
            turn = runtime.handle(f"peer{i}", text, DenyAll())
            calls = [c for s in turn.steps for c in s.calls]
            ours.append((bool(calls) and calls[0].status.value != "invalid", turn.seconds))
            t = time.perf_counter()
            response = peer.create_chat_completion(
                messages=[{"role": "system", "content": runtime.system_prompt()}, {"role": "user", "content": text}],
                tools=registry.schemas(), tool_choice="auto", max_tokens=96, temperature=0.0,
            )
            seconds = time.perf_counter() - t
            tool_calls = response["choices"][0]["message"].get("tool_calls") or []
            valid = False
            if tool_calls:
                function = tool_calls[0]["function"]
                try:
                    arguments = json.loads(function["arguments"])
                    valid = not _is_failure(registry.validate(function["name"], arguments))
                except (ValueError, KeyError, TypeError):
                    valid = False
            theirs.append((valid, seconds))
        runtime.close()
        del peer
        note = f"{len(prompts)} prompts, one model step each, same model and settings"
        self.report.add("valid_call_rate_runtime", "valid tool-call rate: this runtime",
                        sum(v for v, _ in ours) / len(ours), note=note)
        self.report.add("valid_call_rate_chatml_fc", "valid tool-call rate: chatml-function-calling",
                        sum(v for v, _ in theirs) / len(theirs))
        self.report.add("seconds_per_episode_ratio", "s/episode: runtime ÷ chatml-function-calling",
                        statistics.median(s for _, s in ours) / statistics.median(s for _, s in theirs),
                        note="llama_cpp.server + OpenAI client loop: not measured")

    # -- all ------------------------------------------------------------------------------

    def run(self) -> Report:
        cfg = self.config
        self.report.info.update(machine())
        self.report.info.update({"model": cfg.model_path, "n_ctx": cfg.n_ctx, "quick": cfg.quick,
                                 "repeats": cfg.repeats, "max_tokens_per_step": cfg.max_tokens})
        backend = self.startup()
        self.loop_overhead(backend)
        model_size = Path(cfg.model_path).stat().st_size
        # Peak RSS now holds the runtime and the bare baseline Llama (which mmaps the same file).
        self.report.add("rss_overhead_mb", "peak RSS − model file size, MB", (peak_rss_bytes() - model_size) / 2**20,
                        "<= 150", note=f"after the episodes; includes the KV cache of n_ctx={cfg.n_ctx} twice "
                        "(runtime + bare baseline)")
        self.state_copy(backend)
        self.interleaved(backend)
        self.constrained(backend, "49k", f"vocab {backend._llm.n_vocab()}")
        self.qwen3()
        self.peers(backend)
        return self.report

    def qwen3(self) -> None:
        try:
            from tests import model_fixtures as mf

            progress("building/loading the tiny qwen3 fixture (151k vocabulary)")
            path = mf.cached_build("tiny-qwen3.gguf", mf.build_tiny_qwen3)
        except Exception as exc:  # fixtures are a test-only dependency; absent in an installed copy
            self.report.add("grammar_lazy_151k", "vocab 151936: tok/s runtime grammar ÷ unconstrained", None,
                            ">= 0.9", note=f"skipped: tiny qwen3 fixture unavailable ({type(exc).__name__})")
            return
        backend = self.build_backend(str(path), n_ctx=2048)
        self.constrained(backend, "151k", f"vocab {backend._llm.n_vocab()}")
        del backend


def _is_failure(value: Any) -> bool:
    from tools.registry import ToolResult

    return isinstance(value, ToolResult)


# ----------------------------------------------------------------------------- CLI


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON object with every figure")
    parser.add_argument("--quick", action="store_true", help="fewer repeats and shorter outputs (about a minute)")


def add_parser(subparsers: Any, parents: list[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    """Same shape as the other subcommand modules (``add_parser`` + ``run``)."""
    parser = subparsers.add_parser("bench", parents=parents,
                                   help="measure the runtime against llama.cpp itself and a peer (ratios)")
    add_arguments(parser)
    return parser


def default_model(settings: Any) -> str:
    """The configured model, else the SmolLM2 test model (installed on demand)."""
    if settings.model_path:
        return str(Path(settings.model_path).expanduser())
    from models.resolve import resolve_demo

    resolved = resolve_demo()
    if resolved.model_path is None:
        raise SystemExit(f"error: {resolved.error}")
    return str(resolved.model_path)


def run(args: argparse.Namespace, settings: Any) -> int:
    config = BenchConfig(
        model_path=default_model(settings), n_ctx=settings.n_ctx, n_threads=settings.n_threads,
        quick=args.quick, settings=settings,
    )
    progress(f"model {config.model_path}, n_ctx {config.n_ctx}, {'quick' if args.quick else 'full'} run")
    report = Bench(config).run()
    report.info["command"] = "python -m agent " + " ".join(sys.argv[1:])
    if args.json:
        print(json.dumps(report.as_json(), ensure_ascii=False, indent=2))
    else:
        print(report.table())
        print("\n" + json.dumps(report.info, ensure_ascii=False))
    return 0
