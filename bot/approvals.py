"""Approval buttons: a destructive call waits for Approve / Deny from the person who asked.

The agent loop runs in the model's worker thread and calls ``BotApprover.decide``, which
blocks that thread (never the event loop) on a coroutine scheduled onto the loop. The
coroutine sends the question with two inline buttons and waits for ``ApprovalDesk.answer``
(the callback-query handler) or for the timeout, which counts as Deny.

Each question gets an id from ``secrets.token_urlsafe``, kept only in memory and used once:
a second tap, a button from before a restart, or a made-up id finds nothing and changes
nothing. A question belongs to the user whose message started the turn, in the chat it was
asked in: in a group, another allowed member's tap is "not yours"; so is a forged update
that puts someone else's user id into a private chat.

The answer is bound to the call as it was shown: after an Approve, the worker thread checks the
target's fingerprint (``ApprovalRequest.still_current``) and describes the same call again. If
either differs -- the event was changed or replaced between the question and the tap -- the
approval does not count, the question says so, and the model gets ``target_changed``. The gate
checks the fingerprint once more in the write's own transaction (a change in between is caught
there).
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import threading
from dataclasses import dataclass
from typing import Callable

from telegram import Bot, CallbackQuery, InlineKeyboardButton, InlineKeyboardMarkup

from agent.approval import STALE, ApprovalRequest, Decision
from agent.visible import QUESTION_LIMIT, visible_line
from bot.access import Access
from bot.buttons import EXPIRED, NOT_YOURS, button_data, split_button_data
from bot.outbox import Outbox
from bot.sending import send_text, with_retry

log = logging.getLogger(__name__)

PREFIX = "ap"
APPROVE, DENY = "y", "n"

CHANGED = "changed since asked"
# A question waits this long (scaled) for the chat's earlier replies still in the outbox, e.g.
# after an outage; then it is sent anyway: a turn must not hang on an outage without end.
ORDER_WAIT_S = 60.0


def callback_data(approval_id: str, choice: str) -> str:
    """``ap:<id>:y`` — 22 random URL-safe characters, 28 bytes, well inside Telegram's 64."""
    return button_data(PREFIX, approval_id, choice)


def parse_callback_data(data: str | None) -> tuple[str, str] | None:
    return split_button_data(data, PREFIX, (APPROVE, DENY))


@dataclass
class _Pending:
    chat_id: int
    user_id: int | None  # who may answer: the author of the message that started the turn
    future: asyncio.Future[Decision]


async def _wait(future: asyncio.Future[Decision], timeout_s: float) -> Decision:
    """The tap's decision, or Deny at the timeout. ``asyncio.wait`` never swallows a
    cancellation of the caller (``wait_for`` can, on Python 3.11, if the answer lands at the
    same moment), so a stopping bot is never held up here."""
    done, _ = await asyncio.wait([future], timeout=timeout_s)
    return future.result() if done else Decision(False, "timeout")


