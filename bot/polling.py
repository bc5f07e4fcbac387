"""Durable polling and crash recovery: every update is stored before it is acknowledged.

Polling is our own loop rather than PTB's Updater, because the Updater acknowledges a batch
(by asking for the next offset) before any handler has seen it. Here every update is written
to the ``Inbox`` first, as raw JSON; only then is the next ``getUpdates`` sent. An update is
marked done once its reply is in the durable outbox (``bot.outbox``), and failed (never to
be retried) if it cannot be read or its handler raises. A stranger's update (``Access.admits_raw``)
is stored as its id and "refused" only, never its body.

At start-up (``recover``), updates still pending from a run that died are taken in order:
- the one whose job had begun (``Inbox.started``) is not run again (a half-finished turn may
  already have changed the calendar, and running it again could do it twice): the chat is told
  it was interrupted and asked to check and resend;
- the ones stored but never begun are handled now, as if they had just come, in their order,
  so each chat's messages keep theirs;
- except one stored longer ago than the stale limit (default 15 minutes, ``stale_message_minutes``):
  acting on an old "delete my 3 pm" hours later would surprise its sender, so it gets one notice
  that quotes it and asks for it again.
"""

from __future__ import annotations

import asyncio
import logging
import time
import warnings
from typing import Callable

from telegram import Update
from telegram.error import EndPointNotFound, InvalidToken, TimedOut
from telegram.ext import Application
from telegram.warnings import PTBUserWarning

from bot.handlers import BotServices
from bot.worker import Job
from bot.inbox import KEEP_HANDLED_S, STALE_AFTER_S, Inbox, clean
from bot.timing import TIME

log = logging.getLogger(__name__)
# poll() asks for getUpdates through do_api_request on purpose (to get the raw JSON).
warnings.filterwarnings("ignore", message=r"Please use 'Bot\.get_updates'", category=PTBUserWarning)

POLL_TIMEOUT_S = 25
ALLOWED_UPDATES = ["message", "callback_query"]
FIRST_POLL_DELAY_S, MAX_POLL_DELAY_S = 1.0, 60.0
PRUNE_EVERY_S = 24 * 3600.0  # old handled inbox rows and sent replies go at start-up, then once a day

INTERRUPTED = (
    "I was restarted while working on your message \u201c{text}\u201d, so I did not finish it. "
    "Some steps may already have been done: please check, then send it again if needed."
)
STALE = (
    "I was restarted and your message \u201c{text}\u201d waited too long (over {minutes} minutes), "
    "so I did not act on it. Please send it again if it still matters."
)


