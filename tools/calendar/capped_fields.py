"""Imported and synced fields cut to what the store keeps, the originals kept whole for export.

A file or a CalDAV server decides how long a DESCRIPTION is and how many ATTENDEEs and RDATEs
an event has. The store keeps at most ``limits.IMPORT_*`` of each (what the model reads, what a
search matches, what the occurrence index expands), so one hostile event cannot make every read
of its day slow. The server must not lose anything by it: for each field cut, the VEVENT's own
property goes into the event's unmodelled lines (``ics_extra``) whole, with a mark (``CUT``)
that names it, how many of its properties there are, a fingerprint of what the store kept, and
how long the whole was. The export (``restore``) writes the original back instead of the stored
cut while the stored value still has that fingerprint; once the field is changed here (the user
edits the notes, cancels an occurrence of a series with more than ``IMPORT_DATES`` EXDATEs),
what the store holds is written, as for any other edit. The mark never leaves the store, and a
file's own mark is dropped on the way in, so a file cannot make the export drop what it wrote.
"""

from __future__ import annotations

import hashlib
import icalendar
from dataclasses import replace
from datetime import datetime, timezone
from typing import Any, Callable, TypeVar

from tools.calendar import recurrence as rec
from tools.calendar.limits import IMPORT_ATTENDEES, IMPORT_DATES, IMPORT_LOCATION, IMPORT_NOTES, IMPORT_TITLE

CUT = "X-ILJEONG-CUT"  # "<PROPERTY> <how many of it> <fingerprint of what is stored> <whole size>"
F = TypeVar("F")
Moments = Callable[[icalendar.Event, str, Any, bool], list[datetime]]  # ics_fields._moments
_TEXT = (("title", "SUMMARY", IMPORT_TITLE), ("location", "LOCATION", IMPORT_LOCATION), ("notes", "DESCRIPTION", IMPORT_NOTES))
_KEPT = {"SUMMARY": IMPORT_TITLE, "LOCATION": IMPORT_LOCATION, "DESCRIPTION": IMPORT_NOTES, "ATTENDEE": IMPORT_ATTENDEES,
         "RDATE": IMPORT_DATES, "EXDATE": IMPORT_DATES}
_WORDS = {"SUMMARY": "title characters", "LOCATION": "location characters", "DESCRIPTION": "notes characters",
          "ATTENDEE": "attendees", "RDATE": "RDATEs", "EXDATE": "EXDATEs"}


def capped(fields: F, vevent: icalendar.Event, moments: Moments) -> F:
    """``fields`` (``ics_fields.Fields``) with title, location, notes and attendees cut to
    ``IMPORT_*``, and ``extra`` holding each cut property, and an RDATE or EXDATE list longer
    than ``IMPORT_DATES`` (which ``dates`` cuts in the recurrence), whole with its mark; and
    ``note`` naming what was cut, for the import report."""
    changes: dict[str, Any] = {}
    kept: list[tuple[str, list[Any], str, int]] = []  # property, its values, fingerprint, whole size
    for attr, name, limit in _TEXT:
        value = getattr(fields, attr)
        if value is not None and len(value) > limit:
            changes[attr] = value[:limit]
            kept.append((name, _as_list(vevent.get(name))[:1], _digest(changes[attr]), len(value)))
    names = list(dict.fromkeys(getattr(fields, "attendees")))
    if len(names) > IMPORT_ATTENDEES:
        changes["attendees"] = names[:IMPORT_ATTENDEES]
        kept.append(("ATTENDEE", _as_list(vevent.get("ATTENDEE")), _names_digest(changes["attendees"]), len(names)))
    zone, all_day = getattr(fields, "start").tzinfo, getattr(fields, "all_day")
    for name in ("RDATE", "EXDATE"):
        if sum(len(getattr(prop, "dts", ())) for prop in _as_list(vevent.get(name))) <= IMPORT_DATES:
            continue  # the common case: not read twice
        found = moments(vevent, name.lower(), zone, all_day)
        if len(set(found)) > IMPORT_DATES:
            kept.append((name, _as_list(vevent.get(name)), _dates_digest(dates(found)), len(set(found))))
    extra = _without_marks(getattr(fields, "extra"))
    if kept or extra != getattr(fields, "extra"):
        changes["extra"] = _with_originals(extra, kept)
    if kept and hasattr(fields, "note"):  # the import report's line for this VEVENT (ImportReport.notes)
        said = ", ".join(f"{_WORDS[name]} {min(whole, _KEPT[name]):,} of {whole:,}" for name, _v, _d, whole in kept)
        changes["note"] = "; ".join(filter(None, [getattr(fields, "note"), f"kept cut (exported whole): {said}"]))
    return replace(fields, **changes) if changes else fields  # type: ignore[type-var]


