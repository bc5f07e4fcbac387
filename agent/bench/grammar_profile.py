"""What a constrained token costs, against the grammar's size, and where a step's time goes.

``python -m agent.bench.grammar_profile`` builds the call grammar of each set of tool schemas
(today's, from the domain, and every ``--tools FILE``, such as the schemas before the series tools
in ``tools/calendar/lab/schemas_before_series.json``) and measures it in one process, on a 49k
(SmolLM2) and a 151k (Qwen3) vocabulary:

- the grammar: GBNF bytes, rules, ``|`` alternatives; parsing it; copying it (what a forced run's
  look-ahead and each opened call do) along a valid ``create_event`` call;
- asking it about one token, and about the whole vocabulary (the full mask), along the same call;
- a greedy constrained decode where the model writes what it wants (the bench's *own choice*),
  split into the stages of ``Decoder.sample_constrained``: the unconstrained choice (what decoding
  without a grammar pays too), asking the grammar about it, narrowing the candidates, choosing
  among them, accepting the token; and ``llama_decode`` for comparison.

Microseconds, medians over positions; a profile, not a bench ratio: it says which part to work on.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import llama_cpp
import numpy as np

STAGES = ("unconstrained", "first_choice", "candidates", "choice", "accept")


@dataclass
class Row:
    """One schema set on one vocabulary."""

    schemas: str
    vocabulary: int
    gbnf_bytes: int
    rules: int
    alternatives: int
    parse_us: float
    copy_us: float
    ask_one_us: float
    full_mask_us: float
    decode_us: float = 0.0  # llama_decode of one token (the model's own time)
    stages_us: dict[str, float] = field(default_factory=dict)  # per constrained token, own choice


def timed(f: Callable[[], Any], n: int = 20) -> float:
    f()
    start = time.perf_counter()
    for _ in range(n):
        f()
    return 1e6 * (time.perf_counter() - start) / n


def _along_call(backend: Any, gbnf: str, call: str, measure: Callable[[Any], None]) -> None:
    """``measure(grammar)`` at every position of ``call`` (text after the opening tag)."""
    _, grammar = backend.decoder.sampler(gbnf)
    for token in backend.engine.tokenize(call.encode(), add_bos=False):
        measure(grammar)
        llama_cpp.llama_sampler_accept(grammar, token)


def grammar_row(backend: Any, name: str, tools: list[dict[str, Any]]) -> Row:
    from agent.backends.candidates import grammar_keeps
    from agent.bench.episode import valid_call

    gbnf = backend.chat_format.call_gbnf(tools)
    engine = backend.engine
    start = time.perf_counter()
    parsed = llama_cpp.llama_sampler_init_grammar(engine.vocab, gbnf.encode(), b"root")
    parse_us = 1e6 * (time.perf_counter() - start)
    llama_cpp.llama_sampler_free(parsed)
    copies: list[float] = []
    ask_one: list[float] = []
    full: list[float] = []
    one = np.array([engine.tokenize(b" x", add_bos=False)[-1]], dtype=np.int32)
    vocab = np.arange(engine.n_vocab, dtype=np.int32)

    def measure(grammar: Any) -> None:
        copies.append(timed(lambda: llama_cpp.llama_sampler_free(llama_cpp.llama_sampler_clone(grammar)), 5))
        ask_one.append(timed(lambda: grammar_keeps(grammar, one)))
        if len(copies) % 8 == 1:  # the full mask is slow: every 8th position
            full.append(timed(lambda: grammar_keeps(grammar, vocab), 1))

    _along_call(backend, gbnf, valid_call(backend.chat_format), measure)
    return Row(name, engine.n_vocab, len(gbnf.encode()), gbnf.count("::="), gbnf.count("|"), parse_us,
               statistics.median(copies), statistics.median(ask_one), statistics.median(full))


def stage_times(backend: Any, tools: list[dict[str, Any]], length: int = 40) -> tuple[dict[str, float], float]:
    """Per constrained token of an own-choice greedy decode: µs by stage, and µs of llama_decode."""
    from agent.backends import candidates
    from agent.backends.llama import decode
    from agent.bench.episode import USER_TEXT
    from agent.bench.recording import hold

    engine, decoder = backend.engine, backend.decoder
    spent = dict.fromkeys(STAGES, 0.0)
    originals = {"keeps": decode.grammar_keeps, "best": decode.best_allowed,
                 "candidates": candidates.CandidateIndex.candidates, "accept": llama_cpp.llama_sampler_accept}

    def clocked(stage: str, f: Callable[..., Any]) -> Callable[..., Any]:
        def run(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return f(*args, **kwargs)
            finally:
                spent[stage] += time.perf_counter() - start
        return run

    messages = [{"role": "system", "content": "You manage a calendar."}, {"role": "user", "content": USER_TEXT}]
    fmt = backend.chat_format
    prompt = backend.prompt_tokens(messages, tools, fmt.call_open)
    hold(engine.llm, prompt)
    free, _ = decoder.sampler()
    chain, grammar = decoder.sampler(fmt.call_gbnf(tools))
    sample, evaluate = engine.sample, engine.eval
    tokens, decode_s = 0, 0.0
    decode.grammar_keeps = clocked("first_choice", originals["keeps"])
    decode.best_allowed = clocked("choice", originals["best"])
    candidates.CandidateIndex.candidates = clocked("candidates", originals["candidates"])
    llama_cpp.llama_sampler_accept = clocked("accept", originals["accept"])  # restored below
    try:
        while tokens < length:
            engine.sample = clocked("unconstrained", sample)  # this instance's, for this call only
            token = decoder.sample_constrained(free, chain, grammar)
            del engine.sample
            if engine.is_eog(token):
                break
            tokens += 1
            start = time.perf_counter()
            evaluate([token])
            decode_s += time.perf_counter() - start
    finally:
        decode.grammar_keeps, decode.best_allowed = originals["keeps"], originals["best"]
        candidates.CandidateIndex.candidates = originals["candidates"]
        llama_cpp.llama_sampler_accept = originals["accept"]
        vars(engine).pop("sample", None)
    tokens = max(tokens, 1)
    return {k: round(1e6 * v / tokens, 1) for k, v in spent.items()}, 1e6 * decode_s / tokens


def schema_sets(files: list[Path], one_tool: str | None = None) -> dict[str, list[dict[str, Any]]]:
    """Today's schemas (from the domain), ``one_tool`` of them alone (what a grammar per tool would
    be once the name is written), and each file's."""
    import tempfile

    from agent.bench.context import domain_tools
    from agent.config import Settings

    sets = {"today": domain_tools(Settings(), Path(tempfile.mkdtemp(prefix="iljeong-profile-")))}
    if one_tool is not None:
        alone = [t for t in sets["today"] if t.get("function", t).get("name") == one_tool]
        if not alone:
            raise SystemExit(f"error: no tool named {one_tool!r} (today's: "
                             f"{', '.join(t.get('function', t)['name'] for t in sets['today'])})")
        sets[f"{one_tool} alone"] = alone
    for path in files:
        sets[path.stem] = json.loads(path.read_text(encoding="utf-8"))
    return sets


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agent.bench.grammar_profile", description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", help="a 49k-vocabulary GGUF (default: the demo's SmolLM2, installed on demand)")
    parser.add_argument("--grammar-model", help="a 151k-vocabulary GGUF (default: the tiny qwen3 test fixture)")
    parser.add_argument("--tools", type=Path, action="append", default=[],
                        help="a JSON list of tool schemas to set beside today's (repeatable)")
    parser.add_argument("--one-tool", metavar="NAME", help="also today's schema of this tool alone")
    parser.add_argument("--json", action="store_true", help="one JSON list of rows")
    args = parser.parse_args(argv)
    from agent.backends.llama import LlamaBackend
    from agent.bench import default_model
    from agent.config import Settings

    models = [args.model or default_model(Settings())]
    if args.grammar_model:
        models.append(args.grammar_model)
    else:
        try:
            from tests import model_fixtures

            models.append(str(model_fixtures.tiny_qwen3_path()))
        except ImportError:
            print("no --grammar-model and no tiny qwen3 fixture (a checkout's tests/): 151k skipped", file=sys.stderr)
    sets = schema_sets(args.tools, args.one_tool)
    rows: list[Row] = []
    for path in models:
        backend = LlamaBackend(path, n_ctx=4096, n_threads=1)
        backend.decoder.candidate_index()
        for name, tools in sets.items():
            print(f"profiling {name} on {Path(path).name}", file=sys.stderr, flush=True)
            row = grammar_row(backend, name, tools)
            row.stages_us, row.decode_us = stage_times(backend, tools)
            rows.append(row)
        del backend
    if args.json:
        print(json.dumps([row.__dict__ for row in rows], indent=1))
        return 0
    print("| schemas | vocab | GBNF bytes | rules | alternatives | parse µs | copy µs | ask 1 token µs | full mask µs | "
          + " | ".join(f"{s} µs" for s in STAGES) + " | llama_decode µs |")
    print("|" + "---|" * (10 + len(STAGES)))
    for r in rows:
        print(f"| {r.schemas} | {r.vocabulary} | {r.gbnf_bytes} | {r.rules} | {r.alternatives} | {r.parse_us:.0f} | "
              f"{r.copy_us:.0f} | {r.ask_one_us:.0f} | {r.full_mask_us:.0f} | "
              + " | ".join(f"{r.stages_us.get(s, 0):.0f}" for s in STAGES) + f" | {r.decode_us:.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