def _short(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


async def recover(application: Application, services: BotServices, stale_after_s: float = STALE_AFTER_S,
                  now: float | None = None) -> None:
    """What a previous run left pending: the message in progress is reported as interrupted,
    one stored too long ago gets the stale notice, and the others are handled now, in order
    (before polling starts, so they stay ahead of anything new)."""
    now = time.time() if now is None else now
    for row in services.inbox.unfinished():
        update = read_update(row.body, application, services.inbox)
        if update is None:  # marked failed
            continue
        message, chat, user = update.message, update.effective_chat, update.effective_user
        allowed = chat is not None and services.access.allows(chat.id, chat.type, user.id if user else None)
        if not allowed:
            services.inbox.refused(row.update_id)  # a stranger's, recorded before the gate saw it
        elif row.started:
            if message is not None and message.text:
                log.info("update %s in chat %s was interrupted by a restart", row.update_id, chat.id)
                services.outbox.put(chat.id, INTERRUPTED.format(text=_short(message.text)), row.update_id)
            else:
                services.inbox.done(row.update_id)
        elif message is not None and message.text and now - row.received_at > stale_after_s:
            log.info("update %s in chat %s waited %.0f s: not run", row.update_id, chat.id, now - row.received_at)
            notice = STALE.format(text=_short(message.text), minutes=f"{stale_after_s / 60:g}")
            # through the runner, so it keeps its place among the chat's messages run below
            await services.runner.submit(Job(chat.id, row.update_id, "notice", notice, user_id=user.id if user else None))
        else:
            log.info("update %s in chat %s was stored but never begun: handling it now", row.update_id, chat.id)
            await application.update_queue.put(update)


async def poll(application: Application, inbox: Inbox, stop: asyncio.Event,
               admits: Callable[[dict], bool] = lambda raw: True, keep_s: float = KEEP_HANDLED_S) -> None:
    """Long polling that records each update before acknowledging it with the next offset.

    ``admits`` is the access rule on the raw update: one it refuses is recorded as refused,
    without its body. ``keep_s``: how long handled updates and sent replies are kept (``prune``).

    Updates are fetched as raw JSON and stored before PTB parses them: an update PTB cannot
    build (a field it does not know how to read, a lone surrogate in a stranger's text) is
    marked failed and skipped, and the offset moves past it, so it can never stop this loop
    or be fetched again by every restart.
    """
    offset = inbox.next_offset()
    delay = FIRST_POLL_DELAY_S
    pruned_at: float | None = None
    while not stop.is_set():
        if pruned_at is None or time.monotonic() - pruned_at >= PRUNE_EVERY_S:
            gone = inbox.prune(keep_s)
            if any(gone):
                log.info("deleted %d handled inbox rows and %d finished outbox replies older than %g days",
                         gone.updates, gone.replies, keep_s / 86400)
            pruned_at = time.monotonic()
        try:
            raw_updates = await application.bot.do_api_request(
                "get_updates",
                api_kwargs={"offset": offset, "timeout": POLL_TIMEOUT_S, "allowed_updates": ALLOWED_UPDATES},
                read_timeout=POLL_TIMEOUT_S + 15,
            )
            delay = FIRST_POLL_DELAY_S
        except TimedOut:
            continue
        except InvalidToken:
            raise
        except EndPointNotFound as exc:
            # getUpdates exists: this is how do_api_request reports Telegram's 401/404 for a
            # token revoked while running (PTB raised InvalidToken underneath). Retrying
            # cannot help; serve reports it as at start-up.
            raise InvalidToken(str(exc)) from exc
        except Exception as exc:  # NetworkError, 5xx, a garbled answer: wait and ask again
            log.warning("getUpdates failed (%s: %s); retrying in %.1f s", type(exc).__name__, exc, delay * TIME.scale)
            await TIME.sleep(delay)
            delay = min(delay * 2, MAX_POLL_DELAY_S)
            continue
        for raw in raw_updates if isinstance(raw_updates, list) else []:
            update_id = raw.get("update_id") if isinstance(raw, dict) else None
            if not isinstance(update_id, int) or isinstance(update_id, bool):
                log.error("getUpdates returned an item without an update id; skipped")
                continue
            offset = max(offset or 0, update_id + 1)
            if not admits(raw):
                if inbox.record_refused(update_id):
                    await _refuse(raw, application)
                continue
            if inbox.record(update_id, raw):
                update = read_update(raw, application, inbox)
                if update is not None:
                    await application.update_queue.put(update)


async def _refuse(raw: dict, application: Application) -> None:
    """A stranger's update, already recorded as refused: the gate still sees it (it logs their
    ids and answers a tap, so their client stops spinning); one PTB cannot read is dropped with
    its id only (an error message could quote their text)."""
    try:
        update = Update.de_json(clean(raw), application.bot)
    except Exception as exc:
        log.warning("refused update %s could not be read (%s); dropped", raw.get("update_id"), type(exc).__name__)
        return
    await application.update_queue.put(update)


def read_update(raw: dict, application: Application, inbox: Inbox) -> Update | None:
    """The update PTB builds from ``raw``; None (and the row marked failed) if it cannot."""
    update_id = raw["update_id"]
    try:
        return Update.de_json(clean(raw), application.bot)
    except Exception as exc:
        inbox.failed(update_id, f"unreadable update: {type(exc).__name__}: {exc}")
        log.error("update %s could not be read (%s: %s); skipped", update_id, type(exc).__name__, _short(str(exc)))
        return None
