"""The day search before the occurrence index, kept as the oracle the index is checked against.

``expanded_between`` is ``CalendarStore.events_between`` as of main 855c0f0, verbatim but for
``self`` (and ``self._occurrences``, now ``occurrence_reads.series_occurrences``): every series
that may overlap the window is expanded with ``dateutil`` at every call.
"""

from __future__ import annotations

import sqlite3
from datetime import datetime, timedelta
from functools import lru_cache
from zoneinfo import ZoneInfo

from tools.calendar import recurrence as rec
from tools.calendar.occurrence_reads import series_occurrences
from tools.calendar.store import CalendarStore, Event, from_utc_text, to_utc_text


def expanded_between(store: CalendarStore, start: datetime, end: datetime) -> list[Event]:
    """events_between of main 855c0f0: every series that may overlap the window, expanded."""
    lower, upper = to_utc_text(start), to_utc_text(end)
    with store._lock:
        rows = store._conn.execute(
            "SELECT * FROM events WHERE recurrence IS NULL AND start_utc < ? AND end_utc > ? ORDER BY start_utc, id",
            (upper, lower),
        ).fetchall()
        events = [store._event_from_row(r) for r in rows]
        series = store._conn.execute(
            """SELECT * FROM events WHERE recurrence IS NOT NULL AND start_utc < ?
               AND (series_end_utc IS NULL OR series_end_utc > ?)""",
            (upper, lower),
        ).fetchall()
        moved_in = {
            int(r[0]) for r in store._conn.execute(
                "SELECT DISTINCT event_id FROM event_overrides WHERE start_utc < ? AND end_utc > ?", (upper, lower)
            ).fetchall()
        }
        seen = {int(r["id"]) for r in series}
        if moved_in - seen:
            series += store._conn.execute(
                f"SELECT * FROM events WHERE id IN ({','.join('?' * len(moved_in - seen))})", sorted(moved_in - seen)
            ).fetchall()
        for row in series:
            if int(row["id"]) not in moved_in and not _may_occur(row, start, end):
                continue
            events += series_occurrences(store._conn, store._event_from_row(row), start, end)
    events.sort(key=lambda e: (e.start, e.id))
    return events


def _may_occur(row: sqlite3.Row, start: datetime, end: datetime) -> bool:
    first, length = _first_and_length(row["start_utc"], row["end_utc"], row["tz"])
    return bool(rec.starts_between(row["recurrence"], first, start - length, end))


@lru_cache(maxsize=8192)
def _first_and_length(start_utc: str, end_utc: str, tz: str) -> tuple[datetime, timedelta]:
    first = from_utc_text(start_utc)
    return first.astimezone(ZoneInfo(tz)), from_utc_text(end_utc) - first
