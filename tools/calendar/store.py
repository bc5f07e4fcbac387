"""The event store: events, people, attendees, busy times and each event's reminder offsets.

Times are aware datetimes here and UTC text on disk (``utc_text.to_utc_text``), plus the IANA
zone an event was made in. Every change runs inside ``transaction()`` so a tool call fully
happens or not at all, even if the process is killed half-way.

The store owns the calendar file (``schema.MIGRATIONS``, opened by ``agent.sqlite``); what the
bot delivered from it lives in the same file but in its own module, ``ledger.DeliveryLedger``,
reached as ``store.ledger``.

This module is the core: the file, transactions, people, busy times, events in and out, the
day search and reminder offsets. What ``CalendarStore`` is built from lives beside it: the
values it hands out (``records``), rows made into them (``event_rows``), a series' occurrences
read from the index or expanded (``occurrence_reads``), the per-occurrence series methods
(``series_edits``, a mixin) and the comparison snapshot (``store_snapshot``, a mixin).
"""

from __future__ import annotations

import sqlite3
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator
from zoneinfo import ZoneInfo

from agent.sqlite import Database
from tools.calendar import occurrence_index as index
from tools.calendar import recurrence as rec
from tools.calendar.event_rows import busy_from_row, events_from_rows
from tools.calendar.ledger import DeliveryLedger
from tools.calendar.occurrence_reads import indexed_occurrences
from tools.calendar.records import UNSET, Busy, Event, Person
from tools.calendar.schema import MIGRATIONS, SCHEMA_VERSION, legacy_version, new_uid
from tools.calendar.series_edits import SeriesEdits
from tools.calendar.store_snapshot import StoreSnapshot
from tools.calendar.utc_text import from_utc_text, now_text, to_utc_text

__all__ = [
    "MIGRATIONS", "SCHEMA_VERSION", "UNSET", "Busy", "CalendarStore", "Event", "Person",
    "from_utc_text", "to_utc_text",
]


REMINDER_HORIZON = timedelta(days=15)  # a series' reminders are looked for this far ahead (reminders are at most a week before)


def _clean_name(name: str) -> str:
    cleaned = " ".join(name.split())
    if not cleaned:
        raise ValueError("a person's name cannot be empty")
    return cleaned


