"""The trajectory log: every turn, with every model step, call, approval and timing, in SQLite.

This is the input of eval and export, so it stores the turn whole (JSON) next to the few
columns that queries filter on. With the turn goes the history window it was served with
(``history``: ``{"turns": history_turns, "block": history_block}``, see ``agent.history``), so
export cuts a logged chat where the runtime cut it, whatever is configured when it runs. It is
written for every turn, the defaults too: a turn without it is one logged before it was kept,
served with whatever was configured then.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Iterator

from agent.records import Turn
from agent.sqlite import Database, Migration

SCHEMA = """
CREATE TABLE IF NOT EXISTS turns (
    id INTEGER PRIMARY KEY,
    session_id TEXT,
    created_at REAL NOT NULL,
    stop_reason TEXT NOT NULL,
    steps INTEGER NOT NULL,
    tool_calls INTEGER NOT NULL,
    seconds REAL NOT NULL,
    model TEXT NOT NULL,          -- JSON: backend, model path, adapter path, sha256, scale
    turn TEXT NOT NULL            -- JSON: Turn.to_dict(), and "history" (the window it was served with)
);
CREATE INDEX IF NOT EXISTS turns_session ON turns(session_id);
"""

# MIGRATIONS[i] takes the file from version i to i + 1 (agent.sqlite); step 1 adopts a file
# written before versions existed as it is (IF NOT EXISTS).
MIGRATIONS: list[Migration] = [SCHEMA]

HistoryWindow = tuple[int, int | None]  # (history_turns, history_block), as agent.history takes them


def served_window(row: dict[str, Any]) -> HistoryWindow | None:
    """The window a logged turn (a ``turns()`` row) was served with; None if it was logged
    before the log kept it (or the record is not one this code wrote)."""
    history = row.get("history")
    if not isinstance(history, dict) or not isinstance(history.get("turns"), int):
        return None
    block = history.get("block")
    return history["turns"], block if isinstance(block, int) else None


class TrajectoryLog:
    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self._db = Database(self.path, MIGRATIONS)
        self._conn = self._db.conn
        self._lock = self._db.lock

    def record(self, turn: Turn, model: dict[str, Any], history: HistoryWindow | None = None) -> int:
        """One INSERT per turn: the log must not cost a SQLite round-trip per step. ``history``:
        the (history_turns, history_block) the turn was served with (the runtime always gives it)."""
        data = turn.to_dict()
        if history is not None:
            data["history"] = {"turns": history[0], "block": history[1]}
        with self._lock:
            cur = self._conn.execute(
                "INSERT INTO turns (session_id, created_at, stop_reason, steps, tool_calls, seconds, model, turn) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    turn.session_id,
                    time.time(),
                    turn.stop_reason.value,
                    len(turn.steps),
                    len(turn.calls),
                    turn.seconds,
                    json.dumps(model, ensure_ascii=False, default=str),
                    json.dumps(data, ensure_ascii=False, default=str),
                ),
            )
            return int(cur.lastrowid or 0)

    def turns(self, session_id: str | None = None) -> Iterator[dict[str, Any]]:
        query = "SELECT id, model, turn FROM turns"
        params: tuple[Any, ...] = ()
        if session_id is not None:
            query += " WHERE session_id = ?"
            params = (session_id,)
        with self._lock:
            rows = self._conn.execute(query + " ORDER BY id", params).fetchall()
        for row_id, model, turn in rows:
            yield {"id": row_id, "model": json.loads(model), **json.loads(turn)}

    def close(self) -> None:
        self._db.close()
