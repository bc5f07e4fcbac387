"""What sync remembers, in the calendar file beside the events (schema migration 7).

- ``caldav_queue``: the UIDs changed here and not yet on the server (filled by triggers);
- ``caldav_items``: per UID, where the server keeps it (collection, href), its ETag, and the
  object as the server last had it (``base``: the common ancestor of a three-way merge, and
  the source of what we do not model, such as an attendee's PARTSTAT);
- ``caldav_collections``: each calendar's sync token and last pull;
- ``caldav_status``: the last good sync, since when the server has been unreachable, why;
- ``caldav_conflicts``: every local value a server change won over, kept, and told once.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from tools.calendar.store import CalendarStore
from tools.calendar.utc_text import from_utc_text, now_text


@dataclass(frozen=True)
class Item:
    uid: str
    collection: str
    href: str
    etag: str | None
    base: str | None
    sent: str | None = None  # a PUT that went out and whose answer we have not seen


@dataclass(frozen=True)
class Conflict:
    id: int
    uid: str
    title: str
    field: str
    local_value: str | None
    server_value: str | None
    at: datetime


@dataclass(frozen=True)
class Status:
    ok_at: datetime | None
    offline_since: datetime | None
    last_error: str | None
    last_report: str | None
    queued: int
    conflicts: int


class SyncState:
    """Reads and writes the sync tables through the store's connection and lock, so a change
    to the state and a change to the events can share one transaction."""

    def __init__(self, store: CalendarStore) -> None:
        self.store = store
        self.db = store.db

    # -- the push queue ---------------------------------------------------------------------

    def queued(self) -> list[tuple[str, int]]:
        """(uid, seq) of every queued change, oldest first."""
        return [(str(r[0]), int(r[1])) for r in self.db.fetchall("SELECT uid, seq FROM caldav_queue ORDER BY queued_utc, uid")]

    def is_queued(self, uid: str) -> bool:
        return self.db.fetchone("SELECT 1 FROM caldav_queue WHERE uid = ?", (uid,)) is not None

    def done(self, uid: str, seq: int) -> None:
        """The change ``seq`` of ``uid`` reached the server; a newer one stays queued."""
        self.db.execute("DELETE FROM caldav_queue WHERE uid = ? AND seq = ?", (uid, seq))

    def dequeue(self, uid: str) -> None:
        """The store now holds what the server holds (a pull applied it): nothing to send."""
        self.db.execute("DELETE FROM caldav_queue WHERE uid = ?", (uid,))

    def failed(self, uid: str, why: str) -> None:
        self.db.execute("UPDATE caldav_queue SET attempts = attempts + 1, last_error = ? WHERE uid = ?", (why[:300], uid))

    # -- what the server holds ---------------------------------------------------------------

    def item(self, uid: str) -> Item | None:
        row = self.db.fetchone("SELECT uid, collection, href, etag, base, sent FROM caldav_items WHERE uid = ?", (uid,))
        return Item(*row) if row else None

    def items(self, collection: str) -> dict[str, Item]:
        """href → item, for one collection."""
        rows = self.db.fetchall("SELECT uid, collection, href, etag, base, sent FROM caldav_items WHERE collection = ?", (collection,))
        return {str(r[2]): Item(*r) for r in rows}

    def saved(self, uid: str, collection: str, href: str, etag: str | None, base: str | None) -> None:
        """The server holds ``base`` at ``href`` with ``etag`` (nothing of ours in flight)."""
        self.db.execute(
            """INSERT INTO caldav_items (uid, collection, href, etag, base, sent) VALUES (?, ?, ?, ?, ?, NULL)
               ON CONFLICT (uid) DO UPDATE SET collection = excluded.collection, href = excluded.href,
                                               etag = excluded.etag, base = excluded.base, sent = NULL""",
            (uid, collection, href, etag, base),
        )

    def sending(self, uid: str, collection: str, href: str, body: str) -> None:
        """Written (and committed) before a PUT goes out: if its answer is lost, the next push can
        tell the server's copy for our own (see ``engine._resolve``)."""
        self.db.execute(
            """INSERT INTO caldav_items (uid, collection, href, sent) VALUES (?, ?, ?, ?)
               ON CONFLICT (uid) DO UPDATE SET sent = excluded.sent""",
            (uid, collection, href, body),
        )

    def forget(self, uid: str) -> None:
        self.db.execute("DELETE FROM caldav_items WHERE uid = ?", (uid,))

    # -- collections ---------------------------------------------------------------------------

    def sync_token(self, collection: str) -> str | None:
        row = self.db.fetchone("SELECT sync_token FROM caldav_collections WHERE url = ?", (collection,))
        return str(row[0]) if row and row[0] else None

    def pulled(self, collection: str, token: str | None) -> None:
        self.db.execute(
            """INSERT INTO caldav_collections (url, sync_token, pulled_utc) VALUES (?, ?, ?)
               ON CONFLICT (url) DO UPDATE SET sync_token = excluded.sync_token, pulled_utc = excluded.pulled_utc""",
            (collection, token, now_text()),
        )

    def last_pull(self) -> datetime | None:
        """When every collection was last pulled (the oldest of them); None if one never was."""
        rows = self.db.fetchall("SELECT pulled_utc FROM caldav_collections")
        if not rows or any(r[0] is None for r in rows):
            return None
        return from_utc_text(min(str(r[0]) for r in rows))

    # -- status ----------------------------------------------------------------------------------

    def succeeded(self, report: str) -> None:
        self.db.execute(
            """INSERT INTO caldav_status (id, ok_utc, offline_since_utc, last_error, last_report) VALUES (1, ?, NULL, NULL, ?)
               ON CONFLICT (id) DO UPDATE SET ok_utc = excluded.ok_utc, offline_since_utc = NULL,
                                              last_error = NULL, last_report = excluded.last_report""",
            (now_text(), report),
        )

    def unreachable(self, why: str) -> None:
        """Failed: keep the first moment of the outage (``offline since``), and the latest reason."""
        self.db.execute(
            """INSERT INTO caldav_status (id, offline_since_utc, last_error) VALUES (1, ?, ?)
               ON CONFLICT (id) DO UPDATE SET offline_since_utc = COALESCE(offline_since_utc, excluded.offline_since_utc),
                                              last_error = excluded.last_error""",
            (now_text(), why[:300]),
        )

    def status(self) -> Status:
        row = self.db.fetchone("SELECT ok_utc, offline_since_utc, last_error, last_report FROM caldav_status WHERE id = 1")
        queued = int(self.db.fetchone("SELECT COUNT(*) FROM caldav_queue")[0])
        conflicts = int(self.db.fetchone("SELECT COUNT(*) FROM caldav_conflicts")[0])
        if row is None:
            return Status(None, None, None, None, queued, conflicts)
        return Status(_moment(row[0]), _moment(row[1]), row[2], row[3], queued, conflicts)

    # -- conflicts -------------------------------------------------------------------------------

    def conflict(self, uid: str, title: str, field: str, local_value: str | None, server_value: str | None) -> None:
        self.db.execute(
            """INSERT INTO caldav_conflicts (uid, title, field, local_value, server_value, at_utc)
               VALUES (?, ?, ?, ?, ?, ?)""",
            (uid, title, field, local_value, server_value, now_text()),
        )

    def refused(self, uid: str, title: str, reason: str, detail: str) -> bool:
        """Keep a refusal (``identity``) as a conflict record, so the chat names it as it names a
        conflict; False if the same one is kept already: a server that sends the same object at
        every sync (no sync token) gets it named once, not at every sync."""
        if self.db.fetchone("SELECT 1 FROM caldav_conflicts WHERE uid = ? AND field = 'refused' AND local_value = ?"
                            " AND server_value = ?", (uid, reason, detail)) is not None:
            return False
        self.conflict(uid, title, "refused", reason, detail)
        return True

    def conflicts(self, untold_only: bool = False, limit: int = 50) -> list[Conflict]:
        rows = self.db.fetchall(
            "SELECT id, uid, title, field, local_value, server_value, at_utc FROM caldav_conflicts"
            + (" WHERE told = 0" if untold_only else "") + " ORDER BY id DESC LIMIT ?", (limit,))
        return [Conflict(int(r[0]), r[1], r[2], r[3], r[4], r[5], from_utc_text(r[6])) for r in reversed(rows)]

    def told(self, ids: list[int]) -> None:
        self.db.execute(f"UPDATE caldav_conflicts SET told = 1 WHERE id IN ({','.join('?' * len(ids))})", ids)


def _moment(text: Any) -> datetime | None:
    return from_utc_text(str(text)) if text else None
