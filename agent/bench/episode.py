"""The scripted 6-step episode the loop-overhead and prefix-reuse figures run.

Each reply starts with a fixed ``assistant_prefix`` so that, with greedy sampling, every run
evaluates the same tokens. The prefixes are written in the benched model's chat format
(``episode_prefixes``); the module constants are the default (Hermes) format's, which every model
the bench runs today is served with.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from agent.bench.recording import RecordingBackend, StepTrace
from agent.formats.chat_format import DEFAULT_FORMAT, ChatFormat, format_named, format_of

if TYPE_CHECKING:
    from agent.bench.context import Bench

DAY = "2026-12-01"
USER_TEXT = "Book a dentist appointment on 2026-12-01 at 15:00 for an hour, then show me that day."



def episode_prefixes(fmt: ChatFormat) -> list[str]:
    """The episode's replies start with these (one per step); the model writes the rest."""
    return [
        fmt.call_open + "\n",
        fmt.format_tool_call("search_events", {"date": DAY}),
        fmt.format_tool_call("create_event", {"title": "Dentist", "date": DAY, "start_time": "15:00",
                                              "duration_minutes": 60}),
        fmt.format_tool_call("find_free_slots", {"date": DAY, "duration_minutes": 30}),
        fmt.format_tool_call("search_events", {"date": DAY, "query": "Dentist"}),
        "",
    ]


def valid_call(fmt: ChatFormat) -> str:
    """The create_event call of step 2 after its opening tag: the text the grammar and jump-forward
    figures have the model write (a call known to be valid): "\n{...create_event...}\n</tool_call>"."""
    return episode_prefixes(fmt)[2].split(fmt.call_open, 1)[1]


EPISODE_PREFIXES: list[str] = episode_prefixes(format_named(DEFAULT_FORMAT))
VALID_CALL = valid_call(format_named(DEFAULT_FORMAT))


def run_episode(bench: Bench, recorder: RecordingBackend) -> tuple[float, list[StepTrace], Any]:
    """One episode on a fresh runtime: its wall time, the steps it recorded, and the turn."""
    from agent.approval import ApproveAll

    prefixes = episode_prefixes(format_of(recorder))
    runtime = bench.build_runtime(recorder, max_steps=len(prefixes))
    recorder.prefixes = prefixes
    first = len(recorder.steps)
    t = time.perf_counter()
    turn = runtime.handle(f"episode{bench.runs}", USER_TEXT, ApproveAll())
    seconds = time.perf_counter() - t
    runtime.close()
    return seconds, recorder.steps[first:], turn
