"""The event store: events, people, attendees, busy times and each event's reminder offsets.

Times are aware datetimes here and UTC text on disk (``utc_text.to_utc_text``), plus the IANA
zone an event was made in. Every change runs inside ``transaction()`` so a tool call fully
happens or not at all, even if the process is killed half-way.

The store owns the calendar file (``schema.MIGRATIONS``, opened by ``agent.sqlite``); what the
bot delivered from it lives in the same file but in its own module, ``ledger.DeliveryLedger``,
reached as ``store.ledger``.
"""

from __future__ import annotations

import json
import sqlite3
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import date, datetime, time, timedelta, timezone
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator
from zoneinfo import ZoneInfo

from agent.sqlite import Database
from tools.calendar import occurrence_index as index
from tools.calendar import recurrence as rec
from tools.calendar.ledger import DeliveryLedger
from tools.calendar.schema import MIGRATIONS, SCHEMA_VERSION, legacy_version, new_uid
from tools.calendar.utc_text import from_utc_text, now_text, to_utc_text

__all__ = [
    "MIGRATIONS", "SCHEMA_VERSION", "UNSET", "Busy", "CalendarStore", "Event", "Person",
    "from_utc_text", "to_utc_text",
]


@dataclass(frozen=True)
class Person:
    id: int
    name: str


@dataclass(frozen=True)
class Event:
    """An event; ``start``/``end`` are aware datetimes in the event's own zone ``tz``."""

    id: int
    title: str
    start: datetime
    end: datetime
    tz: str
    location: str | None = None
    notes: str | None = None
    attendees: tuple[str, ...] = ()
    created_at: datetime | None = None
    updated_at: datetime | None = None
    remind_minutes_before: tuple[int, ...] = ()  # ascending
    uid: str = ""  # the iCalendar UID, made once (schema.new_uid) and kept through export and import
    recurrence: str | None = None  # RRULE/RDATE/EXDATE lines (see tools.calendar.recurrence); None: one-off
    all_day: bool = False  # start and end are local midnights; end is the day after the last day
    transparent: bool = False  # TRANSP:TRANSPARENT (a birthday, a holiday): never busy
    ics_extra: str | None = None  # iCalendar properties we do not model, as content lines
    original_start: datetime | None = None  # set on an occurrence: its start as the series has it

    @property
    def is_series(self) -> bool:
        return self.recurrence is not None

    @property
    def key(self) -> tuple[int, str | None]:
        """An occurrence's stable identity: (series id, original start UTC text); (id, None) for one-off."""
        return self.id, to_utc_text(self.original_start) if self.original_start is not None else None

    def series_words(self, korean: bool = False) -> str:
        """"weekly, Mon 10:00" (or "매주 월 10:00"); "" for a one-off event."""
        first = self.original_start or self.start
        return rec.describe(self.recurrence, first, korean=korean, all_day=self.all_day)


@dataclass(frozen=True)
class Busy:
    id: int
    person: str
    start: datetime  # aware, UTC
    end: datetime
    label: str | None = None


SNAPSHOT_WINDOW = timedelta(days=400)  # a series' snapshot lists its occurrences over this span from its start ...
SNAPSHOT_OCCURRENCES = 60  # ... at most this many (a weekly series' first year and more)
REMINDER_HORIZON = timedelta(days=15)  # a series' reminders are looked for this far ahead (reminders are at most a week before)


class _Unset:
    """Marks "leave unchanged" in ``update_event`` (None means "clear")."""

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()


def _clean_name(name: str) -> str:
    cleaned = " ".join(name.split())
    if not cleaned:
        raise ValueError("a person's name cannot be empty")
    return cleaned


