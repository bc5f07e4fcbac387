"""Scenario data and the calendar store: events and busy times as scenario JSON, a store filled
from a scenario's ``initial`` state, and the ``expected`` snapshot after the task's effects.

Kept apart from the templates (``tools.calendar.lab.scenarios``), which only say what a task is:
the expected store is computed here by the same store code that the run uses, so "expected"
and "final" can only differ by what the agent did.
"""

from __future__ import annotations

from datetime import date, datetime, time, timedelta
from typing import Any, Iterable
from zoneinfo import ZoneInfo

from tools.calendar.store import CalendarStore
from tools.calendar.tools import DEFAULT_REMINDERS

TZ = "Asia/Seoul"
ZONE = ZoneInfo(TZ)


def at(day: date, moment: time) -> datetime:
    """``moment`` on ``day`` in the scenarios' zone."""
    return datetime.combine(day, moment, tzinfo=ZONE)


def event_state(title: str, day: date, start: time, minutes: int, attendees: Iterable[str] = (),
                recurrence: str | None = None) -> dict[str, Any]:
    """An event (or, with ``recurrence``, a series starting then) as scenario data; it carries the
    reminders a new event gets from ``create_event``."""
    begin = at(day, start)
    state = {"title": title, "start": begin.isoformat(), "end": (begin + timedelta(minutes=minutes)).isoformat(),
             "attendees": list(attendees), "reminders": list(DEFAULT_REMINDERS)}
    if recurrence:
        state["recurrence"] = recurrence
    return state


def all_day_state(title: str, first: date, last: date | None = None) -> dict[str, Any]:
    """A whole-day event from ``first`` to ``last`` (inclusive) as scenario data."""
    start = at(first, time(0))
    return {"title": title, "start": start.isoformat(), "end": at((last or first) + timedelta(days=1), time(0)).isoformat(),
            "attendees": [], "reminders": list(DEFAULT_REMINDERS), "all_day": True}


def busy_state(person: str, day: date, start: time, minutes: int) -> dict[str, Any]:
    begin = at(day, start)
    return {"person": person, "start": begin.isoformat(), "end": (begin + timedelta(minutes=minutes)).isoformat(),
            "label": None}


def load_state(store: CalendarStore, state: dict[str, Any]) -> None:
    """Fill an empty store from a scenario's ``initial`` data."""
    with store.transaction():
        for person in state.get("people", []):
            store.ensure_person(person)
        for b in state.get("busy", []):
            store.add_busy(b["person"], datetime.fromisoformat(b["start"]), datetime.fromisoformat(b["end"]),
                           b.get("label"))
        for e in state.get("events", []):
            _add(store, e, e.get("reminders", ()))


def _add(store: CalendarStore, e: dict[str, Any], reminders: Iterable[int]) -> None:
    store.add_event(e["title"], datetime.fromisoformat(e["start"]), datetime.fromisoformat(e["end"]), tz=TZ,
                    location=e.get("location"), notes=e.get("notes"), attendees=e.get("attendees", ()),
                    remind_minutes_before=reminders, recurrence=e.get("recurrence"), all_day=e.get("all_day", False))


def _same_event(row: dict[str, Any], state: dict[str, Any]) -> bool:
    return all(row[k] == state[k] for k in ("title", "start", "end"))


def expected_snapshot(initial: dict[str, Any], remove: Iterable[dict[str, Any]] = (),
                      add: Iterable[dict[str, Any]] = (),
                      change: Iterable[tuple[dict[str, Any], dict[str, Any]]] = (),
                      cancel: Iterable[tuple[dict[str, Any], str]] = (),
                      move: Iterable[tuple[dict[str, Any], str, str, str]] = ()) -> dict[str, Any]:
    """The store's snapshot (with ids) after the task: ``remove`` deleted, each ``(old, new)`` of
    ``change`` updated in place (it keeps its id), ``add`` created; for a series, each
    ``(series, original start)`` of ``cancel`` cancelled and each ``(series, original start, new
    start, new end)`` of ``move`` moved (one occurrence each). Computed by the same store
    code as the run. Events that did not exist at the start get ``id: None``: the verifier holds
    on to the identity of the initial events only (a new event's id is the store's business)."""
    with CalendarStore(":memory:", tz=TZ) as store:
        load_state(store, initial)
        rows = store.snapshot(with_ids=True)["events"]
        initial_ids = {r["id"] for r in rows}
        removed: set[int] = set()
        for state in remove:
            event_id = next(r["id"] for r in rows if _same_event(r, state) and r["id"] not in removed)
            store.delete_event(event_id)
            removed.add(event_id)
        for old, new in change:
            event_id = next(r["id"] for r in rows if _same_event(r, old))
            store.update_event(event_id, title=new["title"], start=datetime.fromisoformat(new["start"]),
                               end=datetime.fromisoformat(new["end"]))
        for series, original in cancel:
            event_id = next(r["id"] for r in rows if _same_event(r, series))
            assert store.cancel_occurrence(event_id, datetime.fromisoformat(original))
        for series, original, new_start, new_end in move:
            event_id = next(r["id"] for r in rows if _same_event(r, series))
            assert store.override_occurrence(event_id, datetime.fromisoformat(original),
                                             start=datetime.fromisoformat(new_start), end=datetime.fromisoformat(new_end))
        for e in add:
            _add(store, e, e.get("reminders", DEFAULT_REMINDERS))
        snapshot = store.snapshot(with_ids=True)
    for event in snapshot["events"]:
        if event["id"] not in initial_ids or event["id"] in removed:
            event["id"] = None
    return snapshot
