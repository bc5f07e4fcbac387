"""Moving events in and out as .ics (iCalendar) files, for Apple Calendar and Google Calendar.

Parsing and writing are the ``icalendar`` package's job; this module only maps its events to
ours. Each event keeps its zone (DTSTART;TZID=…, with the VTIMEZONE added) or stays UTC.
Attendees are names here, so they travel as ``ATTENDEE;CN=<name>``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote
from zoneinfo import ZoneInfo

import icalendar

from tools.calendar.store import CalendarStore, Event

_PRODID = "-//iljeong//calendar assistant//EN"
_ATTENDEE_URN = "urn:x-iljeong:attendee:"


@dataclass(frozen=True)
class ImportReport:
    count: int  # events added to the store
    skipped: list[str] = field(default_factory=list)  # one line per VEVENT not imported, with the reason


def export_ics(store: CalendarStore, path: Path | str, start: datetime | None = None, end: datetime | None = None) -> int:
    """Write the store's events (those overlapping [start, end) if given) to ``path``; returns how many."""
    content, count = ics_bytes(store, start, end)
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(content)
    return count


def ics_bytes(store: CalendarStore, start: datetime | None = None, end: datetime | None = None) -> tuple[bytes, int]:
    """The store's events (those overlapping [start, end) if given) as one iCalendar file, and how
    many there are; for a file written to disk (``export_ics``) or sent in a chat (/ics)."""
    if start is not None or end is not None:
        lower = start or datetime(1970, 1, 1, tzinfo=timezone.utc)
        upper = end or datetime(9999, 1, 1, tzinfo=timezone.utc)
        events = store.events_between(lower, upper)
    else:
        events = store.all_events()
    cal = icalendar.Calendar()
    cal.add("prodid", _PRODID)
    cal.add("version", "2.0")
    for event in events:
        cal.add_component(_to_vevent(event))
    cal.add_missing_timezones()
    return cal.to_ical(), len(events)


def _to_vevent(event: Event) -> icalendar.Event:
    vevent = icalendar.Event()
    stamp = event.created_at or datetime.now(timezone.utc)
    vevent.add("uid", f"{stamp.strftime('%Y%m%dT%H%M%SZ')}-{event.id}@iljeong")
    vevent.add("dtstamp", event.updated_at or stamp)
    vevent.add("summary", event.title)
    zone = timezone.utc if event.tz == "UTC" else ZoneInfo(event.tz)
    vevent.add("dtstart", event.start.astimezone(zone))
    vevent.add("dtend", event.end.astimezone(zone))
    if event.location:
        vevent.add("location", event.location)
    if event.notes:
        vevent.add("description", event.notes)
    for name in event.attendees:
        address = icalendar.vCalAddress(_ATTENDEE_URN + quote(name))
        address.params["CN"] = name
        vevent.add("attendee", address, encode=False)
    return vevent


def import_ics(store: CalendarStore, path: Path | str) -> ImportReport:
    """Add the file's timed events to the store in one transaction; an event already there is skipped."""
    calendar = icalendar.Calendar.from_ical(Path(path).read_bytes())
    count = 0
    skipped: list[str] = []
    with store.transaction():
        for vevent in calendar.walk("VEVENT"):
            parsed = _from_vevent(vevent, store)
            if isinstance(parsed, str):
                skipped.append(parsed)
                continue
            title, start, end, tz, extra = parsed
            if any(e.title == title and e.start == start and e.end == end for e in store.events_between(start, end)):
                skipped.append(f"'{title}' {start.isoformat()}: already in the calendar")
                continue
            store.add_event(title, start, end, tz=tz, **extra)
            count += 1
    return ImportReport(count, skipped)


def _from_vevent(vevent: icalendar.Event, store: CalendarStore) -> tuple[str, datetime, datetime, str, dict[str, Any]] | str:
    """Our fields for one VEVENT, or the reason it cannot be imported."""
    title = " ".join(str(vevent.get("summary", "")).split()) or "(no title)"
    if "dtstart" not in vevent:
        return f"'{title}': no DTSTART"
    start = vevent.decoded("dtstart")
    if "rrule" in vevent:
        return f"'{title}': recurring events are not imported"
    if str(vevent.get("status", "")).upper() == "CANCELLED":
        return f"'{title}': cancelled"
    if not isinstance(start, datetime):
        return f"'{title}' {start}: all-day events are not imported"
    if "dtend" in vevent:
        end = vevent.decoded("dtend")
    elif "duration" in vevent:
        end = start + vevent.decoded("duration")
    else:
        return f"'{title}' {start.isoformat()}: no DTEND or DURATION"
    if isinstance(end, date) and not isinstance(end, datetime):
        return f"'{title}': DTEND is a date, DTSTART a time"
    start, end = _aware(start, store), _aware(end, store)
    if end <= start:
        return f"'{title}' {start.isoformat()}: ends before it starts"
    if end - start > timedelta(days=31):
        return f"'{title}' {start.isoformat()}: longer than 31 days"
    extra: dict[str, Any] = {
        "location": str(vevent["location"]) if vevent.get("location") else None,
        "notes": str(vevent["description"]) if vevent.get("description") else None,
        "attendees": _attendee_names(vevent.get("attendee")),
    }
    return title, start, end, _zone_name(start, store), extra


def _aware(moment: datetime, store: CalendarStore) -> datetime:
    """Floating (zone-less) times are read as the store's local time."""
    return moment.replace(tzinfo=store.zone) if moment.tzinfo is None else moment


def _zone_name(moment: datetime, store: CalendarStore) -> str:
    key = getattr(moment.tzinfo, "key", None)
    if isinstance(key, str):
        try:
            ZoneInfo(key)
            return key
        except (ValueError, KeyError, OSError):
            pass
    if moment.utcoffset() == timedelta(0) and moment.tzinfo in (timezone.utc, ZoneInfo("UTC")):
        return "UTC"
    return store.tz  # a non-IANA zone (e.g. Outlook names): the instant is kept, shown in local time


def _attendee_names(value: Any) -> list[str]:
    if value is None:
        return []
    addresses = value if isinstance(value, list) else [value]
    names: list[str] = []
    for address in addresses:
        params = getattr(address, "params", {})
        name = params.get("CN") if params else None
        if not name:
            text = str(address)
            for prefix in (_ATTENDEE_URN, "mailto:", "MAILTO:"):
                if text.startswith(prefix):
                    text = unquote(text[len(prefix):]) if prefix == _ATTENDEE_URN else text[len(prefix):]
            name = text
        cleaned = " ".join(str(name).split())
        if cleaned:
            names.append(cleaned)
    return names
