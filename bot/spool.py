"""The bot's own SQLite file (``telegram_inbox.sqlite3``): the inbox and the outbox tables.

Both tables live in one file so that a reply is queued in the same transaction that marks its
update done (see ``bot.outbox``). One file has one version (``agent.sqlite`` keeps it in
``user_version``), so its migrations are one list, here, whichever of ``Inbox`` and ``Outbox``
opens the file first.
"""

from __future__ import annotations

import sqlite3

from agent.sqlite import Migration, add_missing_columns, split_sql

INBOX_SCHEMA = """
CREATE TABLE IF NOT EXISTS updates (
    update_id INTEGER PRIMARY KEY,
    body TEXT NOT NULL,           -- the update as Telegram sent it (JSON, lone surrogates replaced)
    state TEXT NOT NULL,          -- 'pending' | 'done' | 'failed' | 'refused'
    received_at REAL NOT NULL,
    done_at REAL,
    error TEXT,                   -- why a 'failed' update failed
    started_at REAL               -- when its job began (a restart tells it from one never begun)
);
CREATE INDEX IF NOT EXISTS updates_pending ON updates(state) WHERE state = 'pending';
"""

OUTBOX_SCHEMA = """
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

# Columns added before the file had a version: a file from then gets them in step 1.
INBOX_ADDED_COLUMNS = {"error": "TEXT"}
STARTED_COLUMN = {"started_at": "REAL"}
OUTBOX_ADDED_COLUMNS = {"document": "BLOB", "filename": "TEXT"}


def _adopt(conn: sqlite3.Connection) -> None:
    """1: both tables as they are today. A file written before versions existed already has
    some of it (an inbox without ``error``, an outbox without documents, or no outbox): the
    tables are created if missing, and the columns added where they lack."""
    for statement in split_sql(INBOX_SCHEMA + OUTBOX_SCHEMA):
        conn.execute(statement)
    add_missing_columns(conn, "updates", INBOX_ADDED_COLUMNS)
    add_missing_columns(conn, "outbox", OUTBOX_ADDED_COLUMNS)


def _started(conn: sqlite3.Connection) -> None:
    """2: ``updates.started_at``, so that after a crash the messages stored but never begun are
    run, and only the one in progress is reported as interrupted. A row still pending from an
    older version may have been in progress: it counts as begun (reported, never run twice)."""
    add_missing_columns(conn, "updates", STARTED_COLUMN)
    conn.execute("UPDATE updates SET started_at = received_at WHERE state = 'pending' AND started_at IS NULL")


# MIGRATIONS[i] takes the file from version i to i + 1; never edit a released step, append one.
MIGRATIONS: list[Migration] = [_adopt, _started]
