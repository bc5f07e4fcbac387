"""The calendar domain: a SQLite store, the tools a model calls on it, and .ics import/export."""

from tools.calendar.store import Busy, CalendarStore, Event, Person
from tools.calendar.tools import CALENDAR_TOOL_NAMES, DOMAIN_PROMPT, build_registry

__all__ = [
    "CALENDAR_TOOL_NAMES",
    "DOMAIN_PROMPT",
    "Busy",
    "CalendarStore",
    "Event",
    "Person",
    "build_registry",
]