class CalendarStore(SeriesEdits, StoreSnapshot):
    """One SQLite calendar file, safe to share between threads (one connection behind a lock)."""

    def __init__(self, path: Path | str, tz: str = "Asia/Seoul") -> None:
        self.path = Path(path)
        self.tz = tz
        self.zone = ZoneInfo(tz)  # fails early on an unknown zone name
        self.db = Database(self.path, MIGRATIONS, legacy_version=legacy_version)
        self._conn = self.db.conn
        self._conn.row_factory = sqlite3.Row
        self._lock = self.db.lock
        self.ledger = DeliveryLedger(self.db)

    # -- lifecycle ---------------------------------------------------------------------------

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> CalendarStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def schema_version(self) -> int:
        return self.db.version

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """BEGIN IMMEDIATE … COMMIT, or ROLLBACK on any exception. Nested calls join the outer one."""
        with self.db.transaction():
            yield

    @contextmanager
    def savepoint(self) -> Iterator[Callable[[], None]]:
        """Inside a transaction: a savepoint, and a function that rolls back to it (an import
        drops one broken VEVENT and keeps the rest)."""
        with self.transaction():
            self._conn.execute("SAVEPOINT part")
            yield lambda: self._conn.execute("ROLLBACK TO part")
            self._conn.execute("RELEASE part")

    # -- people ------------------------------------------------------------------------------

    def ensure_person(self, name: str) -> Person:
        """The person with this name (case-insensitive), created if new."""
        cleaned = _clean_name(name)
        with self.transaction():
            self._conn.execute("INSERT OR IGNORE INTO people (name) VALUES (?)", (cleaned,))
            row = self._conn.execute("SELECT id, name FROM people WHERE name = ?", (cleaned,)).fetchone()
        return Person(int(row["id"]), str(row["name"]))

    add_person = ensure_person

    def find_person(self, name: str) -> Person | None:
        with self._lock:
            row = self._conn.execute("SELECT id, name FROM people WHERE name = ?", (" ".join(name.split()),)).fetchone()
        return Person(int(row["id"]), str(row["name"])) if row else None

    def people(self) -> list[Person]:
        with self._lock:
            rows = self._conn.execute("SELECT id, name FROM people ORDER BY name, id").fetchall()
        return [Person(int(r["id"]), str(r["name"])) for r in rows]

    # -- busy --------------------------------------------------------------------------------

    def add_busy(self, person: str, start: datetime, end: datetime, label: str | None = None) -> Busy:
        start_text, end_text = to_utc_text(start), to_utc_text(end)
        if end_text <= start_text:
            raise ValueError("busy interval must end after it starts")
        with self.transaction():
            who = self.ensure_person(person)
            cur = self._conn.execute(
                "INSERT INTO busy (person_id, start_utc, end_utc, label) VALUES (?, ?, ?, ?)",
                (who.id, start_text, end_text, label),
            )
        return Busy(int(cur.lastrowid or 0), who.name, from_utc_text(start_text), from_utc_text(end_text), label)

    def busy_between(self, person: str, start: datetime, end: datetime) -> list[Busy]:
        """The person's busy intervals that overlap [start, end)."""
        with self._lock:
            rows = self._conn.execute(
                """SELECT b.id, p.name, b.start_utc, b.end_utc, b.label FROM busy b JOIN people p ON p.id = b.person_id
                   WHERE p.name = ? AND b.start_utc < ? AND b.end_utc > ? ORDER BY b.start_utc, b.id""",
                (" ".join(person.split()), to_utc_text(end), to_utc_text(start)),
            ).fetchall()
        return [busy_from_row(r) for r in rows]

    def all_busy(self) -> list[Busy]:
        with self._lock:
            rows = self._conn.execute(
                """SELECT b.id, p.name, b.start_utc, b.end_utc, b.label FROM busy b JOIN people p ON p.id = b.person_id
                   ORDER BY b.start_utc, p.name, b.id"""
            ).fetchall()
        return [busy_from_row(r) for r in rows]

    # -- events ------------------------------------------------------------------------------

    def add_event(
        self,
        title: str,
        start: datetime,
        end: datetime,
        *,
        tz: str | None = None,
        location: str | None = None,
        notes: str | None = None,
        attendees: Iterable[str] = (),
        remind_minutes_before: Iterable[int] = (),
        recurrence: str | None = None,
        all_day: bool = False,
        transparent: bool = False,
        uid: str | None = None,
        ics_extra: str | None = None,
    ) -> Event:
        """Add an event or, with ``recurrence``, a series whose first occurrence is [start, end).

        A series runs in ``tz`` on local wall time; its recurrence is checked here (ValueError:
        nothing is stored). ``uid`` is kept when given (an import), else made once."""
        start_text, end_text = to_utc_text(start), to_utc_text(end)
        if end_text <= start_text:
            raise ValueError("an event must end after it starts")
        zone_name = tz or self.tz
        zone = ZoneInfo(zone_name)
        recurrence, series_end = self._checked_recurrence(recurrence, start.astimezone(zone), end - start)
        now = now_text()
        with self.transaction():
            cur = self._conn.execute(
                """INSERT INTO events (title, start_utc, end_utc, tz, location, notes, created_at, updated_at,
                                       uid, recurrence, series_end_utc, all_day, transparent, ics_extra)
                   VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
                (title, start_text, end_text, zone_name, location, notes, now, now, uid or new_uid(),
                 recurrence, series_end, int(all_day), int(transparent), ics_extra),
            )
            event_id = int(cur.lastrowid or 0)
            self._set_attendees(event_id, attendees)
            self._set_reminders(event_id, remind_minutes_before)
            self._reindex(event_id)
            event = self.get_event(event_id)
        assert event is not None
        return event

    def get_event(self, event_id: int) -> Event | None:
        with self._lock:
            row = self._conn.execute("SELECT * FROM events WHERE id = ?", (event_id,)).fetchone()
            return self._event_from_row(row) if row else None

    def update_event(
        self,
        event_id: int,
        *,
        title: Any = UNSET,
        start: Any = UNSET,
        end: Any = UNSET,
        location: Any = UNSET,
        notes: Any = UNSET,
        attendees: Any = UNSET,
        remind_minutes_before: Any = UNSET,
        recurrence: Any = UNSET,
        all_day: Any = UNSET,
        transparent: Any = UNSET,
        ics_extra: Any = UNSET,
    ) -> Event | None:
        """Change the given fields (``UNSET`` leaves one alone); None if there is no such event.

        Sent reminders are recorded by due time, so moving an event re-arms its reminders.
        Moving a whole series moves its EXDATEs, RDATEs and overrides' original starts by the
        same amount, so a cancelled occurrence stays cancelled.
        """
        with self.transaction():
            current = self.get_event(event_id)
            if current is None:
                return None
            new_start = current.start if start is UNSET else start
            new_end = current.end if end is UNSET else end
            start_text, end_text = to_utc_text(new_start), to_utc_text(new_end)
            if end_text <= start_text:
                raise ValueError("an event must end after it starts")
            text = current.recurrence if recurrence is UNSET else recurrence
            shift = new_start - current.start
            if text and shift and recurrence is UNSET:
                text = rec.parse(text).shifted(shift).text()
                for row in self._conn.execute(
                    "SELECT original_utc FROM event_overrides WHERE event_id = ? ORDER BY original_utc DESC"
                    if shift.total_seconds() > 0 else
                    "SELECT original_utc FROM event_overrides WHERE event_id = ? ORDER BY original_utc",
                    (event_id,),
                ).fetchall():
                    self._conn.execute(
                        "UPDATE event_overrides SET original_utc = ? WHERE event_id = ? AND original_utc = ?",
                        (to_utc_text(from_utc_text(row[0]) + shift), event_id, row[0]),
                    )
            zone = ZoneInfo(current.tz)
            text, series_end = self._checked_recurrence(text, new_start.astimezone(zone), new_end - new_start)
            self._conn.execute(
                """UPDATE events SET title = ?, start_utc = ?, end_utc = ?, location = ?, notes = ?, updated_at = ?,
                                     recurrence = ?, series_end_utc = ?, all_day = ?, transparent = ?, ics_extra = ?
                   WHERE id = ?""",
                (
                    current.title if title is UNSET else title,
                    start_text,
                    end_text,
                    current.location if location is UNSET else location,
                    current.notes if notes is UNSET else notes,
                    now_text(),
                    text,
                    series_end,
                    int(current.all_day if all_day is UNSET else all_day),
                    int(current.transparent if transparent is UNSET else transparent),
                    current.ics_extra if ics_extra is UNSET else ics_extra,
                    event_id,
                ),
            )
            if attendees is not UNSET:
                self._conn.execute("DELETE FROM event_attendees WHERE event_id = ?", (event_id,))
                self._set_attendees(event_id, attendees or ())
            if remind_minutes_before is not UNSET:
                self._conn.execute("DELETE FROM reminders WHERE event_id = ?", (event_id,))
                self._set_reminders(event_id, remind_minutes_before or ())
            self._reindex(event_id)
            return self.get_event(event_id)

    def delete_event(self, event_id: int) -> bool:
        """Delete an event, or a whole series with its overrides (by foreign key)."""
        with self.transaction():
            cur = self._conn.execute("DELETE FROM events WHERE id = ?", (event_id,))
        return cur.rowcount > 0

    def find_uid(self, uid: str) -> Event | None:
        with self._lock:
            row = self._conn.execute("SELECT * FROM events WHERE uid = ?", (uid,)).fetchone()
            return self._event_from_row(row) if row else None

    def events_between(self, start: datetime, end: datetime, query: str | None = None) -> list[Event]:
        """Events and occurrences of series overlapping [start, end), optionally only those whose
        text mentions ``query``; ordered by start. An occurrence carries its ``original_start``.

        One-off events come from ``events`` and occurrences from the occurrence index, one range
        query each (see ``occurrence_index``), not from expanding every series at every call."""
        lower, upper = to_utc_text(start), to_utc_text(end)
        with self._lock:
            rows = self._conn.execute(
                "SELECT * FROM events WHERE recurrence IS NULL AND start_utc < ? AND end_utc > ? ORDER BY start_utc, id",
                (upper, lower),
            ).fetchall()
            events = events_from_rows(self._conn, rows) + indexed_occurrences(self.db, start, end)
        events.sort(key=lambda e: (e.start, e.id))
        return _matching(events, query)

    def all_events(self, query: str | None = None) -> list[Event]:
        """Every stored event and series (a series once, as its first occurrence's row)."""
        with self._lock:
            rows = self._conn.execute("SELECT * FROM events ORDER BY start_utc, id").fetchall()
            events = events_from_rows(self._conn, rows)
        return _matching(events, query)

    def conflicts(self, start: datetime, end: datetime, exclude_id: int | None = None,
                  exclude_key: tuple[int, str | None] | None = None) -> list[Event]:
        """Busy events and occurrences overlapping [start, end): TRANSP:TRANSPARENT ones never are."""
        return [e for e in self.events_between(start, end)
                if not e.transparent and e.id != exclude_id and e.key != exclude_key]

    # -- reminder offsets (what was delivered is in the ledger) ------------------------------

    def reminder_rows(self, start_after: datetime, horizon: timedelta = REMINDER_HORIZON) -> list[tuple[int, int, datetime]]:
        """(event id, minutes before, start UTC) of events, and of series' occurrences, starting
        after ``start_after``; a series' occurrences only up to ``horizon`` later (it may be endless).
        The start identifies the occurrence, so each occurrence's reminder is settled once."""
        with self._lock:
            rows = self._conn.execute(
                """SELECT r.event_id, r.minutes_before, e.start_utc FROM reminders r JOIN events e ON e.id = r.event_id
                   WHERE e.recurrence IS NULL AND e.start_utc > ? ORDER BY e.start_utc, r.event_id, r.minutes_before""",
                (to_utc_text(start_after),),
            ).fetchall()
            found = [(int(r[0]), int(r[1]), from_utc_text(r[2])) for r in rows]
            minutes: dict[int, list[int]] = {}
            for event_id, value in self._conn.execute(
                """SELECT r.event_id, r.minutes_before FROM reminders r JOIN events e ON e.id = r.event_id
                   WHERE e.recurrence IS NOT NULL ORDER BY r.minutes_before"""
            ).fetchall():
                minutes.setdefault(int(event_id), []).append(int(value))
        if minutes:
            for occurrence in self.events_between(start_after, start_after + horizon):
                if occurrence.id in minutes and occurrence.original_start is not None and occurrence.start > start_after:
                    found += [(occurrence.id, m, occurrence.start.astimezone(timezone.utc)) for m in minutes[occurrence.id]]
            found.sort(key=lambda row: (row[2], row[0], row[1]))
        return found

    def event_at(self, event_id: int, start: datetime) -> Event | None:
        """The event, or the occurrence of a series that starts at ``start`` (for a reminder)."""
        event = self.get_event(event_id)
        if event is None or not event.is_series:
            return event
        found = [e for e in self.occurrences(event_id, start, start + timedelta(seconds=1)) if e.start == start]
        return found[0] if found else None

    # -- internals ---------------------------------------------------------------------------

    def _checked_recurrence(self, text: str | None, start: datetime, length: timedelta) -> tuple[str | None, str | None]:
        """The normalised recurrence text and the UTC end of its last occurrence (None if endless)."""
        if not text:
            return None, None
        normalised = rec.check(text, start)
        last = rec.last_start(normalised or "", start)
        return normalised, to_utc_text(last + length) if last is not None else None

    def _reindex(self, event_id: int) -> None:
        """Rebuild the event's occurrence rows (inside the transaction that changed it)."""
        index.reindex(self._conn, event_id, datetime.now(timezone.utc))

    def _set_reminders(self, event_id: int, minutes: Iterable[int]) -> None:
        for value in minutes:
            if int(value) < 0:
                raise ValueError("a reminder cannot be after the event starts")
            self._conn.execute(
                "INSERT OR IGNORE INTO reminders (event_id, minutes_before) VALUES (?, ?)", (event_id, int(value))
            )

    def _set_attendees(self, event_id: int, names: Iterable[str]) -> None:
        for name in names:
            person = self.ensure_person(name)
            self._conn.execute(
                "INSERT OR IGNORE INTO event_attendees (event_id, person_id) VALUES (?, ?)", (event_id, person.id)
            )

    def _event_from_row(self, row: sqlite3.Row) -> Event:
        return events_from_rows(self._conn, [row])[0]


def _matching(events: list[Event], query: str | None) -> list[Event]:
    """Case-insensitive (Unicode-aware) match on title, location, notes and attendee names."""
    if not query or not query.strip():
        return events
    needle = query.strip().casefold()

    def text(e: Event) -> str:
        return " ".join([e.title, e.location or "", e.notes or "", *e.attendees]).casefold()

    return [e for e in events if needle in text(e)]
