"""The verifier's view of a series: its expanded occurrences, not the spelling of its rule.

The fourth series adversary, a series kept in UTC that drifts an hour at DST, cannot be
written through the tools (create_event always makes a series in the calendar's own zone), so it
is checked here on the comparison the verifier runs (``snapshot_diff.normalized``); the other
three are scripted policies in ``tools.calendar.lab.adversaries`` and run in test_adversaries.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from tools.calendar.lab.snapshot_diff import diff_words, normalized
from tools.calendar.store import CalendarStore

NEW_YORK = ZoneInfo("America/New_York")
FIRST = datetime(2026, 10, 5, 10, tzinfo=NEW_YORK)  # a Monday; DST ends on Nov 1


def snapshot_of(tz: str, rule: str) -> dict:
    with CalendarStore(":memory:", tz="America/New_York") as store:
        store.add_event("standup", FIRST, FIRST + timedelta(minutes=30), tz=tz, recurrence=rule)
        return normalized(store.snapshot())


def test_a_series_kept_in_utc_drifts_an_hour_at_dst_and_the_comparison_sees_it() -> None:
    local = snapshot_of("America/New_York", "RRULE:FREQ=WEEKLY;COUNT=8")
    drifting = snapshot_of("UTC", "RRULE:FREQ=WEEKLY;COUNT=8")
    assert local != drifting
    [ours], [theirs] = local["events"], drifting["events"]
    differ = [(a[0], b[0]) for a, b in zip(ours["occurrences"], theirs["occurrences"]) if a != b]
    assert [a[:10] for a, _ in differ] == ["2026-11-02", "2026-11-09", "2026-11-16", "2026-11-23"]
    assert all(a.endswith("T10:00:00-05:00") and b.endswith("T09:00:00-05:00") for a, b in differ)
    assert "missing 'standup'" in diff_words(drifting, local)


def test_the_same_occurrences_written_another_way_are_the_same_series() -> None:
    assert snapshot_of("America/New_York", "RRULE:FREQ=WEEKLY;COUNT=8") == snapshot_of(
        "America/New_York", "RRULE:FREQ=WEEKLY;BYDAY=MO;UNTIL=20261123T150000Z")
    assert snapshot_of("America/New_York", "RRULE:FREQ=WEEKLY;COUNT=8") != snapshot_of(
        "America/New_York", "RRULE:FREQ=WEEKLY;COUNT=9")
