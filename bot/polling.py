"""Durable polling and crash recovery: every update is stored before it is acknowledged.

Polling is our own loop rather than PTB's Updater, because the Updater acknowledges a batch
(by asking for the next offset) before any handler has seen it. Here every update is written
to the ``Inbox`` first, as raw JSON; only then is the next ``getUpdates`` sent. An update is
marked done once its reply is in the durable outbox (``bot.outbox``), and failed (never to
be retried) if it cannot be read or its handler raises. At start-up, updates still pending
from a run that died are not re-run (a half-finished turn may already have changed the
calendar, and running it again could do it twice): the chat is told the message was
interrupted and asked to check and resend.
"""

from __future__ import annotations

import asyncio
import logging
import time
import warnings

from telegram import Update
from telegram.error import EndPointNotFound, InvalidToken, TimedOut
from telegram.ext import Application
from telegram.warnings import PTBUserWarning

from bot.handlers import BotServices
from bot.inbox import KEEP_HANDLED_S, Inbox, clean
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


def _short(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


async def answer_interrupted(application: Application, services: BotServices) -> None:
    """Tell chats whose messages a previous run never finished; then mark those done."""
    for update_id, body in services.inbox.pending():
        update = read_update(body, application, services.inbox)
        if update is None:  # marked failed
            continue
        message, chat, user = update.message, update.effective_chat, update.effective_user
        allowed = chat is not None and services.access.allows(chat.id, chat.type, user.id if user else None)
        if allowed and message is not None and message.text:
            log.info("update %s in chat %s was interrupted by a restart", update_id, chat.id)
            services.outbox.put(chat.id, INTERRUPTED.format(text=_short(message.text)), update_id)
        elif not allowed:
            services.inbox.refused(update_id)  # a stranger's, recorded before the gate saw it
        else:
            services.inbox.done(update_id)


async def poll(application: Application, inbox: Inbox, stop: asyncio.Event) -> None:
    """Long polling that records each update before acknowledging it with the next offset.

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
            gone = inbox.prune()
            if any(gone):
                log.info("deleted %d handled inbox rows and %d finished outbox replies older than %.0f days",
                         gone.updates, gone.replies, KEEP_HANDLED_S / 86400)
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
            fresh = inbox.record(update_id, raw)
            offset = max(offset or 0, update_id + 1)
            if fresh:
                update = read_update(raw, application, inbox)
                if update is not None:
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
