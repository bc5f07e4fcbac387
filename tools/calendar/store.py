"""The event store: events, people, attendees, busy times and each event's reminder offsets.

Times are aware datetimes here and UTC text on disk (``schema.to_utc_text``), plus the IANA
zone an event was made in. Every change runs inside ``transaction()`` so a tool call fully
happens or not at all, even if the process is killed half-way.

The store owns the calendar file (``schema.MIGRATIONS``, opened by ``agent.sqlite``); what the
bot delivered from it lives in the same file but in its own module, ``ledger.DeliveryLedger``,
reached as ``store.ledger``.
"""

from __future__ import annotations

import sqlite3
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Iterable, Iterator
from zoneinfo import ZoneInfo

from agent.sqlite import Database
from tools.calendar.ledger import DeliveryLedger
from tools.calendar.schema import MIGRATIONS, SCHEMA_VERSION, from_utc_text, legacy_version, now_text, to_utc_text

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


@dataclass(frozen=True)
class Busy:
    id: int
    person: str
    start: datetime  # aware, UTC
    end: datetime
    label: str | None = None


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
    ) -> Event:
        start_text, end_text = to_utc_text(start), to_utc_text(end)
        if end_text <= start_text:
            raise ValueError("an event must end after it starts")
        zone_name = tz or self.tz
        ZoneInfo(zone_name)
        now = now_text()
        with self.transaction():
            cur = self._conn.execute(
                """INSERT INTO events (title, start_utc, end_utc, tz, location, notes, created_at, updated_at)
                   VALUES (?, ?, ?, ?, ?, ?, ?, ?)""",
                (title, start_text, end_text, zone_name, location, notes, now, now),
            )
            event_id = int(cur.lastrowid or 0)
            self._set_attendees(event_id, attendees)
            self._set_reminders(event_id, remind_minutes_before)
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
    ) -> Event | None:
        """Change the given fields (``UNSET`` leaves one alone); None if there is no such event.

        Sent reminders are recorded by due time, so moving an event re-arms its reminders.
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
            self._conn.execute(
                """UPDATE events SET title = ?, start_utc = ?, end_utc = ?, location = ?, notes = ?, updated_at = ?
                   WHERE id = ?""",
                (
                    current.title if title is UNSET else title,
                    start_text,
                    end_text,
                    current.location if location is UNSET else location,
                    current.notes if notes is UNSET else notes,
                    now_text(),
                    event_id,
                ),
            )
            if attendees is not UNSET:
                self._conn.execute("DELETE FROM event_attendees WHERE event_id = ?", (event_id,))
                self._set_attendees(event_id, attendees or ())
            if remind_minutes_before is not UNSET:
                self._conn.execute("DELETE FROM reminders WHERE event_id = ?", (event_id,))
                self._set_reminders(event_id, remind_minutes_before or ())
            return self.get_event(event_id)

    def delete_event(self, event_id: int) -> bool:
        with self.transaction():
            cur = self._conn.execute("DELETE FROM events WHERE id = ?", (event_id,))
        return cur.rowcount > 0

    def events_between(self, start: datetime, end: datetime, query: str | None = None) -> list[Event]:
        """Events overlapping [start, end), optionally only those whose text mentions ``query``."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT * FROM events WHERE start_utc < ? AND end_utc > ? ORDER BY start_utc, id",
                (to_utc_text(end), to_utc_text(start)),
            ).fetchall()
            events = [self._event_from_row(r) for r in rows]
        return _matching(events, query)

    def all_events(self, query: str | None = None) -> list[Event]:
        with self._lock:
            rows = self._conn.execute("SELECT * FROM events ORDER BY start_utc, id").fetchall()
            events = [self._event_from_row(r) for r in rows]
        return _matching(events, query)

    def conflicts(self, start: datetime, end: datetime, exclude_id: int | None = None) -> list[Event]:
        return [e for e in self.events_between(start, end) if e.id != exclude_id]

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

    def reminder_rows(self, start_after: datetime) -> list[tuple[int, int, datetime]]:
        """(event id, minutes before, event start UTC) of events starting after ``start_after``."""
        with self._lock:
            rows = self._conn.execute(
                """SELECT r.event_id, r.minutes_before, e.start_utc FROM reminders r JOIN events e ON e.id = r.event_id
                   WHERE e.start_utc > ? ORDER BY e.start_utc, r.event_id, r.minutes_before""",
                (to_utc_text(start_after),),
            ).fetchall()
        return [(int(r[0]), int(r[1]), from_utc_text(r[2])) for r in rows]

    # -- internals ---------------------------------------------------------------------------

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
        zone = ZoneInfo(row["tz"])
        names = self._conn.execute(
            """SELECT p.name FROM event_attendees a JOIN people p ON p.id = a.person_id
               WHERE a.event_id = ? ORDER BY p.name""",
            (row["id"],),
        ).fetchall()
        reminders = self._conn.execute(
            "SELECT minutes_before FROM reminders WHERE event_id = ? ORDER BY minutes_before", (row["id"],)
        ).fetchall()
        return Event(
            id=int(row["id"]),
            title=str(row["title"]),
            start=from_utc_text(row["start_utc"]).astimezone(zone),
            end=from_utc_text(row["end_utc"]).astimezone(zone),
            tz=str(row["tz"]),
            location=row["location"],
            notes=row["notes"],
            attendees=tuple(str(n[0]) for n in names),
            created_at=from_utc_text(row["created_at"]),
            updated_at=from_utc_text(row["updated_at"]),
            remind_minutes_before=tuple(int(r[0]) for r in reminders),
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

