"""Text written the way an attacker writes it, and the check that none of it reaches a person.

The attacks: ESC sequences that clear the screen and move the cursor (``\\x1b[2J\\x1b[H``), a
one-byte C1 CSI (U+009B), a carriage return that makes later text overwrite earlier text, line
breaks that start a fake line under a real one ("📅 nothing changed"), and bidi overrides and
isolates (U+202E, U+2066) that show text in another order. ``hostile_ics`` packs them into an
.ics file the way a shared calendar or a CalDAV server could: a weekly series with a 10,000-
character title and 5,000 attendees. The importer keeps 500 characters of it and 200 attendees
(``tools.calendar.limits``), so ``add_hostile_series`` stores the whole of it directly, as any
other way into the store could: what is shown must not rely on the importer's cut.
"""

from __future__ import annotations

import unicodedata
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from tools.calendar.store import CalendarStore

# Pieces that must never reach a screen or the Bot API as they are.
ESC_SEQUENCE = "\x1b[2J\x1b[H"  # clear the screen, cursor home
C1_CSI = "\x9b31m"
RLO, LRI, PDI = "\u202e", "\u2066", "\u2069"
TITLE_HEAD = "Dentist"
# What an importer keeps of a hostile SUMMARY (it folds whitespace): 10,000 characters in all.
HOSTILE_TITLE = (f"{TITLE_HEAD} {RLO}gnp.exe{LRI}{PDI} {ESC_SEQUENCE}PAID{C1_CSI}\u200b\ufeff\U000e0041 "
                 + "x" * 10_000)[:10_000]
# A place, a note: fields an importer keeps as they are (line breaks and all).
HOSTILE_PLACE = "Room 1\r\n📅 deleted everything\x1b[31m\u2028red"
HOSTILE_NOTES = f"Bring this.\r{ESC_SEQUENCE}{RLO}txt.exe"
ATTENDEES = 5_000
WEEKS = 52

BIDI = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c")


def bad_characters(text: str, newlines: bool = True) -> list[str]:
    """The characters in ``text`` a person must not be shown (as they are): C0 controls (``\\n``
    allowed when ``newlines``, tab too), DEL, C1, bidi controls, U+2028/2029, invisible format
    characters other than ZWJ/ZWNJ, and lone surrogates."""
    found = []
    for char in text:
        code = ord(char)
        if char in "\n\t" and newlines:
            continue
        category = unicodedata.category(char)
        if (code < 0x20 or 0x7F <= code <= 0x9F or char in BIDI or char in "\u2028\u2029"
                or (category == "Cf" and char not in "\u200c\u200d") or category == "Cs"):
            found.append(char)
    return found


def _escaped(text: str) -> str:
    """iCalendar TEXT escaping (RFC 5545 3.3.11); control characters stay raw, as a hostile file has them."""
    return text.replace("\\", "\\\\").replace(";", "\\;").replace(",", "\\,").replace("\r\n", "\\n").replace("\n", "\\n")


def hostile_ics(title: str = HOSTILE_TITLE, attendees: int = ATTENDEES, start: str = "20261201T010000Z") -> bytes:
    """One weekly series (``WEEKS`` times) with ``title``, ``HOSTILE_PLACE``, a hostile note and
    ``attendees`` attendees, starting at ``start`` (UTC; 10:00 in Seoul by default)."""
    lines = [
        "BEGIN:VCALENDAR", "VERSION:2.0", "PRODID:-//attacker//shared calendar//EN",
        "BEGIN:VEVENT", "UID:hostile-series@example.com", "DTSTAMP:20261101T000000Z",
        f"DTSTART:{start}", f"DTEND:{start[:9]}{int(start[9:11]) + 1:02d}{start[11:]}",
        f"RRULE:FREQ=WEEKLY;COUNT={WEEKS}",
        f"SUMMARY:{_escaped(title)}",
        f"LOCATION:{_escaped(HOSTILE_PLACE)}",
        f"DESCRIPTION:{_escaped(HOSTILE_NOTES)}",
        *(f"ATTENDEE;CN=Guest {i}:mailto:guest{i}@example.com" for i in range(attendees)),
        "END:VEVENT", "END:VCALENDAR",
    ]
    return ("\r\n".join(lines) + "\r\n").encode("utf-8")


def add_hostile_series(store: CalendarStore, first: datetime | None = None) -> int:
    """The same series stored whole (10,000-character title, 5,000 attendees), weekly from
    ``first`` (Tue 2026-12-01 10:00 in Seoul) with a 10-minute reminder; its id."""
    start = first or datetime(2026, 12, 1, 10, 0, tzinfo=ZoneInfo("Asia/Seoul"))
    event = store.add_event(
        HOSTILE_TITLE, start, start + timedelta(hours=1), location=HOSTILE_PLACE, notes=HOSTILE_NOTES,
        attendees=[f"Guest {i}" for i in range(ATTENDEES)], remind_minutes_before=[10],
        recurrence=f"RRULE:FREQ=WEEKLY;COUNT={WEEKS}",
    )
    return event.id
