"""The calendar tools the model calls, bound to one store: ``build_registry(store)``.

This module is the registry: each tool's name, the description the model reads, its argument
model and its flags (destructive, mutating, what an approval covers). The functions themselves
are ``tool_functions``; the approval questions' words ``approval_words``; the prompt text
``prompt_text``.
"""

from __future__ import annotations

from datetime import datetime
from functools import partial
from typing import Callable, Sequence

from tools.calendar.arguments import (
    CreateEventArgs,
    DeleteEventArgs,
    FindCommonFreeTimeArgs,
    FindFreeSlotsArgs,
    SearchEventsArgs,
    UpdateEventArgs,
)
from tools.calendar import result_views
from tools.calendar.approval_rules import create_question, target_fingerprint
from tools.calendar.approval_words import describe_delete, describe_update
from tools.calendar.prompt_text import DOMAIN_PROMPT  # noqa: F401 - tools.calendar's public name, imported from here
from tools.calendar.store import CalendarStore
from tools.calendar.tool_functions import DEFAULT_REMINDERS, CalendarTools
from agent.tools import Registry, Tool

CALENDAR_TOOL_NAMES: tuple[str, ...] = (
    "search_events",
    "create_event",
    "update_event",
    "delete_event",
    "find_free_slots",
    "find_common_free_time",
)


def build_registry(
    store: CalendarStore,
    now: Callable[[], datetime] | None = None,
    default_reminders: Sequence[int] = DEFAULT_REMINDERS,
    also_on: str | None = None,
) -> Registry:
    """The calendar tools bound to ``store``; ``now`` is the clock (tests and evals freeze it);
    ``default_reminders`` are the minutes-before a new event gets when the call names none;
    ``also_on`` names the server the calendar is synced with, for the approval prompts."""
    t = CalendarTools(store, now, default_reminders, also_on)

    def bound(args: UpdateEventArgs | DeleteEventArgs) -> str:
        """What an approval covers: the rows the change would touch (``approval_rules``)."""
        return target_fingerprint(store, args)

    return Registry.of(
        [
            Tool(
                "search_events",
                "List events on a day or in a date range, optionally matching text. Returns ids for update/delete.",
                SearchEventsArgs,
                t.search_events,
            ),
            Tool(
                "create_event",
                "Add an event. Refuses to overlap another event unless allow_conflict=true.",
                CreateEventArgs,
                result_views.refusing_rules_that_never_match(store, t.create_event),
                mutates=True,
                asks_when=lambda args, ran: create_question(args, ran, also_on),  # bulk changes ask first
            ),
            Tool(
                "update_event",
                "Change an existing event; give only the fields to change. Needs the user's confirmation.",
                UpdateEventArgs,
                result_views.refusing_rules_that_never_match(store, t.update_event),
                destructive=True,
                mutates=True,
                describe=partial(describe_update, t),
                fingerprint=bound,
                atomic=store.transaction,
            ),
            Tool(
                "delete_event",
                "Delete an event by id. Needs the user's confirmation.",
                DeleteEventArgs,
                result_views.refusing_rules_that_never_match(store, t.delete_event),
                destructive=True,
                mutates=True,
                describe=partial(describe_delete, t),
                fingerprint=bound,
                atomic=store.transaction,
            ),
            Tool(
                "find_free_slots",
                "Find free times of at least duration_minutes within working hours, between the user's events.",
                FindFreeSlotsArgs,
                t.find_free_slots,
            ),
            Tool(
                "find_common_free_time",
                "Find times when the user and all the named people are free (e.g. 민수와 지영이 같이 되는 시간).",
                FindCommonFreeTimeArgs,
                t.find_common_free_time,
            ),
        ]
    )