class CalendarStore:
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
        return [_busy_from_row(r) for r in rows]

    def all_busy(self) -> list[Busy]:
        with self._lock:
            rows = self._conn.execute(
                """SELECT b.id, p.name, b.start_utc, b.end_utc, b.label FROM busy b JOIN people p ON p.id = b.person_id
                   ORDER BY b.start_utc, p.name, b.id"""
            ).fetchall()
        return [_busy_from_row(r) for r in rows]

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
            events = self._events_from_rows(rows) + self._indexed_occurrences(start, end)
        events.sort(key=lambda e: (e.start, e.id))
        return _matching(events, query)

    def all_events(self, query: str | None = None) -> list[Event]:
        """Every stored event and series (a series once, as its first occurrence's row)."""
        with self._lock:
            rows = self._conn.execute("SELECT * FROM events ORDER BY start_utc, id").fetchall()
            events = self._events_from_rows(rows)
        return _matching(events, query)

    def conflicts(self, start: datetime, end: datetime, exclude_id: int | None = None,
                  exclude_key: tuple[int, str | None] | None = None) -> list[Event]:
        """Busy events and occurrences overlapping [start, end): TRANSP:TRANSPARENT ones never are."""
        return [e for e in self.events_between(start, end)
                if not e.transparent and e.id != exclude_id and e.key != exclude_key]

    # -- series ------------------------------------------------------------------------------

    def occurrences(self, event_id: int, start: datetime, end: datetime) -> list[Event]:
        """The series' occurrences overlapping [start, end) (the event itself if it is one-off)."""
        event = self.get_event(event_id)
        if event is None:
            return []
        if not event.is_series:
            return [event] if event.start < end and event.end > start else []
        with self._lock:
            return sorted(self._occurrences(event, start, end), key=lambda e: e.start)

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
        return self._apply_override(event, moment)

    def occurrence_on(self, event_id: int, day: date) -> Event | None:
        """The first occurrence whose original start falls on ``day`` (the store's local day)."""
        event = self.get_event(event_id)
        if event is None or not event.is_series:
            return None
        first = datetime.combine(day, time(0), tzinfo=self.zone)
        starts = rec.starts_between(event.recurrence or "", event.start, first, first + timedelta(days=1))
        return self._apply_override(event, starts[0]) if starts else None

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
            return [self._apply_override(event, from_utc_text(r[0]).astimezone(ZoneInfo(event.tz))) for r in rows]

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

    def _indexed_occurrences(self, start: datetime, end: datetime) -> list[Event]:
        """Occurrences of every series overlapping [start, end), from the occurrence index (call
        under the lock). Each is built as ``_occurrences`` builds it from the expansion, and they
        come in its order where starts tie: an occurrence found by its original start before one
        moved in from outside the window, then by original start."""
        longest = self._conn.execute("SELECT MAX(longest_s) FROM occurrence_index").fetchone()[0]
        if longest is None:
            return []  # no series
        upper = _ceil_text(end)
        expanded = self._extend_index(end, upper)
        rows = self._conn.execute(
            """SELECT o.event_id, o.original_utc, o.original_wall, o.start_utc,
                      v.original_utc, v.title, v.start_utc, v.end_utc, v.location, v.notes, v.ics_extra
               FROM event_occurrences o LEFT JOIN event_overrides v
                    ON v.event_id = o.event_id AND v.original_utc = o.original_utc
               WHERE o.start_utc >= ? AND o.start_utc < ? AND o.end_utc > ?""",
            (to_utc_text(start - timedelta(seconds=longest)), upper, to_utc_text(start)),
        ).fetchall()
        ids = json.dumps(sorted({int(r[0]) for r in rows} | expanded))
        series = {f["id"]: f for f in self._fields_of_rows(self._conn.execute(
            "SELECT * FROM events WHERE id IN (SELECT value FROM json_each(?))", (ids,)).fetchall())}
        found: list[tuple[str, int, bool, str, Event]] = []
        shapes: dict[int, tuple[ZoneInfo, timedelta]] = {}
        for row in rows:
            event_id = int(row[0])
            if event_id in expanded:
                continue
            parent = series[event_id]
            if event_id not in shapes:
                shapes[event_id] = (ZoneInfo(parent["tz"]), parent["end"] - parent["start"])
            zone, length = shapes[event_id]
            if row[4] is None:
                original = index.wall_start(row[1], row[2], zone)
                found.append((row[3], event_id, False, row[1],
                              _occurrence_of(parent, original, original + length, original)))
                continue
            original = index.wall_start(row[1], row[2], zone)
            moved_in = not start - length <= original < end  # _occurrences takes these from the override
            if moved_in:
                original = datetime.fromisoformat(row[1]).astimezone(zone)
            changed = {**parent, "title": str(row[5]), "location": row[8], "notes": row[9], "ics_extra": row[10]}
            occurrence = _occurrence_of(changed, datetime.fromisoformat(row[6]).astimezone(zone),
                                        datetime.fromisoformat(row[7]).astimezone(zone), original)
            found.append((row[3], event_id, moved_in, row[1], occurrence))
        found.sort(key=lambda item: item[:4])
        occurrences = [item[4] for item in found]
        for event_id in sorted(expanded):
            occurrences += self._occurrences(Event(**series[event_id]), start, end)
        return occurrences

    def _extend_index(self, end: datetime, upper: str) -> set[int]:
        """Make the occurrence index reach ``end`` (``upper``: its UTC text rounded up) for the
        endless series whose materialised originals stop before it: extended if ``end`` is within
        ``INDEX_REACH``, a write in its own transaction (or the caller's); the ids of the others,
        which this search expands (a search a century ahead must not store a century of a
        daily series)."""
        short = self._conn.execute(
            """SELECT i.event_id, e.start_utc FROM occurrence_index i JOIN events e ON e.id = i.event_id
               WHERE i.until_utc < ?""",
            (upper,),
        ).fetchall()
        if not short:
            return set()
        now = datetime.now(timezone.utc)
        near = [int(r[0]) for r in short if end <= index.horizon_base(from_utc_text(r[1]), now) + index.INDEX_REACH]
        if near:
            with self.transaction():
                for event_id in near:
                    index.reindex(self._conn, event_id, now, until=end + index.INDEX_AHEAD)
        return {int(r[0]) for r in short} - set(near)

    def _events_from_rows(self, rows: list[sqlite3.Row]) -> list[Event]:
        return [Event(**fields) for fields in self._fields_of_rows(rows)]

    def _fields_of_rows(self, rows: list[sqlite3.Row]) -> list[dict[str, Any]]:
        """The ``Event`` fields of ``rows``, their attendees and reminders read for all of them in
        two queries (a day search over a calendar of series returns ~140: two queries per event
        were most of its time)."""
        if not rows:
            return []
        ids = json.dumps([int(r["id"]) for r in rows])
        names: dict[int, list[str]] = {}
        for event_id, name in self._conn.execute(
            """SELECT a.event_id, p.name FROM event_attendees a JOIN people p ON p.id = a.person_id
               WHERE a.event_id IN (SELECT value FROM json_each(?)) ORDER BY a.event_id, p.name""",
            (ids,),
        ).fetchall():
            names.setdefault(int(event_id), []).append(str(name))
        minutes: dict[int, list[int]] = {}
        for event_id, value in self._conn.execute(
            """SELECT event_id, minutes_before FROM reminders WHERE event_id IN (SELECT value FROM json_each(?))
               ORDER BY event_id, minutes_before""",
            (ids,),
        ).fetchall():
            minutes.setdefault(int(event_id), []).append(int(value))
        return [_fields_of_row(r, tuple(names.get(int(r["id"]), ())), tuple(minutes.get(int(r["id"]), ()))) for r in rows]

    def _occurrences(self, series: Event, start: datetime, end: datetime) -> list[Event]:
        """Occurrences of ``series`` overlapping [start, end), overrides applied (call under the lock)."""
        length = series.end - series.start
        overrides = {
            str(r["original_utc"]): r for r in self._conn.execute(
                "SELECT * FROM event_overrides WHERE event_id = ?", (series.id,)
            ).fetchall()
        }
        found: list[Event] = []
        for original in rec.starts_between(series.recurrence or "", series.start, start - length, end):
            row = overrides.pop(to_utc_text(original), None)
            occurrence = _overridden(series, original, row)
            if occurrence.start < end and occurrence.end > start:
                found.append(occurrence)
        zone = ZoneInfo(series.tz)
        for key, row in overrides.items():  # moved in from an original start outside the window
            original = from_utc_text(key).astimezone(zone)
            if row["start_utc"] < to_utc_text(end) and row["end_utc"] > to_utc_text(start) and rec.starts_between(
                series.recurrence or "", series.start, original, original + timedelta(seconds=1)
            ):
                found.append(_overridden(series, original, row))
        return found

    def _apply_override(self, series: Event, original: datetime) -> Event:
        row = self._conn.execute(
            "SELECT * FROM event_overrides WHERE event_id = ? AND original_utc = ?", (series.id, to_utc_text(original))
        ).fetchone()
        return _overridden(series, original, row)

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
                for o in sorted(self._occurrences(event, first, first + SNAPSHOT_WINDOW), key=lambda o: o.start)
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
        return self._events_from_rows([row])[0]


