"""Writing events out as iCalendar: the whole calendar (or a window of it) as one .ics file, and
one event as the VEVENTs an .ics file and a CalDAV object both carry for its UID.

Each event keeps its zone (DTSTART;TZID=…, with the VTIMEZONE added) or stays UTC, and its UID.
The properties and components the import kept as they came (``Event.ics_extra``) go out first,
then the modelled ones; a field the import cut goes out whole (``capped_fields.restore``).
Attendees are names here, so they travel as ``ATTENDEE;CN=<name>``.
"""

from __future__ import annotations

from datetime import date, datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import quote
from zoneinfo import ZoneInfo

import icalendar

from tools.calendar import capped_fields
from tools.calendar import ics_read
from tools.calendar import recurrence as rec
from tools.calendar.store import CalendarStore, Event

_PRODID = "-//iljeong//calendar assistant//EN"
ATTENDEE_URN = "urn:x-iljeong:attendee:"  # an attendee's name as a calendar address (read back by ics_fields)


def export_ics(store: CalendarStore, path: Path | str, start: datetime | None = None, end: datetime | None = None) -> int:
    """Write the store's events (those overlapping [start, end) if given) to ``path``; returns how many."""
    content, count = ics_bytes(store, start, end)
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(content)
    return count


def ics_bytes(store: CalendarStore, start: datetime | None = None, end: datetime | None = None) -> tuple[bytes, int]:
    """The store's events (those overlapping [start, end) if given; a series whole) as one
    iCalendar file, and how many events and series there are; for a file written to disk
    (``export_ics``) or sent in a chat (/ics)."""
    if start is not None or end is not None:
        lower = start or datetime(1970, 1, 1, tzinfo=timezone.utc)
        upper = end or datetime(9999, 1, 1, tzinfo=timezone.utc)
        ids = list(dict.fromkeys(e.id for e in store.events_between(lower, upper)))
        events = [e for e in (store.get_event(i) for i in ids) if e is not None]
    else:
        events = store.all_events()
    cal = icalendar.Calendar()
    cal.add("prodid", _PRODID)
    cal.add("version", "2.0")
    for event in events:
        for component in event_components(store, event):
            cal.add_component(component)
    cal.add_missing_timezones()
    return cal.to_ical(), len(events)


def event_components(store: CalendarStore, event: Event) -> list[icalendar.Event]:
    """One event as VEVENTs: the event (or series) itself, then one per moved occurrence
    (RECURRENCE-ID); what an .ics file and a CalDAV object both carry for one UID."""
    return [_to_vevent(event)] + [_to_vevent(moved, recurrence_id=moved.original_start)
                                  for moved in (store.overrides(event.id) if event.is_series else ())]


def _zone(event: Event) -> Any:
    return timezone.utc if event.tz == "UTC" else ZoneInfo(event.tz)


def _when(moment: datetime, event: Event) -> date | datetime:
    local = moment.astimezone(_zone(event))
    return local.date() if event.all_day else local


def _to_vevent(event: Event, recurrence_id: datetime | None = None) -> icalendar.Event:
    vevent = icalendar.Event()
    extra = capped_fields.extra_vevent(event.ics_extra)  # parsed once: its properties, then its VALARMs and the like
    if extra is not None:
        for name, value in extra.property_items(recursive=False, sorted=False):
            if name not in ("BEGIN", "END"):
                vevent.add(name, value, encode=False)
        for component in extra.subcomponents:
            vevent.add_component(component)
    vevent.add("uid", event.uid or f"{event.id}@iljeong")
    vevent.add("dtstamp", event.updated_at or event.created_at or datetime.now(timezone.utc))
    vevent.add("summary", event.title)
    vevent.add("dtstart", _when(event.start, event))
    vevent.add("dtend", _when(event.end, event))
    if recurrence_id is not None:
        vevent.add("recurrence-id", _when(recurrence_id, event))
    elif event.recurrence:
        parts = rec.parse(event.recurrence)
        for rule in parts.rrules:
            vevent.add("rrule", icalendar.vRecur.from_ical(rule))
        if parts.rdates:
            vevent.add("rdate", [_when(d, event) for d in parts.rdates])
        if parts.exdates:
            vevent.add("exdate", [_when(d, event) for d in parts.exdates])
    if event.transparent:
        vevent.add("transp", "TRANSPARENT")
    if event.location:
        vevent.add("location", event.location)
    if event.notes:
        vevent.add("description", event.notes)
    for name in event.attendees:
        address = icalendar.vCalAddress(ATTENDEE_URN + quote(name))
        address.params["CN"] = name
        vevent.add("attendee", address, encode=False)
    ics_read.drop_stand_in(vevent, event.start, event.end, event.all_day)
    capped_fields.restore(vevent, event)  # a field the import cut goes out whole
    return vevent
