"""The receipt after a turn: one line, starting with 📅, of what the turn really did.

A small model will say it deleted an event that the user refused to let it touch. The program
knows what ran, so the frontends end a turn with a line built from the turn's executed calls
(``Turn.calls``, the gate's records) and the domain's state, never from the model's words.
``agent/`` knows no domain: the words come from the domain's ``receipt`` hook (a ``ReceiptFn``
on ``agent.domain.Domain`` and on the eval ``Environment``); this module only decides, from
the ``receipt`` setting, whether the line is shown.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Callable

from agent.records import Turn
from agent.visible import visible_line

log = logging.getLogger(__name__)

MARK = "📅"
RECEIPT_MODES = ("on", "off", "changes")
DEFAULT_RECEIPT = "changes"
# The line is shown with the reply, in the same Telegram message (4096 characters): whatever the
# domain writes, it stays a small part of that.
RECEIPT_LIMIT = 1500


@dataclass(frozen=True)
class Receipt:
    """The domain's line for a turn, and whether the turn touched the domain's state at all
    (a change that ran, was declined or failed): ``changes`` mode shows only those."""

    text: str  # one line, starting with ``MARK``
    touched: bool


# The domain's hook: the finished turn (its calls, the user's text for the language) -> a line.
ReceiptFn = Callable[[Turn], Receipt | None]


def receipt_line(hook: ReceiptFn | None, turn: Turn, mode: str = DEFAULT_RECEIPT) -> str | None:
    """The line to show after ``turn`` under the ``receipt`` setting, or None.

    ``off``: never; ``changes`` (the default): when the turn touched the domain's state;
    ``on``: after every turn the domain has words for (a read-only turn says nothing changed).
    A hook that fails costs the line, never the turn's reply."""
    if hook is None or mode == "off":
        return None
    try:
        receipt = hook(turn)
    except Exception:  # the reply still goes out; the receipt is an addition to it
        log.exception("the domain's receipt failed")
        return None
    if receipt is None or (mode == "changes" and not receipt.touched):
        return None
    # one line, whatever the domain wrote: its fields hold outside text (titles), shown as text
    line = visible_line(receipt.text, RECEIPT_LIMIT)
    return line if line.startswith(MARK) else f"{MARK} {line}"
