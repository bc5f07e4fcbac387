"""Prefix reuse: evaluated ÷ new prompt tokens in the episode and in two interleaved chats
(with and without per-session saved states), and what saving one session state costs.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from agent.bench.episode import DAY, episode_prefixes
from agent.bench.recording import RecordingBackend, StepTrace
from agent.bench.report import Report, progress
from agent.formats.chat_format import ChatFormat, format_of

if TYPE_CHECKING:
    from agent.bench.context import Bench



def chat_turns(fmt: ChatFormat) -> dict[str, list[tuple[str, str]]]:
    """Two chats interleaved turn by turn; each turn is one scripted call (in the model's format)
    and one free reply."""
    prefixes = episode_prefixes(fmt)
    return {
        "chat-a": [
            ("What do I have on 2026-12-01?", prefixes[1]),
            ("Add 'Dentist' at 15:00 for an hour that day.", prefixes[2]),
            ("Any 30 minutes free that day?", prefixes[3]),
        ],
        "chat-b": [
            ("Is there anything called Dentist on 2026-12-01?", prefixes[4]),
            ("Add 'Team sync' at 10:00 that day, 30 minutes.",
             fmt.format_tool_call("create_event", {"title": "Team sync", "date": DAY, "start_time": "10:00",
                                                   "duration_minutes": 30})),
            ("What is on that day now?", prefixes[1]),
        ],
    }


def episode_reuse(report: Report, steps: list[StepTrace]) -> None:
    """Token counts of the loop-overhead episode: exact, so one episode is enough."""
    evaluated = sum(s.evaluated for s in steps)
    new = sum(s.new for s in steps)
    report.add("prefix_reuse", "prefix reuse: evaluated ÷ new prompt tokens (6-step episode)",
               evaluated / max(1, new), "<= 1.05", note=f"{evaluated} evaluated, {new} new, "
               f"{sum(len(s.prompt) for s in steps)} prompt tokens over {len(steps)} steps")
    report.add("episode_steps", "episode steps", len(steps))


def interleaved(bench: Bench, backend: Any) -> None:
    """The two chats turn by turn, once keeping per-session states and once not."""
    from agent.approval import ApproveAll

    report = bench.report
    results: dict[str, tuple[int, int]] = {}
    for mode, keep in (("with", 4), ("without", 0)):
        progress(f"two interleaved chats, {mode} per-session saved states")
        backend.max_saved_sessions = keep
        recorder = RecordingBackend(backend)
        runtime = bench.build_runtime(recorder, max_steps=2)
        turns = chat_turns(format_of(backend))
        for a, b in zip(turns["chat-a"], turns["chat-b"]):
            for chat, (text, call) in (("chat-a", a), ("chat-b", b)):
                recorder.prefixes = [call, ""]
                runtime.handle(f"{chat}-{mode}-{bench.runs}", text, ApproveAll())
        runtime.close()
        results[mode] = (sum(s.evaluated for s in recorder.steps), sum(s.new for s in recorder.steps))
    backend.max_saved_sessions = 4
    (ev_with, new_with), (ev_without, new_without) = results["with"], results["without"]
    report.add("interleaved_reuse", "two chats: evaluated ÷ new, with saved states", ev_with / max(1, new_with),
               "<= 1.1", note=f"{ev_with} evaluated / {new_with} new")
    report.add("interleaved_reuse_naive", "two chats: evaluated ÷ new, without saved states",
               ev_without / max(1, new_without), note=f"{ev_without} evaluated / {new_without} new")
    report.add("naive_factor", "naive way evaluates this many times more tokens", ev_without / max(1, ev_with))


def state_copy(report: Report, backend: Any) -> None:
    """The session-state save, split: llama.cpp writing the state into the kept bytearray (what
    ``states.capture`` does now) vs the two earlier versions' extra copy."""
    import ctypes

    import llama_cpp

    ctx = backend.engine.context
    size = llama_cpp.llama_state_seq_get_size(ctx, 0)
    data = bytearray(size)
    buf = (ctypes.c_uint8 * size).from_buffer(data)
    t = time.perf_counter()
    written = llama_cpp.llama_state_seq_get_data(ctx, buf, size, 0)
    t_get = time.perf_counter() - t
    t = time.perf_counter()
    bytes(buf[:written])  # the first version: a Python list of ints first
    t_slice = time.perf_counter() - t
    t = time.perf_counter()
    ctypes.string_at(buf, written)  # the second version: one more copy of the state
    t_direct = time.perf_counter() - t
    del buf
    report.add("state_mb", "saved session state, MB", written / 2**20,
               note=f"{backend.engine.n_tokens} tokens in context")
    report.add("state_get_s", "state save as now: llama_state_seq_get_data into the kept bytes, s", t_get)
    report.add("state_bytes_slice_s", "state save, first version: + bytes(buf[:n]), s", t_slice)
    report.add("state_string_at_s", "state save, second version: + ctypes.string_at(buf, n), s", t_direct)
