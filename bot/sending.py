"""Talking to the Bot API without losing replies: retry with backoff, plain text, split pieces."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Awaitable, Callable, TypeVar

from telegram import Bot, InlineKeyboardMarkup, Message
from telegram.error import BadRequest, Forbidden, InvalidToken, NetworkError, RetryAfter

from agent.visible import visible_text
from bot.text import split_message
from bot.timing import TIME

log = logging.getLogger(__name__)
T = TypeVar("T")

ATTEMPTS = 6
FIRST_DELAY_S = 0.5
MAX_DELAY_S = 30.0


def _seconds(value: int | float | timedelta) -> float:
    return value.total_seconds() if isinstance(value, timedelta) else float(value)


async def with_retry(call: Callable[[], Awaitable[T]], what: str, attempts: int = ATTEMPTS) -> T:
    """Run a Bot API call, retrying network failures and flood waits with exponential backoff.

    A request Telegram refuses (bad request, blocked by the user, bad token) is not retried:
    sending it again would fail the same way.
    """
    delay = FIRST_DELAY_S
    for attempt in range(1, attempts + 1):
        try:
            return await call()
        except RetryAfter as exc:
            wait = _seconds(exc.retry_after)
            log.warning("%s: flood limit, retrying in %.1f s", what, wait)
            await TIME.sleep(wait)
        except (BadRequest, Forbidden, InvalidToken):
            raise
        except NetworkError as exc:  # includes TimedOut and HTTP 502
            if attempt == attempts:
                raise
            log.warning("%s failed (%s), attempt %d/%d, retrying in %.1f s", what, exc, attempt, attempts, delay)
            await TIME.sleep(delay)
            delay = min(delay * 2, MAX_DELAY_S)
    return await call()


async def send_text(
    bot: Bot, chat_id: int, text: str, reply_markup: InlineKeyboardMarkup | None = None
) -> list[Message]:
    """Send ``text`` as plain text (no parse_mode, so ``_*[]`` in titles are just characters).

    Long text goes out as several messages cut on paragraph boundaries; a keyboard, if any,
    is attached to the last piece. Control and bidi characters are neutralised (``agent.visible``).
    """
    pieces = split_message(visible_text(text)) or ["(empty reply)"]
    sent = []
    for index, piece in enumerate(pieces):
        markup = reply_markup if index == len(pieces) - 1 else None
        sent.append(
            await with_retry(
                lambda piece=piece, markup=markup: bot.send_message(chat_id, piece, reply_markup=markup),
                f"sendMessage to {chat_id}",
            )
        )
    return sent
