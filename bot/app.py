"""The running bot: Bot API connection, handlers, durable polling, and crash recovery.

Polling is our own loop rather than PTB's Updater, because the Updater acknowledges a batch
(by asking for the next offset) before any handler has seen it. Here every update is written
to the ``Inbox`` first, as raw JSON; only then is the next ``getUpdates`` sent. An update is
marked done once its reply is in the durable outbox (``bot.outbox``), and failed (never to
be retried) if it cannot be read or its handler raises. At start-up, updates still pending
from a run that died are not re-run (a half-finished turn may already have changed the
calendar, and running it again could do it twice): the chat is told the message was
interrupted and asked to check and resend.

Stopping: SIGTERM/SIGINT are handled from before the first Bot API call, so they work
during start-up retries too; see ``serve`` and ``ShutdownGuard``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
import threading
import warnings
from dataclasses import dataclass
from typing import Awaitable, Callable

from telegram import BotCommand, Update
from telegram.error import EndPointNotFound, InvalidToken, NetworkError, RetryAfter, TelegramError, TimedOut
from telegram.ext import (
    Application,
    ApplicationBuilder,
    ApplicationHandlerStop,
    CallbackQueryHandler,
    CommandHandler,
    ContextTypes,
    MessageHandler,
    TypeHandler,
    filters,
)
from telegram.request import HTTPXRequest
from telegram.warnings import PTBUserWarning

from agent.domain import Domain
from agent.runtime import Runtime
from bot.access import Access
from bot.approvals import NOT_YOURS, ApprovalDesk
from bot.config import BotConfig, mask
from bot.inbox import Inbox, clean
from bot.outbox import Outbox, OutboxSender
from bot.reminders import PREFIX as REMINDER_PREFIX
from bot.reminders import REAL_TICK_S, Clock, ReminderDesk, ReminderLoop, chat_target, system_clock
from bot.sending import with_retry
from bot.timing import TIME
from bot.worker import Job, TurnRunner

log = logging.getLogger(__name__)
# poll() asks for getUpdates through do_api_request on purpose (to get the raw JSON).
warnings.filterwarnings("ignore", message=r"Please use 'Bot\.get_updates'", category=PTBUserWarning)

POLL_TIMEOUT_S = 25
ALLOWED_UPDATES = ["message", "callback_query"]
FIRST_POLL_DELAY_S, MAX_POLL_DELAY_S = 1.0, 60.0
TASK_BOUND_S = 3.0  # each group of tasks gets this long to end once cancelled
SHUTDOWN_BOUND_S = 10.0  # after a stop signal the process ends within this, whatever hangs
DEFAULT_API = "https://api.telegram.org"
# A refused token ends the bot "successfully", so launchd does not restart it (see README).
EXIT_TOKEN_REFUSED = 0

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
INTERRUPTED = (
    "I was restarted while working on your message \u201c{text}\u201d, so I did not finish it. "
    "Some steps may already have been done: please check, then send it again if needed."
)
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


def _short(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


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
    """Group -1: strangers and unlisted groups get silence; only their ids reach the log."""
    services = _services(context)
    chat, user = update.effective_chat, update.effective_user
    if chat is not None and services.access.allows(chat.id, chat.type, user.id if user else None):
        return
    log.warning("refused update from user %s in %s chat %s", user.id if user else None,
                chat.type if chat else None, chat.id if chat else None)
    if update.callback_query is not None:
        # A stranger's button tap must still be answered, or their client spins; no data in it.
        await with_retry(lambda: update.callback_query.answer(NOT_YOURS), "answerCallbackQuery")
    services.inbox.done(update.update_id)
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


async def on_domain_command(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    name = update.message.text.split()[0].lstrip("/").split("@")[0]
    argument = update.message.text.partition(" ")[2]
    services = _services(context)
    if name not in domain_commands(services.runtime.domain):
        await reply_now(update, context, f"/{name} is not available here. /help lists what is.")
        return
    job = Job(update.effective_chat.id, update.update_id, "command", argument, name, user_id=_user_id(update))
    await services.runner.submit(job)


async def on_agenda(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """/agenda on|off|HH:MM: this private chat's daily agenda (stored, so it survives restarts)."""
    services = _services(context)
    chat = update.effective_chat
    if services.reminders is None:
        text = "/agenda is not available here."
    elif chat.type != "private":
        text = "The daily agenda goes to private chats: send /agenda to me directly."
    else:
        argument = update.message.text.partition(" ")[2]
        text = services.reminders.notifier.agenda_command(chat_target(chat.id), argument)
    await reply_now(update, context, text)


