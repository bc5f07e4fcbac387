"""One model, many chats: a queue of jobs run one at a time on a single worker thread.

A single FIFO keeps every chat's messages in order and never runs two model steps at once.
The event loop only awaits the worker's futures, so polling, button taps and /cancel keep
flowing while the model works. A chat whose message has to wait behind another chat's turn
is told so once, instead of seeing nothing.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import queue
import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable

from telegram import Bot
from telegram.constants import ChatAction

from agent.approval import ApprovalRequest
from agent.backends.base import KEY_REFUSED
from agent.records import StopReason, Turn
from agent.runtime import Runtime
from bot.approvals import ApprovalDesk, BotApprover
from bot.outbox import Outbox
from bot.text import with_receipt
from agent.tools import ToolResult

log = logging.getLogger(__name__)

TYPING_EVERY_S = 4.0  # Telegram shows "typing…" for about 5 s per action
TYPING_TIMEOUT_S = 3.0  # a Bot API that does not answer the action in time does not delay the turn
QUEUED_NOTICE = "Queued: I'm answering another chat first; your message is next in line."
KEY_REFUSED_REPLY = ("Sorry, the model's API refused this bot's API key. "
                     "The bot's owner needs to fix AGENT_API_KEY or the key file (see the bot's log).")
TURN_FAILED = "Sorry, something went wrong with that message. I'm still running; please try again."


def conversation_id(chat_id: int) -> str:
    return f"telegram:{chat_id}"


@dataclass
class Job:
    chat_id: int
    update_id: int | None
    # "turn" (model), "new" (/new), "command" (a domain command, e.g. /today or /ics), "notice"
    # (``text`` is sent as it is: a restart's word about a message it will not run, in its place)
    kind: str
    text: str = ""
    command: str = ""
    user_id: int | None = None  # who sent it: only they may answer its approval questions
    cancel: threading.Event = field(default_factory=threading.Event)


class ModelThread:
    """A single daemon thread that runs callables in order (a daemon, so a stuck model
    never keeps a stopping process alive)."""

    def __init__(self) -> None:
        self._jobs: queue.Queue[tuple[Any, concurrent.futures.Future[Any] | None]] = queue.Queue()
        self.busy = False  # a job is running right now (the process must not tidy up under it)
        threading.Thread(target=self._serve, name="model-worker", daemon=True).start()

    def _serve(self) -> None:
        while True:
            fn, future = self._jobs.get()
            if future is None:  # close()
                return
            if not future.set_running_or_notify_cancel():
                continue
            self.busy = True
            try:
                future.set_result(fn())
            except BaseException as exc:  # handed to the awaiting coroutine
                future.set_exception(exc)
            finally:
                self.busy = False

    def close(self) -> None:
        """End the thread once the job in hand (if any) is done; jobs after it never run."""
        self._jobs.put((None, None))

    async def run(self, fn: Callable[[], Any]) -> Any:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self._jobs.put((fn, future))
        return await asyncio.wrap_future(future)


def reply_for(turn: Turn) -> str:
    """What the user reads for a finished turn; never empty, never a stack trace."""
    if turn.reply.strip():
        return turn.reply
    if turn.stop_reason is StopReason.MODEL_ERROR and (turn.error or "").startswith(KEY_REFUSED):
        return KEY_REFUSED_REPLY
    return {
        StopReason.INTERRUPTED: "Stopped.",
        StopReason.MODEL_ERROR: "Sorry, the model failed on that message. Please try again.",
        StopReason.CONTEXT_LIMIT: "This conversation is too long for the model. Send /new to start a fresh one.",
        StopReason.STEP_BUDGET: "I could not finish that within my step limit. Please rephrase or split it.",
        StopReason.TOOL_CALL_BUDGET: "I could not finish that within my tool-call limit. Please split it up.",
        StopReason.REPEATED_FAILURE: "I kept failing at that, so I stopped. Nothing more was changed.",
        StopReason.NO_PROGRESS: "I was not making progress, so I stopped.",
    }.get(turn.stop_reason, "Done.")


class TurnRunner:
    def __init__(self, bot: Bot, runtime: Runtime, desk: ApprovalDesk, outbox: Outbox) -> None:
        self.bot = bot
        self.runtime = runtime
        self.desk = desk
        self.outbox = outbox  # replies go here: durable, retried until sent (bot.outbox)
        self.model = ModelThread()
        self._queue: asyncio.Queue[Job] = asyncio.Queue()
        self._waiting: Counter[int] = Counter()  # queued jobs per chat
        self.running: Job | None = None
        self.after_job: Callable[[], None] | None = None  # e.g. wake the reminder loop
        # Told a job's update id just before the job begins (the inbox's ``started``, committed).
        self.started: Callable[[int], None] = lambda update_id: None

    async def submit(self, job: Job) -> None:
        """Queue a job; tell the chat if it waits behind another chat's work."""
        behind_other = (self.running is not None and self.running.chat_id != job.chat_id) or any(
            count for chat, count in self._waiting.items() if chat != job.chat_id
        )
        first_of_chat = self._waiting[job.chat_id] == 0
        self._waiting[job.chat_id] += 1
        self._queue.put_nowait(job)
        if behind_other and first_of_chat and job.kind != "notice":  # via the outbox: never ahead of an earlier reply
            try:
                self.outbox.put(job.chat_id, QUEUED_NOTICE)
            except Exception:
                log.exception("could not queue the queued notice to chat %s", job.chat_id)

    def close(self) -> None:
        self.model.close()

    def cancel(self, chat_id: int, user_id: int | None) -> bool:
        """/cancel from ``user_id``: stop their running turn in this chat (and deny its open
        approval). In a group, another member's /cancel touches neither: like a tap, it is
        not theirs to answer."""
        job = self.running
        self.desk.cancel_chat(chat_id, user_id)
        if job is None or job.chat_id != chat_id or job.kind != "turn" or job.user_id != user_id:
            return False
        job.cancel.set()
        return True

    async def run_forever(self) -> None:
        while True:
            job = await self._queue.get()
            self._waiting[job.chat_id] -= 1
            if self._waiting[job.chat_id] <= 0:
                del self._waiting[job.chat_id]
            self.running = job
            try:
                if job.update_id is not None:
                    self.started(job.update_id)
                await self._run(job)
            except Exception:
                log.exception("job %s for chat %s failed", job.kind, job.chat_id)
                self.outbox.put(job.chat_id, TURN_FAILED, job.update_id)
            finally:
                self.running = None
                if self.after_job is not None:
                    self.after_job()

    async def _run(self, job: Job) -> None:
        if job.kind == "turn":
            text = await self._turn(job)
        elif job.kind == "notice":
            text = job.text
        elif job.kind == "new":
            await self.model.run(lambda: self.runtime.new_session(conversation_id(job.chat_id)))
            text = "Started a new conversation. Earlier messages are kept on disk but no longer in my context."
        elif job.command in self.runtime.domain.documents:
            # A file (e.g. /ics): through the outbox too, so it keeps its place in the chat's order.
            make = self.runtime.domain.documents[job.command]
            document = await self.model.run(lambda: make(job.text))
            self.outbox.put_document(job.chat_id, document, job.update_id)  # marks the update done
            return
        else:
            command = self.runtime.domain.commands[job.command]
            text = await self.model.run(lambda: command(job.text))
        self.outbox.put(job.chat_id, text, job.update_id)  # marks the update done

    async def _turn(self, job: Job) -> str:
        loop = asyncio.get_running_loop()
        approver = BotApprover(self.desk, loop, job.chat_id, job.user_id, job.cancel, self._describe_now)
        await self._typing(job.chat_id)  # shown before the model starts, however short the turn
        typing = asyncio.create_task(self._keep_typing(job.chat_id))
        try:
            turn: Turn = await self.model.run(
                lambda: self.runtime.handle(conversation_id(job.chat_id), job.text, approver, job.cancel)
            )
        finally:
            typing.cancel()
        if turn.error:
            log.error("turn in chat %s ended with %s: %s", job.chat_id, turn.stop_reason.value, turn.error)
        return with_receipt(reply_for(turn), turn.receipt)  # what really happened, in the same message

    def _describe_now(self, request: ApprovalRequest) -> str | None:
        """The domain's words for ``request``'s call as it would run now (worker thread)."""
        registry = self.runtime.domain.registry
        validated = registry.validate(request.tool, request.arguments)
        if isinstance(validated, ToolResult):
            return None
        return registry.describe(request.tool, validated)

    async def _typing(self, chat_id: int) -> None:
        """One "typing…" action, bounded: it is cosmetic and must never hold up or break a turn."""
        try:
            await asyncio.wait_for(self.bot.send_chat_action(chat_id, ChatAction.TYPING), TYPING_TIMEOUT_S)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.debug("typing action for %s failed: %s", chat_id, exc)

    async def _keep_typing(self, chat_id: int) -> None:
        """Renew the action while the turn runs (the first one went out before it started)."""
        while True:
            await asyncio.sleep(TYPING_EVERY_S)
            await self._typing(chat_id)
