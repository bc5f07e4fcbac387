"""Reading one VEVENT as our event's fields: title, times in their zone, place, notes, attendees,
its recurrence as stored text, and the properties we do not model kept as content lines.

``read_fields`` is the whole mapping; the import (``tools.calendar.ics``) decides what to do with
the result. Floating (zone-less) times are read in the file's X-WR-TIMEZONE while that file is
being imported (``floating_times_in``), else in the store's zone. How a file's times are read
when it breaks RFC 5545's rules is ``ics_read``'s job; this module calls it.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, timezone
from typing import Any, Iterator
from urllib.parse import unquote
from zoneinfo import ZoneInfo

import icalendar

from tools.calendar import capped_fields
from tools.calendar import ics_read
from tools.calendar import recurrence as rec
from tools.calendar.ics_read import Skip as _Skip
from tools.calendar.ics_write import ATTENDEE_URN
from tools.calendar.store import CalendarStore

MAX_LENGTH = timedelta(days=366)  # a longer single event is almost surely a broken file

# What we model; every other property of a VEVENT is kept verbatim in ``ics_extra``.
_MODELLED = {
    "UID", "DTSTAMP", "SUMMARY", "DTSTART", "DTEND", "DURATION", "LOCATION", "DESCRIPTION", "ATTENDEE",
    "RRULE", "RDATE", "EXDATE", "TRANSP", "RECURRENCE-ID", "CREATED", "LAST-MODIFIED", "STATUS",
    ics_read.MARK,  # ours alone: a file's own is not kept
}

_FLOATING: dict[int, ZoneInfo] = {}  # store id → the zone floating times of the file being imported are in


def _calendar_zone(calendar: icalendar.Calendar) -> ZoneInfo | None:
    name = first_text(calendar, "x-wr-timezone").strip()
    try:
        return ZoneInfo(name) if name else None
    except (ValueError, KeyError, OSError):
        return None


@contextmanager
def floating_times_in(store: CalendarStore, calendars: list[icalendar.Calendar]) -> Iterator[None]:
    """While the file's calendars are imported into ``store``, its floating times are in the zone
    its calendars name (when they name exactly one)."""
    zones = {_calendar_zone(c) for c in calendars} - {None}
    if len(zones) == 1:
        _FLOATING[id(store)] = zones.pop()  # type: ignore[assignment]
    try:
        yield
    finally:
        _FLOATING.pop(id(store), None)


@dataclass(frozen=True)
class Fields:
    title: str
    start: datetime
    end: datetime
    tz: str
    all_day: bool
    transparent: bool
    location: str | None
    notes: str | None
    attendees: list[str]
    extra: str | None
    note: str | None  # a rule the file broke and how it was read (ics_read.span), for the report


def read_fields(vevent: icalendar.Event, store: CalendarStore) -> Fields:
    title = " ".join(first_text(vevent, "summary").split()) or "(no title)"
    when = ics_read.span(vevent, lambda moment: aware(moment, store))
    start, end, all_day = when.start, when.end, when.all_day
    if end - start > MAX_LENGTH:
        raise _Skip("longer than a year")
    transp = first_text(vevent, "transp", "OPAQUE").strip().upper()
    return capped_fields.capped(Fields(  # imported fields cut to limits.IMPORT_*, the originals kept
        title=title, start=start, end=end, tz=_zone_name(start, store), all_day=all_day,
        transparent=transp == "TRANSPARENT",
        location=first_text(vevent, "location") or None,
        notes=first_text(vevent, "description") or None,
        attendees=attendee_names(vevent.get("attendee")),
        extra=ics_read.marked(_unmodelled(vevent), when),
        note=when.note,
    ), vevent, _moments)


def first_text(component: icalendar.cal.Component, name: str, default: str = "") -> str:
    """The text of a property RFC 5545 allows once (UID, SUMMARY, LOCATION, STATUS, ...). A file
    that repeats one gets icalendar's list of the values, whose ``str`` is the Python repr
    ("[vText(b'Lunch'), ...]"), so the first value is the one kept; the others are dropped."""
    value = component.get(name)
    if isinstance(value, list):
        value = value[0] if value else None
    return default if value is None else _text(value)


def _text(value: Any) -> str:
    """A property's value as the text it was written as. icalendar reads a text property with a
    VALUE parameter as that type (``UID;VALUE=DURATION:123456`` is a time), and ``str`` of most of
    its types is their repr ("vDDDTypes(12:34:56, ...)"), so those give their iCalendar text."""
    if isinstance(value, str):  # vText, vCalAddress: str already is the unescaped text
        return str(value)
    try:
        written = value.to_ical()
    except Exception:  # noqa: BLE001 - an object icalendar made from broken input cannot write itself
        return ""
    # bytes as a rule, but a time read as VALUE=DURATION writes itself as str (icalendar 7.3.2)
    return written.decode("utf-8", errors="replace") if isinstance(written, bytes) else str(written)


def _unmodelled(vevent: icalendar.Event) -> str | None:
    """The VEVENT's properties and components we do not model, as content lines. A VEVENT inside
    it (a file missing an END:VEVENT nests the next one) is not kept: ``walk`` imports it as an
    event of its own, and keeping it here too would export it twice, inside its parent."""
    keep = icalendar.Event()
    for name, value in vevent.property_items(recursive=False, sorted=False):
        if name in ("BEGIN", "END") or name.upper() in _MODELLED:
            continue
        keep.add(name, value, encode=False)
    for component in vevent.subcomponents:
        if component.name != "VEVENT":
            keep.add_component(component)
    text = keep.to_ical().decode("utf-8", errors="replace").replace("\r\n", "\n").strip().split("\n")
    body = [line for line in text if line not in ("BEGIN:VEVENT", "END:VEVENT")]
    return "\r\n".join(body) or None


def recurrence_text(vevent: icalendar.Event, fields: Fields, store: CalendarStore) -> str | None:
    """The VEVENT's RRULE/RDATE/EXDATE as stored text (UTC instants, UNTIL in UTC)."""
    zone = fields.start.tzinfo
    rules = []
    for value in ics_read.stated_rules(vevent):
        rule = icalendar.vRecur(value)
        untils = rule.get("UNTIL")
        if untils:
            until = untils[0] if isinstance(untils, list) else untils
            if not isinstance(until, datetime):
                until = datetime.combine(until, time(23, 59, 59), tzinfo=zone)
            elif until.tzinfo is None:
                until = until.replace(tzinfo=zone)
            rule["UNTIL"] = [until.astimezone(timezone.utc)]
        rules.append(rule.to_ical().decode())
    rdates = _moments(vevent, "rdate", zone, fields.all_day)
    exdates = _moments(vevent, "exdate", zone, fields.all_day)
    if not rules and not rdates:
        return None
    return rec.Recurrence(tuple(rules), capped_fields.dates(rdates), capped_fields.dates(exdates)).text()


