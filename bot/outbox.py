"""Replies that outlive a Bot API outage: a durable, per-chat ordered outbox.

A finished turn's reply (and every reminder and agenda) is written here, in the same SQLite file as the inbox and in the
same transaction that marks its update done, so from that moment a crash, a restart or an
outage of any length cannot lose it. ``OutboxSender`` sends each chat's oldest reply first
(a chat's replies never overtake each other; chats do not wait for each other), piece by
piece (a reply split for Telegram's limit is never sent twice in part), and on a passing
failure (network, 5xx, flood wait) tries that chat again later with exponential backoff.

A reply that cannot be sent for ``MAX_AGE_S`` (a day) is no longer worth sending: the chat
gets one short apology instead, however many replies had piled up. Telegram answers that
can never succeed -- 403 (the user blocked the bot), 400 (chat not found, a bad request) --
drop the reply with a log line.

A file a domain command answers with (``agent.domain.Document``, e.g. /ics) is a reply like
any other: stored here with its caption as the text, so it keeps its place in the chat's
order, outlives outages and restarts, and is dropped or apologised for by the same rules.
It goes out as one sendDocument (a single piece).

A finished reply (sent, dropped, late) still holds what the bot told the owner; it goes a week
later, with the inbox's handled updates, in the one ``Inbox.prune`` (``bot.inbox``). A queued
one is never deleted. ``secure_delete`` here too, so what an apology overwrites is zeroed.

Times are on ``bot.timing.TIME`` so tests can play a long outage quickly.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Callable, ContextManager

from telegram import Bot, InlineKeyboardMarkup
from telegram.error import BadRequest, Forbidden, RetryAfter

from agent.domain import Document
from agent.visible import visible_line, visible_text
from agent.sqlite import Database
from bot.spool import MIGRATIONS
from bot.text import split_message
from bot.timing import TIME

log = logging.getLogger(__name__)

MAX_AGE_S = 24 * 3600.0
FIRST_BACKOFF_S = 1.0
MAX_BACKOFF_S = 300.0
CAPTION_LIMIT = 1024  # Telegram's limit for a document's caption
ORDER_POLL_S = 0.2  # how often ``wait_until_sent`` looks again
LATE = ("Sorry, this answer is late: I could not reach Telegram for a long time, so I dropped "
        "what I had written. Please send your message again if it still matters.")



@dataclass(frozen=True)
class Reply:
    id: int
    chat_id: int
    text: str
    created_at: float
    next_at: float
    attempts: int
    pieces_sent: int
    markup: str | None = None
    document: bytes | None = None
    filename: str | None = None




class Outbox:
    """The outbox table; safe to call from the event loop and worker threads."""

    def __init__(self, path: Path) -> None:
        self._db = Database(path, MIGRATIONS)
        self._conn = self._db.conn
        self._lock = self._db.lock
        self._conn.execute("PRAGMA secure_delete = ON")  # an overwritten reply leaves no bytes in the file
        self.on_put: Callable[[], None] | None = None  # the sender's wake-up (event loop thread)

    def _transaction(self) -> ContextManager[sqlite3.Connection]:
        """Under the lock, all or nothing: a failure rolls back, so the shared connection is
        never left inside an open transaction (the next ``BEGIN`` would fail, every write after
        it would pile into a transaction nobody commits)."""
        return self._db.transaction()

    def put(
        self, chat_id: int, text: str, update_id: int | None = None, markup: InlineKeyboardMarkup | None = None
    ) -> int:
        """Queue ``text`` for ``chat_id``; the update it answers (if any) is done from now on."""
        return self._put(chat_id, text, update_id, markup, None)

    def put_document(self, chat_id: int, document: Document, update_id: int | None = None) -> int:
        """Queue a file (its caption as the text) for ``chat_id``, in order with the chat's replies."""
        return self._put(chat_id, document.caption, update_id, None, document)

    def _put(
        self, chat_id: int, text: str, update_id: int | None, markup: InlineKeyboardMarkup | None,
        document: Document | None,
    ) -> int:
        now = TIME.now()
        keyboard = json.dumps(markup.to_dict(), ensure_ascii=False) if markup is not None else None
        content, filename = (document.content, document.filename) if document is not None else (None, None)
        with self._transaction():
            row_id = self._conn.execute(
                "INSERT INTO outbox (chat_id, text, markup, update_id, state, created_at, next_at, document, filename) "
                "VALUES (?, ?, ?, ?, 'queued', ?, ?, ?, ?)",
                (chat_id, text, keyboard, update_id, now, now, content, filename),
            ).lastrowid
            if update_id is not None:
                self._conn.execute(
                    "UPDATE updates SET state = 'done', done_at = ? WHERE update_id = ? AND state = 'pending'",
                    (now, update_id),
                )
        if self.on_put is not None:
            self.on_put()
        return int(row_id)

    def heads(self) -> list[Reply]:
        """Each chat's oldest queued reply."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT id, chat_id, text, created_at, next_at, attempts, pieces_sent, markup, document, filename "
                "FROM outbox "
                "WHERE id IN (SELECT MIN(id) FROM outbox WHERE state = 'queued' GROUP BY chat_id) ORDER BY id"
            ).fetchall()
        return [Reply(*row) for row in rows]

    def progress(self, reply: Reply, pieces_sent: int) -> None:
        with self._lock:
            self._conn.execute("UPDATE outbox SET pieces_sent = ? WHERE id = ?", (pieces_sent, reply.id))

    def finish(self, reply: Reply, state: str, error: str | None = None, pieces_sent: int | None = None) -> None:
        """The reply is done with (``pieces_sent``: its last piece went out, in the same commit)."""
        with self._lock:
            self._conn.execute(
                "UPDATE outbox SET state = ?, last_error = ?, pieces_sent = COALESCE(?, pieces_sent) WHERE id = ?",
                (state, error, pieces_sent, reply.id),
            )

    def later(self, reply: Reply, next_at: float, error: str) -> None:
        with self._lock:
            self._conn.execute(
                "UPDATE outbox SET attempts = attempts + 1, next_at = ?, last_error = ? WHERE id = ?",
                (next_at, error[:500], reply.id),
            )

    def replace_with_apology(self, reply: Reply, now: float) -> Reply:
        """A too-old head becomes the one apology; the chat's other too-old replies are dropped."""
        with self._transaction():
            self._conn.execute(
                "UPDATE outbox SET state = 'late' WHERE chat_id = ? AND state = 'queued' AND id != ? AND created_at < ?",
                (reply.chat_id, reply.id, now - MAX_AGE_S),
            )
            self._conn.execute(
                "UPDATE outbox SET text = ?, markup = NULL, document = NULL, filename = NULL, created_at = ?, "
                "next_at = ?, pieces_sent = 0 WHERE id = ?",
                (LATE, now, now, reply.id),
            )
        return Reply(reply.id, reply.chat_id, LATE, now, now, reply.attempts, 0)

    def queued(self, chat_id: int) -> int:
        """How many replies to ``chat_id`` are still waiting to be sent."""
        with self._lock:
            return self._conn.execute(
                "SELECT COUNT(*) FROM outbox WHERE chat_id = ? AND state = 'queued'", (chat_id,)
            ).fetchone()[0]

    async def wait_until_sent(self, chat_id: int, timeout_s: float) -> bool:
        """Wait (at most ``timeout_s``, scaled) until the chat has nothing queued; False if it still has.

        For a message that cannot go through the outbox (an approval question: its message id
        is needed at once), so that it does not overtake the chat's earlier replies.
        """
        deadline = TIME.after(timeout_s)
        while self.queued(chat_id):
            if TIME.now() >= deadline:
                return False
            await TIME.sleep(ORDER_POLL_S)
        return True

    def state_of(self, row_id: int) -> str | None:
        with self._lock:
            row = self._conn.execute("SELECT state FROM outbox WHERE id = ?", (row_id,)).fetchone()
        return row[0] if row else None

    def close(self) -> None:
        self._db.close()


