"""Property tests: free slots never overlap anything busy, stay in working hours, and are maximal."""

from __future__ import annotations

import tempfile
from datetime import date, datetime, time, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tools.calendar import CalendarStore, build_registry
from tools.calendar.slots import Interval, free_slots, merge, working_windows
from agent.tools import ToolResult

SEOUL = ZoneInfo("Asia/Seoul")
DAY0 = date(2026, 12, 1)
ORIGIN = datetime(2026, 12, 1, tzinfo=SEOUL)
PROPERTY_SETTINGS = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def minute(offset: int) -> datetime:
    return ORIGIN + timedelta(minutes=offset)


intervals = st.lists(
    st.tuples(st.integers(-120, 3 * 1440), st.integers(1, 600)).map(lambda p: (minute(p[0]), minute(p[0] + p[1]))),
    max_size=12,
)
hours = st.tuples(st.integers(0, 23 * 60), st.integers(15, 12 * 60)).map(
    lambda p: (p[0], min(p[0] + p[1], 24 * 60 - 1))
)


def clock(minutes: int) -> time:
    return time(minutes // 60, minutes % 60)


def assert_valid_slots(slots: list[Interval], windows: list[Interval], busy: list[Interval], minimum: timedelta) -> None:
    """Inside a window, long enough, overlapping no busy time, and bounded by busy time or the window edge."""
    for start, end in slots:
        assert end - start >= minimum
        window = next(w for w in windows if w[0] <= start and end <= w[1])
        assert all(not (b_start < end and start < b_end) for b_start, b_end in busy), (start, end)
        assert start == window[0] or any(b_start < start <= b_end for b_start, b_end in busy), "slot could start earlier"
        assert end == window[1] or any(b_start <= end < b_end for b_start, b_end in busy), "slot could end later"
    assert slots == sorted(slots)
    assert all(a[1] <= b[0] for a, b in zip(slots, slots[1:]))


def minute_grid_oracle(windows: list[Interval], busy: list[Interval], minimum: timedelta) -> list[Interval]:
    """Brute force: walk every minute of every window, collect free runs at least ``minimum`` long."""
    found: list[Interval] = []
    for w_start, w_end in windows:
        run_start = None
        cursor = w_start
        while cursor <= w_end:
            free = cursor < w_end and not any(b_start <= cursor < b_end for b_start, b_end in busy)
            if free and run_start is None:
                run_start = cursor
            if not free and run_start is not None:
                if cursor - run_start >= minimum:
                    found.append((run_start, cursor))
                run_start = None
            cursor += timedelta(minutes=1)
    return found


@PROPERTY_SETTINGS
@given(busy=intervals, working=hours, days=st.integers(1, 3), need=st.integers(1, 240))
def test_free_slots_match_a_minute_by_minute_oracle(busy: list[Interval], working: tuple[int, int], days: int, need: int) -> None:
    windows = working_windows(DAY0, DAY0 + timedelta(days=days - 1), clock(working[0]), clock(working[1]), SEOUL)
    minimum = timedelta(minutes=need)
    slots = free_slots(windows, busy, minimum)
    assert_valid_slots(slots, windows, busy, minimum)
    assert slots == minute_grid_oracle(windows, busy, minimum)


@PROPERTY_SETTINGS
@given(busy=intervals)
def test_merge_covers_exactly_the_same_time_without_overlaps(busy: list[Interval]) -> None:
    merged = merge(busy)
    assert all(a[1] < b[0] for a, b in zip(merged, merged[1:]))
    for b_start, b_end in busy:
        assert any(m_start <= b_start and b_end <= m_end for m_start, m_end in merged)
    for m_start, m_end in merged:
        assert any(b_start == m_start for b_start, _ in busy) and any(b_end == m_end for _, b_end in busy)


# -- through the tools, on a real store ----------------------------------------------------------

event_specs = st.lists(st.tuples(st.integers(0, 2 * 1440), st.integers(5, 300)), max_size=6)
busy_specs = st.lists(
    st.tuples(st.sampled_from(["민수", "지영", "Jane"]), st.integers(0, 2 * 1440), st.integers(5, 300)), max_size=8
)


def slot_intervals(result: ToolResult) -> list[Interval]:
    assert result.ok, result
    return [
        (datetime.fromisoformat(f"{s['date']}T{s['start']}").replace(tzinfo=SEOUL),
         datetime.fromisoformat(f"{s['date']}T{s['end']}").replace(tzinfo=SEOUL))
        for s in result.data["slots"]
    ]


@PROPERTY_SETTINGS
@given(events=event_specs, busy=busy_specs, who=st.sets(st.sampled_from(["민수", "지영", "Jane"]), min_size=1),
       working=hours, need=st.sampled_from([15, 30, 60, 90]))
def test_tools_find_maximal_slots_free_of_events_and_attendees_busy_times(
    events: list[tuple[int, int]], busy: list[tuple[str, int, int]], who: set[str], working: tuple[int, int], need: int
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = CalendarStore(Path(tmp) / "c.sqlite3")
        try:
            for name in ["민수", "지영", "Jane"]:
                store.ensure_person(name)
            for i, (offset, length) in enumerate(events):
                store.add_event(f"e{i}", minute(offset), minute(offset + length), attendees=["민수"] if i % 2 else [])
            for name, offset, length in busy:
                store.add_busy(name, minute(offset), minute(offset + length))
            registry = build_registry(store, now=lambda: ORIGIN - timedelta(days=1))
            period = {"start_date": "2026-12-01", "end_date": "2026-12-02", "duration_minutes": need,
                      "working_hours_start": clock(working[0]).strftime("%H:%M"),
                      "working_hours_end": clock(working[1]).strftime("%H:%M")}
            windows = working_windows(DAY0, DAY0 + timedelta(days=1), clock(working[0]), clock(working[1]), SEOUL)
            event_times = [(e.start, e.end) for e in store.all_events()]

            result = registry.execute("find_free_slots", registry.validate("find_free_slots", period))
            assert_valid_slots(slot_intervals(result), windows, event_times, timedelta(minutes=need))

            args = registry.validate("find_common_free_time", {**period, "attendees": sorted(who)})
            common = slot_intervals(registry.execute("find_common_free_time", args))
            blocked = event_times + [(b.start, b.end) for b in store.all_busy() if b.person in who]
            assert_valid_slots(common, windows, blocked, timedelta(minutes=need))
        finally:
            store.close()