class ApprovalDesk:
    """The open questions, by id. Lives on the event loop; only its coroutines touch it."""

    def __init__(self, bot: Bot, access: Access, timeout_s: float, outbox: Outbox | None = None) -> None:
        self.bot = bot
        self.access = access
        self.timeout_s = timeout_s
        self.outbox = outbox  # the chat's earlier replies go first (see ``_after_earlier_replies``)
        self._open: dict[str, _Pending] = {}

    async def ask(self, chat_id: int, user_id: int | None, description: str) -> tuple[Decision, int | None]:
        """Send the question, wait for the asker's tap or the timeout.

        Returns the decision and the question's message id, for ``conclude``.
        """
        approval_id = secrets.token_urlsafe(16)
        future: asyncio.Future[Decision] = asyncio.get_running_loop().create_future()
        self._open[approval_id] = _Pending(chat_id, user_id, future)
        keyboard = InlineKeyboardMarkup(
            [[
                InlineKeyboardButton("Approve", callback_data=callback_data(approval_id, APPROVE)),
                InlineKeyboardButton("Deny", callback_data=callback_data(approval_id, DENY)),
            ]]
        )
        # the action is one cut line, so Telegram's limit never moves it away from the buttons
        question = f"Approve this action?\n\n{visible_line(description, QUESTION_LIMIT)}"
        try:
            await self._after_earlier_replies(chat_id)
            messages = await send_text(self.bot, chat_id, question, reply_markup=keyboard)
            decision = await _wait(future, self.timeout_s)
        finally:
            self._open.pop(approval_id, None)
        return decision, messages[-1].message_id

    async def _after_earlier_replies(self, chat_id: int) -> None:
        """The question is sent directly (its message id is needed for ``conclude``), not
        through the outbox; so that "Approve this action?" does not arrive before an earlier
        reply still backing off there, wait (bounded) until the chat's outbox is empty."""
        if self.outbox is None:
            return
        waiting = self.outbox.queued(chat_id)
        if not waiting:
            return
        log.info("approval question in chat %s waits for %d earlier replies", chat_id, waiting)
        if not await self.outbox.wait_until_sent(chat_id, ORDER_WAIT_S):
            log.warning("earlier replies to chat %s still unsent after %g s: asking anyway", chat_id, ORDER_WAIT_S)

    async def conclude(self, chat_id: int, message_id: int | None, description: str, decision: Decision) -> None:
        """Edit the question to its outcome (and so remove its buttons)."""
        if message_id is None:
            return
        if decision.reason == CHANGED:
            outcome = "Not done: this changed after I asked, so the approval no longer fits. Nothing was changed."
        else:
            outcome = {
                "user": "Approved." if decision.approved else "Denied.",
                "timeout": f"No answer within {self.timeout_s:g} s: denied.",
                "cancelled": "Cancelled: denied.",
            }.get(decision.reason, "Denied.")
        try:
            await with_retry(
                lambda: self.bot.edit_message_text(f"{visible_line(description, QUESTION_LIMIT)}\n\n{outcome}",
                                                   chat_id=chat_id, message_id=message_id),
                f"editMessageText in {chat_id}",
            )
        except Exception:  # the decision stands even if the cosmetic edit fails
            log.exception("could not edit the approval message in chat %s", chat_id)

    async def answer(self, query: CallbackQuery) -> str:
        """Apply a button tap if it is valid; return the text for answerCallbackQuery."""
        parsed = parse_callback_data(query.data)
        pending = self._open.get(parsed[0]) if parsed else None
        if pending is None or pending.future.done():
            return EXPIRED
        chat = query.message.chat if query.message else None
        user_id = query.from_user.id if query.from_user else None
        if (
            chat is None
            or chat.id != pending.chat_id
            or user_id != pending.user_id
            or not self.access.allows(chat.id, chat.type, user_id)
        ):
            log.warning("approval button refused: user %s in chat %s", user_id, chat.id if chat else None)
            return NOT_YOURS
        approved = parsed[1] == APPROVE
        self._open.pop(parsed[0], None)
        pending.future.set_result(Decision(approved, "user"))
        return "Approved." if approved else "Denied."

    def cancel_chat(self, chat_id: int, user_id: int | None) -> None:
        """/cancel: the open questions ``user_id`` was asked in this chat are answered with Deny."""
        for pending in list(self._open.values()):
            if pending.chat_id == chat_id and pending.user_id == user_id and not pending.future.done():
                pending.future.set_result(Decision(False, "cancelled"))


class BotApprover:
    """The agent's Approver for one turn in one chat; called from the worker thread.

    ``describe_now`` describes a request's call as it would run now (None: cannot tell); it
    runs here, in the worker thread, where the domain's store is used.
    """

    def __init__(
        self,
        desk: ApprovalDesk,
        loop: asyncio.AbstractEventLoop,
        chat_id: int,
        user_id: int | None,
        cancel: threading.Event,
        describe_now: Callable[[ApprovalRequest], str | None] | None = None,
    ) -> None:
        self.desk = desk
        self.loop = loop
        self.chat_id = chat_id
        self.user_id = user_id
        self.cancel = cancel
        self.describe_now = describe_now

    def decide(self, request: ApprovalRequest) -> Decision:
        if self.cancel.is_set():
            return Decision(False, "cancelled")
        asked = asyncio.run_coroutine_threadsafe(
            self.desk.ask(self.chat_id, self.user_id, request.description), self.loop
        )
        try:
            decision, message_id = asked.result()
        except Exception:
            log.exception("asking for approval in chat %s failed", self.chat_id)
            return Decision(False, "could not ask the user")
        if decision.approved and not self._still_as_shown(request):
            log.warning("approval in chat %s refused: the call's target changed after the question", self.chat_id)
            decision = Decision(False, CHANGED)
        concluded = asyncio.run_coroutine_threadsafe(
            self.desk.conclude(self.chat_id, message_id, request.description, decision), self.loop
        )
        try:
            concluded.result()
        except Exception:
            log.exception("could not conclude the approval in chat %s", self.chat_id)
        if decision.reason == CHANGED:  # the gate answers the call with its stable ``target_changed``
            return Decision(False, STALE)
        return decision

    def _still_as_shown(self, request: ApprovalRequest) -> bool:
        """Is the call's target what the question showed? Its fingerprint if the tool has one
        (any stored field, shown or not), else the domain's words for it now. The gate checks
        the fingerprint again in the write's own transaction; this is so the question can say so."""
        if request.still_current is not None and not request.still_current():
            return False
        return self.describe_now is None or self.describe_now(request) == request.description
