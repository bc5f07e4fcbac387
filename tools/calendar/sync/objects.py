"""One event ⇄ one CalDAV object (a VCALENDAR holding one UID: the event, or a series and its
moved occurrences), through the same mapping as .ics files (``tools.calendar.ics``).

What the server wrote that the store does not model survives our edits: VALARMs, X- properties
and the like travel in ``Event.ics_extra``; an attendee is a name to the store, so the server's
own ATTENDEE line (its mailto:, PARTSTAT, ROLE, ...) is put back for every attendee we still have.

``snapshot`` reads an object into the fields the merge compares, through a scratch in-memory
store, so the server's copy is read by exactly the code that imports it.
"""

from __future__ import annotations

import json
from datetime import date, datetime
from typing import Any

import icalendar

from tools.calendar import ics, ics_read
from tools.calendar.store import CalendarStore, Event
from tools.calendar.utc_text import to_utc_text

# The fields the merge compares. "when" is start, end, zone, all-day and the recurrence
# together: they change together (moving a series moves its EXDATEs), so they merge together.
FIELDS = ("title", "when", "location", "notes", "attendees", "transparent", "occurrences")

Snapshot = dict[str, str]


def object_bytes(store: CalendarStore, event: Event, base: str | None = None) -> bytes:
    """The event as the object to PUT; ``base`` (the server's last copy) lends its ATTENDEE lines."""
    cal = icalendar.Calendar()
    cal.add("prodid", "-//iljeong//calendar assistant//EN")
    cal.add("version", "2.0")
    theirs = _attendee_lines(base)
    for component in ics.event_components(store, event):
        key = _recurrence_key(component)
        kept = theirs.get(key, {})
        if kept and "attendee" in component:
            mine = component.pop("attendee")
            for prop in mine if isinstance(mine, list) else [mine]:
                names = ics.attendee_names(prop)
                component.add("attendee", kept.get(names[0], prop) if names else prop, encode=False)
        cal.add_component(component)
    cal.add_missing_timezones()
    return cal.to_ical()


def event_snapshot(store: CalendarStore, event: Event) -> Snapshot:
    occurrences = [
        (to_utc_text(o.original_start) if o.original_start else "", o.title, to_utc_text(o.start), to_utc_text(o.end),
         o.location, o.notes)
        for o in (store.overrides(event.id) if event.is_series else ())
    ]
    return {
        "title": event.title,
        "when": json.dumps([to_utc_text(event.start), to_utc_text(event.end), event.tz, event.all_day, event.recurrence]),
        "location": event.location or "",
        "notes": event.notes or "",
        "attendees": json.dumps(sorted(event.attendees)),
        "transparent": json.dumps(event.transparent),
        "occurrences": json.dumps(occurrences),
    }


def snapshot(data: bytes | str | None, uid: str, tz: str) -> Snapshot | None:
    """The fields of ``uid`` in an object, read as an import reads it; None if it has none."""
    if not data:
        return None
    with CalendarStore(":memory:", tz=tz) as scratch:
        try:
            ics.import_bytes(scratch, data.encode() if isinstance(data, str) else data)
        except ValueError:
            return None
        event = scratch.find_uid(uid)
        return event_snapshot(scratch, event) if event is not None else None


def _recurrence_key(component: Any) -> str:
    """"" for a master VEVENT; a moved occurrence's RECURRENCE-ID as UTC text (as written by
    ``ics``), or as it stands when floating or a date (such a base then simply lends nothing)."""
    if component.get("recurrence-id") is None:
        return ""
    try:
        moment = component.decoded("recurrence-id")
    except Exception:  # noqa: BLE001 - a broken property lends nothing
        return "?"
    if isinstance(moment, datetime) and moment.utcoffset() is not None:
        return to_utc_text(moment)
    return moment.isoformat() if isinstance(moment, (date, datetime)) else "?"


def _attendee_lines(base: str | None) -> dict[str, dict[str, Any]]:
    """RECURRENCE-ID key ("" for the master) → attendee name → the server's ATTENDEE property."""
    if not base:
        return {}
    try:
        calendars = ics_read.parsed(base)  # under the import's lock, with its own zone cache
    except Exception:  # noqa: BLE001 - a base we cannot read lends nothing
        return {}
    found: dict[str, dict[str, Any]] = {}
    for cal in calendars:
        for vevent in cal.walk("VEVENT"):
            props = vevent.get("attendee")
            if props is None:
                continue
            lines = found.setdefault(_recurrence_key(vevent), {})
            for prop in props if isinstance(props, list) else [props]:
                names = ics.attendee_names(prop)
                if names:
                    lines.setdefault(names[0], prop)
    return found