async def on_reminders(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
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


# ---- start-up, polling, shutdown ------------------------------------------------------------


def build_application(config: BotConfig) -> Application:
    base = (config.api_base_url or DEFAULT_API).rstrip("/")
    return (
        ApplicationBuilder()
        .token(config.token)
        .base_url(f"{base}/bot")
        .base_file_url(f"{base}/file/bot")
        .request(HTTPXRequest(connection_pool_size=16, read_timeout=20, write_timeout=20, connect_timeout=10))
        .get_updates_request(HTTPXRequest(connection_pool_size=1, read_timeout=POLL_TIMEOUT_S + 15))
        .updater(None)
        .job_queue(None)
        .build()
    )


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
    while not stop.is_set():
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


class ShutdownGuard:
    """The last resort: once a stop is asked for, the process ends within ``bound_s``.

    Every task is cancelled and awaited with a bound of its own; this timer (a daemon thread,
    so it never holds the process up) covers whatever still hangs -- a library call that
    ignores cancellation, a close that blocks. ``action`` is ``os._exit(0)`` in the bot; a
    test passes something that records the miss instead.
    """

    def __init__(self, bound_s: float = SHUTDOWN_BOUND_S, action: Callable[[], None] | None = None) -> None:
        self.bound_s = bound_s
        self.action = action or self._exit
        self._timer: threading.Timer | None = None

    @staticmethod
    def _exit() -> None:
        log.error("shutdown did not finish in time; exiting anyway")
        logging.shutdown()
        os._exit(0)

    def arm(self) -> None:
        if self._timer is None:
            self._timer = threading.Timer(self.bound_s, self.action)
            self._timer.daemon = True
            self._timer.start()

    def disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()


async def connect(application: Application, config: BotConfig) -> None:
    """getMe until it answers. A network failure at start-up is retried for as long as it
    lasts (said on the console too, where the person who started the bot is looking); a
    refused token is raised (retrying cannot fix it)."""
    delay = FIRST_POLL_DELAY_S
    while True:
        try:
            await application.initialize()
            return
        except InvalidToken:
            raise
        except (NetworkError, RetryAfter) as exc:  # TimedOut and 5xx are NetworkErrors
            where = config.api_base_url or DEFAULT_API
            line = f"cannot reach the Bot API at {where} ({type(exc).__name__}: {exc}); retrying in {delay:g} s"
            log.warning("%s", line)
            print(f"python -m bot: {mask(line, config.token)}", file=sys.stderr, flush=True)
            await TIME.sleep(delay)
            delay = min(delay * 2, MAX_POLL_DELAY_S)


async def start(application: Application, services: BotServices, config: BotConfig) -> None:
    """Everything before polling: getMe, no webhook, the commands menu, interrupted updates."""
    await connect(application, config)
    await with_retry(lambda: application.bot.delete_webhook(drop_pending_updates=False), "deleteWebhook")
    try:
        await with_retry(lambda: application.bot.set_my_commands(command_menu(services.runtime.domain)), "setMyCommands")
    except TelegramError as exc:  # the menu is a convenience
        log.warning("setMyCommands failed: %s", exc)
    await application.start()
    await answer_interrupted(application, services)


async def _first(stop: asyncio.Event, work: asyncio.Task) -> bool:
    """Wait for ``work`` or a stop, whichever comes first; True if it was the stop."""
    stopper = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait([work, stopper], return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopper.cancel()
    return not work.done()


async def _end(tasks: list[asyncio.Task], bound_s: float) -> None:
    """Cancel ``tasks`` and wait for them, at most ``bound_s`` (a task that swallows its
    cancellation is left behind rather than waited on forever)."""
    for task in tasks:
        task.cancel()
    if tasks:
        _, stuck = await asyncio.wait(tasks, timeout=bound_s)
        for task in stuck:
            log.error("task %s did not stop within %g s", task.get_name(), bound_s)


async def serve(
    config: BotConfig,
    runtime: Runtime,
    approval_timeout_s: float,
    inbox: Inbox,
    clock: Clock = system_clock,
    tick_s: float = REAL_TICK_S,
    guard: ShutdownGuard | None = None,
) -> int:
    """Run until SIGTERM/SIGINT. The model is already loaded: nothing waits on it here.

    ``clock`` and ``tick_s`` drive reminders and the agenda (tests pass a file clock). A stop
    is honoured at any point, also while start-up is still retrying: every task is cancelled
    and awaited within ``TASK_BOUND_S``, and ``guard`` ends the process if even that hangs.
    Returns 0 after a stop, 1 if a task died.
    """
    guard = guard or ShutdownGuard()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()

    def on_signal() -> None:
        if not stop.is_set():
            log.info("stop requested")
            stop.set()
            guard.arm()

    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, on_signal)
    try:
        return await _serve(config, runtime, approval_timeout_s, inbox, clock, tick_s, stop)
    finally:
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(signum)


def report_refused_token(config: BotConfig) -> int:
    """Telegram refused the token (at start-up or while running): one line, exit 0.

    Retrying cannot help, and a crash would have launchd restart the bot every 30 s to be
    refused again. Exit 0: KeepAlive {SuccessfulExit: false} then leaves it stopped.
    """
    source = config.token_file or "TELEGRAM_BOT_TOKEN"
    line = (f"Telegram refused the bot token from {source} (401 Unauthorized): get the current token "
            f"from @BotFather, store it there, then start the bot again. Not restarting.")
    log.error("%s", line)
    print(f"python -m bot: {line}", file=sys.stderr)
    return EXIT_TOKEN_REFUSED


async def _serve(
    config: BotConfig,
    runtime: Runtime,
    approval_timeout_s: float,
    inbox: Inbox,
    clock: Clock,
    tick_s: float,
    stop: asyncio.Event,
) -> int:
    application = build_application(config)
    access = Access(config.allowed_users, config.allowed_chats)
    outbox = Outbox(inbox.path)
    desk = ApprovalDesk(application.bot, access, approval_timeout_s, outbox)
    runner = TurnRunner(application.bot, runtime, desk, outbox)
    services = BotServices(access, inbox, runtime, desk, runner, outbox)
    notifier = runtime.domain.notifier
    if notifier is not None:
        services.reminders = ReminderLoop(
            outbox, notifier, config.allowed_users, ReminderDesk(access), clock, tick_s
        )
        runner.after_job = services.reminders.wake  # a turn may have changed the calendar
    application.bot_data["services"] = services
    add_handlers(application, domain_commands(runtime.domain), reminders=notifier is not None)

    starting = asyncio.create_task(start(application, services, config), name="start-up")
    tasks: list[asyncio.Task] = []
    status = 0
    refused = False  # the token was revoked while polling
    try:
        if await _first(stop, starting):
            log.info("stopped during start-up")
            await _end([starting], TASK_BOUND_S)
            return 0
        starting.result()  # raises InvalidToken (handled by the caller) or a bug
        log.info("polling as @%s; allowed users %s, chats %s", application.bot.username,
                 sorted(access.users), sorted(access.chats))
        tasks = [
            asyncio.create_task(runner.run_forever(), name="turns"),
            asyncio.create_task(poll(application, inbox, stop), name="poll"),
        ]
        sender = OutboxSender(application.bot, outbox)
        sending = asyncio.create_task(sender.run_forever(), name="outbox")
        tasks.append(sending)
        if services.reminders is not None:  # the schedule is the store: a start-up rebuilds it
            tasks.append(asyncio.create_task(services.reminders.run_forever(), name="reminders"))
        watch = asyncio.ensure_future(asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED))
        await _first(stop, watch)
        watch.cancel()
        for task in tasks:
            if task.done() and not task.cancelled() and task.exception() is not None:
                if isinstance(task.exception(), InvalidToken):
                    refused = True
                else:
                    log.error("bot stopped by an error", exc_info=task.exception())
                    status = 1
        # Nothing new comes in; then the send in hand (if any) is let finish, not cut off.
        await _end([task for task in tasks if task is not sending], TASK_BOUND_S)
        sender.finish_up()
        await asyncio.wait([sending], timeout=TASK_BOUND_S)
    finally:
        await _end(tasks, TASK_BOUND_S)
        for step in (application.stop, application.shutdown):
            try:
                await _end([asyncio.create_task(_quietly(step))], TASK_BOUND_S)
            except Exception:
                log.exception("closing the Bot API connection failed")
        runner.close()
        outbox.close()
    if refused and status == 0:
        status = report_refused_token(config)
    if runner.model.busy:
        # A turn is still inside the model (or a tool). Tidying up under it (closing its
        # databases, finalising the interpreter) could crash mid-write; its update stays
        # pending and is reported as interrupted at the next start.
        log.info("stopped mid-turn; the unfinished message will be reported at the next start")
        logging.shutdown()
        os._exit(status)
    log.info("stopped")
    return status


async def _quietly(step: Callable[[], Awaitable[None]]) -> None:
    """application.stop/shutdown, where "was not running" is not an error."""
    try:
        await step()
    except RuntimeError as exc:
        log.debug("%s: %s", getattr(step, "__name__", step), exc)
