"""Free-time arithmetic: working-hours windows minus busy intervals. Pure functions, no store.

Kept apart from the tools so property tests can hammer it directly and the eval verifier can
recompute expected answers with exactly the same rules.
"""

from __future__ import annotations

from datetime import date, datetime, time, timedelta
from typing import Iterable
from zoneinfo import ZoneInfo

Interval = tuple[datetime, datetime]


def merge(intervals: Iterable[Interval]) -> list[Interval]:
    """Sorted, non-overlapping union; touching intervals are joined."""
    merged: list[Interval] = []
    for start, end in sorted(i for i in intervals if i[1] > i[0]):
        if merged and start <= merged[-1][1]:
            if end > merged[-1][1]:
                merged[-1] = (merged[-1][0], end)
        else:
            merged.append((start, end))
    return merged


def working_windows(first: date, last: date, day_start: time, day_end: time, zone: ZoneInfo) -> list[Interval]:
    """One [day_start, day_end) window per local day from ``first`` to ``last`` inclusive."""
    windows: list[Interval] = []
    day = first
    while day <= last:
        start = datetime.combine(day, day_start, tzinfo=zone)
        end = datetime.combine(day, day_end, tzinfo=zone)
        if end > start:
            windows.append((start, end))
        day += timedelta(days=1)
    return windows


def free_slots(windows: Iterable[Interval], busy: Iterable[Interval], minimum: timedelta) -> list[Interval]:
    """Maximal gaps inside each window that overlap no busy interval and last at least ``minimum``.

    Each slot is bounded on both sides by a busy interval or a window edge, so it cannot be
    extended without hitting one.
    """
    blocked = merge(busy)
    slots: list[Interval] = []
    for w_start, w_end in sorted(windows):
        cursor = w_start
        for b_start, b_end in blocked:
            if b_end <= cursor:
                continue
            if b_start >= w_end:
                break
            if b_start - cursor >= minimum:
                slots.append((cursor, b_start))
            cursor = max(cursor, b_end)
            if cursor >= w_end:
                break
        if w_end - cursor >= minimum and cursor < w_end:
            slots.append((cursor, w_end))
    return slots
