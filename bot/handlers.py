"""What each kind of update gets: the access gate, commands, text, button taps, and errors.

PTB dispatches to these in three groups: the gate (-1) drops strangers and unlisted groups,
group 0 holds one handler per kind of message or tap, and group 1 finishes updates no handler
owns. Every handler ends its update, through the outbox or by marking it done in the inbox,
so the durable polling loop (``bot.polling``) never re-runs it. Model turns and model-free
domain commands go to the ``TurnRunner``; approval and reminder buttons to their desks.

What the domain holds is answered only in private chats: a group has members who are not on the
allowlist (and members who join later), so a model-free domain command (``/today``, ``/week``,
``/ics``) or ``/reminders`` in a group gets one line asking for it in a private chat.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from telegram import BotCommand, Update
from telegram.ext import (
    Application,
    ApplicationHandlerStop,
    CallbackQueryHandler,
    CommandHandler,
    ContextTypes,
    MessageHandler,
    TypeHandler,
    filters,
)

from agent.domain import Domain
from agent.runtime import Runtime
from bot.access import PRIVATE, Access
from bot.approvals import NOT_YOURS, ApprovalDesk
from bot.inbox import Inbox
from bot.outbox import Outbox
from bot.reminders import PREFIX as REMINDER_PREFIX
from bot.reminders import ReminderLoop, chat_target
from bot.sending import with_retry
from bot.worker import Job, TurnRunner

log = logging.getLogger(__name__)

HELP_INTRO = (
    "I'm your calendar assistant. Write what you need in plain words, e.g. "
    "\"lunch with Mina tomorrow at 12\".\n\n"
)
HELP_COMMANDS = (
    "/new – start a fresh conversation\n"
    "/cancel – stop what I'm doing\n"
    "/help – this text\n\n"
    "Before I delete or change anything I ask with Approve / Deny buttons."
)
REMINDER_HELP = (
    "\n\nReminders come before your events (say e.g. \u201c30분 전에 알려줘\u201d); "
    "/reminders lists the next ones.\n/agenda on|off|HH:MM – the daily agenda in this chat"
)
PRIVATE_ONLY = ("/{name} is answered only in a private chat, because it shows what is in your calendar "
                "and others in this group could read it: send /{name} to me directly.")
BUILT_IN_COMMANDS = [
    BotCommand("new", "start a fresh conversation"),
    BotCommand("cancel", "stop the running request"),
    BotCommand("help", "what I can do"),
]


def domain_commands(domain: Domain) -> list[str]:
    """Every model-free command of the domain the bot answers: text ones and file ones."""
    return sorted({*domain.commands, *domain.documents})


def described_commands(domain: Domain) -> list[BotCommand]:
    """The domain's commands that have a description, in the domain's order."""
    offered = set(domain_commands(domain))
    return [BotCommand(name, text) for name, text in domain.descriptions.items() if name in offered]


def command_menu(domain: Domain) -> list[BotCommand]:
    """The menu Telegram shows: the domain's described commands first, then the bot's own."""
    return described_commands(domain) + BUILT_IN_COMMANDS


def help_text(domain: Domain) -> str:
    """/start and /help: the domain's described commands, then the bot's own."""
    lines = "".join(f"/{c.command} – {c.description}\n" for c in described_commands(domain))
    return HELP_INTRO + lines + HELP_COMMANDS


@dataclass
class BotServices:
    """What the handlers share; kept in ``application.bot_data['services']``."""

    access: Access
    inbox: Inbox
    runtime: Runtime
    desk: ApprovalDesk
    runner: TurnRunner
    outbox: Outbox
    reminders: ReminderLoop | None = None  # when the domain has a Notifier


def _services(context: ContextTypes.DEFAULT_TYPE) -> BotServices:
    return context.application.bot_data["services"]


# ---- handlers -------------------------------------------------------------------------------


def _user_id(update: Update) -> int | None:
    return update.effective_user.id if update.effective_user else None


async def gate(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """Group -1: strangers and unlisted groups get silence; only their ids reach the log, and
    the inbox keeps only the update's id and times."""
    services = _services(context)
    chat, user = update.effective_chat, update.effective_user
    if chat is not None and services.access.allows(chat.id, chat.type, user.id if user else None):
        return
    why = services.access.refusal(chat.id, chat.type) if chat is not None else "no chat"
    log.warning("refused update from user %s in %s chat %s: %s", user.id if user else None,
                chat.type if chat else None, chat.id if chat else None, why)
    if update.callback_query is not None:
        # A stranger's button tap must still be answered, or their client spins; no data in it.
        # In an allowed group the answer (which only the tapper sees) says who may act there.
        answer = why if chat is not None and chat.type != PRIVATE and chat.id in services.access.chats else NOT_YOURS
        await with_retry(lambda: update.callback_query.answer(answer), "answerCallbackQuery")
    services.inbox.refused(update.update_id)  # their text is not kept
    raise ApplicationHandlerStop


async def reply_now(update: Update, context: ContextTypes.DEFAULT_TYPE, text: str) -> None:
    """Answer without the model: through the outbox, which also finishes the update."""
    _services(context).outbox.put(update.effective_chat.id, text, update.update_id)


