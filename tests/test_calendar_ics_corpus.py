"""Real calendars in and out: the test calendars that ``icalendar`` and ``recurring-ical-events``
ship in their wheels (``icalendar/tests/calendars``, ``…/events``, ``recurring_ical_events/test/
calendars``; 258 files), read from the installed packages, never copied here.

Every file imports without a traceback (a file that is not iCalendar is one ValueError line,
a VEVENT we do not keep is named with its reason), and the occurrences of what we export, as
``recurring-ical-events`` expands them over 2000–2035, equal its expansion of the original file's
events that we kept, occurrence by occurrence; a file in ``KNOWN_DIFFERENCES`` differs by exactly
the number of occurrences pinned there, so a new drift (or a fix) fails until it is looked at.

The original is expanded one series at a time (the VEVENTs of one UID, or one VEVENT without a
UID): a series ``recurring-ical-events`` cannot expand (no DTSTART, a broken RRULE) adds nothing
and does not hide the others, as skipping the whole file did. A VEVENT without a UID is always
compared (our store gives it a UID, so "kept" cannot be told by UID): skipping one is a difference.

On ``recurring-ical-events``' own 95 test calendars, ``test_the_public_test_calendars_round_trip``
counts every occurrence of the original, kept or not, and holds the share of files and of
occurrences that come back whole to ``FILES_WHOLE`` and ``OCCURRENCES_KEPT``.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, timezone
from functools import cache
from pathlib import Path
from zoneinfo import ZoneInfo

import icalendar
import icalendar.tests
import pytest
import recurring_ical_events
import recurring_ical_events.test

from tools.calendar.ics import ImportReport, ics_bytes, import_bytes
from tools.calendar.store import CalendarStore

ZONE = ZoneInfo("Asia/Seoul")
WINDOW = (datetime(2000, 1, 1), datetime(2035, 1, 1))
PUBLIC = Path(recurring_ical_events.test.__file__).parent
ROOTS = [Path(icalendar.tests.__file__).parent, PUBLIC]
FILES = sorted(p for root in ROOTS for p in root.rglob("*.ics"))
FILES_WHOLE = 0.90  # share of recurring-ical-events' test calendars whose every occurrence comes back
OCCURRENCES_KEPT = 0.99  # share of their occurrences that come back

# name → (why our occurrences differ from recurring-ical-events' expansion of the original, how
# many occurrences differ: those only in the original plus those only in ours).
KNOWN_DIFFERENCES: dict[str, tuple[str, int]] = {
    "issue_75_range_parameter.ics": ("RECURRENCE-ID;RANGE=THISANDFUTURE: we apply the change to that occurrence "
                                     "only", 369),
    "issue_253_additional_recurrence_id.ics": ("RANGE=THISANDFUTURE (as above)", 1),
    "issue_466_respect_unique_timezone.ics": ("a custom VTIMEZONE (/Europe/CUSTOM): the instant is kept, the series "
                                              "runs in the store's zone, so its weekday can shift", 1272),
    "issue_156_RDATE_with_PERIOD_TZID_khal.ics": ("an RDATE;VALUE=PERIOD in a zone the series does not use", 1),
    "multiple_timezones.ics": ("RDATE;VALUE=TIME (a time without a date): recurring-ical-events cannot expand "
                               "these three series; we keep each one's DTSTART and drop the RDATE", 3),
    "end_before_start_event.ics": ("DTEND before DTSTART: we keep the start and read no length (named in the "
                                   "report); recurring-ical-events swaps the two", 2),
    "issue_132_swapped_start_and_end.ics": ("DTEND before DTSTART (as above)", 2),
}


@dataclass(frozen=True)
class RoundTrip:
    """One file imported into a fresh store and exported again, as occurrences."""
    refused: str | None  # the one-line ValueError of a file that is not iCalendar
    report: ImportReport | None
    stored: int  # events and series in the store after the import
    original: Counter  # every series of the original recurring-ical-events can expand
    kept: Counter  # the series of the original we kept (by UID) and every VEVENT without a UID
    ours: Counter  # our export


def _instant(value: date) -> datetime:
    if not isinstance(value, datetime):
        return datetime.combine(value, time(0), tzinfo=ZONE).astimezone(timezone.utc)
    if value.tzinfo is None or value.utcoffset() is None:
        return value.replace(tzinfo=ZONE).astimezone(timezone.utc)
    return value.astimezone(timezone.utc)


def _uid(vevent: icalendar.Event) -> str:
    value = vevent.get("uid")
    if isinstance(value, list):
        value = value[0] if value else None
    return "" if value is None else str(value).strip()


def _occurrence(item: icalendar.cal.Component) -> tuple[datetime, datetime | None, str]:
    """(start, end, title); an all-day occurrence that ends on its start date is that day, as RFC
    5545 reads a date DTSTART alone (``recurring-ical-events`` leaves it zero days long)."""
    start = item.decoded("dtstart")
    end = item.decoded("dtend") if "dtend" in item else None
    if end is not None and not isinstance(start, datetime) and not isinstance(end, datetime) and end <= start:
        end = start + timedelta(days=1)
    title = " ".join(str(item.get("summary", "")).split()) or "(no title)"
    return _instant(start), _instant(end) if end is not None else None, title


def occurrences(content: bytes, uids: set[str] | None = None) -> Counter:
    """The occurrences (cancelled ones are none) of every series of the file recurring-ical-events
    can expand, each series expanded alone; with ``uids``, only the series of those UIDs and the
    VEVENTs without a UID."""
    found: Counter = Counter()
    for calendar in icalendar.Calendar.from_ical(content, multiple=True):
        everything = list(calendar.subcomponents)
        others = [c for c in everything if c.name != "VEVENT"]
        series: dict[str, list[icalendar.cal.Component]] = defaultdict(list)
        for index, vevent in enumerate(c for c in everything if c.name == "VEVENT"):
            uid = _uid(vevent)
            if uids is None or not uid or uid in uids:
                series[uid or f"no UID #{index}"].append(vevent)
        try:
            for members in series.values():
                calendar.subcomponents = others + members
                try:
                    expanded = list(recurring_ical_events.of(calendar).between(*WINDOW))
                except Exception:  # noqa: BLE001 - a series other apps cannot read either adds nothing
                    continue
                for item in expanded:
                    if item.name == "VEVENT" and str(item.get("status", "")).upper() != "CANCELLED":
                        found[_occurrence(item)] += 1
        finally:
            calendar.subcomponents = everything
    return found


@cache
def round_trip(path: Path) -> RoundTrip:
    content = path.read_bytes()
    with CalendarStore(":memory:", tz="Asia/Seoul") as store:
        try:
            report = import_bytes(store, content)
        except ValueError as refused:
            return RoundTrip(str(refused), None, 0, Counter(), Counter(), Counter())
        events = store.all_events()
        exported, _ = ics_bytes(store)
    kept = {e.uid for e in events if e.uid}
    return RoundTrip(None, report, len(events), occurrences(content), occurrences(content, kept), occurrences(exported))


def differing(first: Counter, second: Counter) -> int:
    return sum((first - second).values()) + sum((second - first).values())


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_a_real_calendar_imports_without_a_traceback_and_exports_the_same_occurrences(path: Path) -> None:
    trip = round_trip(path)
    if trip.refused is not None:
        assert "\n" not in trip.refused
        return
    assert trip.report is not None
    assert trip.report.count + trip.report.updated == trip.stored
    assert all("\n" not in line for line in trip.report.skipped + trip.report.notes)
    why, pinned = KNOWN_DIFFERENCES.get(path.name, ("", 0))
    assert differing(trip.kept, trip.ours) == pinned, (
        f"{why or 'no known difference'}; only in the original: {list(trip.kept - trip.ours)[:3]}; "
        f"only ours: {list(trip.ours - trip.kept)[:3]}")


def test_the_public_test_calendars_round_trip() -> None:
    """recurring-ical-events' own test calendars: every occurrence of the original counts (a
    VEVENT we skip loses its occurrences), and a file is whole when all of them come back."""
    trips = [round_trip(p) for p in FILES if p.is_relative_to(PUBLIC)]
    whole = sum(t.refused is None and t.original == t.ours for t in trips)
    total = sum(sum(t.original.values()) for t in trips)
    back = sum(sum((t.original & t.ours).values()) for t in trips)
    figures = f"{whole}/{len(trips)} files ({whole / len(trips):.1%}), {back}/{total} occurrences ({back / total:.2%})"
    print(f"recurring-ical-events' test calendars round-trip: {figures}")
    assert len(trips) == 95, figures
    assert whole / len(trips) >= FILES_WHOLE and back / total >= OCCURRENCES_KEPT, figures


def test_the_known_differences_name_files_that_exist() -> None:
    assert set(KNOWN_DIFFERENCES) <= {p.name for p in FILES}
