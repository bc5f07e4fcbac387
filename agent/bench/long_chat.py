"""A long chat: 40 messages through ``Runtime.handle``, evaluated ÷ new prompt tokens over all turns.

A Telegram chat lives for weeks. Past ``history_turns`` the runtime drops old turns; how it drops
them decides whether llama.cpp keeps the prompt cached. Both rules run on the same script: block
trimming (``agent.history``, today's rule) and the sliding window it replaced (``block = 1``).

The replies are scripted ("Noted."), and the counts are exact token arithmetic on the runtime's
real prompts, tokenized by the bench model's tokenizer: each step evaluates its prompt less the
common prefix with the previous context (prompt + reply), which is what ``PrefixCache.place``
reuses for a chat that keeps the context. No decoding is timed, so the figure does not depend on
the machine's load. "New" is what a never-trimmed chat would evaluate: its last prompt, less the
replies (evaluated as they were generated). 1.0 is a perfect cache.
"""

from __future__ import annotations

import tempfile
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent.bench.report import progress

if TYPE_CHECKING:
    from agent.bench.context import Bench

MESSAGES = 40
REPLY = "Noted."


def replay(backend: Any, settings: Any, now: Any, block: int | None) -> tuple[int, int, int]:
    """(evaluated, new, turns that re-evaluated history) for the 40-message chat under ``block``."""
    from agent.app import build_runtime
    from agent.approval import ApproveAll
    from agent.backends.llama import common_prefix
    from agent.backends.scripted import ScriptedBackend

    scripted = ScriptedBackend(lambda messages: REPLY)
    data = Path(tempfile.mkdtemp(prefix="iljeong-long-chat-"))
    runtime = build_runtime(replace(settings, data_dir=data), scripted, clock=lambda: now)
    runtime.history_block = block
    try:
        for i in range(MESSAGES):
            runtime.handle("long-chat", f"Remember item {i}: call the florist about table {i}.", ApproveAll())
        tools = runtime.agent.registry.schemas()
        history = runtime.sessions.history(runtime.sessions.current("long-chat"))
    finally:
        runtime.close()
    reply = backend.tokenize(REPLY, add_bos=False)
    evaluated, cuts, context = 0, 0, []
    for messages in scripted.calls:
        prompt = backend.prompt_tokens(messages, tools)
        kept = min(common_prefix(prompt, context), len(prompt) - 1)
        cuts += bool(context) and kept < len(context)
        evaluated += len(prompt) - kept
        context = prompt + reply
    untrimmed = backend.prompt_tokens(scripted.calls[0][:1] + history[:-1], tools)
    return evaluated, len(untrimmed) - len(reply) * (MESSAGES - 1), cuts


def long_chat(bench: Bench, backend: Any) -> None:
    report = bench.report
    settings = bench.config.settings
    progress(f"a {MESSAGES}-message chat, history trimmed in blocks and by a sliding window")
    ev, new, cuts = replay(backend, settings, bench.now, None)
    ev_s, new_s, cuts_s = replay(backend, settings, bench.now, 1)
    report.add("long_chat_reuse", f"{MESSAGES}-message chat: evaluated ÷ new, history trimmed in blocks",
               ev / max(1, new), "<= 1.2",
               note=f"{ev} evaluated / {new} new; history_turns {settings.history_turns}, "
                    f"{cuts} turns re-evaluated history")
    report.add("long_chat_reuse_sliding", f"{MESSAGES}-message chat: evaluated ÷ new, sliding window (before)",
               ev_s / max(1, new_s), note=f"{ev_s} evaluated / {new_s} new; {cuts_s} turns re-evaluated history")


if __name__ == "__main__":  # python -m agent.bench.long_chat [MODEL.gguf]: this figure alone
    import sys
    from datetime import datetime, timezone

    from agent.backends.llama import LlamaBackend
    from agent.config import load_settings
    from models.resolve import resolve_demo

    path = sys.argv[1] if len(sys.argv) > 1 else str(resolve_demo(name="smollm2").model_path)
    model = LlamaBackend(path, n_ctx=8192, n_threads=1)
    config = load_settings({}, environ={})
    moment = datetime(2026, 12, 1, 5, 0, tzinfo=timezone.utc)
    for label, rule in (("blocks (default)", None), ("sliding (before)", 1)):
        e, n, c = replay(model, config, moment, rule)
        print(f"{label}: evaluated {e}, new {n}, evaluated ÷ new {e / n:.3f}, {c} turns re-evaluated history")
