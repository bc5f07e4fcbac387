"""The bot speaks first: reminders and the daily agenda, on a clock the tests can drive.

The bot runs its own polling loop (see ``bot.polling``) and builds its Application without PTB's
JobQueue: APScheduler jobs run on the wall clock, which a test cannot move, and a schedule
held in memory would have to be rebuilt after every turn anyway. Instead one task ticks:
each tick asks the domain's ``Notifier`` (whose schedule is the store itself) what is due at
``clock()``, claims each notice in the store, then queues it in the durable outbox
(``bot.outbox``), which sends it through any outage. It sleeps until the next due
time (at most ``tick_s``), and is woken early after each turn and each snooze, so a changed
calendar is seen at once and a Mac waking from sleep catches up on the next tick.

Tests pass ``--clock-file PATH`` to ``python -m bot run`` (hidden flag): the current instant
is then the ISO-8601 text in that file, re-read on each tick, and ticks come every 0.1 s.

Reminder buttons (Snooze 10 min, Open) follow the approval rules: one random id per button,
held only in memory, used once; a stale, foreign or made-up id changes nothing.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections import OrderedDict
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterable

from telegram import CallbackQuery, InlineKeyboardButton, InlineKeyboardMarkup

from agent.domain import Notifier
from bot.access import Access
from bot.buttons import EXPIRED, NOT_YOURS, button_data, split_button_data
from bot.outbox import Outbox

log = logging.getLogger(__name__)

Clock = Callable[[], datetime]
PREFIX = "rm"
SNOOZE, OPEN = "s", "o"
MAX_OPEN_BUTTONS = 1000  # older reminder buttons are forgotten (and answer EXPIRED)
REAL_TICK_S = 30.0
TEST_TICK_S = 0.1


def system_clock() -> datetime:
    return datetime.now(timezone.utc)


def file_clock(path: Path) -> Clock:
    """Tests: "now" is the ISO instant written in ``path`` (with its UTC offset)."""

    def now() -> datetime:
        moment = datetime.fromisoformat(path.read_text(encoding="utf-8").strip())
        if moment.tzinfo is None:
            raise ValueError(f"{path}: the clock needs a UTC offset, e.g. 2026-03-29T09:00:00+02:00")
        return moment

    return now


def chat_target(chat_id: int) -> str:
    return f"telegram:{chat_id}"


def parse_callback_data(data: str | None) -> tuple[str, str] | None:
    return split_button_data(data, PREFIX, (SNOOZE, OPEN))


class ReminderDesk:
    """Single-use ids for reminder buttons; lives on the event loop."""

    def __init__(self, access: Access) -> None:
        self.access = access
        self._open: OrderedDict[str, tuple[int, int, str]] = OrderedDict()  # id -> (chat, subject, action)

    def _button(self, label: str, chat_id: int, subject_id: int, action: str) -> InlineKeyboardButton:
        button_id = secrets.token_urlsafe(16)
        self._open[button_id] = (chat_id, subject_id, action)
        while len(self._open) > MAX_OPEN_BUTTONS:
            self._open.popitem(last=False)
        return InlineKeyboardButton(label, callback_data=button_data(PREFIX, button_id, action))

    def keyboard(self, chat_id: int, subject_id: int) -> InlineKeyboardMarkup:
        return InlineKeyboardMarkup([[
            self._button("Snooze 10 min", chat_id, subject_id, SNOOZE),
            self._button("Open", chat_id, subject_id, OPEN),
        ]])

    def take(self, query: CallbackQuery) -> tuple[str, int] | str:
        """(action, subject id) for a valid tap, used up; else the text to answer with."""
        parsed = parse_callback_data(query.data)
        entry = self._open.get(parsed[0]) if parsed else None
        if parsed is None or entry is None or entry[2] != parsed[1]:
            return EXPIRED
        chat = query.message.chat if query.message else None
        if chat is None or chat.id != entry[0] or not self.access.allows(chat.id, chat.type, query.from_user.id):
            log.warning("reminder button refused: user %s in chat %s", query.from_user.id, chat.id if chat else None)
            return NOT_YOURS
        del self._open[parsed[0]]
        return entry[2], entry[1]


class ReminderLoop:
    """Sends due reminders to every allowed user's private chat, and each chat's agenda."""

    def __init__(
        self, outbox: Outbox, notifier: Notifier, users: Iterable[int], desk: ReminderDesk, clock: Clock, tick_s: float
    ) -> None:
        self.outbox = outbox  # notices go out through it, so an outage cannot lose them
        self.notifier = notifier
        self.users = sorted(users)
        self.desk = desk
        self.clock = clock
        self.tick_s = tick_s
        self._wake = asyncio.Event()

    def wake(self) -> None:
        """Look at the store again now (after a turn or a snooze changed it)."""
        self._wake.set()

    async def run_forever(self) -> None:
        while True:
            try:
                await self.tick()
            except Exception:  # a bad tick must not end reminders for good
                log.exception("reminder tick failed")
            await self._sleep()

    async def tick(self) -> None:
        now = self.clock()
        for notice in self.notifier.due(now):
            if not self.notifier.claim(notice, now):  # claimed first: a restart never repeats it
                continue
            log.info("sending reminder %s", notice.key)
            for user in self.users:
                markup = self.desk.keyboard(user, notice.subject_id) if notice.subject_id is not None else None
                await self._send(user, notice.text, markup)
        for user in self.users:
            agenda = self.notifier.agenda_due(chat_target(user), now)
            if agenda is not None and self.notifier.claim(agenda, now):
                await self._send(user, agenda.text)

    async def _send(self, chat_id: int, text: str, markup: InlineKeyboardMarkup | None = None) -> None:
        """Through the outbox: a notice claimed in the store is never lost to an outage."""
        self.outbox.put(chat_id, text, markup=markup)

    async def _sleep(self) -> None:
        now = self.clock()
        upcoming = self.notifier.next_due(now)
        delay = self.tick_s
        if upcoming is not None:
            delay = min(delay, max((upcoming - now).total_seconds(), 0.05))
        # Not ``wait_for(self._wake.wait(), delay)``: on Python 3.11 that can swallow a
        # cancellation arriving just as the event is set (right after a turn), and the bot
        # then never stops. ``asyncio.wait`` always lets the cancellation through.
        waiter = asyncio.ensure_future(self._wake.wait())
        try:
            await asyncio.wait([waiter], timeout=delay)
        finally:
            waiter.cancel()
        self._wake.clear()

    async def answer(self, query: CallbackQuery) -> str:
        """A Snooze or Open tap: act on it and return the text for answerCallbackQuery."""
        taken = self.desk.take(query)
        if isinstance(taken, str):
            return taken
        action, subject_id = taken
        if action == SNOOZE:
            text = self.notifier.snooze(subject_id, self.clock())
            self.wake()
            return text
        await self._send(query.message.chat.id, self.notifier.show(subject_id))
        return "Opened."
