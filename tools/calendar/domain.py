"""The calendar as a runtime domain: the store under AGENT_DATA_DIR, its tools, and /today."""

from __future__ import annotations

from datetime import date, datetime, time, timedelta
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

from agent.domain import Domain
from tools.calendar.reminders import CalendarNotifier
from tools.calendar.store import CalendarStore
from tools.calendar.tools import DOMAIN_PROMPT, build_registry, event_words

if TYPE_CHECKING:
    from agent.config import Settings


def agenda(store: CalendarStore, day_text: str = "") -> str:
    """The events of one day as plain lines, without the model (``/today``, ``/events DATE``)."""
    zone = ZoneInfo(store.tz)
    try:
        day = date.fromisoformat(day_text) if day_text else datetime.now(zone).date()
    except ValueError:
        return f"Not a date: {day_text!r}. Use YYYY-MM-DD, e.g. 2026-12-01."
    start = datetime.combine(day, time(0), zone)
    events = store.events_between(start, start + timedelta(days=1))
    if not events:
        return f"No events on {day.isoformat()}."
    return "\n".join([f"{day.isoformat()}:"] + [f"  {event_words(e, zone)}" for e in events])


def load_domain(settings: Settings) -> Domain:
    store = CalendarStore(settings.store_path, tz=settings.tz)
    notifier = CalendarNotifier(
        store, settings.agenda_time, timedelta(minutes=settings.reminder_grace_minutes)
    )
    return Domain(
        name="calendar",
        registry=build_registry(store, default_reminders=settings.remind_minutes),
        prompt=DOMAIN_PROMPT,
        commands={"today": lambda arg: agenda(store, arg)},
        close=store.close,
        notifier=notifier,
    )
