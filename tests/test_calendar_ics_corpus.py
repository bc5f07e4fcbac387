"""Real calendars in and out: the test calendars that ``icalendar`` and ``recurring-ical-events``
ship in their wheels (``icalendar/tests/calendars``, ``…/events``, ``recurring_ical_events/test/
calendars``; 258 files), read from the installed packages, never copied here.

Every file imports without a traceback (a file that is not iCalendar is one ValueError line,
a VEVENT we do not keep is named with its reason), and the occurrences of what we export, as
``recurring-ical-events`` expands them over 2000–2035, equal its expansion of the original file
for every event we kept, occurrence by occurrence, but for the files in ``KNOWN_DIFFERENCES``.
"""

from __future__ import annotations

from collections import Counter
from datetime import date, datetime, time, timezone
from pathlib import Path
from zoneinfo import ZoneInfo

import icalendar
import icalendar.tests
import pytest
import recurring_ical_events
import recurring_ical_events.test

from tools.calendar.ics import ics_bytes, import_bytes
from tools.calendar.store import CalendarStore

ZONE = ZoneInfo("Asia/Seoul")
WINDOW = (datetime(2000, 1, 1), datetime(2035, 1, 1))
ROOTS = [Path(icalendar.tests.__file__).parent, Path(recurring_ical_events.test.__file__).parent]
FILES = sorted(p for root in ROOTS for p in root.rglob("*.ics"))

# name → why our occurrences differ from recurring-ical-events' expansion of the original.
KNOWN_DIFFERENCES = {
    "issue_148_edge_case_1.ics": "RECURRENCE-ID;RANGE=THISANDFUTURE: we apply the change to that occurrence only",
    "issue_148_exdate_and_rdate_updated.ics": "RANGE=THISANDFUTURE (as above)",
    "issue_148_ignored_exdate.ics": "RANGE=THISANDFUTURE (as above)",
    "issue_75_range_parameter.ics": "RANGE=THISANDFUTURE (as above)",
    "issue_163_deleted_modification.ics": "RANGE=THISANDFUTURE (as above)",
    "issue_253_additional_recurrence_id.ics": "RANGE=THISANDFUTURE (as above)",
    "issue_466_respect_unique_timezone.ics": "a custom VTIMEZONE (/Europe/CUSTOM): the instant is kept, the "
                                             "series runs in the store's zone, so its weekday can shift",
    "issue_156_RDATE_with_PERIOD_TZID_khal.ics": "an RDATE;VALUE=PERIOD in a zone the series does not use",
    "issue_113_period_rdate_duration.ics": "an RDATE PERIOD with a DURATION equal to the series' own",
    "issue_201_test_matrix.ics": "events before 2000 that end inside the window (recurring-ical-events counts "
                                 "them by start)",
    # events without a UID that we skip with a reason (zero length); the comparison is by title
    "duration.ics": "'Short event' has no length: skipped, named in the report",
    "issue_722_missing_VTIMEZONE_custom.ics": "an event without length: skipped, named in the report",
    "issue_107_omitting_last_event.ics": "two VEVENTs without UID or SUMMARY: the comparison by title cannot tell them apart",
}


def _instant(value: date) -> datetime:
    if not isinstance(value, datetime):
        return datetime.combine(value, time(0), tzinfo=ZONE).astimezone(timezone.utc)
    if value.tzinfo is None or value.utcoffset() is None:
        return value.replace(tzinfo=ZONE).astimezone(timezone.utc)
    return value.astimezone(timezone.utc)


def occurrences(content: bytes, uids: set[str]) -> Counter:
    """(start, end, title) of every VEVENT occurrence of the events kept (by UID; UID-less ones by
    title), as recurring-ical-events expands them; cancelled occurrences are not occurrences."""
    found: Counter = Counter()
    for calendar in icalendar.Calendar.from_ical(content, multiple=True):
        for item in recurring_ical_events.of(calendar).between(*WINDOW):
            if item.name != "VEVENT" or str(item.get("status", "")).upper() == "CANCELLED":
                continue
            uid = str(item.get("uid", ""))
            if uid and uid not in uids:
                continue
            end = item.decoded("dtend") if "dtend" in item else None
            title = " ".join(str(item.get("summary", "")).split()) or "(no title)"
            found[(_instant(item.decoded("dtstart")), _instant(end) if end is not None else None, title)] += 1
    return found


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_a_real_calendar_imports_without_a_traceback_and_exports_the_same_occurrences(path: Path) -> None:
    content = path.read_bytes()
    with CalendarStore(":memory:", tz="Asia/Seoul") as store:
        try:
            report = import_bytes(store, content)
        except ValueError as refused:
            assert "\n" not in str(refused)
            return
        kept = {e.uid for e in store.all_events()}
        assert report.count + report.updated == len(store.all_events())
        assert all("\n" not in line for line in report.skipped)
        exported, _ = ics_bytes(store)
    try:
        original = occurrences(content, kept)
    except Exception as exc:  # noqa: BLE001 - recurring-ical-events cannot expand some broken files
        pytest.skip(f"recurring-ical-events cannot expand the original: {type(exc).__name__}")
    ours = occurrences(exported, kept)
    if path.name in KNOWN_DIFFERENCES:
        return
    assert ours == original, f"only in the original: {list((original - ours))[:3]}; only ours: {list((ours - original))[:3]}"


def test_the_known_differences_name_files_that_exist() -> None:
    assert set(KNOWN_DIFFERENCES) <= {p.name for p in FILES}
