"""The delivery ledger: what the bot has delivered from the calendar, so nothing goes out twice.

Each reminder occurrence is recorded by (event, minutes before, due time) once it is sent or
skipped, so it goes out exactly once across restarts, and moving an event (new due times)
re-arms its reminders. Snoozes are one-off reminders with their own row. The daily agenda
has a per-chat setting and a record of the days it was delivered.

The ledger lives in the calendar file (its tables are in ``schema.MIGRATIONS``) and shares the
store's connection: its rows point at events, and deleting an event deletes them by foreign
key. It decides nothing about *when* something is due; ``reminders`` does that.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from agent.sqlite import Database
from tools.calendar.utc_text import from_utc_text, to_utc_text


class DeliveryLedger:
    """Sent reminders, snoozes and the agenda, on the calendar file's ``Database``."""

    def __init__(self, db: Database) -> None:
        self.db = db

    # -- reminders ---------------------------------------------------------------------------

    def settled_reminders(self, due_after: datetime) -> set[tuple[int, int, str]]:
        """(event id, minutes, due UTC text) already sent or skipped, due after ``due_after``."""
        rows = self.db.fetchall(
            "SELECT event_id, minutes_before, due_utc FROM sent_reminders WHERE due_utc > ?",
            (to_utc_text(due_after),),
        )
        return {(int(r[0]), int(r[1]), str(r[2])) for r in rows}

    def settle_reminder(self, event_id: int, minutes_before: int, due: datetime, at: datetime, outcome: str) -> bool:
        """Record a reminder as sent or skipped; False if it was already recorded (or the event is gone)."""
        with self.db.transaction() as conn:
            if not self._event_exists(event_id):
                return False
            cur = conn.execute(
                """INSERT OR IGNORE INTO sent_reminders (event_id, minutes_before, due_utc, sent_at, outcome)
                   VALUES (?, ?, ?, ?, ?)""",
                (event_id, minutes_before, to_utc_text(due), to_utc_text(at), outcome),
            )
        return cur.rowcount == 1

    # -- snoozes -----------------------------------------------------------------------------

    def add_snooze(self, event_id: int, due: datetime) -> bool:
        """A one-off reminder of the event at ``due``; False if the event is gone."""
        with self.db.transaction() as conn:
            if not self._event_exists(event_id):
                return False
            conn.execute("INSERT INTO snoozes (event_id, due_utc) VALUES (?, ?)", (event_id, to_utc_text(due)))
        return True

    def open_snoozes(self) -> list[tuple[int, int, datetime]]:
        """(snooze id, event id, due) of snoozes not yet sent, earliest first."""
        rows = self.db.fetchall(
            "SELECT id, event_id, due_utc FROM snoozes WHERE sent_at IS NULL ORDER BY due_utc, id"
        )
        return [(int(r[0]), int(r[1]), from_utc_text(r[2])) for r in rows]

    def settle_snooze(self, snooze_id: int, at: datetime) -> bool:
        """Mark the snooze sent; False if it already was."""
        cur = self.db.execute(
            "UPDATE snoozes SET sent_at = ? WHERE id = ? AND sent_at IS NULL", (to_utc_text(at), snooze_id)
        )
        return cur.rowcount == 1

    # -- the daily agenda --------------------------------------------------------------------

    def agenda_setting(self, target: str) -> tuple[bool, str | None] | None:
        """(enabled, HH:MM or None for the default time), or None if never set."""
        row = self.db.fetchone("SELECT enabled, at_time FROM agenda_settings WHERE target = ?", (target,))
        return (bool(row[0]), row[1]) if row else None

    def agenda_settings(self) -> list[dict[str, Any]]:
        """Every chat's setting, by target (part of the store's snapshot: a user can change it)."""
        rows = self.db.fetchall("SELECT target, enabled, at_time FROM agenda_settings ORDER BY target")
        return [{"target": str(r[0]), "enabled": bool(r[1]), "at_time": r[2]} for r in rows]

    def set_agenda_setting(self, target: str, enabled: bool, at_time: str | None) -> None:
        self.db.execute(
            """INSERT INTO agenda_settings (target, enabled, at_time) VALUES (?, ?, ?)
               ON CONFLICT(target) DO UPDATE SET enabled = excluded.enabled, at_time = excluded.at_time""",
            (target, int(enabled), at_time),
        )

    def record_agenda(self, target: str, day: str, at: datetime) -> bool:
        """Mark the agenda of ``day`` as delivered to ``target``; False if it already was."""
        cur = self.db.execute(
            "INSERT OR IGNORE INTO agenda_sent (target, day, sent_at) VALUES (?, ?, ?)",
            (target, day, to_utc_text(at)),
        )
        return cur.rowcount == 1

    def agenda_recorded(self, target: str, day: str) -> bool:
        row = self.db.fetchone("SELECT 1 FROM agenda_sent WHERE target = ? AND day = ?", (target, day))
        return row is not None

    def _event_exists(self, event_id: int) -> bool:
        return self.db.fetchone("SELECT 1 FROM events WHERE id = ?", (event_id,)) is not None
