"""The calendar file's layout: its migrations, from an empty file to ``SCHEMA_VERSION``.

One SQLite file holds two things with separate owners: the events (``store.CalendarStore``:
events, people, attendees, busy times, each event's reminder offsets) and the delivery ledger
(``ledger.DeliveryLedger``: which reminders went out, snoozes, the daily agenda's settings and
deliveries). They share a file because the ledger's rows point at events (deleting an event
deletes its ledger rows, by foreign key) and because a change and its record commit together.

Times are stored as UTC instants in fixed-width ISO text (``utc_text``), so string order is
time order.
"""

from __future__ import annotations

import sqlite3
import uuid
from datetime import datetime, timezone

from agent.sqlite import split_sql
from tools.calendar import occurrence_index


def new_uid() -> str:
    """An event's identity, made once: uuid4-based, as iCalendar's UID (RFC 5545 recommends
    a globally unique, host-qualified value)."""
    return f"{uuid.uuid4()}@iljeong"


def _series_and_identity(conn: sqlite3.Connection) -> None:
    """Version 6. Each event gets a stored UID (existing rows one each, here, once), a recurrence
    (RRULE/RDATE/EXDATE lines, see ``recurrence``) with the last end of a finite series for
    range queries, an all-day flag (start and end are then local midnights), TRANSP (a
    transparent event is not busy), and the iCalendar properties we do not model (raw content
    lines, written back on export). ``event_overrides`` holds one occurrence moved or retitled
    (RECURRENCE-ID); a cancelled occurrence is an EXDATE of its series."""
    for statement in split_sql(
        """
        ALTER TABLE events ADD COLUMN uid TEXT;
        ALTER TABLE events ADD COLUMN recurrence TEXT;
        ALTER TABLE events ADD COLUMN series_end_utc TEXT;
        ALTER TABLE events ADD COLUMN all_day INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE events ADD COLUMN transparent INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE events ADD COLUMN ics_extra TEXT;
        CREATE TABLE event_overrides (
            event_id INTEGER NOT NULL REFERENCES events(id) ON DELETE CASCADE,
            original_utc TEXT NOT NULL,
            title TEXT,
            start_utc TEXT NOT NULL,
            end_utc TEXT NOT NULL,
            location TEXT,
            notes TEXT,
            ics_extra TEXT,
            PRIMARY KEY (event_id, original_utc),
            CHECK (end_utc > start_utc)
        );
        CREATE INDEX event_overrides_start ON event_overrides(start_utc);
        CREATE INDEX events_series ON events(start_utc) WHERE recurrence IS NOT NULL;
        """
    ):
        conn.execute(statement)
    for (event_id,) in conn.execute("SELECT id FROM events ORDER BY id").fetchall():
        conn.execute("UPDATE events SET uid = ? WHERE id = ?", (new_uid(), event_id))
    conn.execute("CREATE UNIQUE INDEX events_uid ON events(uid)")


def _occurrence_index(conn: sqlite3.Connection) -> None:
    """Version 8. Each series' occurrences materialised (see ``occurrence_index``), filled here
    for the series the file already has, so that a day search is a range query instead of a
    ``dateutil`` expansion of every series; and an index on the start of one-off events alone,
    which a day search reads beside it.

    ``event_occurrences``: one row per occurrence, its original start (the identity) and its
    start and end as shown (an override's if it was moved); ``original_wall`` only where the
    original's wall time does not survive a trip through UTC (``dateutil`` yields a start in a
    DST gap, 02:30 on the day New York skips to 03:00, as that wall time). ``occurrence_index``:
    per series, the originals before ``until_utc`` are there (NULL: all of them, a finite
    series), and its longest occurrence in seconds (the range query's lower bound)."""
    for statement in split_sql(
        """
        CREATE TABLE event_occurrences (
            event_id INTEGER NOT NULL REFERENCES events(id) ON DELETE CASCADE,
            original_utc TEXT NOT NULL,
            original_wall TEXT,
            start_utc TEXT NOT NULL,
            end_utc TEXT NOT NULL,
            PRIMARY KEY (event_id, original_utc)
        ) WITHOUT ROWID;
        CREATE INDEX event_occurrences_start ON event_occurrences(start_utc, end_utc);
        CREATE TABLE occurrence_index (
            event_id INTEGER PRIMARY KEY REFERENCES events(id) ON DELETE CASCADE,
            until_utc TEXT,
            longest_s INTEGER NOT NULL
        );
        CREATE INDEX occurrence_index_until ON occurrence_index(until_utc) WHERE until_utc IS NOT NULL;
        CREATE INDEX occurrence_index_longest ON occurrence_index(longest_s);
        CREATE INDEX events_single_start ON events(start_utc) WHERE recurrence IS NULL;
        """
    ):
        conn.execute(statement)
    occurrence_index.build(conn, datetime.now(timezone.utc))


