"""What a domain may add to the runtime for its users' language: the runtime itself writes English.

The runtime's prompt scaffolding (the date line, the rules, the days-ahead list, the time stamp)
is English, and it knows no other language. A domain whose users write in another language
hands the runtime a ``Language`` (``Domain.language``, ``Environment.language`` in eval), whose
parts the runtime calls without knowing what they do:

- ``annotate`` rewrites a user's message before it is stamped and stored (e.g. a clock time said
  in words shown the 24-hour way), when the ``time_notes`` / ``date_notes`` settings ask for it;
- ``companions`` gives a rule of the ``full`` system prompt a line in the users' language, written
  beside the English one (keys: ``agent.prompt.FULL_RULES``);
- ``date_labels`` names the weekdays, weeks and near days of the days-ahead list;
- ``yes_words`` are the answers the terminal takes as a yes; ``day_words`` what the REPL's help
  says may follow ``/events``.

``ENGLISH`` (every default) is what a domain without a language of its own gets: English lines
only, and user messages stored as typed.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Callable, Mapping

# (message as typed, the local time it was sent, time_notes, date_notes) -> the message as stored.
Annotate = Callable[[str, datetime, bool, bool], str]
# (the local time of the prompt, the user's zone name) -> {rule key: the rule in the users' language}.
Companions = Callable[[datetime, str], Mapping[str, str]]


def as_typed(text: str, local_now: datetime, time_notes: bool, date_notes: bool) -> str:
    """No annotation: the message is stored exactly as the user typed it."""
    return text


def no_companions(local_now: datetime, tz: str) -> Mapping[str, str]:
    """No line besides the English ones."""
    return {}


@dataclass(frozen=True)
class DateLabels:
    """How the days-ahead list (``agent.prompt.date_list``) names a day: ``weekdays`` Monday
    first (7); ``weeks`` this week, next week, ..., the last label standing for every later
    week; ``near`` the days right after today, tomorrow first."""

    weekdays: tuple[str, ...] = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
    weeks: tuple[str, ...] = ("this week", "next week", "week after next")
    near: tuple[str, ...] = ("tomorrow", "day after tomorrow")

    def __post_init__(self) -> None:
        if len(self.weekdays) != 7 or not self.weeks:
            raise ValueError("DateLabels needs 7 weekdays (Monday first) and at least one week label")


@dataclass(frozen=True)
class Language:
    """The hooks, every one defaulting to English only (see the module docstring)."""

    annotate: Annotate = as_typed
    companions: Companions = no_companions
    date_labels: DateLabels = DateLabels()
    yes_words: frozenset[str] = frozenset({"y", "yes"})
    day_words: str = "today (default), tomorrow, a weekday (friday, fri) or YYYY-MM-DD"


ENGLISH = Language()
