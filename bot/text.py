"""Cutting replies to Telegram's 4096-character limit without breaking paragraphs; the receipt's place."""

from __future__ import annotations

TELEGRAM_LIMIT = 4096


def split_message(text: str, limit: int = TELEGRAM_LIMIT) -> list[str]:
    """Pieces of at most ``limit`` characters, cut at a blank line, else a newline, else a space.

    Only a single unbroken run longer than ``limit`` is cut mid-word. Empty text gives no pieces.
    """
    pieces: list[str] = []
    rest = text.strip()
    while len(rest) > limit:
        window = rest[: limit + 1]
        cut = -1
        for separator in ("\n\n", "\n", " "):
            cut = window.rfind(separator, 0, limit + 1)
            if cut > 0:
                break
        if cut <= 0:
            cut = limit
        pieces.append(rest[:cut].rstrip())
        rest = rest[cut:].lstrip()
    if rest:
        pieces.append(rest)
    return pieces


def with_receipt(reply: str, receipt: str | None, limit: int = TELEGRAM_LIMIT) -> str:
    """The reply with the turn's 📅 receipt as its last paragraph: one message, one notification.

    A reply that fits one message keeps fitting: it is shortened (ending in "…") rather than
    pushing the receipt into a second message. A reply already longer than a message is split
    as before, and the receipt ends its last piece."""
    if not receipt:
        return reply
    joined = f"{reply.rstrip()}\n\n{receipt}"
    if len(reply) <= limit < len(joined):
        keep = max(0, limit - len(receipt) - 3)
        joined = f"{reply[:keep].rstrip()}…\n\n{receipt}"
    return joined
