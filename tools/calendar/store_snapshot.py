"""A calendar's content as canonical JSON-able data, for comparing two stores (the eval's and the
verifier's check that a tool call did what it should, and nothing else).

A mixin of ``store.CalendarStore``, apart from its core because it is a view for checking, not
a way to read or change the calendar: it decides what counts as a change (no timestamps, ids
only when asked, a series by its expanded occurrences rather than its rule's spelling).
"""

from __future__ import annotations

import sqlite3
from datetime import timedelta
from threading import RLock
from typing import Any
from zoneinfo import ZoneInfo

from tools.calendar.occurrence_reads import series_occurrences
from tools.calendar.records import Event

SNAPSHOT_WINDOW = timedelta(days=400)  # a series' snapshot lists its occurrences over this span from its start ...
SNAPSHOT_OCCURRENCES = 60  # ... at most this many (a weekly series' first year and more)


class StoreSnapshot:
    """``CalendarStore.snapshot``; reads the store through its ``all_events``, ``all_busy``,
    ``people``, ``overrides`` and ``ledger``, under its lock."""

    _conn: sqlite3.Connection
    _lock: RLock
    zone: ZoneInfo

    def snapshot(self, with_ids: bool = False) -> dict[str, Any]:
        """Canonical JSON-able content of everything the tools can change, for comparing stores.

        Per event: title, times, location, notes, attendees and reminders; then people,
        busy times and the agenda settings (from the ledger: a user can change them). No timestamps. ``with_ids`` adds each event's id, so
        that an event deleted and re-created is a change, not a no-op (the eval compares these);
        without it two stores filled in another order still compare equal.
        """
        with self._lock:
            events = [
                {
                    **({"id": e.id} if with_ids else {}),
                    "title": e.title,
                    "start": e.start.astimezone(self.zone).isoformat(),
                    "end": e.end.astimezone(self.zone).isoformat(),
                    "location": e.location,
                    "notes": e.notes,
                    "attendees": sorted(e.attendees),
                    "reminders": list(e.remind_minutes_before),
                    **self._series_snapshot(e),
                }
                for e in self.all_events()
            ]
            busy = [
                {
                    "person": b.person,
                    "start": b.start.astimezone(self.zone).isoformat(),
                    "end": b.end.astimezone(self.zone).isoformat(),
                    "label": b.label,
                }
                for b in self.all_busy()
            ]
            people = sorted(p.name for p in self.people())
            agenda = self.ledger.agenda_settings()
        events.sort(key=lambda e: (e["start"], e["end"], e["title"], e["location"] or "", e["notes"] or "",
                                   e.get("id", 0)))
        busy.sort(key=lambda b: (b["person"], b["start"], b["end"], b["label"] or ""))
        return {"events": events, "people": people, "busy": busy, "agenda": agenda}

    def _series_snapshot(self, event: Event) -> dict[str, Any]:
        """A series', an all-day or a transparent event's own keys (absent on a plain event, so
        snapshots of calendars without them are as before). Overrides by original start; a
        series also lists its expanded occurrences (the verifier compares those, not the rule's
        spelling)."""
        extra: dict[str, Any] = {}
        if event.recurrence:
            extra["recurrence"] = event.recurrence
            extra["tz"] = event.tz
            first = event.start
            extra["occurrences"] = [
                [o.start.astimezone(self.zone).isoformat(), o.end.astimezone(self.zone).isoformat(), o.title]
                for o in sorted(series_occurrences(self._conn, event, first, first + SNAPSHOT_WINDOW),
                                key=lambda o: o.start)
            ][:SNAPSHOT_OCCURRENCES]
            extra["overrides"] = [
                {"original": o.original_start.astimezone(self.zone).isoformat() if o.original_start else None,
                 "title": o.title, "start": o.start.astimezone(self.zone).isoformat(),
                 "end": o.end.astimezone(self.zone).isoformat(), "location": o.location, "notes": o.notes}
                for o in self.overrides(event.id)
            ]
        if event.all_day:
            extra["all_day"] = True
        if event.transparent:
            extra["transparent"] = True
        return extra