def _ceil_text(moment: datetime) -> str:
    """``to_utc_text`` rounded up to the second: stored times are whole seconds, so a stored
    start is before ``moment`` exactly when its text is before this one."""
    return to_utc_text(moment + timedelta(microseconds=1_000_000 - moment.microsecond) if moment.microsecond else moment)


def _fields_of_row(row: sqlite3.Row, attendees: tuple[str, ...], reminders: tuple[int, ...]) -> dict[str, Any]:
    """An ``Event``'s fields from its stored row, in field order."""
    zone = ZoneInfo(row["tz"])
    return {
        "id": int(row["id"]),
        "title": str(row["title"]),
        "start": from_utc_text(row["start_utc"]).astimezone(zone),
        "end": from_utc_text(row["end_utc"]).astimezone(zone),
        "tz": str(row["tz"]),
        "location": row["location"],
        "notes": row["notes"],
        "attendees": attendees,
        "created_at": from_utc_text(row["created_at"]),
        "updated_at": from_utc_text(row["updated_at"]),
        "remind_minutes_before": reminders,
        "uid": str(row["uid"] or ""),
        "recurrence": row["recurrence"],
        "all_day": bool(row["all_day"]),
        "transparent": bool(row["transparent"]),
        "ics_extra": row["ics_extra"],
        "original_start": None,
    }


