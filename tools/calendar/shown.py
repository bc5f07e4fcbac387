"""The calendar's fields as a person sees them: titles, places, notes and names made visible and short.

Every one of these comes from outside -- an .ics file, a CalDAV server, the model's arguments --
and may hold ESC sequences, line breaks or bidi overrides, or run to megabytes. Whatever the
calendar shows a person (approval questions, /today, /week, reminders, the agenda, the 📅
receipt) puts each field through these, so a field stays inside its quotes on its one line and
the words around it (the action, the scope, the count) always fit in the message. What the model
reads and what the store and exports hold are never changed here.
"""

from __future__ import annotations

from collections.abc import Iterable

from agent.visible import FIELD_LIMIT, visible_line, visible_list

PLACE_LIMIT = 80
NOTES_LIMIT = 120  # a note in a one-line place (an approval question); the event view shows more
NOTES_VIEW_LIMIT = 1000
NAME_LIMIT = 40
MAX_NAMES = 10  # attendees named in one line; the rest are counted


def title(text: object) -> str:
    """A title for a one-line place, without its quotes (cut at ``FIELD_LIMIT``)."""
    return visible_line(text, FIELD_LIMIT)


def place(text: object) -> str:
    return visible_line(text, PLACE_LIMIT)


def notes(text: object, limit: int = NOTES_LIMIT) -> str:
    return visible_line(text, limit)


def names(people: Iterable[object], more: str = "and {n} more") -> str:
    """Attendees in one line: at most ``MAX_NAMES``, each cut, the rest counted ("and 4,990 more")."""
    return visible_list(people, MAX_NAMES, NAME_LIMIT, more)