def as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


def periods(vevent: icalendar.Event, zone: Any) -> list[tuple[datetime, datetime]]:
    """RDATE;VALUE=PERIOD values: an occurrence with its own end (kept as an override)."""
    found = []
    for prop in as_list(vevent.get("rdate")):
        for item in getattr(prop, "dts", []):
            if isinstance(item.dt, tuple) and isinstance(item.dt[0], datetime):
                begin, last = item.dt
                begin = begin.replace(tzinfo=zone) if begin.tzinfo is None else begin
                finish = begin + last if isinstance(last, timedelta) else (
                    last.replace(tzinfo=zone) if last.tzinfo is None else last)
                found.append((begin.astimezone(zone), finish.astimezone(zone)))
    return found


def _moments(vevent: icalendar.Event, name: str, zone: Any, all_day: bool) -> list[datetime]:
    """RDATE or EXDATE values as UTC instants. In an all-day series a time counts as its day (in
    the series' zone): an occurrence at 09:00 of an all-day series is exported as a date, so it
    would come back at midnight, another occurrence."""
    found: list[datetime] = []
    for prop in as_list(vevent.get(name)):
        for item in getattr(prop, "dts", []):
            value = item.dt
            if isinstance(value, tuple):  # a PERIOD: its start is the occurrence (its end: periods)
                value = value[0]
            if isinstance(value, datetime):
                value = value.replace(tzinfo=zone) if value.tzinfo is None else value
                if not all_day:
                    found.append(value.astimezone(timezone.utc))
                    continue
                value = value.astimezone(zone).date()
            if isinstance(value, date):
                found.append(datetime.combine(value, time(0), tzinfo=zone).astimezone(timezone.utc))
    return found


def aware(moment: date, store: CalendarStore) -> datetime:
    """Floating (zone-less) times and dates are read in the file's X-WR-TIMEZONE if it names
    one (Google Calendar writes it), else as the store's local time; a zone that is not a
    ``zoneinfo`` one (a custom VTIMEZONE) keeps its instant, shown in the store's zone."""
    floating = _FLOATING.get(id(store), store.zone)
    if not isinstance(moment, datetime):
        return datetime.combine(moment, time(0), tzinfo=floating)
    if moment.tzinfo is None or moment.utcoffset() is None:
        return moment.replace(tzinfo=floating)
    if isinstance(moment.tzinfo, ZoneInfo) or moment.tzinfo is timezone.utc:
        return moment
    key = _zone_key(moment)
    return moment.astimezone(ZoneInfo(key)) if key else moment.astimezone(store.zone)


def _zone_key(moment: datetime) -> str | None:
    key = getattr(moment.tzinfo, "key", None) or getattr(moment.tzinfo, "zone", None)
    if isinstance(key, str):
        try:
            ZoneInfo(key)
            return key
        except (ValueError, KeyError, OSError):
            return None
    return None


def _zone_name(moment: datetime, store: CalendarStore) -> str:
    key = _zone_key(moment)
    if key:
        return key
    if moment.utcoffset() == timedelta(0) and moment.tzinfo in (timezone.utc, ZoneInfo("UTC")):
        return "UTC"
    return store.tz  # a non-IANA zone (e.g. Outlook names): the instant is kept, shown in local time


def attendee_names(value: Any) -> list[str]:
    """The names our store keeps for an ATTENDEE property (or a list of them)."""
    names: list[str] = []
    for address in as_list(value):
        params = getattr(address, "params", {})
        name = params.get("CN") if params else None
        if not name:
            text = _text(address)
            for prefix in (ATTENDEE_URN, "mailto:", "MAILTO:"):
                if text.startswith(prefix):
                    text = unquote(text[len(prefix):]) if prefix == ATTENDEE_URN else text[len(prefix):]
            name = text
        cleaned = " ".join(str(name).split())[:50]
        if cleaned:
            names.append(cleaned)
    return names
