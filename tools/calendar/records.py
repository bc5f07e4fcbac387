"""What the calendar store hands out: a person, an event (or one occurrence of a series), a busy
interval, and ``UNSET``, the "leave this field alone" its updates take.

Apart from ``store`` because most of the code base (the tools, .ics, CalDAV sync, reminders, the
eval) speaks these values and none of it needs the SQLite code that fills them; ``store``
imports them back, so ``from tools.calendar.store import Event`` keeps working.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from tools.calendar import recurrence as rec
from tools.calendar.utc_text import to_utc_text

__all__ = ["UNSET", "Busy", "Event", "Person"]


@dataclass(frozen=True)
class Person:
    id: int
    name: str


@dataclass(frozen=True)
class Event:
    """An event; ``start``/``end`` are aware datetimes in the event's own zone ``tz``."""

    id: int
    title: str
    start: datetime
    end: datetime
    tz: str
    location: str | None = None
    notes: str | None = None
    attendees: tuple[str, ...] = ()
    created_at: datetime | None = None
    updated_at: datetime | None = None
    remind_minutes_before: tuple[int, ...] = ()  # ascending
    uid: str = ""  # the iCalendar UID, made once (schema.new_uid) and kept through export and import
    recurrence: str | None = None  # RRULE/RDATE/EXDATE lines (see tools.calendar.recurrence); None: one-off
    all_day: bool = False  # start and end are local midnights; end is the day after the last day
    transparent: bool = False  # TRANSP:TRANSPARENT (a birthday, a holiday): never busy
    ics_extra: str | None = None  # iCalendar properties we do not model, as content lines
    original_start: datetime | None = None  # set on an occurrence: its start as the series has it

    @property
    def is_series(self) -> bool:
        return self.recurrence is not None

    @property
    def key(self) -> tuple[int, str | None]:
        """An occurrence's stable identity: (series id, original start UTC text); (id, None) for one-off."""
        return self.id, to_utc_text(self.original_start) if self.original_start is not None else None

    def series_words(self, korean: bool = False) -> str:
        """"weekly, Mon 10:00" (or "매주 월 10:00"); "" for a one-off event."""
        first = self.original_start or self.start
        return rec.describe(self.recurrence, first, korean=korean, all_day=self.all_day)


@dataclass(frozen=True)
class Busy:
    id: int
    person: str
    start: datetime  # aware, UTC
    end: datetime
    label: str | None = None


class _Unset:
    """Marks "leave unchanged" in ``update_event`` (None means "clear")."""

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()
