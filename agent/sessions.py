"""Conversation histories, one per session id, persisted in SQLite so a restart continues them.

A message is an OpenAI-style dict. Assistant messages keep the model's exact raw text in
``content``; that text is what gets rendered again, so the KV prefix stays byte-identical.
Each message is written as soon as it exists: a crash mid-turn loses nothing already said.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

from agent.sqlite import Database, Migration

SCHEMA = """
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

# MIGRATIONS[i] takes the file from version i to i + 1 (agent.sqlite); never edit a released
# step, append one. Step 1 is the schema of the files written before versions existed, with
# IF NOT EXISTS, so such a file is adopted as it is.
MIGRATIONS: list[Migration] = [SCHEMA]


class SessionStore:
    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self._db = Database(self.path, MIGRATIONS)
        self._conn = self._db.conn
        self._lock = self._db.lock

    def current(self, conversation: str) -> str:
        """The session a conversation (a chat, the REPL) is in now; created on first use."""
        with self._lock:
            row = self._conn.execute(
                "SELECT session_id FROM current_session WHERE conversation = ?", (conversation,)
            ).fetchone()
        return row[0] if row else self.start_new(conversation)

    def start_new(self, conversation: str) -> str:
        """``/new``: point the conversation at a fresh session; the old one stays on disk."""
        session_id = f"{conversation}:{uuid.uuid4().hex[:12]}"
        now = time.time()
        with self._db.transaction():
            self._conn.execute("INSERT INTO sessions VALUES (?, ?, ?)", (session_id, now, now))
            self._conn.execute(
                "INSERT INTO current_session VALUES (?, ?) "
                "ON CONFLICT(conversation) DO UPDATE SET session_id = excluded.session_id",
                (conversation, session_id),
            )
        return session_id

    def history(self, session_id: str) -> list[dict[str, Any]]:
        with self._lock:
            rows = self._conn.execute(
                "SELECT message FROM messages WHERE session_id = ? ORDER BY idx", (session_id,)
            ).fetchall()
        return [json.loads(r[0]) for r in rows]

    def append(self, session_id: str, message: dict[str, Any]) -> None:
        now = time.time()
        with self._db.transaction():  # rolls back on a Ctrl-C mid-write too: no transaction left open
            self._append_locked(session_id, message, now)

    def _append_locked(self, session_id: str, message: dict[str, Any], now: float) -> None:
        self._conn.execute("INSERT OR IGNORE INTO sessions VALUES (?, ?, ?)", (session_id, now, now))
        self._conn.execute(
            "INSERT INTO messages VALUES (?, (SELECT COALESCE(MAX(idx), -1) + 1 FROM messages "
            "WHERE session_id = ?), ?, ?)",
            (session_id, session_id, json.dumps(message, ensure_ascii=False), now),
        )
        self._conn.execute("UPDATE sessions SET updated_at = ? WHERE id = ?", (now, session_id))

    def truncate(self, session_id: str, keep: int) -> None:
        """Drop every message after the first ``keep`` (an interrupted turn that did nothing)."""
        with self._lock:
            self._conn.execute("DELETE FROM messages WHERE session_id = ? AND idx >= ?", (session_id, keep))

    def close(self) -> None:
        self._db.close()