def dates(moments: list[datetime]) -> tuple[datetime, ...]:
    """An RDATE or EXDATE list as the store keeps it: the first ``IMPORT_DATES``, in time order."""
    return tuple(sorted(set(moments))[:IMPORT_DATES])


def whole_sizes(extra: str | None) -> dict[str, int]:
    """Property name → how long (characters) or how many (attendees, dates) the original was,
    for each field the store holds cut: what a tool result says it left out."""
    return {name: whole for name, _count, _digest, whole in _marks(extra)}


def restore(vevent: icalendar.Event, event: Any) -> None:
    """The export's half (``event``: the ``store.Event`` written as ``vevent``): every field
    still as the import cut it goes out as the original, and the marks never leave."""
    marks = _marks_of(vevent)
    if CUT in vevent:
        del vevent[CUT]
    for name, count, digest, _whole in marks:
        values = _as_list(vevent.pop(name, None))
        originals, ours = values[:count], values[count:]  # the extra lines are added before our own
        for value in originals if digest == _stored_digest(name, event) else ours:
            vevent.add(name, value, encode=False)


# -- internals -----------------------------------------------------------------------------------


def _stored_digest(name: str, event: Any) -> str:
    if name == "ATTENDEE":
        return _names_digest(list(event.attendees))
    if name in ("RDATE", "EXDATE"):
        parts = rec.parse(event.recurrence)
        return _dates_digest(parts.rdates if name == "RDATE" else parts.exdates)
    value = {"SUMMARY": event.title, "LOCATION": event.location, "DESCRIPTION": event.notes}[name]
    return _digest(value or "")


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", errors="replace")).hexdigest()[:24]


def _names_digest(names: list[str]) -> str:
    """Names as the store gives them back: each once, whatever the case (people are matched
    case-insensitively), in any order."""
    return _digest("\n".join(sorted({" ".join(n.split()).lower() for n in names})))


def _dates_digest(moments: tuple[datetime, ...] | list[datetime]) -> str:
    return _digest(",".join(rec.utc_stamp(m) for m in sorted(set(m.astimezone(timezone.utc) for m in moments))))


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


def extra_vevent(extra: str | None) -> icalendar.Event | None:
    """An event's kept .ics lines (``ics_extra``) as the VEVENT they came from, or None (none
    kept, or unreadable): what the marks here are read from and what an export writes back."""
    if not extra:
        return None
    try:
        return icalendar.Event.from_ical(f"BEGIN:VEVENT\r\n{extra}\r\nEND:VEVENT\r\n")
    except Exception:  # noqa: BLE001 - lines we wrote from a parsed file; an unreadable one has no marks
        return None


def _marks_of(component: icalendar.Event) -> list[tuple[str, int, str, int]]:
    found = []
    for value in _as_list(component.get(CUT)):
        parts = str(value).split()
        if len(parts) == 4 and parts[1].isdigit() and parts[3].isdigit():
            found.append((parts[0].upper(), int(parts[1]), parts[2], int(parts[3])))
    return found


def _marks(extra: str | None) -> list[tuple[str, int, str, int]]:
    """The marks alone. Only their own lines are parsed: the originals beside them run to
    megabytes (1 MB of notes, 5,000 attendees), and every view of the event reads the marks."""
    if not extra or CUT not in extra.upper().replace("\r\n ", ""):
        return []  # most events: no parse
    unfolded = extra.replace("\r\n ", "").replace("\r\n\t", "").replace("\n ", "").replace("\n\t", "")
    lines = [line for line in unfolded.replace("\r\n", "\n").split("\n")
             if line[: len(CUT) + 1].upper() in (CUT + ":", CUT + ";")]
    parsed = extra_vevent("\r\n".join(lines))
    return _marks_of(parsed) if parsed is not None else []


def _serialise(component: icalendar.Event) -> str | None:
    lines = component.to_ical().decode("utf-8", errors="replace").replace("\r\n", "\n").strip().split("\n")
    return "\r\n".join(line for line in lines if line not in ("BEGIN:VEVENT", "END:VEVENT")) or None


def _without_marks(extra: str | None) -> str | None:
    """The unmodelled lines without a file's own ``CUT`` (only the import writes one)."""
    if not extra or CUT not in extra.upper().replace("\r\n ", ""):
        return extra
    parsed = extra_vevent(extra)
    if parsed is None:
        return extra
    del parsed[CUT]
    return _serialise(parsed)


def _with_originals(extra: str | None, kept: list[tuple[str, list[Any], str, int]]) -> str | None:
    """The cut properties whole, each with its mark, before the other unmodelled lines (which
    are left as they are: they may hold VALARMs)."""
    component = icalendar.Event()
    for name, values, digest, whole in kept:
        for value in values:
            component.add(name, value, encode=False)
        component.add(CUT, f"{name} {len(values)} {digest} {whole}")
    return "\r\n".join(part for part in (_serialise(component), extra) if part) or None
