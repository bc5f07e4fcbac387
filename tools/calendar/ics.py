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

This module is the import (which VEVENTs count, by UID and RECURRENCE-ID, and what each does to
the store) and the package's one name for .ics: reading one VEVENT as our fields is
``ics_fields``, writing is ``ics_write``, and their public functions are importable from here.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import date, timezone
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import icalendar

from tools.calendar import ics_read
from tools.calendar import recurrence as rec
from tools.calendar.ics_fields import (
    Fields,
    as_list,
    attendee_names,
    aware,
    first_text,
    floating_times_in,
    periods,
    read_fields,
    recurrence_text,
)
from tools.calendar.ics_read import Skip as _Skip
from tools.calendar.ics_write import event_components, export_ics, ics_bytes
from tools.calendar.store import CalendarStore, Event

__all__ = ["ImportReport", "attendee_names", "event_components", "export_ics", "ics_bytes", "import_bytes", "import_ics"]


@dataclass(frozen=True)
class ImportReport:
    count: int  # events and series added to the store
    skipped: list[str] = field(default_factory=list)  # one line per VEVENT not imported, with the reason
    updated: int = 0  # events already in the calendar (same UID), updated in place
    exceptions: int = 0  # RECURRENCE-ID occurrences applied to their series
    notes: list[str] = field(default_factory=list)  # one line per VEVENT kept, read by a rule its file broke (ics_read)


def import_ics(store: CalendarStore, path: Path | str) -> ImportReport:
    """Add (or, by UID, update) the file's events and series in one transaction; every VEVENT
    not kept is named with its reason. ValueError (one line) if the file is not iCalendar."""
    return import_bytes(store, Path(path).read_bytes())


def import_bytes(store: CalendarStore, content: bytes) -> ImportReport:
    calendars = _read(content)
    groups: dict[str, list[icalendar.Event]] = defaultdict(list)
    order: list[str] = []
    loose: list[icalendar.Event] = []
    with floating_times_in(store, calendars):
        return _import_groups(store, calendars, groups, order, loose)


def _import_groups(store: CalendarStore, calendars: list[icalendar.Calendar], groups: dict[str, list[icalendar.Event]],
                   order: list[str], loose: list[icalendar.Event]) -> ImportReport:
    for calendar in calendars:
        for vevent in calendar.walk("VEVENT"):
            uid = first_text(vevent, "uid").strip()
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
        title = " ".join(first_text(vevent, "summary").split()) or "(no title)"
    except Exception:  # noqa: BLE001
        title = "(no title)"
    try:
        start = next(iter(as_list(vevent.get("dtstart"))), None)  # the first, if it is given twice
        when = f" {start.to_ical().decode()}" if start is not None else ""
    except Exception:  # noqa: BLE001
        when = ""
    return f"'{title[:80]}'{when}"


def _import_loose(store: CalendarStore, vevent: icalendar.Event, report: _Counter) -> None:
    """A VEVENT without a UID: added unless the same title and times are already there."""
    if "recurrence-id" in vevent:
        raise _Skip("an exception (RECURRENCE-ID) without a UID")
    fields = read_fields(vevent, store)
    text = recurrence_text(vevent, fields, store)
    if text is None and any(e.title == fields.title and e.start == fields.start and e.end == fields.end
                            for e in store.events_between(fields.start, fields.end)):
        raise _Skip("already in the calendar")
    _period_overrides(store, _add(store, fields, text, None), vevent, fields)  # a PERIOD's end counts here too
    report.count += 1
    _noted(report, vevent, fields)


def _import_master(store: CalendarStore, vevent: icalendar.Event, uid: str, report: _Counter) -> None:
    if first_text(vevent, "status").strip().upper() == "CANCELLED":
        raise _Skip("cancelled")
    fields = read_fields(vevent, store)
    text = recurrence_text(vevent, fields, store)
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


def _noted(report: _Counter, vevent: icalendar.Event, fields: Fields | None) -> None:
    """Name a VEVENT that was kept by reading a rule its file broke (last, once it is kept)."""
    if fields is not None and fields.note:
        report.notes.append(f"{_label(vevent)}: {fields.note}")


def _period_overrides(store: CalendarStore, event: Event | None, vevent: icalendar.Event, fields: Fields) -> None:
    if event is None or not event.is_series or fields.all_day:
        return  # an all-day occurrence is whole days: a PERIOD's hours would export as a zero-length day
    for begin, finish in periods(vevent, fields.start.tzinfo):
        if finish > begin and finish - begin != fields.end - fields.start:
            store.override_occurrence(event.id, begin, start=begin, end=finish)


def _checked(text: str | None, fields: Fields) -> str | None:
    try:
        return rec.check(text, fields.start)
    except ValueError as exc:
        raise _Skip(f"recurrence not kept: {exc}") from None


def _add(store: CalendarStore, fields: Fields, text: str | None, uid: str | None) -> Event:
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
    original = aware(raw, store).astimezone(ZoneInfo(series.tz))
    if store.occurrence(series.id, original) is None:  # RFC 5545 lets it add an occurrence
        parts = rec.parse(series.recurrence)
        text = rec.Recurrence(parts.rrules, (*parts.rdates, original.astimezone(timezone.utc)), parts.exdates).text()
        store.update_event(series.id, recurrence=text)
    if first_text(vevent, "status").strip().upper() == "CANCELLED":
        store.cancel_occurrence(series.id, original)
        report.exceptions += 1
        return
    if "dtstart" not in vevent:
        start, end = original, original + (series.end - series.start)
        fields = None  # the series' length, and so its lack of one (ics_read.MARK)
    else:
        fields = read_fields(vevent, store)
        start, end = fields.start, fields.end
    store.override_occurrence(
        series.id, original, title=fields.title if fields else series.title, start=start, end=end,
        location=fields.location if fields else series.location, notes=fields.notes if fields else series.notes,
        ics_extra=fields.extra if fields else (ics_read.MARK_LINE if ics_read.is_marked(series.ics_extra) else None),
    )
    report.exceptions += 1
    _noted(report, vevent, fields)
