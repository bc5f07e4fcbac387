"""The occurrence index: each series' occurrences, materialised in SQLite from its recurrence.

Until version 8 a day search expanded, with ``dateutil``, every series that might touch the day,
at every call (a day over 1,000 weekly series cost ~100-400 times a day over 1,000
single events). ``event_occurrences`` holds one row per occurrence of each series: its original
start (its identity, RECURRENCE-ID), and its start and end as the calendar shows them (the
override's when it was moved), so that a search is one range query on ``start_utc``.
``occurrence_index`` says, per series, up to where its originals are materialised and how long
its longest occurrence is (the range query's lower bound: an occurrence overlapping a window
starts at most that long before it).

The rows are derived data, never edited: expansion stays ``recurrence``'s (``dateutil``), and
``reindex`` rebuilds one series' rows from its stored row and overrides. The store calls it in
the transaction of every change to a series, its recurrence or its overrides, so no reader sees
the index disagree with them (a deleted event's rows go by foreign key).

A finite series is materialised whole. An endless one (or one too long for ``last_start`` to
walk) only up to a horizon: ``INDEX_AHEAD`` past now, or past its first start if that is later.
A search that reaches past a series' horizon extends it, if the search ends within
``INDEX_REACH`` of that same base; beyond, the store expands that series for that search, as
every search did before (right, only not fast). An overridden occurrence is indexed whatever
its original start, since it may have been moved anywhere. Every walk that fills or extends the
index is ``recurrence``'s, so it is bounded as those are (``bounded_rules``): a series stored
before its rule was checked, whose rule never matches, costs one bounded walk, not one to 9999.
"""

from __future__ import annotations

import sqlite3
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

from tools.calendar import recurrence as rec
from tools.calendar.utc_text import from_utc_text, to_utc_text

INDEX_AHEAD = timedelta(days=2 * 366)  # an endless series is materialised this far past now (weekly: ~105 rows)
INDEX_REACH = timedelta(days=30 * 366)  # a search ending within this of now extends the index; beyond, it expands


def horizon_base(first: datetime, now: datetime) -> datetime:
    """What an endless series' horizon and reach count from: now, or its first start if later."""
    return max(first, now)


def reindex(conn: sqlite3.Connection, event_id: int, now: datetime, until: datetime | None = None) -> None:
    """Rebuild one event's rows from its stored row and overrides: none for a one-off or deleted
    event, every occurrence of a finite series, an endless one's before ``until`` (default:
    ``INDEX_AHEAD`` past ``horizon_base``). Run it inside the transaction that changed the event.

    Works on any row factory (the migration's connection has none)."""
    conn.execute("DELETE FROM event_occurrences WHERE event_id = ?", (event_id,))
    row = conn.execute(
        "SELECT start_utc, end_utc, tz, recurrence, series_end_utc FROM events WHERE id = ?", (event_id,)
    ).fetchone()
    if row is None or row[3] is None:
        conn.execute("DELETE FROM occurrence_index WHERE event_id = ?", (event_id,))
        return
    start_utc, end_utc, tz, text, series_end = row[0], row[1], row[2], row[3], row[4]
    zone = ZoneInfo(tz)
    first = from_utc_text(start_utc).astimezone(zone)
    length = from_utc_text(end_utc).astimezone(zone) - first  # on the wall clock, as the store adds it
    limit = None
    if series_end is None:
        limit = from_utc_text(to_utc_text(until or horizon_base(first, now) + INDEX_AHEAD))  # whole seconds
    rows: dict[str, tuple[int, str, str | None, str, str]] = {}
    for original in rec.starts_before(text, first, limit):
        key = _utc_text(original)
        rows[key] = (event_id, key, _wall(original, key, zone), key, _utc_text(original + length))
    limit_text = to_utc_text(limit) if limit is not None else None
    for original_utc, start, end in conn.execute(
        "SELECT original_utc, start_utc, end_utc FROM event_overrides WHERE event_id = ?", (event_id,)
    ).fetchall():
        if original_utc in rows:
            rows[original_utc] = (*rows[original_utc][:3], start, end)
        elif limit_text is not None and original_utc >= limit_text:
            original = from_utc_text(original_utc).astimezone(zone)
            if rec.starts_between(text, first, original, original + timedelta(seconds=1)):
                rows[original_utc] = (event_id, original_utc, None, start, end)
    conn.executemany(
        "INSERT INTO event_occurrences (event_id, original_utc, original_wall, start_utc, end_utc) VALUES (?, ?, ?, ?, ?)",
        rows.values(),
    )
    longest = conn.execute(
        "SELECT MAX(strftime('%s', end_utc) - strftime('%s', start_utc)) FROM event_occurrences WHERE event_id = ?", (event_id,)
    ).fetchone()[0]
    conn.execute(
        "INSERT OR REPLACE INTO occurrence_index (event_id, until_utc, longest_s) VALUES (?, ?, ?)",
        (event_id, limit_text, int(longest or 0)),
    )


def build(conn: sqlite3.Connection, now: datetime) -> None:
    """Every series' rows (a file migrated to version 8, whose series have none yet)."""
    for (event_id,) in conn.execute("SELECT id FROM events WHERE recurrence IS NOT NULL ORDER BY id").fetchall():
        reindex(conn, int(event_id), now)


def wall_start(original_utc: str, wall: str | None, zone: ZoneInfo) -> datetime:
    """An indexed original start as the series' expansion gives it (see ``original_wall``)."""
    if wall is not None:
        return datetime.fromisoformat(wall).replace(tzinfo=zone)
    return from_utc_text(original_utc).astimezone(zone)


def _utc_text(moment: datetime) -> str:
    """``to_utc_text(moment)``, about three times faster (a rebuild writes two per occurrence,
    ~2,000 for a daily series): ``isoformat`` instead of ``strftime``, which writes the same
    text for the years 1000-9999 (it does not pad earlier ones, so those go to ``to_utc_text``)."""
    utc = moment.astimezone(timezone.utc)
    if utc.year < 1000:
        return to_utc_text(moment)
    return utc.isoformat(timespec="seconds")[:-6] + "Z"  # "+00:00" -> "Z"


def _wall(original: datetime, key: str, zone: ZoneInfo) -> str | None:
    """The naive wall time of ``original`` if UTC ``key`` does not give it back, else None."""
    if original.utcoffset() == original.replace(fold=1 - original.fold).utcoffset():
        return None  # outside a DST gap or overlap, where a wall time and an instant are one-to-one
    back = from_utc_text(key).astimezone(zone)
    if back.replace(tzinfo=None) == original.replace(tzinfo=None) and back.fold == original.fold:
        return None
    return original.replace(tzinfo=None).isoformat()