def backoff(attempts: int) -> float:
    """Seconds before the next try after ``attempts`` failures: 1, 2, 4, … capped at 5 min."""
    return min(FIRST_BACKOFF_S * 2 ** min(attempts, 20), MAX_BACKOFF_S)


class OutboxSender:
    """The task that empties the outbox."""

    def __init__(self, bot: Bot, outbox: Outbox) -> None:
        self.bot = bot
        self.outbox = outbox
        self._wake = asyncio.Event()
        self._stopping = False
        outbox.on_put = self._wake.set

    def finish_up(self) -> None:
        """Stop after the reply in hand: a send cut off after Telegram took it but before it
        was marked sent would go out a second time at the next start."""
        self._stopping = True
        self._wake.set()

    async def run_forever(self) -> None:
        while not self._stopping:
            try:
                await self.send_due()
            except Exception:  # a bug here must not end sending for good
                log.exception("outbox pass failed")
                await TIME.sleep(FIRST_BACKOFF_S)
            await self._sleep()

    async def send_due(self) -> None:
        for reply in self.outbox.heads():
            if self._stopping:
                return
            now = TIME.now()
            if reply.next_at > now:
                continue
            if now - reply.created_at > MAX_AGE_S and reply.text != LATE:
                log.warning("reply %s to chat %s is older than %g h: sending an apology instead",
                            reply.id, reply.chat_id, MAX_AGE_S / 3600)
                reply = self.outbox.replace_with_apology(reply, now)
            await self._send(reply)

    async def _send(self, reply: Reply) -> None:
        # Shown as text: a title's ESC or bidi override is neutralised here, at the last step, so
        # what is stored stays as written and every reply (turns, commands, reminders) is covered.
        pieces = split_message(visible_text(reply.text)) or ["(empty reply)"]
        keyboard = InlineKeyboardMarkup.de_json(json.loads(reply.markup), self.bot) if reply.markup else None
        try:
            if reply.filename is not None:  # a file goes out whole, as one piece
                await self._send_document(reply)
                pieces = [reply.text]
            else:
                for index in range(reply.pieces_sent, len(pieces)):
                    last = index == len(pieces) - 1
                    await self.bot.send_message(reply.chat_id, pieces[index], reply_markup=keyboard if last else None)
                    if not last:  # the last one is booked with "sent", below: one commit, not two,
                        self.outbox.progress(reply, index + 1)  # so a crash has less time to send it twice
        except (BadRequest, Forbidden) as exc:
            log.warning("reply %s to chat %s dropped: Telegram refused it for good (%s)", reply.id, reply.chat_id, exc)
            self.outbox.finish(reply, "dropped", str(exc))
        except RetryAfter as exc:
            wait = exc.retry_after.total_seconds() if isinstance(exc.retry_after, timedelta) else float(exc.retry_after)
            self.outbox.later(reply, TIME.after(wait), f"flood limit: {wait:g} s")
        except Exception as exc:  # network, 5xx, timeouts: try this chat again later
            delay = backoff(reply.attempts)
            log.warning("reply %s to chat %s not sent (%s: %s); retrying in %g s",
                        reply.id, reply.chat_id, type(exc).__name__, exc, delay)
            self.outbox.later(reply, TIME.after(delay), f"{type(exc).__name__}: {exc}")
        else:
            self.outbox.finish(reply, "sent", pieces_sent=len(pieces))

    async def _send_document(self, reply: Reply) -> None:
        """One sendDocument; a caption over Telegram's limit is cut (captions are one line)."""
        caption = visible_line(reply.text, CAPTION_LIMIT)
        await self.bot.send_document(
            reply.chat_id, document=reply.document or b"", filename=reply.filename, caption=caption or None
        )

    async def _sleep(self) -> None:
        """Until the next head is due (at most a minute, wall clock), or a new reply is queued."""
        heads = self.outbox.heads()
        now = TIME.now()
        delay = min([max(h.next_at - now, 0.0) for h in heads] or [60.0])
        if delay <= 0:
            return
        waiter = asyncio.ensure_future(self._wake.wait())
        try:
            await asyncio.wait([waiter], timeout=delay)  # next_at is already scaled (TIME.after)
        finally:
            waiter.cancel()
        self._wake.clear()