def _queue_trigger(table: str, change: str, uid_of: str) -> str:
    """One trigger of migration 7: a change to ``table`` queues its event's UID for the CalDAV push."""
    return f"""
    CREATE TRIGGER caldav_queue_{table}_{change.lower()} AFTER {change} ON {table} BEGIN
        INSERT INTO caldav_queue (uid) {uid_of}
            ON CONFLICT (uid) DO UPDATE SET seq = seq + 1, queued_utc = excluded.queued_utc;
    END;
    """


# An event's own row names its UID; an override's or an attendee's row reaches it by event_id
# (and finds none once a cascade has deleted the event: the event's own trigger queued it then).
_QUEUE_TRIGGERS = "".join(
    [_queue_trigger("events", change, f"VALUES ({row}.uid)")
     for change, row in (("INSERT", "NEW"), ("UPDATE", "NEW"), ("DELETE", "OLD"))]
    + [_queue_trigger(table, change, f"SELECT uid FROM events WHERE id = {row}.event_id AND true")
       for table, changes in (("event_overrides", ("INSERT", "UPDATE", "DELETE")), ("event_attendees", ("INSERT", "DELETE")))
       for change in changes for row in [("OLD" if change == "DELETE" else "NEW")]]
)


# Forward migrations (run by agent.sqlite.Database): MIGRATIONS[i] takes a file from version i
# to version i + 1. Never edit a released step; append a new one.
MIGRATIONS: list[str] = [
    # 1: events, people, attendees
    """
    CREATE TABLE events (
        id INTEGER PRIMARY KEY,
        title TEXT NOT NULL,
        start_utc TEXT NOT NULL,
        end_utc TEXT NOT NULL,
        tz TEXT NOT NULL,
        location TEXT,
        notes TEXT,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        CHECK (end_utc > start_utc)
    );
    CREATE INDEX events_start ON events(start_utc);
    CREATE TABLE people (
        id INTEGER PRIMARY KEY,
        name TEXT NOT NULL UNIQUE COLLATE NOCASE
    );
    CREATE TABLE event_attendees (
        event_id INTEGER NOT NULL REFERENCES events(id) ON DELETE CASCADE,
        person_id INTEGER NOT NULL REFERENCES people(id) ON DELETE CASCADE,
        PRIMARY KEY (event_id, person_id)
    );
    """,
    # 2: people's busy times, so common free time is real data
    """
    CREATE TABLE busy (
        id INTEGER PRIMARY KEY,
        person_id INTEGER NOT NULL REFERENCES people(id) ON DELETE CASCADE,
        start_utc TEXT NOT NULL,
        end_utc TEXT NOT NULL,
        label TEXT,
        CHECK (end_utc > start_utc)
    );
    CREATE INDEX busy_person_start ON busy(person_id, start_utc);
    """,
    # 3: reminders, what was sent (each reminder exactly once, across restarts), snoozes,
    #    and the daily agenda's per-chat setting and delivery record
    """
    CREATE TABLE reminders (
        event_id INTEGER NOT NULL REFERENCES events(id) ON DELETE CASCADE,
        minutes_before INTEGER NOT NULL CHECK (minutes_before >= 0),
        PRIMARY KEY (event_id, minutes_before)
    );
    CREATE TABLE sent_reminders (
        event_id INTEGER NOT NULL REFERENCES events(id) ON DELETE CASCADE,
        minutes_before INTEGER NOT NULL,
        due_utc TEXT NOT NULL,
        sent_at TEXT NOT NULL,
        outcome TEXT NOT NULL DEFAULT 'sent',
        PRIMARY KEY (event_id, minutes_before, due_utc)
    );
    CREATE TABLE snoozes (
        id INTEGER PRIMARY KEY,
        event_id INTEGER NOT NULL REFERENCES events(id) ON DELETE CASCADE,
        due_utc TEXT NOT NULL,
        sent_at TEXT
    );
    CREATE TABLE agenda_settings (
        target TEXT PRIMARY KEY,
        enabled INTEGER NOT NULL,
        at_time TEXT
    );
    CREATE TABLE agenda_sent (
        target TEXT NOT NULL,
        day TEXT NOT NULL,
        sent_at TEXT NOT NULL,
        PRIMARY KEY (target, day)
    );
    """,
    # 4: event ids are never reused (AUTOINCREMENT), so an id quoted in an open approval, a
    #    reminder button or the model's context can never come to mean a later event. SQLite
    #    cannot add AUTOINCREMENT in place: the table is rebuilt with its rows and ids (run
    #    with foreign keys off, see agent.sqlite, so the rebuild does not cascade).
    """
    CREATE TABLE events_v4 (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        title TEXT NOT NULL,
        start_utc TEXT NOT NULL,
        end_utc TEXT NOT NULL,
        tz TEXT NOT NULL,
        location TEXT,
        notes TEXT,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        CHECK (end_utc > start_utc)
    );
    INSERT INTO events_v4 (id, title, start_utc, end_utc, tz, location, notes, created_at, updated_at)
        SELECT id, title, start_utc, end_utc, tz, location, notes, created_at, updated_at FROM events;
    DROP TABLE events;
    ALTER TABLE events_v4 RENAME TO events;
    CREATE INDEX events_start ON events(start_utc);
    """,
    # 5: the version moves into the file header (PRAGMA user_version, where agent.sqlite keeps
    #    every file's version); the table that held it until version 4 goes.
    """
    DROP TABLE IF EXISTS schema_version;
    """,
    # 6: calendars as people keep them (see _series_and_identity)
    _series_and_identity,
    # 7: two-way CalDAV sync (tools/calendar/sync). The push queue is filled by triggers, so every
    #    change to an event, its occurrences or its attendees is queued in the same transaction as
    #    the change, whichever code path made it (a tool, an .ics import, a split series); a
    #    crash can lose neither the change nor its place in the queue. The queue holds UIDs, not
    #    operations: a push sends the event as it is then (or deletes it), so ten edits are one PUT.
    #    ``seq`` grows with every change, so a push that raced a newer change leaves it queued.
    #    Every event already in the file is queued once: the first sync sends it to the server.
    #    ``caldav_items.sent`` is a PUT in flight, written before it goes out: after a crash that
    #    lost the server's answer, the server's copy is recognised as ours, not as a phone's change.
    """
    CREATE TABLE caldav_queue (
        uid TEXT PRIMARY KEY,
        seq INTEGER NOT NULL DEFAULT 1,
        queued_utc TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now')),
        attempts INTEGER NOT NULL DEFAULT 0,
        last_error TEXT
    );
    INSERT INTO caldav_queue (uid) SELECT uid FROM events;
    CREATE TABLE caldav_items (
        uid TEXT PRIMARY KEY,
        collection TEXT NOT NULL,
        href TEXT NOT NULL,
        etag TEXT,
        base TEXT,
        sent TEXT
    );
    CREATE TABLE caldav_collections (
        url TEXT PRIMARY KEY,
        sync_token TEXT,
        pulled_utc TEXT
    );
    CREATE TABLE caldav_status (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        ok_utc TEXT,
        offline_since_utc TEXT,
        last_error TEXT,
        last_report TEXT
    );
    CREATE TABLE caldav_conflicts (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        uid TEXT NOT NULL,
        title TEXT NOT NULL,
        field TEXT NOT NULL,
        local_value TEXT,
        server_value TEXT,
        at_utc TEXT NOT NULL,
        told INTEGER NOT NULL DEFAULT 0
    );
    """
    + _QUEUE_TRIGGERS,
    # 8: the occurrence index (see _occurrence_index)
    _occurrence_index,
]

SCHEMA_VERSION = len(MIGRATIONS)


def legacy_version(conn: sqlite3.Connection) -> int:
    """The version of a file written before version 5, which kept it in a ``schema_version`` table."""
    if conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'").fetchone() is None:
        return 0
    return int(conn.execute("SELECT MAX(version) FROM schema_version").fetchone()[0] or 0)

