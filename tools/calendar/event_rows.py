"""Stored rows made into records: an ``events`` row into an ``Event`` (its attendees and
reminders read alongside), a series and an ``event_overrides`` row into one occurrence, a
``busy`` row into a ``Busy``.

Its own module because both the store's core and the occurrence reads (``occurrence_reads``)
build records from rows, and because this is where the day search spends its time: the
functions below are shaped by measurements (two queries for all rows, not two per row; an
occurrence filled in from its series' fields instead of through the frozen ``__init__``).
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import replace
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from tools.calendar.records import Busy, Event
from tools.calendar.utc_text import from_utc_text


def events_from_rows(conn: sqlite3.Connection, rows: list[sqlite3.Row]) -> list[Event]:
    """The events stored in ``rows`` (rows of ``events``, read under the store's lock)."""
    return [Event(**fields) for fields in fields_of_rows(conn, rows)]


def fields_of_rows(conn: sqlite3.Connection, rows: list[sqlite3.Row]) -> list[dict[str, Any]]:
    """The ``Event`` fields of ``rows``, their attendees and reminders read for all of them in
    two queries (a day search over a calendar of series returns ~140: two queries per event
    were most of its time)."""
    if not rows:
        return []
    ids = json.dumps([int(r["id"]) for r in rows])
    names: dict[int, list[str]] = {}
    for event_id, name in conn.execute(
        """SELECT a.event_id, p.name FROM event_attendees a JOIN people p ON p.id = a.person_id
           WHERE a.event_id IN (SELECT value FROM json_each(?)) ORDER BY a.event_id, p.name""",
        (ids,),
    ).fetchall():
        names.setdefault(int(event_id), []).append(str(name))
    minutes: dict[int, list[int]] = {}
    for event_id, value in conn.execute(
        """SELECT event_id, minutes_before FROM reminders WHERE event_id IN (SELECT value FROM json_each(?))
           ORDER BY event_id, minutes_before""",
        (ids,),
    ).fetchall():
        minutes.setdefault(int(event_id), []).append(int(value))
    return [fields_of_row(r, tuple(names.get(int(r["id"]), ())), tuple(minutes.get(int(r["id"]), ()))) for r in rows]


def fields_of_row(row: sqlite3.Row, attendees: tuple[str, ...], reminders: tuple[int, ...]) -> dict[str, Any]:
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


def occurrence_of(series: dict[str, Any], start: datetime, end: datetime, original: datetime) -> Event:
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


def overridden(series: Event, original: datetime, row: sqlite3.Row | None) -> Event:
    """One occurrence of ``series`` at ``original``, with its override row if there is one."""
    zone = ZoneInfo(series.tz)
    if row is None:
        return replace(series, start=original, end=original + (series.end - series.start), original_start=original)
    return replace(
        series, title=str(row["title"]), start=from_utc_text(row["start_utc"]).astimezone(zone),
        end=from_utc_text(row["end_utc"]).astimezone(zone), location=row["location"], notes=row["notes"],
        ics_extra=row["ics_extra"], original_start=original,
    )


def busy_from_row(row: sqlite3.Row) -> Busy:
    return Busy(int(row[0]), str(row[1]), from_utc_text(row[2]), from_utc_text(row[3]), row[4])
