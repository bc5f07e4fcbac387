"""Reading a series' occurrences: from the occurrence index for a day search, or by expanding
its recurrence (``dateutil``, through ``recurrence``) with its overrides applied.

Apart from the store's core because this is the one subtle read: the index and the expansion
must give the same occurrences, in the same order, built the same way (``tests/calendar_expansion``
keeps the expansion-only search as the oracle), and a search past the index's horizon either
extends it or expands, as ``occurrence_index`` explains. Every function runs under the store's
lock; ``indexed_occurrences`` may write, in its own transaction or the caller's.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

from agent.sqlite import Database
from tools.calendar import occurrence_index as index
from tools.calendar import recurrence as rec
from tools.calendar.event_rows import fields_of_rows, occurrence_of, overridden
from tools.calendar.records import Event
from tools.calendar.utc_text import from_utc_text, to_utc_text


def indexed_occurrences(db: Database, start: datetime, end: datetime) -> list[Event]:
    """Occurrences of every series overlapping [start, end), from the occurrence index (call
    under the lock). Each is built as ``series_occurrences`` builds it from the expansion, and they
    come in its order where starts tie: an occurrence found by its original start before one
    moved in from outside the window, then by original start."""
    conn = db.conn
    longest = conn.execute("SELECT MAX(longest_s) FROM occurrence_index").fetchone()[0]
    if longest is None:
        return []  # no series
    upper = _ceil_text(end)
    expanded = _extend_index(db, end, upper)
    rows = conn.execute(
        """SELECT o.event_id, o.original_utc, o.original_wall, o.start_utc,
                  v.original_utc, v.title, v.start_utc, v.end_utc, v.location, v.notes, v.ics_extra
           FROM event_occurrences o LEFT JOIN event_overrides v
                ON v.event_id = o.event_id AND v.original_utc = o.original_utc
           WHERE o.start_utc >= ? AND o.start_utc < ? AND o.end_utc > ?""",
        (to_utc_text(start - timedelta(seconds=longest)), upper, to_utc_text(start)),
    ).fetchall()
    ids = json.dumps(sorted({int(r[0]) for r in rows} | expanded))
    series = {f["id"]: f for f in fields_of_rows(conn, conn.execute(
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
                          occurrence_of(parent, original, original + length, original)))
            continue
        original = index.wall_start(row[1], row[2], zone)
        moved_in = not start - length <= original < end  # series_occurrences takes these from the override
        if moved_in:
            original = datetime.fromisoformat(row[1]).astimezone(zone)
        changed = {**parent, "title": str(row[5]), "location": row[8], "notes": row[9], "ics_extra": row[10]}
        occurrence = occurrence_of(changed, datetime.fromisoformat(row[6]).astimezone(zone),
                                    datetime.fromisoformat(row[7]).astimezone(zone), original)
        found.append((row[3], event_id, moved_in, row[1], occurrence))
    found.sort(key=lambda item: item[:4])
    occurrences = [item[4] for item in found]
    for event_id in sorted(expanded):
        occurrences += series_occurrences(conn, Event(**series[event_id]), start, end)
    return occurrences


def _extend_index(db: Database, end: datetime, upper: str) -> set[int]:
    """Make the occurrence index reach ``end`` (``upper``: its UTC text rounded up) for the
    endless series whose materialised originals stop before it: extended if ``end`` is within
    ``INDEX_REACH``, a write in its own transaction (or the caller's); the ids of the others,
    which this search expands (a search a century ahead must not store a century of a
    daily series)."""
    short = db.conn.execute(
        """SELECT i.event_id, e.start_utc FROM occurrence_index i JOIN events e ON e.id = i.event_id
           WHERE i.until_utc < ?""",
        (upper,),
    ).fetchall()
    if not short:
        return set()
    now = datetime.now(timezone.utc)
    near = [int(r[0]) for r in short if end <= index.horizon_base(from_utc_text(r[1]), now) + index.INDEX_REACH]
    if near:
        with db.transaction():
            for event_id in near:
                index.reindex(db.conn, event_id, now, until=end + index.INDEX_AHEAD)
    return {int(r[0]) for r in short} - set(near)


def series_occurrences(conn: sqlite3.Connection, series: Event, start: datetime, end: datetime) -> list[Event]:
    """Occurrences of ``series`` overlapping [start, end), overrides applied (call under the lock)."""
    length = series.end - series.start
    overrides = {
        str(r["original_utc"]): r for r in conn.execute(
            "SELECT * FROM event_overrides WHERE event_id = ?", (series.id,)
        ).fetchall()
    }
    found: list[Event] = []
    for original in rec.starts_between(series.recurrence or "", series.start, start - length, end):
        row = overrides.pop(to_utc_text(original), None)
        occurrence = overridden(series, original, row)
        if occurrence.start < end and occurrence.end > start:
            found.append(occurrence)
    zone = ZoneInfo(series.tz)
    for key, row in overrides.items():  # moved in from an original start outside the window
        original = from_utc_text(key).astimezone(zone)
        if row["start_utc"] < to_utc_text(end) and row["end_utc"] > to_utc_text(start) and rec.starts_between(
            series.recurrence or "", series.start, original, original + timedelta(seconds=1)
        ):
            found.append(overridden(series, original, row))
    return found


def apply_override(conn: sqlite3.Connection, series: Event, original: datetime) -> Event:
    """The occurrence of ``series`` at ``original``, its override applied if it has one."""
    row = conn.execute(
        "SELECT * FROM event_overrides WHERE event_id = ? AND original_utc = ?", (series.id, to_utc_text(original))
    ).fetchone()
    return overridden(series, original, row)


def _ceil_text(moment: datetime) -> str:
    """``to_utc_text`` rounded up to the second: stored times are whole seconds, so a stored
    start is before ``moment`` exactly when its text is before this one."""
    return to_utc_text(moment + timedelta(microseconds=1_000_000 - moment.microsecond) if moment.microsecond else moment)
