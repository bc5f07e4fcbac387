"""How a file's VEVENTs are read: their times and which copy of an event counts, the way other
calendar apps read them, and each file's TZIDs as its own (``parsed``).

Files in the wild break RFC 5545's rules (Google Calendar writes zero-length events as DTEND
equal to DTSTART; a holiday feed ends each all-day event on its start date), and
``recurring-ical-events`` (the Open Web Calendar's reader, and what our corpus test compares
with) reads them anyway; refusing such an event loses it for the user, who sees it elsewhere. So:

- DTSTART alone: a date lasts that day, a time takes no time (RFC 5545 §3.6.1).
- A date DTEND equal to (or before) a date DTSTART: that one day; a holiday calendar writing
  every holiday's end as its start day lost all its events.
- A time DTEND equal to DTSTART (Google Calendar writes it) or before it (``DURATION:-PT1H``
  too): no time at its start, and the event is named in the import report. For an end before
  the start the apps disagree: ``recurring-ical-events`` (and SOGo's view) swap the two,
  Apple Calendar drops the event, khal skips it; swapping moves the start the file names,
  and the RRULE, RECURRENCE-ID and reminders hang from that start, so we keep it.
- A date beside a time (``DTSTART;VALUE=DATE`` with a time DTEND, or the reverse): the date is
  its midnight and the event is timed; a date or floating time beside a time with a zone is in
  that zone (floating beside a floating time).
- An empty ``RRULE:`` states no repetition (``stated_rules``).
- Several VEVENTs with one UID and no RECURRENCE-ID (edited copies): the latest by SEQUENCE,
  then DTSTAMP, is the event; on a tie the first in the file, as ``recurring-ical-events``.
  Several with one UID and one RECURRENCE-ID: the latest of them, the same way.

The store refuses an event that takes no time (``CHECK (end_utc > start_utc)``, and slot and
reminder code rely on it), so such an event is stored ``STAND_IN`` long, the shortest length
the store keeps (its times are to the second), and its extra properties carry ``MARK``; the
export (``drop_stand_in``) writes it back without DTEND, which RFC 5545 reads as no length.
The mark counts only while the event is still ``STAND_IN`` long: once it is given a length,
that length is exported. A file's own ``MARK`` is never kept (``MARK`` is a modelled name).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from typing import Any, Callable

import icalendar

STAND_IN = timedelta(seconds=1)  # the stored length of an event that takes no time
MARK = "X-ILJEONG-LENGTH"  # in ics_extra: the stored STAND_IN stands for no length
MARK_LINE = f"{MARK}:PT0S"
_DAY = timedelta(days=1)


class Skip(Exception):
    """A VEVENT we do not keep; the message is its reason."""


@dataclass(frozen=True)
class Span:
    start: datetime
    end: datetime  # start + STAND_IN when ``zero``
    all_day: bool
    zero: bool  # the file gives it no length
    note: str | None  # a rule of RFC 5545 the file broke and how it was read, for the import report


_PARSING = threading.Lock()


def parsed(content: bytes | str) -> list[icalendar.Component]:
    """The file's components, its TZIDs read as if it were the first file read. icalendar keeps
    every custom VTIMEZONE it parses, process-wide, under its TZID and answers that TZID with it
    from then on (``TZP.cache_timezone_component``): in a long-running bot one file (a hostile
    one: ``TZID:Office`` at +14:00) decided how a later file's ``TZID=Office`` times were read,
    and in the corpus test which file came first decided a file's zone. Switching to the
    provider icalendar already uses starts an empty cache; the lock keeps two of our imports
    from emptying it under each other."""
    with _PARSING:
        icalendar.use_zoneinfo()
        return icalendar.Calendar.from_ical(content, multiple=True)


def decoded_once(vevent: icalendar.Event, name: str) -> Any:
    """A time property's value (DTSTART, DTEND, DURATION, RECURRENCE-ID); a VEVENT that gives
    one twice does not say when it is, so it is skipped rather than guessed."""
    values = vevent.get(name)
    if isinstance(values, list):
        raise Skip(f"{name.upper()} appears {len(values)} times")
    return vevent.decoded(name)


def span(vevent: icalendar.Event, aware: Callable[[date], datetime]) -> Span:
    """When the VEVENT is, by the rules above; ``aware`` places a date or a floating time in the
    file's (or the store's) zone."""
    if "dtstart" not in vevent:
        raise Skip("no DTSTART")
    raw_start = decoded_once(vevent, "dtstart")
    if not isinstance(raw_start, date):
        raise Skip("DTSTART is not a date or a time")
    all_day = not isinstance(raw_start, datetime)
    note = None
    if "dtend" in vevent:
        raw_end = decoded_once(vevent, "dtend")
        if not isinstance(raw_end, date):
            raise Skip("DTEND is not a date or a time")
        if isinstance(raw_end, datetime) == all_day:
            all_day = False
            note = "DTSTART and DTEND mix a date and a time: read as times, the date as its midnight"
        if not all_day:
            raw_start, raw_end = _one_zone(raw_start, raw_end)
        start, end = aware(raw_start), aware(raw_end)
    elif "duration" in vevent:
        length = decoded_once(vevent, "duration")
        if not isinstance(length, timedelta):
            raise Skip(f"DURATION {str(vevent.get('duration'))[:40]!r} is not a duration")
        start = aware(raw_start)
        end = start + length
        if all_day and length % _DAY:
            all_day = False  # a date with a DURATION of hours: a timed event from that midnight
    else:
        start = aware(raw_start)
        end = start + _DAY if all_day else start
    if end < start:
        note = "ends before it starts: read as " + ("its first day" if all_day else "taking no time, at its start")
    if all_day:
        return Span(start, max(end, start + _DAY), True, False, note)
    if end <= start:
        return Span(start, start + STAND_IN, False, True, note)
    return Span(start, end, False, False, note)


def _one_zone(first: date, second: date) -> tuple[datetime, datetime]:
    """DTSTART and DTEND as times in one zone, as ``recurring-ical-events`` compares them: a date
    is its midnight, and a date or floating time beside a time with a zone takes that zone."""
    zone = next((m.tzinfo for m in (first, second) if isinstance(m, datetime) and m.tzinfo is not None), None)

    def as_time(moment: date) -> datetime:
        if not isinstance(moment, datetime):
            moment = datetime(moment.year, moment.month, moment.day)
        return moment.replace(tzinfo=zone) if moment.tzinfo is None else moment

    return as_time(first), as_time(second)


def marked(extra: str | None, when: Span) -> str | None:
    """The VEVENT's extra properties, with ``MARK`` when it takes no time."""
    if not when.zero:
        return extra
    return f"{extra}\r\n{MARK_LINE}" if extra else MARK_LINE


