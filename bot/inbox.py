"""Durable record of incoming updates, so a crash mid-turn never silently drops a message.

The poll loop writes every update here, as the raw JSON Telegram sent and before anything
parses it, and only then asks Telegram for the next batch (which is what acknowledges the
batch). A handler marks the update done once its reply has been sent (or queued in the
outbox); an update that cannot be parsed or whose handler raised is marked failed, with the
error, so it is never retried and never blocks the updates after it. Rows still pending at
start-up belong to a run that died: the bot tells those chats that their message was
interrupted (see ``bot.polling``).

The body is needed only while the update is pending (crash recovery reads it). So a stranger's
update keeps only its id and times (state ``refused``; who it was goes to the log, as an id):
the poll loop refuses it before storing anything (``record_refused``), and one an older version
stored is blanked once the gate refuses it (``refused``). Handled rows (done, failed, refused)
older than the retention (``KEEP_HANDLED_S``, a week; the ``inbox_retention_days`` setting) are
deleted by ``prune``, at start-up and then daily (``bot.polling``); the newest row stays, because
polling resumes after its id, but its body goes. Session history (``agent.sessions``) is the
user's own and is not touched. The same ``prune`` deletes the
outbox's finished replies (sent, dropped, late) by the same rule: they hold what the bot told the
owner, i.e. their calendar, and nothing reads them once they are out. A queued reply is never
deleted, however old: it is the outbox's promise to send it (``bot.outbox``). One pass over the
one file the two tables share (``bot.spool``), in one transaction. ``secure_delete`` zeroes what a
refused body or a pruned row leaves in the file; the write-ahead log holds the old page until the
next checkpoint, which ``prune`` forces (and closing the file does).
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any, NamedTuple

from agent.sqlite import Database
from bot.spool import INBOX_SCHEMA as SCHEMA, MIGRATIONS  # SCHEMA: the table, for readers of this module


# JSON may carry "\ud800" escapes that decode to lone surrogates, which UTF-8 (and so SQLite)
# cannot store. A valid pair has already been joined into one code point by json.loads.
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
ERROR_LIMIT = 500  # characters of an error kept with a failed update
# Handled rows are kept a week (for a look at what failed), far past the day Telegram keeps an
# unacknowledged update for re-delivery, which is when a row's id still matters for dedupe.
KEEP_HANDLED_S = 7 * 24 * 3600.0
STALE_AFTER_S = 15 * 60.0  # a stored message older than this is not run after a restart (bot.polling.recover)


class Unfinished(NamedTuple):
    """A pending update, as a restart finds it."""

    update_id: int
    body: Any
    received_at: float  # wall clock, when it was stored
    started: bool  # its job had begun (it may have done part of its work)


class Pruned(NamedTuple):
    """What one ``Inbox.prune`` deleted."""

    updates: int  # handled inbox rows
    replies: int  # finished outbox rows


def clean(value: Any) -> Any:
    """``value`` with every lone surrogate in its strings (keys too) replaced by U+FFFD."""
    if isinstance(value, str):
        return _LONE_SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {clean(k): clean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clean(v) for v in value]
    return value


class Inbox:
    """A small SQLite table of updates; safe to call from the event loop and worker threads."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._db = Database(path, MIGRATIONS)  # synchronous=FULL: the point of this table is durability
        self._conn = self._db.conn
        self._lock = self._db.lock
        self._conn.execute("PRAGMA secure_delete = ON")  # a dropped body leaves no bytes in the file

    def record(self, update_id: int, body: Any) -> bool:
        """Store a new update as pending; False if it was already recorded (a re-delivery).

        ``body`` is whatever JSON value Telegram sent; it is stored cleaned (see ``clean``), so
        no content a stranger can send makes this refuse the row.
        """
        text = json.dumps(clean(body), ensure_ascii=False, default=repr)
        with self._lock:
            cursor = self._conn.execute(
                "INSERT OR IGNORE INTO updates (update_id, body, state, received_at) VALUES (?, ?, 'pending', ?)",
                (update_id, text, time.time()),
            )
        return cursor.rowcount == 1

    def record_refused(self, update_id: int) -> bool:
        """A stranger's update, refused before it is stored: only its id and times are written,
        never its body, so their text reaches no file. False if it was already recorded."""
        now = time.time()
        with self._lock:
            cursor = self._conn.execute(
                "INSERT OR IGNORE INTO updates (update_id, body, state, received_at, done_at) "
                "VALUES (?, 'null', 'refused', ?, ?)",
                (update_id, now, now),
            )
        return cursor.rowcount == 1

    def started(self, update_id: int) -> None:
        """Its job begins now (committed before it does): after a crash it is reported as
        interrupted, never run again."""
        with self._lock:
            self._conn.execute(
                "UPDATE updates SET started_at = ? WHERE update_id = ? AND state = 'pending'", (time.time(), update_id)
            )

    def done(self, update_id: int) -> None:
        with self._lock:
            self._conn.execute(
                "UPDATE updates SET state = 'done', done_at = ? WHERE update_id = ? AND state = 'pending'",
                (time.time(), update_id),
            )

    def refused(self, update_id: int) -> None:
        """A stranger's update, refused by the gate: finished, and its body (their text) dropped."""
        with self._lock:
            self._conn.execute(
                "UPDATE updates SET state = 'refused', done_at = ?, body = 'null' WHERE update_id = ? AND state = 'pending'",
                (time.time(), update_id),
            )

    def prune(self, keep_s: float = KEEP_HANDLED_S, now: float | None = None) -> Pruned:
        """Delete what is finished and older than ``keep_s``: handled updates (received then),
        except the newest row (polling resumes after its id), and the outbox's sent, dropped and
        late replies (queued then); pending updates and queued replies always stay. The WAL is
        then checkpointed and emptied, so what refused and pruned rows held is in neither file."""
        cutoff = (time.time() if now is None else now) - keep_s
        with self._db.transaction() as conn:
            conn.execute(  # the newest row stays for its id, not for what it said
                "UPDATE updates SET body = 'null' WHERE state != 'pending' AND received_at < ? AND body != 'null'",
                (cutoff,),
            )
            updates = conn.execute(
                "DELETE FROM updates WHERE state != 'pending' AND received_at < ? "
                "AND update_id < (SELECT MAX(update_id) FROM updates)",
                (cutoff,),
            ).rowcount
            replies = conn.execute(  # AUTOINCREMENT: a deleted id is never reused, so order holds
                "DELETE FROM outbox WHERE state != 'queued' AND created_at < ?", (cutoff,)
            ).rowcount
        with self._lock:
            self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # busy readers: it waits for the next day
        return Pruned(updates, replies)

    def failed(self, update_id: int, error: str) -> None:
        """The update could not be handled; keep why, and never hand it out again. A refused
        (stranger's) update stays refused: nothing of it is kept, an error quoting it neither."""
        with self._lock:
            self._conn.execute(
                "UPDATE updates SET state = 'failed', done_at = ?, error = ? WHERE update_id = ? AND state != 'refused'",
                (time.time(), clean(error)[:ERROR_LIMIT], update_id),
            )

    def state(self, update_id: int) -> tuple[str, str | None] | None:
        """(state, error) of a recorded update; None if it was never recorded."""
        with self._lock:
            row = self._conn.execute("SELECT state, error FROM updates WHERE update_id = ?", (update_id,)).fetchone()
        return None if row is None else (row[0], row[1])

    def pending(self) -> list[tuple[int, Any]]:
        """Updates recorded but never finished, oldest first."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT update_id, body FROM updates WHERE state = 'pending' ORDER BY update_id"
            ).fetchall()
        return [(update_id, json.loads(body)) for update_id, body in rows]

    def unfinished(self) -> list[Unfinished]:
        """Updates recorded but never finished, oldest first, with when they came and whether
        their job had begun."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT update_id, body, received_at, started_at FROM updates WHERE state = 'pending' ORDER BY update_id"
            ).fetchall()
        return [Unfinished(update_id, json.loads(body), received_at, started_at is not None)
                for update_id, body, received_at, started_at in rows]

    def next_offset(self) -> int | None:
        """One past the newest recorded update: where polling resumes after a restart."""
        with self._lock:
            row = self._conn.execute("SELECT MAX(update_id) FROM updates").fetchone()
        return None if row[0] is None else row[0] + 1

    def close(self) -> None:
        self._db.close()