async def on_start(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    services = _services(context)
    await reply_now(update, context, help_text(services.runtime.domain) + (REMINDER_HELP if services.reminders else ""))


async def on_cancel(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    stopped = _services(context).runner.cancel(update.effective_chat.id, _user_id(update))
    await reply_now(update, context, "Stopping…" if stopped else "Nothing is running.")


async def on_new(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    job = Job(update.effective_chat.id, update.update_id, "new", user_id=_user_id(update))
    await _services(context).runner.submit(job)


async def in_private(update: Update, context: ContextTypes.DEFAULT_TYPE, name: str) -> bool:
    """True in a private chat; in a group, answers with ``PRIVATE_ONLY`` and returns False."""
    if update.effective_chat.type == PRIVATE:
        return True
    await reply_now(update, context, PRIVATE_ONLY.format(name=name))
    return False


async def on_domain_command(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    name = update.message.text.split()[0].lstrip("/").split("@")[0]
    argument = update.message.text.partition(" ")[2]
    services = _services(context)
    if name not in domain_commands(services.runtime.domain):
        await reply_now(update, context, f"/{name} is not available here. /help lists what is.")
        return
    if not await in_private(update, context, name):
        return
    job = Job(update.effective_chat.id, update.update_id, "command", argument, name, user_id=_user_id(update))
    await services.runner.submit(job)


async def on_agenda(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """/agenda on|off|HH:MM: this private chat's daily agenda (stored, so it survives restarts)."""
    services = _services(context)
    chat = update.effective_chat
    if services.reminders is None:
        text = "/agenda is not available here."
    elif chat.type != PRIVATE:
        text = "The daily agenda goes to private chats: send /agenda to me directly."
    else:
        argument = update.message.text.partition(" ")[2]
        text = services.reminders.notifier.agenda_command(chat_target(chat.id), argument)
    await reply_now(update, context, text)


async def on_reminders(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    if not await in_private(update, context, "reminders"):
        return
    reminders = _services(context).reminders
    text = reminders.notifier.upcoming(reminders.clock()) if reminders else "/reminders is not available here."
    await reply_now(update, context, text)


async def on_unknown_command(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    await reply_now(update, context, "I don't know that command. /help lists what I can do.")


async def on_text(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    await _services(context).runner.submit(
        Job(update.effective_chat.id, update.update_id, "turn", update.message.text, user_id=_user_id(update))
    )


async def on_other_message(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    await reply_now(update, context, "I can only read text messages.")


async def on_button(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    services = _services(context)
    query = update.callback_query
    data = query.data if isinstance(query.data, str) else None  # a forged update may carry 5 or [..]
    if services.reminders is not None and data is not None and data.startswith(REMINDER_PREFIX + ":"):
        text = await services.reminders.answer(query)
    else:
        text = await services.desk.answer(query)
    await with_retry(lambda: query.answer(text), "answerCallbackQuery")
    services.inbox.done(update.update_id)


async def finish_unhandled(update: object, context: ContextTypes.DEFAULT_TYPE) -> None:
    """Group 1: updates no handler owns (edits, reactions, …) are done once seen."""
    if isinstance(update, Update) and update.message is None and update.callback_query is None:
        _services(context).inbox.done(update.update_id)


async def on_error(update: object, context: ContextTypes.DEFAULT_TYPE) -> None:
    """A handler raised: the update is marked failed with the error (so a restart neither
    re-runs it nor reports it as interrupted) and the bot goes on with the next one."""
    update_id = getattr(update, "update_id", None)
    error = context.error
    log.error("handler failed for update %s", update_id, exc_info=error)
    if isinstance(update_id, int):
        _services(context).inbox.failed(update_id, f"handler failed: {type(error).__name__}: {error}")
    # PTB would otherwise go on to the next handler group: after a failing gate, that would be
    # the handlers the gate exists to keep a stranger's update away from.
    raise ApplicationHandlerStop


def add_handlers(application: Application, domain_commands: list[str], reminders: bool = False) -> None:
    application.add_handler(TypeHandler(Update, gate), group=-1)
    # Handlers read update.message: an edited message (which has none) is left to
    # finish_unhandled rather than crash them.
    new = filters.UpdateType.MESSAGE
    application.add_handler(CommandHandler(["start", "help"], on_start, filters=new))
    if reminders:
        application.add_handler(CommandHandler("agenda", on_agenda, filters=new))
        application.add_handler(CommandHandler("reminders", on_reminders, filters=new))
    application.add_handler(CommandHandler("cancel", on_cancel, filters=new))
    application.add_handler(CommandHandler("new", on_new, filters=new))
    if domain_commands:
        application.add_handler(CommandHandler(domain_commands, on_domain_command, filters=new))
    application.add_handler(MessageHandler(new & filters.COMMAND, on_unknown_command))
    application.add_handler(MessageHandler(new & filters.TEXT & ~filters.COMMAND, on_text))
    application.add_handler(MessageHandler(new, on_other_message))
    application.add_handler(CallbackQueryHandler(on_button))
    application.add_handler(TypeHandler(Update, finish_unhandled), group=1)
    application.add_error_handler(on_error)
