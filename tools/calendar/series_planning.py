"""What a change to a series works out before the store is touched: where a new series really
starts and its RRULE (``series_start``), which busy events it would overlap over its first year
(``series_conflicts``), and the rule a weekly series gets when its start moves to another
weekday (``moved_weekday``). Kept apart from the tool functions because this is recurrence
arithmetic, not the tools' contract with the model."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from tools.calendar import recurrence as rec
from tools.calendar.arguments import CreateEventArgs, parse_date
from tools.calendar.event_views import MAX_LISTED
from tools.calendar.store import UNSET, CalendarStore, Event

SERIES_CONFLICT_WINDOW = timedelta(days=366)  # a new series is checked for conflicts over its first year


def series_start(args: CreateEventArgs, start: datetime, end: datetime, zone: ZoneInfo) -> tuple[datetime, datetime, str]:
    """The series' first occurrence (the first of its weekdays on or after ``date``) and its RRULE."""
    repeat = args.repeat
    assert repeat is not None
    codes = [rec.WEEKDAY_CODES.index(d) for d in repeat.by_weekday or ()]
    if codes:
        ahead = min((c - start.weekday()) % 7 for c in codes)
        start, end = start + timedelta(days=ahead), end + timedelta(days=ahead)
    until = None
    if repeat.until is not None:
        until = datetime.combine(parse_date(repeat.until), datetime.max.time().replace(microsecond=0),
                                 tzinfo=zone)
    rule = rec.weekly_rule(repeat.freq.upper(), repeat.interval, repeat.by_weekday or (), repeat.count, until)
    return start, end, f"RRULE:{rule}"


def series_conflicts(store: CalendarStore, start: datetime, end: datetime, recurrence: str | None,
                     exclude_id: int | None = None) -> list[Event]:
    """Busy events overlapping the event, or any occurrence of the series in its first year."""
    if recurrence is None:
        return store.conflicts(start, end, exclude_id=exclude_id)
    found: list[Event] = []
    length = end - start
    # one read of the whole window (not one per occurrence: a daily series has 366), then each
    # occurrence takes what overlaps it, in the store's order
    busy = store.conflicts(start, start + SERIES_CONFLICT_WINDOW + length, exclude_id=exclude_id)
    for moment in rec.starts_between(rec.check(recurrence, start) or "", start, start, start + SERIES_CONFLICT_WINDOW):
        found += [e for e in busy if e.start < moment + length and e.end > moment and e not in found]
        if len(found) >= MAX_LISTED:
            break
    return found


def moved_weekday(event: Event, shift: timedelta) -> Any:
    """A weekly series on one weekday moved by whole days follows to the new weekday (its BYDAY
    changes with DTSTART); anything else keeps its rule (UNSET)."""
    days = round(shift / timedelta(days=1))
    if not event.is_series or days % 7 == 0:
        return UNSET
    parts = rec.parse(event.recurrence).shifted(shift)
    rules = []
    for rule in parts.rrules:
        byday = rec.rule_part(rule, "BYDAY")
        if byday and "," not in byday and byday in rec.WEEKDAY_CODES:
            moved = rec.WEEKDAY_CODES[(rec.WEEKDAY_CODES.index(byday) + days) % 7]
            rule = ";".join(f"BYDAY={moved}" if p.startswith("BYDAY=") else p for p in rule.split(";"))
        rules.append(rule)
    return rec.Recurrence(tuple(rules), parts.rdates, parts.exdates).text()