def _occurrence_of(series: dict[str, Any], start: datetime, end: datetime, original: datetime) -> Event:
    """``replace(Event(**series), start=start, end=end, original_start=original)``, made by
    filling the instance's ``__dict__`` from the series' fields: the frozen dataclass' ``__init__``
    costs ~5 times as much (18 ``object.__setattr__`` calls), and a day search over 1,000 weekly
    series builds ~140 of these. The same object while ``Event`` has no ``__post_init__`` and no
    slots (a test checks)."""
    made = object.__new__(Event)
    fields = made.__dict__
    fields.update(series)
    fields["start"], fields["end"], fields["original_start"] = start, end, original
    return made


def _overridden(series: Event, original: datetime, row: sqlite3.Row | None) -> Event:
    """One occurrence of ``series`` at ``original``, with its override row if there is one."""
    zone = ZoneInfo(series.tz)
    if row is None:
        return replace(series, start=original, end=original + (series.end - series.start), original_start=original)
    return replace(
        series, title=str(row["title"]), start=from_utc_text(row["start_utc"]).astimezone(zone),
        end=from_utc_text(row["end_utc"]).astimezone(zone), location=row["location"], notes=row["notes"],
        ics_extra=row["ics_extra"], original_start=original,
    )


def _busy_from_row(row: sqlite3.Row) -> Busy:
    return Busy(int(row[0]), str(row[1]), from_utc_text(row[2]), from_utc_text(row[3]), row[4])


def _matching(events: list[Event], query: str | None) -> list[Event]:
    """Case-insensitive (Unicode-aware) match on title, location, notes and attendee names."""
    if not query or not query.strip():
        return events
    needle = query.strip().casefold()

    def text(e: Event) -> str:
        return " ".join([e.title, e.location or "", e.notes or "", *e.attendees]).casefold()

    return [e for e in events if needle in text(e)]

