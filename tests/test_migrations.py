"""Files written by the program before agent/sqlite.py open with today's code, data and ids intact.

Each old file is built here from the SQL the old code ran, copied verbatim (not from today's
migration lists, which could drift), with rows in every table, then opened the way the program
opens it. The calendar's versions 3 and 4 kept their version in a ``schema_version`` table;
sessions, trajectories and the bot's inbox/outbox file kept none.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import datetime, timezone
from pathlib import Path

import pytest

from agent.sessions import SessionStore
from agent.trajectory import TrajectoryLog
from bot.inbox import Inbox
from bot.outbox import Outbox
from bot.spool import MIGRATIONS as BOT_MIGRATIONS
from tools.calendar.store import SCHEMA_VERSION, CalendarStore

UTC = timezone.utc

# tools/calendar/store.py MIGRATIONS[0:4] as of main c2eb4cd, verbatim.
CALENDAR_V1_TO_V4 = [
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
]

# Rows in every table of a version-3 file. Events 3 and 4 were deleted before (ids with a gap).
CALENDAR_ROWS = [
    "INSERT INTO events VALUES (1, '치과', '2026-12-01T06:00:00Z', '2026-12-01T07:00:00Z', 'Asia/Seoul', "
    "'강남역', 'scaling', '2026-11-01T00:00:00Z', '2026-11-02T00:00:00Z')",
    "INSERT INTO events VALUES (2, 'Standup', '2026-12-02T00:00:00Z', '2026-12-02T00:30:00Z', 'Asia/Seoul', "
    "NULL, NULL, '2026-11-01T00:00:00Z', '2026-11-01T00:00:00Z')",
    "INSERT INTO events VALUES (5, 'Dinner', '2026-12-03T10:00:00Z', '2026-12-03T12:00:00Z', 'Europe/Paris', "
    "'Bistro', NULL, '2026-11-05T00:00:00Z', '2026-11-05T00:00:00Z')",
    "INSERT INTO people VALUES (1, 'Mina'), (2, '민수')",
    "INSERT INTO event_attendees VALUES (1, 2), (2, 1), (2, 2)",
    "INSERT INTO busy VALUES (4, 1, '2026-12-01T01:00:00Z', '2026-12-01T02:00:00Z', 'gym')",
    "INSERT INTO reminders VALUES (1, 30), (2, 10), (2, 0)",
    "INSERT INTO sent_reminders VALUES (2, 10, '2026-12-01T23:50:00Z', '2026-12-01T23:50:03Z', 'sent')",
    "INSERT INTO sent_reminders VALUES (1, 30, '2026-12-01T05:30:00Z', '2026-12-01T08:00:00Z', 'skipped')",
    "INSERT INTO snoozes VALUES (1, 2, '2026-12-02T00:00:00Z', '2026-12-02T00:00:01Z'), "
    "(2, 2, '2026-12-02T00:10:00Z', NULL)",
    "INSERT INTO agenda_settings VALUES ('chat:1', 0, '07:30'), ('chat:2', 1, NULL)",
    "INSERT INTO agenda_sent VALUES ('chat:2', '2026-12-01', '2026-11-30T23:00:00Z')",
]


def calendar_file_of_main(path: Path, version: int) -> None:
    """The file main's CalendarStore left at ``version``: WAL, steps in one transaction, and a
    ``schema_version`` row per step (with rows added while the file was at version 3)."""
    raw = sqlite3.connect(path, isolation_level=None)
    raw.execute("PRAGMA journal_mode = WAL")
    raw.execute("PRAGMA foreign_keys = ON")
    raw.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL, applied_at TEXT NOT NULL)")
    for step in range(3):
        raw.executescript(CALENDAR_V1_TO_V4[step])
        raw.execute("INSERT INTO schema_version VALUES (?, '2026-11-01T00:00:00Z')", (step + 1,))
    for row in CALENDAR_ROWS:
        raw.execute(row)
    if version == 4:
        raw.execute("PRAGMA foreign_keys = OFF")  # as main's _migrate ran the rebuild
        raw.executescript(CALENDAR_V1_TO_V4[3])
        raw.execute("INSERT INTO schema_version VALUES (4, '2026-11-20T00:00:00Z')")
        raw.execute("PRAGMA foreign_keys = ON")
    assert raw.execute("PRAGMA user_version").fetchone()[0] == 0
    raw.close()


def schema_of(path: Path) -> set[tuple[str, str, str | None]]:
    with sqlite3.connect(path) as raw:
        return set(raw.execute("SELECT type, name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_autoindex%'"))


@pytest.mark.parametrize("version", [3, 4])
def test_a_calendar_file_of_version_3_or_4_opens_with_its_data_ids_and_ledger_at_the_current_version(
    tmp_path: Path, version: int
) -> None:
    path = tmp_path / "calendar.sqlite3"
    calendar_file_of_main(path, version)
    fresh = tmp_path / "fresh.sqlite3"
    CalendarStore(fresh).close()

    with CalendarStore(path, tz="Asia/Seoul") as store:
        assert store.schema_version() == SCHEMA_VERSION
        events = store.all_events()
        assert [(e.id, e.title, e.tz, e.location, e.notes) for e in events] == [
            (1, "치과", "Asia/Seoul", "강남역", "scaling"),
            (2, "Standup", "Asia/Seoul", None, None),
            (5, "Dinner", "Europe/Paris", "Bistro", None),
        ]
        first = events[0]
        assert (first.start, first.created_at, first.updated_at) == (
            datetime(2026, 12, 1, 6, tzinfo=UTC), datetime(2026, 11, 1, tzinfo=UTC), datetime(2026, 11, 2, tzinfo=UTC))
        assert [(e.attendees, e.remind_minutes_before) for e in events] == [
            (("민수",), (30,)), (("Mina", "민수"), (0, 10)), ((), ())]
        [busy] = store.all_busy()
        assert (busy.id, busy.person, busy.label) == (4, "Mina", "gym")

        ledger = store.ledger
        assert ledger.settled_reminders(datetime(2026, 11, 1, tzinfo=UTC)) == {
            (2, 10, "2026-12-01T23:50:00Z"), (1, 30, "2026-12-01T05:30:00Z")}
        assert ledger.open_snoozes() == [(2, 2, datetime(2026, 12, 2, 0, 10, tzinfo=UTC))]
        assert ledger.agenda_setting("chat:1") == (False, "07:30")
        assert ledger.agenda_setting("chat:2") == (True, None)
        assert ledger.agenda_recorded("chat:2", "2026-12-01")
        # Already sent stays sent: the migration must not re-arm a delivered reminder.
        assert not ledger.settle_reminder(2, 10, datetime(2026, 12, 1, 23, 50, tzinfo=UTC),
                                          datetime(2026, 12, 2, tzinfo=UTC), "sent")

        # Ids are never reused from here on, and the foreign keys still cascade.
        assert store.add_event("New", datetime(2026, 12, 9, 1, tzinfo=UTC), datetime(2026, 12, 9, 2, tzinfo=UTC)).id == 6
        assert store.delete_event(2)
        assert ledger.open_snoozes() == []
        assert ledger.settled_reminders(datetime(2026, 11, 1, tzinfo=UTC)) == {(1, 30, "2026-12-01T05:30:00Z")}
        assert store.get_event(1).attendees == ("민수",)

    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert raw.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert schema_of(path) == schema_of(fresh)  # the migrated file is laid out like a new one
    assert ("table", "schema_version") not in {(t, n) for t, n, _ in schema_of(path)}


# agent/sessions.py SCHEMA as of main c2eb4cd, verbatim.
SESSIONS_OF_MAIN = """
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS messages (
    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    idx INTEGER NOT NULL,
    message TEXT NOT NULL,
    created_at REAL NOT NULL,
    PRIMARY KEY (session_id, idx)
);
CREATE TABLE IF NOT EXISTS current_session (
    conversation TEXT PRIMARY KEY,   -- e.g. "telegram:12345" or "repl"
    session_id TEXT NOT NULL
);
"""


def test_a_sessions_file_of_main_keeps_its_conversations_and_gets_a_version(tmp_path: Path) -> None:
    path = tmp_path / "sessions.sqlite3"
    said = [{"role": "user", "content": "내일 치과"}, {"role": "assistant", "content": "<think>\n</think>\n\nDone."}]
    with sqlite3.connect(path) as raw:
        raw.execute("PRAGMA journal_mode = WAL")
        raw.executescript(SESSIONS_OF_MAIN)
        raw.execute("INSERT INTO sessions VALUES ('repl:abc', 1.0, 2.0)")
        raw.executemany("INSERT INTO messages VALUES ('repl:abc', ?, ?, 1.5)",
                        [(i, json.dumps(m, ensure_ascii=False)) for i, m in enumerate(said)])
        raw.execute("INSERT INTO current_session VALUES ('repl', 'repl:abc')")

    store = SessionStore(path)
    assert store.current("repl") == "repl:abc"
    assert store.history("repl:abc") == said
    store.append("repl:abc", {"role": "user", "content": "thanks"})
    assert [m["content"] for m in store.history("repl:abc")][-1] == "thanks"
    store.close()
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA user_version").fetchone()[0] == 1


# agent/trajectory.py SCHEMA as of main c2eb4cd, verbatim.
TRAJECTORIES_OF_MAIN = """
CREATE TABLE IF NOT EXISTS turns (
    id INTEGER PRIMARY KEY,
    session_id TEXT,
    created_at REAL NOT NULL,
    stop_reason TEXT NOT NULL,
    steps INTEGER NOT NULL,
    tool_calls INTEGER NOT NULL,
    seconds REAL NOT NULL,
    model TEXT NOT NULL,          -- JSON: backend, model path, adapter path, sha256, scale
    turn TEXT NOT NULL            -- JSON: Turn.to_dict()
);
CREATE INDEX IF NOT EXISTS turns_session ON turns(session_id);
"""


def test_a_trajectory_file_of_main_keeps_its_turns_and_gets_a_version(tmp_path: Path) -> None:
    path = tmp_path / "trajectories.sqlite3"
    with sqlite3.connect(path) as raw:
        raw.executescript(TRAJECTORIES_OF_MAIN)
        raw.execute("INSERT INTO turns VALUES (3, 's1', 1.0, 'final', 1, 0, 0.5, ?, ?)",
                    (json.dumps({"backend": "llama"}), json.dumps({"session_id": "s1", "steps": []})))
    log = TrajectoryLog(path)
    assert list(log.turns("s1")) == [{"id": 3, "model": {"backend": "llama"}, "session_id": "s1", "steps": []}]
    log.close()
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA user_version").fetchone()[0] == 1


# bot/inbox.py and bot/outbox.py SCHEMA as of main c2eb4cd, verbatim.
BOT_FILE_OF_MAIN = """
CREATE TABLE IF NOT EXISTS updates (
    update_id INTEGER PRIMARY KEY,
    body TEXT NOT NULL,           -- the update as Telegram sent it (JSON, lone surrogates replaced)
    state TEXT NOT NULL,          -- 'pending' | 'done' | 'failed'
    received_at REAL NOT NULL,
    done_at REAL,
    error TEXT                    -- why a 'failed' update failed
);
CREATE INDEX IF NOT EXISTS updates_pending ON updates(state) WHERE state = 'pending';

