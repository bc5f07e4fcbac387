"""Constrained decoding: tokens/s under the tool-call grammar (full-vocabulary mask, and the
runtime's sample-then-check path) ÷ unconstrained, on a 49k and a 151k vocabulary.
"""

from __future__ import annotations

import statistics
import time
from typing import TYPE_CHECKING, Any

from agent.backends.llama import common_prefix
from agent.bench.episode import USER_TEXT
from agent.bench.report import progress

if TYPE_CHECKING:
    from agent.bench.runner import Bench


def constrained(bench: Bench, backend: Any, tag: str, label: str) -> None:
    """Tokens/s of the three samplers on the backend's own context, same prompt and length."""
    import llama_cpp

    from agent.grammar import tool_call_gbnf
    from tools.calendar.store import CalendarStore
    from tools.calendar.tools import build_registry

    config, report = bench.config, bench.report
    tools = build_registry(CalendarStore(bench.tmp / f"constrained-{tag}.sqlite3")).schemas()
    messages = [{"role": "system", "content": "You manage a calendar."}, {"role": "user", "content": USER_TEXT}]
    prompt = backend.tokenize(backend.render(messages, tools) + "<tool_call>\n")
    gbnf = tool_call_gbnf(tools)
    llm = backend._llm
    cap = 48 if config.quick else 96

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
    for i in range(config.repeats + 1):
        progress(f"constrained decoding ({label}): round {i + 1}/{config.repeats + 1}, {length} tokens")
        t_free, n_free, _ = run("free", length)
        t_full, n_full, _ = run("full_mask", length)
        t_lazy, n_lazy, fb = run("lazy", length)
        free_rate = n_free / t_free
        free_rates.append(free_rate)
        full.append((n_full / t_full) / free_rate)
        lazy.append((n_lazy / t_lazy) / free_rate)
        fallbacks = fb
    report.add(f"grammar_full_mask_{tag}", f"{label}: tok/s full-vocab grammar ÷ unconstrained",
               statistics.median(full), note="llama-cpp-python's default path (grammar sampler in the chain)")
    report.add(f"grammar_lazy_{tag}", f"{label}: tok/s runtime grammar ÷ unconstrained",
               statistics.median(lazy), ">= 0.9",
               note=f"{length} tokens, {fallbacks} needed the full mask")
    report.add(f"unconstrained_tok_s_{tag}", f"{label}: unconstrained tok/s", statistics.median(free_rates))


def qwen3(bench: Bench) -> None:
    """The same on the tiny qwen3 test fixture: a 151k vocabulary makes the full mask dearer."""
    try:
        from tests import model_fixtures as mf

        progress("building/loading the tiny qwen3 fixture (151k vocabulary)")
        path = mf.cached_build("tiny-qwen3.gguf", mf.build_tiny_qwen3)
    except Exception as exc:  # fixtures are a test-only dependency; absent in an installed copy
        bench.report.add("grammar_lazy_151k", "vocab 151936: tok/s runtime grammar ÷ unconstrained", None,
                         ">= 0.9", note=f"skipped: tiny qwen3 fixture unavailable ({type(exc).__name__})")
        return
    backend = bench.build_backend(str(path), n_ctx=2048)
    constrained(bench, backend, "151k", f"vocab {backend._llm.n_vocab()}")
    del backend
