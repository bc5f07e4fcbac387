"""A series' occurrences, one at a time: listing, finding and counting them, and the edits that
touch one or some of them (cancel one, move one, end the series, split it in two).

A mixin of ``store.CalendarStore``, apart from its core because these are the calendar's own
rules about recurrence (an EXDATE for a cancelled occurrence, a RECURRENCE-ID override for a
moved one, UNTIL and a new UID for "this and following") while the core is rows in, rows out.
The methods rely on the core for ``transaction``, ``get_event``, ``add_event``,
``update_event``, ``delete_event`` and ``_reindex``; every change runs in one transaction.
"""

from __future__ import annotations

import sqlite3
from datetime import date, datetime, time, timedelta
from threading import RLock
from typing import Any
from zoneinfo import ZoneInfo

from tools.calendar import occurrence_reads as reads
from tools.calendar import recurrence as rec
from tools.calendar.records import UNSET, Event
from tools.calendar.utc_text import from_utc_text, now_text, to_utc_text


class SeriesEdits:
    """The series methods of ``CalendarStore`` (see the module's docstring)."""

    _conn: sqlite3.Connection
    _lock: RLock
    zone: ZoneInfo

    def occurrences(self, event_id: int, start: datetime, end: datetime) -> list[Event]:
        """The series' occurrences overlapping [start, end) (the event itself if it is one-off)."""
        event = self.get_event(event_id)
        if event is None:
            return []
        if not event.is_series:
            return [event] if event.start < end and event.end > start else []
        with self._lock:
            return sorted(reads.series_occurrences(self._conn, event, start, end), key=lambda e: e.start)

    def occurrence(self, event_id: int, original_start: datetime) -> Event | None:
        """The occurrence whose original start is ``original_start``, overrides applied; None if
        the series has no such occurrence (or it was cancelled)."""
        event = self.get_event(event_id)
        if event is None or not event.is_series:
            return None
        moment = original_start.astimezone(ZoneInfo(event.tz))
        starts = rec.starts_between(event.recurrence or "", event.start, moment, moment + timedelta(seconds=1))
        if moment not in starts:
            return None
        return reads.apply_override(self._conn, event, moment)

    def occurrence_on(self, event_id: int, day: date) -> Event | None:
        """The first occurrence whose original start falls on ``day`` (the store's local day)."""
        event = self.get_event(event_id)
        if event is None or not event.is_series:
            return None
        first = datetime.combine(day, time(0), tzinfo=self.zone)
        starts = rec.starts_between(event.recurrence or "", event.start, first, first + timedelta(days=1))
        return reads.apply_override(self._conn, event, starts[0]) if starts else None

    def occurrence_count(self, event_id: int, after: datetime | None = None) -> int | None:
        """How many occurrences the series has (at or after ``after``); None if it is endless."""
        event = self.get_event(event_id)
        if event is None:
            return 0
        if not event.is_series:
            return 1
        return rec.count_from(event.recurrence or "", event.start, after)

    def cancel_occurrence(self, event_id: int, original_start: datetime) -> bool:
        """Cancel one occurrence (an EXDATE; its override, if any, goes). False if there is none."""
        with self.transaction():
            event = self.get_event(event_id)
            if event is None or self.occurrence(event_id, original_start) is None:
                return False
            text = rec.parse(event.recurrence).with_exdate(original_start).text()
            self._conn.execute("DELETE FROM event_overrides WHERE event_id = ? AND original_utc = ?",
                               (event_id, to_utc_text(original_start)))
            self.update_event(event_id, recurrence=text)
        return True

    def override_occurrence(
        self, event_id: int, original_start: datetime, *, title: Any = UNSET, start: Any = UNSET, end: Any = UNSET,
        location: Any = UNSET, notes: Any = UNSET, ics_extra: Any = UNSET,
    ) -> Event | None:
        """Move, retitle or re-describe one occurrence (a RECURRENCE-ID); None if there is none."""
        with self.transaction():
            current = self.occurrence(event_id, original_start)
            if current is None:
                return None
            new_start = current.start if start is UNSET else start
            new_end = current.end if end is UNSET else end
            if to_utc_text(new_end) <= to_utc_text(new_start):
                raise ValueError("an event must end after it starts")
            self._conn.execute(
                """INSERT OR REPLACE INTO event_overrides
                   (event_id, original_utc, title, start_utc, end_utc, location, notes, ics_extra)
                   VALUES (?, ?, ?, ?, ?, ?, ?, ?)""",
                (event_id, to_utc_text(original_start), current.title if title is UNSET else title,
                 to_utc_text(new_start), to_utc_text(new_end), current.location if location is UNSET else location,
                 current.notes if notes is UNSET else notes, current.ics_extra if ics_extra is UNSET else ics_extra),
            )
            self._conn.execute("UPDATE events SET updated_at = ? WHERE id = ?", (now_text(), event_id))
            self._reindex(event_id)
            return self.occurrence(event_id, original_start)

    def clear_overrides(self, event_id: int) -> None:
        """Forget the series' moved occurrences (an import replaces them with the file's)."""
        with self.transaction():
            self._conn.execute("DELETE FROM event_overrides WHERE event_id = ?", (event_id,))
            self._reindex(event_id)

    def overrides(self, event_id: int) -> list[Event]:
        """The series' overridden occurrences, by original start."""
        event = self.get_event(event_id)
        if event is None:
            return []
        with self._lock:
            rows = self._conn.execute(
                "SELECT original_utc FROM event_overrides WHERE event_id = ? ORDER BY original_utc", (event_id,)
            ).fetchall()
            return [reads.apply_override(self._conn, event, from_utc_text(r[0]).astimezone(ZoneInfo(event.tz))) for r in rows]

    def end_series_before(self, event_id: int, original_start: datetime) -> bool:
        """Drop the occurrences from ``original_start`` on ("this and following"); the whole
        series if that is its first. False if there is no such occurrence."""
        with self.transaction():
            event = self.get_event(event_id)
            if event is None or self.occurrence(event_id, original_start) is None:
                return False
            if original_start <= event.start:
                return self.delete_event(event_id)
            self._conn.execute("DELETE FROM event_overrides WHERE event_id = ? AND original_utc >= ?",
                               (event_id, to_utc_text(original_start)))
            text = rec.parse(event.recurrence).with_until(original_start - timedelta(seconds=1)).text()
            self.update_event(event_id, recurrence=text)
        return True

    def split_series(self, event_id: int, original_start: datetime) -> Event | None:
        """Make the occurrences from ``original_start`` on a new series (new UID, same details,
        overrides moved along) and end the old one before it; returns the new series. The
        first occurrence: the series itself is returned unchanged."""
        with self.transaction():
            event = self.get_event(event_id)
            if event is None or self.occurrence(event_id, original_start) is None:
                return None
            if original_start <= event.start:
                return event
            zone = ZoneInfo(event.tz)
            moment = original_start.astimezone(zone)
            last = rec.last_start(event.recurrence or "", event.start)
            text = rec.parse(event.recurrence).from_start(moment, last).text()
            created = self.add_event(
                event.title, moment, moment + (event.end - event.start), tz=event.tz, location=event.location,
                notes=event.notes, attendees=event.attendees, remind_minutes_before=event.remind_minutes_before,
                recurrence=text, all_day=event.all_day, transparent=event.transparent, ics_extra=event.ics_extra,
            )
            self._conn.execute("UPDATE event_overrides SET event_id = ? WHERE event_id = ? AND original_utc >= ?",
                               (created.id, event_id, to_utc_text(original_start)))
            self._reindex(created.id)
            self.end_series_before(event_id, original_start)
            return self.get_event(created.id)