CREATE TABLE IF NOT EXISTS outbox (
    id INTEGER PRIMARY KEY AUTOINCREMENT,  -- sending order within a chat
    chat_id INTEGER NOT NULL,
    text TEXT NOT NULL,
    markup TEXT,                           -- inline keyboard (JSON) for the last piece, if any
    update_id INTEGER,                     -- the update it answers, if any
    state TEXT NOT NULL,                   -- 'queued' | 'sent' | 'dropped' | 'late'
    created_at REAL NOT NULL,              -- wall clock
    next_at REAL NOT NULL,                 -- not tried again before this
    attempts INTEGER NOT NULL DEFAULT 0,
    pieces_sent INTEGER NOT NULL DEFAULT 0,
    last_error TEXT,
    document BLOB,                         -- a file to send instead of text (the text is its caption)
    filename TEXT                          -- its name, set exactly when document is
);
CREATE INDEX IF NOT EXISTS outbox_queued ON outbox(chat_id, id) WHERE state = 'queued';
"""


@pytest.mark.parametrize("outbox_first", [False, True])
def test_the_bot_file_of_main_keeps_pending_updates_and_queued_replies(tmp_path: Path, outbox_first: bool) -> None:
    """Whichever of Inbox and Outbox opens the file first migrates it for both."""
    path = tmp_path / "telegram_inbox.sqlite3"
    with sqlite3.connect(path) as raw:
        raw.execute("PRAGMA journal_mode = WAL")
        raw.executescript(BOT_FILE_OF_MAIN)
        raw.execute("INSERT INTO updates VALUES (7, '{\"update_id\": 7}', 'pending', 1.0, NULL, NULL)")
        raw.execute("INSERT INTO updates VALUES (8, '{\"update_id\": 8}', 'failed', 1.0, 2.0, 'boom')")
        raw.execute("INSERT INTO outbox (id, chat_id, text, update_id, state, created_at, next_at, attempts) "
                    "VALUES (41, 5, 'queued before the restart', 6, 'queued', 1.0, 1.0, 2)")

    if outbox_first:
        outbox, inbox = Outbox(path), Inbox(path)
    else:
        inbox, outbox = Inbox(path), Outbox(path)
    assert inbox.pending() == [(7, {"update_id": 7})]
    assert inbox.state(8) == ("failed", "boom")
    assert inbox.next_offset() == 9
    [reply] = outbox.heads()
    assert (reply.id, reply.chat_id, reply.text, reply.attempts) == (41, 5, "queued before the restart", 2)
    assert outbox.put(5, "after") == 42  # the sending order continues after the old rows
    # A pending update from then may have been in progress: a restart reports it, never runs it again.
    assert [(u.update_id, u.started) for u in inbox.unfinished()] == [(7, True)]
    inbox.close()
    outbox.close()
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA user_version").fetchone()[0] == len(BOT_MIGRATIONS)


@pytest.mark.parametrize("version", [3, 5])
def test_each_event_of_an_older_calendar_file_gets_its_uid_once_and_keeps_its_id(tmp_path: Path, version: int) -> None:
    """Version 6 adds series, all-day events and UIDs; a file of today's schema (5) or an older
    one keeps every event and id, each gets a distinct ``…@iljeong`` UID, and reopening keeps it."""
    from agent.sqlite import Database
    from tools.calendar.schema import MIGRATIONS, legacy_version

    path = tmp_path / "calendar.sqlite3"
    calendar_file_of_main(path, 4 if version == 5 else 3)
    if version == 5:
        Database(path, MIGRATIONS[:5], legacy_version=legacy_version).close()
        with sqlite3.connect(path) as raw:
            assert raw.execute("PRAGMA user_version").fetchone()[0] == 5
    with CalendarStore(path) as store:
        events = store.all_events()
        uids = [e.uid for e in events]
        assert [e.id for e in events] == [1, 2, 5]
        assert all(e.recurrence is None and not e.all_day and not e.transparent for e in events)
    assert len(set(uids)) == 3 and all(u.endswith("@iljeong") for u in uids)
    with CalendarStore(path) as store:
        assert [e.uid for e in store.all_events()] == uids
        with pytest.raises(sqlite3.IntegrityError):  # a UID names one event
            store.add_event("copy", datetime(2027, 1, 1, tzinfo=UTC), datetime(2027, 1, 1, 1, tzinfo=UTC), uid=uids[0])


# Series as a version-6 file holds them: a weekly series with an EXDATE and a moved occurrence,
# an endless daily series in New York, and a one-off event.
CALENDAR_V6_ROWS = [
    "INSERT INTO events (id, title, start_utc, end_utc, tz, created_at, updated_at, uid, recurrence, series_end_utc) "
    "VALUES (7, '팀 회의', '2026-12-07T01:00:00Z', '2026-12-07T02:00:00Z', 'Asia/Seoul', '2026-11-01T00:00:00Z', "
    "'2026-11-01T00:00:00Z', 'a@iljeong', 'RRULE:FREQ=WEEKLY;COUNT=10\nEXDATE:20261214T010000Z', '2027-02-08T02:00:00Z')",
    "INSERT INTO events (id, title, start_utc, end_utc, tz, created_at, updated_at, uid, recurrence) "
    "VALUES (8, 'Standup', '2026-12-01T14:00:00Z', '2026-12-01T14:15:00Z', 'America/New_York', "
    "'2026-11-01T00:00:00Z', '2026-11-01T00:00:00Z', 'b@iljeong', 'RRULE:FREQ=DAILY')",
    "INSERT INTO events (id, title, start_utc, end_utc, tz, created_at, updated_at, uid) "
    "VALUES (9, '치과', '2026-12-22T06:00:00Z', '2026-12-22T07:00:00Z', 'Asia/Seoul', "
    "'2026-11-01T00:00:00Z', '2026-11-01T00:00:00Z', 'c@iljeong')",
    "INSERT INTO event_overrides (event_id, original_utc, title, start_utc, end_utc) "
    "VALUES (7, '2026-12-21T01:00:00Z', '팀 회의 (moved)', '2026-12-22T05:00:00Z', '2026-12-22T06:00:00Z')",
]


def test_the_series_of_a_version_6_calendar_file_are_indexed_when_it_opens(tmp_path: Path) -> None:
    """Version 8 materialises each series' occurrences; a file with series opens with them
    indexed, and a search finds what expanding the series found (moved occurrences at their new
    time, cancelled ones nowhere)."""
    from agent.sqlite import Database
    from tests.calendar_expansion import expanded_between
    from tools.calendar.schema import MIGRATIONS, legacy_version

    path = tmp_path / "calendar.sqlite3"
    Database(path, MIGRATIONS[:6], legacy_version=legacy_version).close()
    with sqlite3.connect(path) as raw:
        for row in CALENDAR_V6_ROWS:
            raw.execute(row)
    with CalendarStore(path) as store:
        assert store.schema_version() == SCHEMA_VERSION
        indexed = {r[0] for r in store._conn.execute("SELECT DISTINCT event_id FROM event_occurrences")}
        assert indexed == {7, 8}
        start, end = datetime(2026, 12, 13, 15, tzinfo=UTC), datetime(2026, 12, 23, 15, tzinfo=UTC)  # Seoul days
        found = store.events_between(start, end)
        assert found == expanded_between(store, start, end)
        assert [(e.id, e.title, e.start.astimezone(UTC).isoformat()) for e in found if e.id != 8] == [
            (7, "팀 회의 (moved)", "2026-12-22T05:00:00+00:00"), (9, "치과", "2026-12-22T06:00:00+00:00")]
        assert len([e for e in found if e.id == 8]) == 10
