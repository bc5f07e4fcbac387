"""Moving events in and out as .ics (iCalendar) files, for Apple Calendar, Google Calendar, CalDAV.

Parsing and writing are the ``icalendar`` package's job; this module only maps its events to
ours. Each event keeps its zone (DTSTART;TZID=…, with the VTIMEZONE added) or stays UTC.
Attendees are names here, so they travel as ``ATTENDEE;CN=<name>``.

Identity: an event's UID is stored (``schema.new_uid`` for events made here) and written back;
importing a VEVENT whose UID is already in the calendar updates that event instead of adding a
second one. The properties and components we do not model (VALARM, CATEGORIES, ORGANIZER,
X- properties, ...) are kept as their content lines (``Event.ics_extra``) and written back as
they came. A series travels as one VEVENT with RRULE/RDATE/EXDATE plus one VEVENT per
RECURRENCE-ID (a moved or retitled occurrence; a cancelled one becomes an EXDATE).

No input gives a traceback: a file icalendar cannot read is one ``ValueError`` line, and a
VEVENT we cannot keep is named in ``ImportReport.skipped`` with its reason. Each VEVENT is
written inside its own savepoint, so one that fails half-way leaves nothing behind.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta, timezone
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote
from zoneinfo import ZoneInfo

import icalendar

from tools.calendar import capped_fields
from tools.calendar import ics_read
from tools.calendar import recurrence as rec
from tools.calendar.ics_read import Skip as _Skip
from tools.calendar.store import CalendarStore, Event

_PRODID = "-//iljeong//calendar assistant//EN"
_ATTENDEE_URN = "urn:x-iljeong:attendee:"
MAX_LENGTH = timedelta(days=366)  # a longer single event is almost surely a broken file

# What we model; every other property of a VEVENT is kept verbatim in ``ics_extra``.
_MODELLED = {
    "UID", "DTSTAMP", "SUMMARY", "DTSTART", "DTEND", "DURATION", "LOCATION", "DESCRIPTION", "ATTENDEE",
    "RRULE", "RDATE", "EXDATE", "TRANSP", "RECURRENCE-ID", "CREATED", "LAST-MODIFIED", "STATUS",
    ics_read.MARK,  # ours alone: a file's own is not kept
}


@dataclass(frozen=True)
class ImportReport:
    count: int  # events and series added to the store
    skipped: list[str] = field(default_factory=list)  # one line per VEVENT not imported, with the reason
    updated: int = 0  # events already in the calendar (same UID), updated in place
    exceptions: int = 0  # RECURRENCE-ID occurrences applied to their series
    notes: list[str] = field(default_factory=list)  # one line per VEVENT kept, read by a rule its file broke (ics_read)


# -- export ----------------------------------------------------------------------------------


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


def attendee_names(value: Any) -> list[str]:
    """The names our store keeps for an ATTENDEE property (or a list of them)."""
    return _attendee_names(value)


def _zone(event: Event) -> Any:
    return timezone.utc if event.tz == "UTC" else ZoneInfo(event.tz)


def _when(moment: datetime, event: Event) -> date | datetime:
    local = moment.astimezone(_zone(event))
    return local.date() if event.all_day else local


def _to_vevent(event: Event, recurrence_id: datetime | None = None) -> icalendar.Event:
    vevent = icalendar.Event()
    extra = _extra_calendar(event.ics_extra)  # parsed once: its properties, then its VALARMs and the like
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
        address = icalendar.vCalAddress(_ATTENDEE_URN + quote(name))
        address.params["CN"] = name
        vevent.add("attendee", address, encode=False)
    ics_read.drop_stand_in(vevent, event.start, event.end, event.all_day)
    capped_fields.restore(vevent, event)  # a field the import cut goes out whole
    return vevent


def _extra_calendar(text: str | None) -> icalendar.Event | None:
    if not text:
        return None
    try:
        return icalendar.Event.from_ical(f"BEGIN:VEVENT\r\n{text}\r\nEND:VEVENT\r\n")
    except Exception:  # noqa: BLE001 - written by us from a parsed file; never fail an export on it
        return None


# -- import ----------------------------------------------------------------------------------


def import_ics(store: CalendarStore, path: Path | str) -> ImportReport:
    """Add (or, by UID, update) the file's events and series in one transaction; every VEVENT
    not kept is named with its reason. ValueError (one line) if the file is not iCalendar."""
    return import_bytes(store, Path(path).read_bytes())


def import_bytes(store: CalendarStore, content: bytes) -> ImportReport:
    calendars = _read(content)
    groups: dict[str, list[icalendar.Event]] = defaultdict(list)
    order: list[str] = []
    loose: list[icalendar.Event] = []
    zones = {_calendar_zone(c) for c in calendars} - {None}
    if len(zones) == 1:
        _FLOATING[id(store)] = zones.pop()  # type: ignore[assignment]
    try:
        return _import_groups(store, calendars, groups, order, loose)
    finally:
        _FLOATING.pop(id(store), None)


def _import_groups(store: CalendarStore, calendars: list[icalendar.Calendar], groups: dict[str, list[icalendar.Event]],
                   order: list[str], loose: list[icalendar.Event]) -> ImportReport:
    for calendar in calendars:
        for vevent in calendar.walk("VEVENT"):
            uid = _first(vevent, "uid").strip()
            if not uid:
                loose.append(vevent)
                continue
            if uid not in groups:
                order.append(uid)
            groups[uid].append(vevent)
    report = _Counter()
    with store.transaction():
        for vevent in loose:
            _guarded(store, report, vevent, lambda v=vevent: _import_loose(store, v, report))
        for uid in order:
            masters = [v for v in groups[uid] if "recurrence-id" not in v]
            moved, older_moves = ics_read.latest_per_occurrence([v for v in groups[uid] if "recurrence-id" in v])
            master, older = ics_read.latest(masters)
            for copy in older:
                report.skipped.append(f"{_label(copy)}: an older copy of UID {uid} (the latest by SEQUENCE, then DTSTAMP, is kept)")
            for copy in older_moves:
                report.skipped.append(f"{_label(copy)}: an older copy of this occurrence of UID {uid} (the latest is kept)")
            if master is not None:
                ok = _guarded(store, report, master, lambda m=master, u=uid: _import_master(store, m, u, report))
                if not ok:
                    for vevent in moved:
                        report.skipped.append(f"{_label(vevent)}: an exception of a series that was not imported")
                    continue
            for vevent in moved:
                _guarded(store, report, vevent, lambda v=vevent, u=uid: _import_exception(store, v, u, report))
    return ImportReport(report.count, report.skipped, report.updated, report.exceptions, report.notes)


@dataclass
class _Counter:
    count: int = 0
    updated: int = 0
    exceptions: int = 0
    skipped: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _read(content: bytes) -> list[icalendar.Calendar]:
    """Every VCALENDAR of the file (several are allowed); ValueError for what is not iCalendar."""
    try:
        calendars = ics_read.parsed(content)
    except Exception as exc:  # noqa: BLE001 - icalendar raises many types on broken input
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ValueError(first) from None
    found = [c for c in calendars if isinstance(c, icalendar.Calendar)]
    if not found:
        raise ValueError("no VCALENDAR in the file")
    return found


_FLOATING: dict[int, ZoneInfo] = {}  # store id → the zone floating times of the file being imported are in


def _calendar_zone(calendar: icalendar.Calendar) -> ZoneInfo | None:
    name = _first(calendar, "x-wr-timezone").strip()
    try:
        return ZoneInfo(name) if name else None
    except (ValueError, KeyError, OSError):
        return None


def _guarded(store: CalendarStore, report: _Counter, vevent: icalendar.Event, step: Any) -> bool:
    """Run one VEVENT's import inside a savepoint: on any failure nothing of it stays and it is
    named in the report (no input gives a traceback)."""
    with store.savepoint() as rollback:
        try:
            step()
            return True
        except _Skip as why:
            reason = str(why)
        except Exception as exc:  # noqa: BLE001 - broken files reach icalendar's and dateutil's corners
            reason = f"unreadable ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})"
        rollback()
    report.skipped.append(f"{_label(vevent)}: {reason}")
    return False


def _label(vevent: icalendar.Event) -> str:
    try:
        title = " ".join(_first(vevent, "summary").split()) or "(no title)"
    except Exception:  # noqa: BLE001
        title = "(no title)"
    try:
        start = next(iter(_as_list(vevent.get("dtstart"))), None)  # the first, if it is given twice
        when = f" {start.to_ical().decode()}" if start is not None else ""
    except Exception:  # noqa: BLE001
        when = ""
    return f"'{title[:80]}'{when}"


@dataclass(frozen=True)
class _Fields:
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


def _fields(vevent: icalendar.Event, store: CalendarStore) -> _Fields:
    title = " ".join(_first(vevent, "summary").split()) or "(no title)"
    when = ics_read.span(vevent, lambda moment: _aware(moment, store))
    start, end, all_day = when.start, when.end, when.all_day
    if end - start > MAX_LENGTH:
        raise _Skip("longer than a year")
    transp = _first(vevent, "transp", "OPAQUE").strip().upper()
    return capped_fields.capped(_Fields(  # imported fields cut to limits.IMPORT_*, the originals kept
        title=title, start=start, end=end, tz=_zone_name(start, store), all_day=all_day,
        transparent=transp == "TRANSPARENT",
        location=_first(vevent, "location") or None,
        notes=_first(vevent, "description") or None,
        attendees=_attendee_names(vevent.get("attendee")),
        extra=ics_read.marked(_unmodelled(vevent), when),
        note=when.note,
    ), vevent, _moments)


def _first(component: icalendar.cal.Component, name: str, default: str = "") -> str:
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


def _recurrence(vevent: icalendar.Event, fields: _Fields, store: CalendarStore) -> str | None:
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


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


def _periods(vevent: icalendar.Event, zone: Any) -> list[tuple[datetime, datetime]]:
    """RDATE;VALUE=PERIOD values: an occurrence with its own end (kept as an override)."""
    found = []
    for prop in _as_list(vevent.get("rdate")):
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
    for prop in _as_list(vevent.get(name)):
        for item in getattr(prop, "dts", []):
            value = item.dt
            if isinstance(value, tuple):  # a PERIOD: its start is the occurrence (its end: _periods)
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


def _import_loose(store: CalendarStore, vevent: icalendar.Event, report: _Counter) -> None:
    """A VEVENT without a UID: added unless the same title and times are already there."""
    if "recurrence-id" in vevent:
        raise _Skip("an exception (RECURRENCE-ID) without a UID")
    fields = _fields(vevent, store)
    text = _recurrence(vevent, fields, store)
    if text is None and any(e.title == fields.title and e.start == fields.start and e.end == fields.end
                            for e in store.events_between(fields.start, fields.end)):
        raise _Skip("already in the calendar")
    _period_overrides(store, _add(store, fields, text, None), vevent, fields)  # a PERIOD's end counts here too
    report.count += 1
    _noted(report, vevent, fields)


def _import_master(store: CalendarStore, vevent: icalendar.Event, uid: str, report: _Counter) -> None:
    if _first(vevent, "status").strip().upper() == "CANCELLED":
        raise _Skip("cancelled")
    fields = _fields(vevent, store)
    text = _recurrence(vevent, fields, store)
    existing = store.find_uid(uid)
    if existing is None:
        added = _add(store, fields, text, uid)
        report.count += 1
        _period_overrides(store, added, vevent, fields)
        _noted(report, vevent, fields)
        return
    store.clear_overrides(existing.id)
    _period_overrides(store, store.update_event(
        existing.id, title=fields.title, start=fields.start, end=fields.end, location=fields.location,
        notes=fields.notes, attendees=fields.attendees, recurrence=_checked(text, fields),
        all_day=fields.all_day, transparent=fields.transparent, ics_extra=fields.extra,
    ), vevent, fields)
    report.updated += 1
    _noted(report, vevent, fields)


def _noted(report: _Counter, vevent: icalendar.Event, fields: _Fields | None) -> None:
    """Name a VEVENT that was kept by reading a rule its file broke (last, once it is kept)."""
    if fields is not None and fields.note:
        report.notes.append(f"{_label(vevent)}: {fields.note}")


def _period_overrides(store: CalendarStore, event: Event | None, vevent: icalendar.Event, fields: _Fields) -> None:
    if event is None or not event.is_series or fields.all_day:
        return  # an all-day occurrence is whole days: a PERIOD's hours would export as a zero-length day
    for begin, finish in _periods(vevent, fields.start.tzinfo):
        if finish > begin and finish - begin != fields.end - fields.start:
            store.override_occurrence(event.id, begin, start=begin, end=finish)


def _checked(text: str | None, fields: _Fields) -> str | None:
    try:
        return rec.check(text, fields.start)
    except ValueError as exc:
        raise _Skip(f"recurrence not kept: {exc}") from None


def _add(store: CalendarStore, fields: _Fields, text: str | None, uid: str | None) -> Event:
    return store.add_event(
        fields.title, fields.start, fields.end, tz=fields.tz, location=fields.location, notes=fields.notes,
        attendees=fields.attendees, recurrence=_checked(text, fields), all_day=fields.all_day,
        transparent=fields.transparent, uid=uid, ics_extra=fields.extra,
    )


def _import_exception(store: CalendarStore, vevent: icalendar.Event, uid: str, report: _Counter) -> None:
    """A RECURRENCE-ID: one occurrence of the series ``uid`` moved, retitled or cancelled."""
    series = store.find_uid(uid)
    if series is None or not series.is_series:
        raise _Skip("an exception (RECURRENCE-ID) of a series that is not in the calendar")
    raw = ics_read.decoded_once(vevent, "recurrence-id")
    if not isinstance(raw, date):
        raise _Skip("RECURRENCE-ID is not a date or a time")
    original = _aware(raw, store).astimezone(ZoneInfo(series.tz))
    if store.occurrence(series.id, original) is None:  # RFC 5545 lets it add an occurrence
        parts = rec.parse(series.recurrence)
        text = rec.Recurrence(parts.rrules, (*parts.rdates, original.astimezone(timezone.utc)), parts.exdates).text()
        store.update_event(series.id, recurrence=text)
    if _first(vevent, "status").strip().upper() == "CANCELLED":
        store.cancel_occurrence(series.id, original)
        report.exceptions += 1
        return
    if "dtstart" not in vevent:
        start, end = original, original + (series.end - series.start)
        fields = None  # the series' length, and so its lack of one (ics_read.MARK)
    else:
        fields = _fields(vevent, store)
        start, end = fields.start, fields.end
    store.override_occurrence(
        series.id, original, title=fields.title if fields else series.title, start=start, end=end,
        location=fields.location if fields else series.location, notes=fields.notes if fields else series.notes,
        ics_extra=fields.extra if fields else (ics_read.MARK_LINE if ics_read.is_marked(series.ics_extra) else None),
    )
    report.exceptions += 1
    _noted(report, vevent, fields)


def _aware(moment: date, store: CalendarStore) -> datetime:
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


def _attendee_names(value: Any) -> list[str]:
    names: list[str] = []
    for address in _as_list(value):
        params = getattr(address, "params", {})
        name = params.get("CN") if params else None
        if not name:
            text = _text(address)
            for prefix in (_ATTENDEE_URN, "mailto:", "MAILTO:"):
                if text.startswith(prefix):
                    text = unquote(text[len(prefix):]) if prefix == _ATTENDEE_URN else text[len(prefix):]
            name = text
        cleaned = " ".join(str(name).split())[:50]
        if cleaned:
            names.append(cleaned)
    return names
