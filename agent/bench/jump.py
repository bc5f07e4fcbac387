"""Jump-forward decoding: a valid ``create_event`` call, with the grammar's forced runs appended in
one batch ÷ the same call decoded token by token, on the 49k and the 151k vocabulary.

Both runs write the same text: a logit bias makes the next token of the call's remaining text the
model's first choice (``SteeredEngine``), so the figure measures decoding, not what a small model
happens to write. The bias follows the text written so far, not token positions, because
jump-forward may split a forced run into other tokens than token-by-token decoding does.

Besides wall time (the target's figure), the process's CPU time (what a loaded machine hardly
changes) and the number of ``llama_decode`` calls: the decode ratio is the floor the time ratio
would reach if a batch cost no more than one token. On a CPU a batch costs more (each token's
attention over the context is its own work), so the *floor* figure replays the very batches both
runs evaluated on llama.cpp alone, with nothing of the runtime between them: what this CPU allows
for these tokens, and, set against the figure, what the runtime adds.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

from agent.bench.report import progress

if TYPE_CHECKING:
    from agent.bench.context import Bench

class SteeredEngine:
    """An engine whose first choice is always the next token of ``target`` (then the turn end).

    Everything else is the wrapped engine's; ``eval`` keeps the text written since ``start``.
    """

    def __init__(self, engine: Any, target: str, end: str) -> None:
        self._engine = engine
        self.target = target
        self.written = b""
        self.decodes = 0  # llama_decode calls for the written tokens (a batch is one)
        self.batches: list[list[int]] = []  # the tokens of each call, for the floor's replay
        ends = engine.tokenize(end.encode(), add_bos=False)  # the format's turn end (``stop_markers``)
        self._end = ends[0] if len(ends) == 1 and engine.is_eog(ends[0]) else None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._engine, name)

    def eval(self, tokens: Sequence[int]) -> None:
        self.written += b"".join(self._engine.piece(t) for t in tokens)
        self.decodes += 1
        self.batches.append(list(tokens))
        self._engine.eval(tokens)

    def sample(self, sampler: Any) -> int:
        rest = self.target.encode()[len(self.written):] if self.target.encode().startswith(self.written) else b""
        token = self._engine.tokenize(rest, add_bos=False)[0] if rest else self._end
        if token is not None:
            logits = self._engine.logits()
            logits[token] = logits.max() + 10.0
        return self._engine.sample(sampler)


@dataclass
class Written:
    text: str
    seconds: float
    tokens: int
    forced: int
    sampled: int
    cpu_seconds: float = 0.0  # the process's CPU time: what a shared machine's load hardly changes
    decodes: int = 0
    prompt: list[int] | None = None  # what the context held before the call
    batches: list[list[int]] | None = None  # what each llama_decode call evaluated


def write_call(backend: Any, messages: list[dict[str, Any]], tools: list[dict[str, Any]], call: str,
               jump_forward: bool) -> Written:
    """``call`` (the text after ``<tool_call>``) written under the grammar by the backend's own
    decoding loop, steered, from a freshly evaluated prompt; jump-forward on or off."""
    from agent.backends.llama.decode import Decoder, generate

    engine = backend.engine
    fmt = backend.chat_format
    prompt = backend.prompt_tokens(messages, tools, fmt.call_open)
    engine.reset()
    engine.eval(prompt)
    steered = SteeredEngine(engine, call, fmt.stop_markers[0])
    decoder = Decoder(steered, candidates=backend.decoder.candidate_index(),  # built once per vocabulary
                      chat_format=fmt)
    decoder.jump_forward = jump_forward
    gbnf = backend.decoder.grammar_for(tools)
    t, cpu = time.perf_counter(), time.process_time()
    out = generate(steered, decoder, gbnf, 256, fmt.call_open)
    seconds, cpu = time.perf_counter() - t, time.process_time() - cpu
    return Written(out.text, seconds, out.tokens, out.forced, out.tokens - out.forced, cpu, steered.decodes,
                   prompt, steered.batches)


def replay(backend: Any, written: Written) -> float:
    """Seconds llama.cpp alone takes to evaluate ``written``'s batches after its prompt (the
    ``Llama.eval`` calls only: no sampling, no grammar, no Python of the runtime between them)."""
    from agent.bench.recording import hold

    hold(backend.engine.llm, written.prompt)
    t = time.perf_counter()
    for batch in written.batches:
        backend.engine.llm.eval(batch)
    return time.perf_counter() - t


def figure(bench: Bench, backend: Any, tag: str, label: str) -> None:
    from agent.bench.context import domain_tools
    from agent.bench.episode import USER_TEXT, valid_call

    tools = domain_tools(bench.config.settings, bench.tmp / f"jump-{tag}")
    messages = [{"role": "system", "content": "You manage a calendar."}, {"role": "user", "content": USER_TEXT}]
    ratios: list[float] = []
    cpu_ratios: list[float] = []
    floors: list[float] = []
    last: dict[bool, Written] = {}
    for i in range(bench.config.repeats + 1):  # round 0 warms up
        progress(f"jump-forward ({label}): round {i + 1}/{bench.config.repeats + 1}")
        for jump in (True, False):
            last[jump] = write_call(backend, messages, tools, valid_call(backend.chat_format), jump)
        if i > 0 or bench.config.repeats == 1:
            ratios.append(last[True].seconds / last[False].seconds)
            cpu_ratios.append(last[True].cpu_seconds / last[False].cpu_seconds)
            floors.append(replay(backend, last[True]) / replay(backend, last[False]))
    on, off = last[True], last[False]
    bench.report.add(f"jump_forward_{tag}", f"{label}: valid create_event call, jump-forward ÷ token by token",
                     statistics.median(ratios), "<= 0.6",
                     note=f"wall time; {on.forced} tokens forced, {on.sampled} sampled "
                          f"(token by token: {off.tokens} sampled)")
    bench.report.add(f"jump_forward_cpu_{tag}", f"{label}: the same, process CPU time", statistics.median(cpu_ratios),
                     note="CPU time hardly moves with the machine's load, wall time does")
    bench.report.add(f"jump_forward_decodes_{tag}", f"{label}: llama_decode calls, jump-forward ÷ token by token",
                     on.decodes / off.decodes if off.decodes else None,
                     note=f"{on.decodes} vs {off.decodes}: the time ratio's floor if a batch cost no more than "
                          "one token (on a CPU it costs more: a small model's decode is compute-bound)")
    bench.report.add(f"jump_forward_floor_{tag}", f"{label}: the same batches on llama.cpp alone, ratio",
                     statistics.median(floors),
                     note="each run's llama_decode batches replayed by a bare Llama.eval after the same prompt: "
                          "what this CPU allows for these tokens; the figure minus this is the runtime's share")
    bench.report.add(f"jump_forward_same_text_{tag}", f"{label}: jump-forward call == token-by-token call (1 = yes)",
                     float(on.text == off.text), ">= 1")
