"""Approval buttons: a destructive call waits for Approve / Deny from the chat it came from.

The agent loop runs in the model's worker thread and calls ``BotApprover.decide``, which
blocks that thread (never the event loop) on a coroutine scheduled onto the loop. The
coroutine sends the question with two inline buttons and waits for ``ApprovalDesk.answer``
(the callback-query handler) or for the timeout, which counts as Deny.

Each question gets an id from ``secrets.token_urlsafe``, kept only in memory and used once:
a second tap, a button from before a restart, or a made-up id finds nothing and changes
nothing.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import threading
from dataclasses import dataclass

from telegram import Bot, CallbackQuery, InlineKeyboardButton, InlineKeyboardMarkup

from agent.approval import ApprovalRequest, Decision
from bot.access import Access
from bot.buttons import button_data, split_button_data
from bot.sending import send_text, with_retry

log = logging.getLogger(__name__)

PREFIX = "ap"
APPROVE, DENY = "y", "n"

EXPIRED = "This button is no longer valid (already answered, expired, or from before a restart). Nothing was changed."
NOT_YOURS = "Only an allowed user of this chat can answer this. Nothing was changed."


def callback_data(approval_id: str, choice: str) -> str:
    """``ap:<id>:y`` — 22 random URL-safe characters, 28 bytes, well inside Telegram's 64."""
    return button_data(PREFIX, approval_id, choice)


def parse_callback_data(data: str | None) -> tuple[str, str] | None:
    return split_button_data(data, PREFIX, (APPROVE, DENY))


@dataclass
class _Pending:
    chat_id: int
    future: asyncio.Future[Decision]


class ApprovalDesk:
    """The open questions, by id. Lives on the event loop; only its coroutines touch it."""

    def __init__(self, bot: Bot, access: Access, timeout_s: float) -> None:
        self.bot = bot
        self.access = access
        self.timeout_s = timeout_s
        self._open: dict[str, _Pending] = {}

    async def ask(self, chat_id: int, description: str) -> Decision:
        """Send the question, wait for a tap or the timeout, then edit the message to the outcome."""
        approval_id = secrets.token_urlsafe(16)
        future: asyncio.Future[Decision] = asyncio.get_running_loop().create_future()
        self._open[approval_id] = _Pending(chat_id, future)
        keyboard = InlineKeyboardMarkup(
            [[
                InlineKeyboardButton("Approve", callback_data=callback_data(approval_id, APPROVE)),
                InlineKeyboardButton("Deny", callback_data=callback_data(approval_id, DENY)),
            ]]
        )
        question = f"Approve this action?\n\n{description}"
        try:
            messages = await send_text(self.bot, chat_id, question, reply_markup=keyboard)
            try:
                decision = await asyncio.wait_for(asyncio.shield(future), self.timeout_s)
            except asyncio.TimeoutError:
                decision = Decision(False, "timeout")
        finally:
            self._open.pop(approval_id, None)
        outcome = {
            "user": "Approved." if decision.approved else "Denied.",
            "timeout": f"No answer within {self.timeout_s:g} s: denied.",
            "cancelled": "Cancelled: denied.",
        }.get(decision.reason, "Denied.")
        last = messages[-1]
        try:
            await with_retry(
                lambda: self.bot.edit_message_text(f"{description}\n\n{outcome}", chat_id=chat_id, message_id=last.message_id),
                f"editMessageText in {chat_id}",
            )
        except Exception:  # the decision stands even if the cosmetic edit fails
            log.exception("could not edit the approval message in chat %s", chat_id)
        return decision

    async def answer(self, query: CallbackQuery) -> str:
        """Apply a button tap if it is valid; return the text for answerCallbackQuery."""
        parsed = parse_callback_data(query.data)
        pending = self._open.get(parsed[0]) if parsed else None
        if pending is None or pending.future.done():
            return EXPIRED
        chat = query.message.chat if query.message else None
        if (
            chat is None
            or chat.id != pending.chat_id
            or not self.access.allows(chat.id, chat.type, query.from_user.id)
        ):
            log.warning("approval button refused: user %s in chat %s", query.from_user.id, chat.id if chat else None)
            return NOT_YOURS
        approved = parsed[1] == APPROVE
        self._open.pop(parsed[0], None)
        pending.future.set_result(Decision(approved, "user"))
        return "Approved." if approved else "Denied."

    def cancel_chat(self, chat_id: int) -> None:
        """/cancel: open questions of this chat are answered with Deny."""
        for pending in list(self._open.values()):
            if pending.chat_id == chat_id and not pending.future.done():
                pending.future.set_result(Decision(False, "cancelled"))


class BotApprover:
    """The agent's Approver for one turn in one chat; called from the worker thread."""

    def __init__(
        self, desk: ApprovalDesk, loop: asyncio.AbstractEventLoop, chat_id: int, cancel: threading.Event
    ) -> None:
        self.desk = desk
        self.loop = loop
        self.chat_id = chat_id
        self.cancel = cancel

    def decide(self, request: ApprovalRequest) -> Decision:
        if self.cancel.is_set():
            return Decision(False, "cancelled")
        future = asyncio.run_coroutine_threadsafe(self.desk.ask(self.chat_id, request.description), self.loop)
        try:
            return future.result()
        except Exception:
            log.exception("asking for approval in chat %s failed", self.chat_id)
            return Decision(False, "could not ask the user")
