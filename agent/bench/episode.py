"""The scripted 6-step episode the loop-overhead and prefix-reuse figures run.

Each reply starts with a fixed ``assistant_prefix`` so that, with greedy sampling, every run
evaluates the same tokens.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from agent.bench.recording import RecordingBackend, StepTrace
from agent.formats import HERMES

if TYPE_CHECKING:
    from agent.bench.context import Bench

DAY = "2026-12-01"
USER_TEXT = "Book a dentist appointment on 2026-12-01 at 15:00 for an hour, then show me that day."

# The episode's replies start with these (one per step); the model writes the rest.
EPISODE_PREFIXES: list[str] = [
    HERMES.call_open + "\n",
    HERMES.format_tool_call("search_events", {"date": DAY}),
    HERMES.format_tool_call("create_event", {"title": "Dentist", "date": DAY, "start_time": "15:00",
                                             "duration_minutes": 60}),
    HERMES.format_tool_call("find_free_slots", {"date": DAY, "duration_minutes": 30}),
    HERMES.format_tool_call("search_events", {"date": DAY, "query": "Dentist"}),
    "",
]
# The create_event call of step 2 after its opening tag: the text the grammar and jump-forward
# figures have the model write (a call known to be valid).
VALID_CALL = EPISODE_PREFIXES[2].split(HERMES.call_open, 1)[1]  # "\n{...create_event...}\n</tool_call>"


def run_episode(bench: Bench, recorder: RecordingBackend) -> tuple[float, list[StepTrace], Any]:
    """One episode on a fresh runtime: its wall time, the steps it recorded, and the turn."""
    from agent.approval import ApproveAll

    runtime = bench.build_runtime(recorder, max_steps=len(EPISODE_PREFIXES))
    recorder.prefixes = list(EPISODE_PREFIXES)
    first = len(recorder.steps)
    t = time.perf_counter()
    turn = runtime.handle(f"episode{bench.runs}", USER_TEXT, ApproveAll())
    seconds = time.perf_counter() - t
    runtime.close()
    return seconds, recorder.steps[first:], turn
