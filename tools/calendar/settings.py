"""The calendar's own settings: default reminders, the daily agenda's time, the reminder grace.

Read from the same flags, environment and config file as the runtime's (``agent.config``'s
precedence and file), through the sources the runtime's ``Settings`` carries.
"""

from __future__ import annotations

from dataclasses import field
from datetime import time
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BeforeValidator
from pydantic.dataclasses import dataclass

from agent.config import load_section, split_list

if TYPE_CHECKING:
    from agent.config import Settings

# calendar setting name -> environment variable
ENV_NAMES: dict[str, str] = {
    "remind_minutes": "AGENT_REMIND_MINUTES",
    "agenda_time": "AGENT_AGENDA_TIME",
    "reminder_grace_minutes": "AGENT_REMINDER_GRACE_MINUTES",
}


def _minutes(value: Any) -> tuple[int, ...]:
    try:
        return tuple(sorted({int(p) for p in split_list(value) if str(p).strip()}))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"expected minutes as integers, e.g. 10 or 10,60; got {value!r}") from exc


def _hhmm(value: Any) -> str:
    try:
        return time.fromisoformat(str(value).strip()).strftime("%H:%M")
    except ValueError as exc:
        raise ValueError(f"expected a 24-hour HH:MM time, e.g. 08:00; got {value!r}") from exc


@dataclass(frozen=True)
class CalendarSettings:
    # reminders a new event gets when none are asked for (minutes before, ascending)
    remind_minutes: Annotated[tuple[int, ...], BeforeValidator(_minutes)] = field(default=(10,))
    agenda_time: Annotated[str, BeforeValidator(_hhmm)] = "08:00"  # daily agenda, local time (each chat can change it)
    reminder_grace_minutes: float = 30.0  # a reminder missed (process down) by more is skipped


def load_settings(settings: Settings) -> CalendarSettings:
    """The calendar's settings from the sources ``settings`` came from; ValueError (one line) if bad."""
    return load_section(CalendarSettings, ENV_NAMES, settings.sources)