def is_marked(extra: str | None) -> bool:
    return bool(extra) and MARK_LINE in (extra or "").split("\r\n")


def drop_stand_in(vevent: icalendar.Event, start: datetime, end: datetime, all_day: bool) -> None:
    """The export's half: ``MARK`` never leaves, and an event still ``STAND_IN`` long that
    carries it goes out without DTEND (no length, as it came)."""
    if MARK not in vevent:
        return
    del vevent[MARK]
    if not all_day and end - start == STAND_IN and "DTEND" in vevent:
        del vevent["DTEND"]


def stated_rules(vevent: icalendar.Event) -> list[Any]:
    """The VEVENT's RRULEs but an empty one (``RRULE:``, which a holiday calendar writes on every
    event): it states no repetition, and ``recurring-ical-events`` reads it as none."""
    values = vevent.get("rrule")
    return [v for v in (values if isinstance(values, list) else [values]) if v is not None and len(v) > 0]


# -- several copies of one event ------------------------------------------------------------


def latest(copies: list[icalendar.Event]) -> tuple[icalendar.Event | None, list[icalendar.Event]]:
    """The copy that is the event (highest SEQUENCE, then latest DTSTAMP, then first in the
    file) and the older copies, in file order. A missing or unreadable SEQUENCE counts as -1
    (``recurring-ical-events``' default), an unreadable DTSTAMP as older than any."""
    if not copies:
        return None, []
    best = max(range(len(copies)), key=lambda i: (_sequence(copies[i]), _stamp(copies[i]), -i))
    return copies[best], [c for i, c in enumerate(copies) if i != best]


def latest_per_occurrence(exceptions: list[icalendar.Event]) -> tuple[list[icalendar.Event], list[icalendar.Event]]:
    """Exceptions (RECURRENCE-ID) of one UID: the latest copy of each occurrence (``latest``), in
    file order, and the older copies; ``recurring-ical-events`` applies only the latest too, where
    applying them in file order let an older copy written last win."""
    groups: dict[str, list[icalendar.Event]] = {}
    for index, vevent in enumerate(exceptions):
        groups.setdefault(_occurrence_key(vevent, index), []).append(vevent)
    kept = {id(latest(copies)[0]) for copies in groups.values()}
    return [v for v in exceptions if id(v) in kept], [v for v in exceptions if id(v) not in kept]


def _occurrence_key(vevent: icalendar.Event, index: int) -> str:
    """The occurrence a RECURRENCE-ID names, as written (value and TZID); one that cannot be read
    or is given twice is a key of its own (its import names why)."""
    value = vevent.get("recurrence-id")
    try:
        if isinstance(value, list):
            raise ValueError("given twice")
        written = value.to_ical()
        zone = value.params.get("TZID", "") if hasattr(value, "params") else ""
        return f"{zone}:{written.decode() if isinstance(written, bytes) else written}"
    except Exception:  # noqa: BLE001 - broken input reaches icalendar's corners
        return f"#{index}"


def _sequence(vevent: icalendar.Event) -> int:
    value = vevent.get("sequence")
    if isinstance(value, list):
        value = value[0] if value else None
    if value is None:
        return -1
    try:
        text = value.to_ical() if hasattr(value, "to_ical") else value
        number = int(text.decode() if isinstance(text, bytes) else str(text))
    except (ValueError, TypeError, OverflowError, UnicodeDecodeError):
        return -1
    return max(-1, min(number, 2**31 - 1))  # a 400-digit SEQUENCE is no later than the largest int32


_NEVER = datetime.min.replace(tzinfo=timezone.utc)


def _stamp(vevent: icalendar.Event) -> datetime:
    """DTSTAMP as UTC (RFC 5545 wants it in UTC; a floating one is read as UTC)."""
    try:
        value = decoded_once(vevent, "dtstamp") if "dtstamp" in vevent else None
    except Exception:  # noqa: BLE001 - an unreadable DTSTAMP only loses the tie-break
        return _NEVER
    try:
        if isinstance(value, datetime):
            floating = value.tzinfo is None or value.utcoffset() is None
            return value.replace(tzinfo=timezone.utc) if floating else value.astimezone(timezone.utc)
        if isinstance(value, date):
            return datetime(value.year, value.month, value.day, tzinfo=timezone.utc)
    except (OverflowError, ValueError):  # year 1 in a zone east of UTC
        pass
    return _NEVER
