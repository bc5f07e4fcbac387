"""Durable record of incoming updates, so a crash mid-turn never silently drops a message.

The poll loop writes every update here before it asks Telegram for the next batch (which is
what acknowledges the batch); a handler marks the update done once its reply has been sent.
Rows still pending at start-up belong to a run that died: the bot tells those chats that
their message was interrupted (see ``bot.app``).
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

from agent.sessions import connect

SCHEMA = """
CREATE TABLE IF NOT EXISTS updates (
    update_id INTEGER PRIMARY KEY,
    body TEXT NOT NULL,           -- the update as Telegram sent it (JSON)
    state TEXT NOT NULL,          -- 'pending' | 'done'
    received_at REAL NOT NULL,
    done_at REAL
);
CREATE INDEX IF NOT EXISTS updates_pending ON updates(state) WHERE state = 'pending';
"""


class Inbox:
    """A small SQLite table of updates; safe to call from the event loop and worker threads."""

    def __init__(self, path: Path) -> None:
        self._conn = connect(path)
        self._conn.execute("PRAGMA synchronous=FULL")  # the point of this table is durability
        self._lock = threading.Lock()
        with self._lock:
            self._conn.executescript(SCHEMA)

    def record(self, update_id: int, body: dict[str, Any]) -> bool:
        """Store a new update as pending; False if it was already recorded (a re-delivery)."""
        with self._lock:
            cursor = self._conn.execute(
                "INSERT OR IGNORE INTO updates (update_id, body, state, received_at) VALUES (?, ?, 'pending', ?)",
                (update_id, json.dumps(body, ensure_ascii=False), time.time()),
            )
        return cursor.rowcount == 1

    def done(self, update_id: int) -> None:
        with self._lock:
            self._conn.execute(
                "UPDATE updates SET state = 'done', done_at = ? WHERE update_id = ?", (time.time(), update_id)
            )

    def pending(self) -> list[tuple[int, dict[str, Any]]]:
        """Updates recorded but never finished, oldest first."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT update_id, body FROM updates WHERE state = 'pending' ORDER BY update_id"
            ).fetchall()
        return [(update_id, json.loads(body)) for update_id, body in rows]

    def next_offset(self) -> int | None:
        """One past the newest recorded update: where polling resumes after a restart."""
        with self._lock:
            row = self._conn.execute("SELECT MAX(update_id) FROM updates").fetchone()
        return None if row[0] is None else row[0] + 1

    def close(self) -> None:
        with self._lock:
            self._conn.close()
