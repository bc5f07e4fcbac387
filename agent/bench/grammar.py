"""Constrained decoding: tokens/s under the tool-call grammar ÷ unconstrained, on a 49k and a 151k
vocabulary, for llama-cpp-python's full-vocabulary mask and for the runtime's path.

Two kinds of output are decoded. *Own choice*: the model writes whatever it wants under the
grammar; for a random-weight model (the 151k test fixture) that is the worst case, because its
first choice is almost never valid JSON and every such token needs the full mask. *Valid
writer*: the logit of the next token of a known-valid call is raised above all others before
each sample, so the model's first choice is what a trained model writes; this measures what
the grammar costs when the model agrees with it, which is the normal case in production.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agent.bench.episode import USER_TEXT, valid_call
from agent.bench.recording import hold
from agent.bench.report import progress

if TYPE_CHECKING:
    from agent.bench.context import Bench

MODES = ("free", "full_mask", "runtime")


@dataclass
class Decoded:
    """One decoding run: its time, its tokens, and how the runtime's path found them."""

    seconds: float
    tokens: list[int]
    paths: dict[str, int]  # how the runtime's path found tokens beyond the model's first choice

    @property
    def rate(self) -> float:
        return len(self.tokens) / self.seconds


class Decoder:
    """Decodes a fixed number of tokens after ``<tool_call>`` on the backend's own context."""

    def __init__(self, bench: Bench, backend: Any, tag: str) -> None:
        from agent.bench.context import domain_tools

        tools = domain_tools(bench.config.settings, bench.tmp / f"constrained-{tag}")
        messages = [{"role": "system", "content": "You manage a calendar."}, {"role": "user", "content": USER_TEXT}]
        self.backend = backend
        fmt = backend.chat_format
        self.prompt = backend.prompt_tokens(messages, tools, fmt.call_open)
        self.gbnf = fmt.call_gbnf(tools)
        self.valid_call = backend.tokenize(valid_call(fmt), add_bos=False)
        t = time.perf_counter()
        backend.decoder.candidate_index()  # built once per process, on the first token that needs it
        self.index_build_s = time.perf_counter() - t

    def _steer(self, token: int) -> None:
        """Make ``token`` the model's first choice by raising its logit above all others."""
        logits = self.backend.engine.logits()
        logits[token] = logits.max() + 10.0

    def decode(self, mode: str, length: int, steered: bool = False) -> Decoded:
        decoder, engine = self.backend.decoder, self.backend.engine
        hold(engine.llm, self.prompt)
        free, _ = decoder.sampler()
        chain, grammar = decoder.sampler(self.gbnf)
        paths = dict(decoder.grammar_paths)
        out: list[int] = []
        t = time.perf_counter()
        while len(out) < length:
            if steered:
                self._steer(self.valid_call[len(out)])
            if mode == "free":
                token = engine.sample(free)
            elif mode == "full_mask":
                token = engine.sample(chain)
            else:
                token = decoder.sample_constrained(free, chain, grammar)
            if mode != "free" and engine.is_eog(token):
                break
            out.append(token)
            engine.eval([token])
        return Decoded(time.perf_counter() - t, out, {k: n - paths[k] for k, n in decoder.grammar_paths.items()})


