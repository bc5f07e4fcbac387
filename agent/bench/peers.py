"""Peers: the runtime against llama-cpp-python's ``chatml-function-calling`` handler, same model,
same prompts, one model step each (valid tool-call rate and seconds per episode).
"""

from __future__ import annotations

import json
import statistics
import time
from typing import TYPE_CHECKING, Any

from agent.bench.report import progress

if TYPE_CHECKING:
    from agent.bench.runner import Bench

PEER_PROMPTS = [
    "What is on my calendar on 2026-12-01?",
    "Add 'Dentist' on 2026-12-01 at 15:00 for 60 minutes.",
    "Find a free hour on 2026-12-02.",
]


def peers(bench: Bench, backend: Any) -> None:
    from llama_cpp import Llama

    from agent.approval import DenyAll
    from agent.loop import Budgets

    config, report = bench.config, bench.report
    prompts = PEER_PROMPTS[:1] if config.quick else PEER_PROMPTS
    runtime = bench.build_runtime(backend, max_steps=1)
    runtime.agent.budgets = Budgets(max_steps=1, max_tokens=96)
    registry = runtime.domain.registry
    progress("peers: loading llama-cpp-python's chatml-function-calling handler")
    peer = Llama(config.model_path, n_ctx=config.n_ctx, n_batch=min(512, config.n_ctx),
                 n_threads=config.n_threads, n_threads_batch=config.n_threads, seed=0,
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
    report.add("valid_call_rate_runtime", "valid tool-call rate: this runtime",
               sum(v for v, _ in ours) / len(ours), note=note)
    report.add("valid_call_rate_chatml_fc", "valid tool-call rate: chatml-function-calling",
               sum(v for v, _ in theirs) / len(theirs))
    report.add("seconds_per_episode_ratio", "s/episode: runtime ÷ chatml-function-calling",
               statistics.median(s for _, s in ours) / statistics.median(s for _, s in theirs),
               note="llama_cpp.server + OpenAI client loop: not measured")


def _is_failure(value: Any) -> bool:
    """``registry.validate`` returns a ToolResult (the error) when the arguments are invalid."""
    from tools.registry import ToolResult

    return isinstance(value, ToolResult)
