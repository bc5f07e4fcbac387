"""A long chat: 40 messages through ``Runtime.handle``, evaluated ÷ new prompt tokens over all turns.

A Telegram chat lives for weeks. Past ``history_turns`` the runtime drops old turns; how it drops
them decides whether llama.cpp keeps the prompt cached. Both rules run on the same script: block
trimming (``agent.history``, today's rule) and the sliding window it replaced (``block = 1``).

"New" tokens are what a never-trimmed conversation would have had to evaluate: the untrimmed
rendering of the last prompt, less the tokens each earlier step generated (evaluated as they were
sampled) and less what the first step found cached. So 1.0 is a perfect cache, and every token
above it is history evaluated again after a cut.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from agent.bench.recording import RecordingBackend
from agent.bench.report import progress

if TYPE_CHECKING:
    from agent.bench.runner import Bench

MESSAGES = 40
REPLY = "Noted."  # every reply starts with this; the model adds at most REPLY_TOKENS tokens
REPLY_TOKENS = 4


class _ToolsSeen(RecordingBackend):
    """Also keeps the tool schemas of the last step, to render the untrimmed prompt the same way."""

    tools: list[dict[str, Any]] = []

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], **kwargs: Any) -> Any:
        self.tools = tools
        return super().complete(messages, tools, **kwargs)


def _one_chat(bench: Bench, backend: Any, block: int | None, label: str) -> tuple[int, int, int]:
    """(evaluated, new, cuts) for one 40-message chat under the given trimming block."""
    from agent.approval import ApproveAll

    recorder = _ToolsSeen(backend)
    runtime = bench.build_runtime(recorder, max_steps=1)
    runtime.agent.budgets = replace(runtime.agent.budgets, max_tokens=REPLY_TOKENS)
    runtime.history_block = block
    conversation = f"long-{label}-{bench.runs}"
    for i in range(MESSAGES):
        recorder.prefixes = [REPLY]
        runtime.handle(conversation, f"Remember item {i}: call the florist about table {i}.", ApproveAll())
    history = runtime.sessions.history(runtime.sessions.current(conversation))
    system = {"role": "system", "content": runtime.system_prompt()}
    last_user = max(i for i, m in enumerate(history) if m.get("role") == "user")
    untrimmed = backend.tokenize(backend.render([system] + history[: last_user + 1], recorder.tools) + REPLY)
    runtime.close()
    steps = recorder.steps
    new = len(untrimmed) - sum(len(s.generated) for s in steps[:-1]) - steps[0].reused
    cuts = sum(1 for prev, s in zip(steps, steps[1:]) if s.reused < len(prev.prompt))  # cache broken
    return sum(s.evaluated for s in steps), new, cuts


def long_chat(bench: Bench, backend: Any) -> None:
    report = bench.report
    results = {}
    for label, block in (("blocks", None), ("sliding", 1)):
        progress(f"a {MESSAGES}-message chat, history trimmed {label}")
        results[label] = _one_chat(bench, backend, block, label)
    turns = bench.config.settings.history_turns
    (ev, new, cuts), (ev_s, new_s, cuts_s) = results["blocks"], results["sliding"]
    report.add("long_chat_reuse", f"{MESSAGES}-message chat: evaluated ÷ new, history trimmed in blocks",
               ev / max(1, new), "<= 1.2",
               note=f"{ev} evaluated / {new} new; history_turns {turns}, {cuts} turns re-evaluated history")
    report.add("long_chat_reuse_sliding", f"{MESSAGES}-message chat: evaluated ÷ new, sliding window (before)",
               ev_s / max(1, new_s), note=f"{ev_s} evaluated / {new_s} new; {cuts_s} turns re-evaluated history")