def constrained(bench: Bench, backend: Any, tag: str, label: str) -> None:
    """Tokens/s of the three samplers, interleaved round by round, same prompt and length."""
    decoder = Decoder(bench, backend, tag)
    cap = 48 if bench.config.quick else 96
    length = max(len(decoder.decode("full_mask", cap).tokens), 1)  # the grammar-valid call's length
    steered_length = len(decoder.valid_call)
    ratios: dict[str, list[float]] = {key: [] for key in ("full_mask", "runtime", "steered_runtime")}
    free_rates: list[float] = []
    cost_ms: list[float] = []
    last: dict[str, Decoded] = {}
    for i in range(bench.config.repeats + 1):
        progress(f"constrained decoding ({label}): round {i + 1}/{bench.config.repeats + 1}, {length} tokens")
        for mode in MODES:
            last[mode] = decoder.decode(mode, length)
        last["steered_free"] = decoder.decode("free", steered_length, steered=True)
        last["steered_runtime"] = decoder.decode("runtime", steered_length, steered=True)
        free_rate = last["free"].rate
        free_rates.append(free_rate)
        ratios["full_mask"].append(last["full_mask"].rate / free_rate)
        ratios["runtime"].append(last["runtime"].rate / free_rate)
        ratios["steered_runtime"].append(last["steered_runtime"].rate / last["steered_free"].rate)
        cost_ms.append(1000 * (1 / last["runtime"].rate - 1 / free_rate))

    own = last["runtime"]
    report = bench.report
    report.add(f"grammar_full_mask_{tag}", f"{label}: tok/s full-vocab grammar ÷ unconstrained",
               statistics.median(ratios["full_mask"]),
               note="llama-cpp-python's default path (grammar sampler in the chain)")
    report.add(f"grammar_lazy_{tag}", f"{label}: tok/s runtime grammar ÷ unconstrained (own choice)",
               statistics.median(ratios["runtime"]), ">= 0.95",
               note=f"{length} tokens: {length - sum(own.paths.values())} its first choice, {own.paths['next']} "
                    f"among the next most likely, {own.paths['top']} among the top candidates, "
                    f"{own.paths['narrowed']} by the grammar's allowed characters, "
                    f"{own.paths['full_mask']} needed the full mask")
    report.add(f"grammar_same_tokens_{tag}", f"{label}: runtime path's call == full mask's call (1 = yes)",
               float(own.tokens == last["full_mask"].tokens), ">= 1",
               note="greedy: the fast paths must never change the choice")
    report.add(f"grammar_cost_ms_{tag}", f"{label}: grammar's cost per token, ms (own choice)",
               statistics.median(cost_ms), note="runtime path's time per token − unconstrained time per token")
    report.add(f"grammar_valid_writer_{tag}", f"{label}: tok/s runtime grammar ÷ unconstrained (valid writer)",
               statistics.median(ratios["steered_runtime"]), ">= 0.9",
               note=f"{steered_length} tokens of a valid create_event call made the first choice by a logit "
                    f"bias in both runs; {last['steered_runtime'].paths['full_mask']} needed the full mask")
    report.add(f"unconstrained_tok_s_{tag}", f"{label}: unconstrained tok/s", statistics.median(free_rates))
    report.add(f"grammar_index_build_s_{tag}", f"{label}: building the candidate index, s (once)",
               decoder.index_build_s, note="the vocabulary grouped by first characters; not in the ratios above")


def qwen3(bench: Bench, constrained_figures: bool = True) -> None:
    """The same on a 151k vocabulary (Qwen3's), where the full mask costs three times as much.

    ``--grammar-model`` names the model; by default the tiny random-weight qwen3 test fixture is
    built from ``tests/`` (only in a checkout of the repository). ``constrained_figures`` False: the
    jump-forward figure only (``--only jump``).
    """
    label = "vocab 151936"
    path = bench.config.grammar_model
    if path is None:
        try:
            from tests import model_fixtures as mf

            progress("building/loading the tiny qwen3 fixture (151k vocabulary)")
            path = str(mf.tiny_qwen3_path())
        except Exception as exc:  # fixtures are a test-only dependency; absent in an installed copy
            for key, text, target in (("grammar_lazy_151k", "own choice", ">= 0.95"),
                                      ("grammar_valid_writer_151k", "valid writer", ">= 0.9")):
                bench.report.add(key, f"{label}: tok/s runtime grammar ÷ unconstrained ({text})", None, target,
                                 note=f"skipped: no --grammar-model and no tiny qwen3 fixture ({type(exc).__name__})")
            for key, target in (("jump_forward_151k", "<= 0.6"), ("jump_forward_same_text_151k", ">= 1"),
                                ("jump_forward_cpu_151k", ""), ("jump_forward_decodes_151k", ""),
                                ("jump_forward_floor_151k", "")):
                bench.report.add(key, f"{label}: {key}", None, target,
                                 note=f"skipped: no --grammar-model and no tiny qwen3 fixture ({type(exc).__name__})")
            return
    backend = bench.build_backend(path, n_ctx=4096)  # the full tool block alone is ~2.2k Qwen3 tokens
    if constrained_figures:
        constrained(bench, backend, "151k", f"vocab {backend.engine.n_vocab}")
    from agent.bench import jump

    jump.figure(bench, backend, "151k", f"vocab {backend.engine.n_vocab}")
    del backend
