"""How an event is shown: the compact dict the model reads in a tool result (``event_view``) and
the one-line words a person checks (``event_words``, ``span_words``, ``scope_words``), both in the
store's zone. Kept apart from the tool functions because the approval questions, /today, the
agenda and the reminders show events the same way without running a tool."""

from __future__ import annotations

from datetime import date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from tools.calendar import result_views
from tools.calendar.shown import title as shown_title
from tools.calendar.store import CalendarStore, Event

MAX_LISTED = 50  # results beyond this are cut (with "truncated": true) to keep the context small
WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")


def hhmm(moment: datetime) -> str:
    return moment.strftime("%H:%M") if moment.second == 0 else moment.strftime("%H:%M:%S")


def event_view(event: Event, zone: ZoneInfo) -> dict[str, Any]:
    """The compact dict the model sees for one event or occurrence (local times in the store's
    zone). An occurrence of a series carries ``occurrence_date`` (its original date: with the id,
    the key update_event and delete_event take) and ``repeats``; an all-day event has no times."""
    start, end = event.start.astimezone(zone), event.end.astimezone(zone)
    view: dict[str, Any] = {
        "id": event.id,
        "title": event.title,
        "date": start.date().isoformat(),
        "weekday": WEEKDAYS[start.weekday()],
    }
    if event.all_day:
        view["all_day"] = True
        last = (end - timedelta(days=1)).date()
        if last != start.date():
            view["end_date"] = last.isoformat()
    else:
        view["start"] = hhmm(start)
        view["end"] = hhmm(end)
        if end.date() != start.date():
            view["end_date"] = end.date().isoformat()
    if event.is_series:
        view["repeats"] = event.series_words()
        if event.original_start is not None:
            view["occurrence_date"] = event.original_start.astimezone(zone).date().isoformat()
    if event.attendees:
        view["attendees"] = list(event.attendees)
    if event.location:
        view["location"] = event.location
    if event.notes:
        view["notes"] = event.notes
    return result_views.capped_view(view, event.ics_extra)  # what the model reads is cut, and says so


def event_words(event: Event, zone: ZoneInfo, to_person: bool = False) -> str:
    """One line a human can check: "#3 '치과' Tue 2026-12-01 15:00-16:00"; a series' occurrence
    adds its rule ("(매주 월 10:00)", "(매일 09:00)"), an all-day event shows days only.
    ``to_person``: the title made visible and cut (``tools.calendar.shown``); the model reads it as stored."""
    mark = f" ({event.series_words(korean=True)})" if event.is_series else ""
    name = shown_title(event.title) if to_person else event.title
    return f"#{event.id} '{name}' {span_words(event.start, event.end, zone, event.all_day)}{mark}"


def span_words(start: datetime, end: datetime, zone: ZoneInfo, all_day: bool = False) -> str:
    start, end = start.astimezone(zone), end.astimezone(zone)
    if all_day:
        last = (end - timedelta(days=1)).date()
        tail = "" if last == start.date() else f"–{WEEKDAYS[last.weekday()]} {last.isoformat()}"
        return f"{WEEKDAYS[start.weekday()]} {start.date().isoformat()}{tail} (all day)"
    tail = hhmm(end) if end.date() == start.date() else f"{end.date().isoformat()} {hhmm(end)}"
    return f"{WEEKDAYS[start.weekday()]} {start.date().isoformat()} {hhmm(start)}-{tail}"


def events_on_day(store: CalendarStore, day: date) -> list[Event]:
    """The events and occurrences of one local day, all-day ones first (as calendars show them):
    what /today, /events, /week and the daily agenda list."""
    start = datetime.combine(day, datetime.min.time(), tzinfo=store.zone)
    found = store.events_between(start, start + timedelta(days=1))
    return sorted(found, key=lambda e: (not e.all_day, e.start, e.id))


def scope_words(
    event: Event, occurrence: Event | None, scope: str, count: int | None, zone: ZoneInfo, to_person: bool = False
) -> str:
    """"all 52 occurrences of '팀 회의' (weekly, Mon 10:00)", "'팀 회의' on Mon 12-07 only", ...
    (``to_person``: for an approval question, the title made visible and cut)."""
    if not event.is_series:
        return event_words(event, zone, to_person)
    rule = event.series_words()
    name = shown_title(event.title) if to_person else event.title
    if scope == "this" and occurrence is not None:
        return f"'{name}' on {_day_words(occurrence.start, zone)} only (#{event.id}, one occurrence of {rule})"
    if scope == "following" and occurrence is not None:
        many = "every later one" if count is None else f"the {count - 1} after it" if count > 1 else "nothing after it"
        return f"'{name}' on {_day_words(occurrence.start, zone)} and {many} (#{event.id}, {rule})"
    many = "every occurrence" if count is None else f"all {count} occurrence{'s' if count != 1 else ''}"
    return f"{many} of '{name}' (#{event.id}, {rule})"


def _day_words(moment: datetime, zone: ZoneInfo) -> str:
    local = moment.astimezone(zone)
    return f"{WEEKDAYS[local.weekday()]} {local.strftime('%m-%d')}"
