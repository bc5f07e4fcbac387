"""The running bot: the Bot API connection, start-up, the tasks it runs, and shutdown.

``serve`` wires the pieces together -- the handlers (``bot.handlers``), the durable polling
loop (``bot.polling``), the turn runner, the outbox sender and the reminder loop -- and runs
them until a stop. Stopping: SIGTERM/SIGINT are handled from before the first Bot API call,
so they work during start-up retries too; see ``serve`` and ``ShutdownGuard``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
import threading
from typing import Awaitable, Callable

from telegram.error import InvalidToken, NetworkError, RetryAfter, TelegramError
from telegram.ext import Application, ApplicationBuilder
from telegram.request import HTTPXRequest

from agent.runtime import Runtime
from bot.access import Access
from bot.approvals import ApprovalDesk
from bot.config import BotConfig
from bot.masking import mask
from bot.handlers import BotServices, add_handlers, command_menu, domain_commands
from bot.inbox import Inbox
from bot.outbox import Outbox, OutboxSender
from bot.polling import FIRST_POLL_DELAY_S, MAX_POLL_DELAY_S, POLL_TIMEOUT_S, poll, recover
from bot.reminders import REAL_TICK_S, Clock, ReminderDesk, ReminderLoop, system_clock
from bot.sending import with_retry
from bot.timing import TIME
from bot.worker import TurnRunner

log = logging.getLogger(__name__)

TASK_BOUND_S = 3.0  # each group of tasks gets this long to end once cancelled
SHUTDOWN_BOUND_S = 10.0  # after a stop signal the process ends within this, whatever hangs
DEFAULT_API = "https://api.telegram.org"
# A refused token ends the bot "successfully", so launchd does not restart it (see docs/bot.md).
EXIT_TOKEN_REFUSED = 0


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
    """Everything before polling: getMe, no webhook, the commands menu, what a crash left pending."""
    await connect(application, config)
    await with_retry(lambda: application.bot.delete_webhook(drop_pending_updates=False), "deleteWebhook")
    try:
        await with_retry(lambda: application.bot.set_my_commands(command_menu(services.runtime.domain)), "setMyCommands")
    except TelegramError as exc:  # the menu is a convenience
        log.warning("setMyCommands failed: %s", exc)
    await application.start()
    await recover(application, services, config.stale_after_s)


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
    runner.started = inbox.started  # a restart tells the message in progress from those never begun
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
        if not access.users and any(chat < 0 for chat in access.chats):
            log.warning("groups are allowed but TELEGRAM_ALLOWED_USERS is empty: nobody can act in a group")
        if runtime.domain.remote is not None:
            runtime.domain.remote.start()  # sync at start, then every interval, in its own thread
        tasks = [
            asyncio.create_task(runner.run_forever(), name="turns"),
            asyncio.create_task(poll(application, inbox, stop, access.admits_raw, config.keep_handled_s), name="poll"),
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
