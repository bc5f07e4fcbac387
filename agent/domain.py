"""What a domain hands the runtime: tools, a few lines of prompt, and model-free commands.

A model-free command answers with text (``commands``) or with a file (``documents``, e.g. the
calendar as an .ics): frontends that can send a file (the bot's sendDocument) offer those, the
others simply do not. ``descriptions`` gives a command its line in a chat's command menu.

The runtime finds a domain by module name from configuration (default ``tools.calendar.domain``)
and calls its ``load_domain(settings)``; ``agent/`` never imports a domain by name. A domain
with settings of its own reads them from ``settings.sources`` (see ``agent.config``).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from types import ModuleType
from typing import TYPE_CHECKING, Callable, Protocol

from agent.language import ENGLISH, Language
from agent.receipt import ReceiptFn
from agent.tools import Registry

if TYPE_CHECKING:
    from agent.config import Settings


@dataclass(frozen=True)
class Notice:
    """A message the domain wants sent unprompted (e.g. a reminder) to every user."""

    key: str  # stable identity, so recording it as sent survives restarts
    text: str
    subject_id: int | None = None  # what it is about (an event id), for Snooze / Open buttons


class Notifier(Protocol):
    """Optional: what a frontend polls, with its own clock, to speak first (reminders, agenda).

    ``claim`` records a notice as sent before it goes out, so a restart never repeats it.
    ``target`` names one chat, e.g. ``telegram:111`` or ``repl``.
    """

    def due(self, now: datetime) -> list[Notice]: ...
    def claim(self, notice: Notice, now: datetime) -> bool: ...
    def next_due(self, now: datetime) -> datetime | None: ...
    def upcoming(self, now: datetime) -> str: ...
    def snooze(self, subject_id: int, now: datetime) -> str: ...
    def show(self, subject_id: int) -> str: ...
    def agenda_due(self, target: str, now: datetime) -> Notice | None: ...
    def agenda_command(self, target: str, argument: str) -> str: ...


class Remote(Protocol):
    """Optional: a copy of the domain's data kept elsewhere and in step with it (the calendar's
    CalDAV server). The runtime calls it around each turn; every call is bounded in time, so a
    turn never waits on a dead server for long. ``start`` begins its background work (a
    frontend calls it once it is up; ``before_turn`` calls it too)."""

    def start(self) -> None: ...
    def before_turn(self) -> None: ...
    def after_turn(self) -> list[str]: ...  # lines to tell the user once, after the turn's receipt
    def status(self) -> str: ...  # one line for a banner
    def describe(self) -> str: ...  # the whole state (account, last sync, what waits), for doctor


@dataclass(frozen=True)
class Document:
    """A file a command answers with, sent as it is (the bot: one sendDocument, caption and all)."""

    filename: str  # what the user's client shows and saves it as, e.g. ``iljeong-calendar.ics``
    content: bytes
    caption: str = ""  # one short line; Telegram shows at most 1024 characters of it


@dataclass
class Domain:
    name: str
    registry: Registry
    prompt: str  # the domain's part of the system prompt
    # Commands that answer without the model, e.g. {"today": ...} for /today and /events today.
    commands: dict[str, Callable[[str], str]] = field(default_factory=dict)
    # Commands for the local command line only (``python -m agent calendar import FILE``): they
    # take file paths on this machine, so no chat frontend may ever offer them.
    local_commands: dict[str, Callable[[str], str]] = field(default_factory=dict)
    # Commands that answer with a file, e.g. {"ics": ...} for /ics. They may read only the
    # domain's own data (never a path the user names): chat frontends offer them to chat users.
    documents: dict[str, Callable[[str], Document]] = field(default_factory=dict)
    # One line per command for a chat's command menu; a command without one works but is not listed.
    descriptions: dict[str, str] = field(default_factory=dict)
    close: Callable[[], None] = lambda: None
    notifier: Notifier | None = None  # reminders and a daily agenda, if the domain has them
    short_prompt: str = ""  # its part in the ``short`` prompt style (agent.prompt); empty: ``prompt``
    # The 📅 line after a turn, from what ran and the domain's state (``agent.receipt``); None: no receipts.
    receipt: ReceiptFn | None = None
    remote: Remote | None = None  # a server the data is kept in step with (the calendar's CalDAV)
    # Its users' language as the runtime needs it (``agent.language``): the prompt's lines beside
    # the English ones, notes on a user's message, yes-words; the default is English only.
    language: Language = ENGLISH


def present_modules(names: Iterable[str]) -> Iterator[ModuleType]:
    """Each module of ``names`` that exists, imported, in order: where a domain keeps a part that
    the lab looks for in more than one place (``eval_suite``, ``grpo_env``). A name that is not
    there is skipped; a module that is there but fails to import (a missing import inside it)
    raises, so a broken module is not taken for an absent one."""
    for name in names:
        try:
            yield importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name is not None and name.startswith(exc.name):
                continue
            raise


def load_domain(settings: Settings) -> Domain:
    module = importlib.import_module(settings.domain)
    return module.load_domain(settings)


def check_domain_settings(settings: Settings) -> None:
    """Validate the domain's own settings now, if it has any (its ``load_settings(settings)``):
    a ValueError of one line before a model loads, not a traceback after."""
    check = getattr(importlib.import_module(settings.domain), "load_settings", None)
    if check is not None:
        check(settings)
