"""icalendar's fuzzing corpus, and mutations of it, through import and export: no input gives a traceback.

The corpus is the seed corpus of icalendar's OSS-Fuzz fuzzer (``collective/icalendar``,
``src/icalendar/fuzzing/corpus``), copied to ``tests/data/icalendar-fuzzing`` because neither
icalendar's wheel nor its sdist carries it (that directory's README names the commit). The seeds
alone are 34 small files, 30 of them also icalendar's test calendars (``test_calendar_ics_corpus``
reads those), and a seed corpus is only where a fuzzer starts: so each file is also imported in
``MUTATIONS`` mutations (lines dropped, repeated, swapped or cut, a value moved to another property,
a digit or byte changed, a parameter added, a line inserted from ``LINES``). Mutation ``n`` of a
file comes from ``random.Random`` seeded with the file's name and ``n``: a failure names its case,
and ``mutated(path, n)`` gives the same bytes on any machine.

What every input must do: a file that icalendar cannot read as a VCALENDAR (and only such a file)
is refused with one ``ValueError`` line; otherwise every VEVENT is added, applied as an exception
of its series, or named in ``skipped``; no stored text is the repr of an icalendar object; and the
export reads back into a fresh calendar whole, nothing skipped.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

import icalendar
import pytest

from tools.calendar.domain import import_file
from tools.calendar import ics_read
from tools.calendar.ics import ics_bytes, import_bytes
from tools.calendar.store import CalendarStore

CORPUS = Path(__file__).parent / "data" / "icalendar-fuzzing" / "corpus"
FILES = sorted(CORPUS.glob("*.ics"))
CORPUS_SIZE = 34  # as copied; a lost directory fails test_the_whole_corpus_is_there, not "0 tests"
MUTATIONS = 40

# Content lines a mutation may insert: corners that broke (or could break) an importer.
LINES = [
    b"RRULE:FREQ=DAILY;INTERVAL=0", b"RRULE:FREQ=WEEKLY;INTERVAL=-1", b"RRULE:FREQ=WEEKLY;BYHOUR=1,2,3;BYMINUTE=0,30",
    b"RRULE:FREQ=SECONDLY;COUNT=100000", b"RRULE:FREQ=YEARLY;BYMONTH=13", b"RRULE:FREQ=DAILY", b"RRULE:",
    b"RRULE:FREQ=MONTHLY;BYMONTHDAY=31;COUNT=5", b"RRULE:FREQ=WEEKLY;BYDAY=XX", b"RRULE:FREQ=DAILY;UNTIL=20000101",
    b"RRULE:FREQ=DAILY;UNTIL=20240101T000000", b"RRULE:FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=30", b"RRULE:FREQ=DAILY;COUNT=-1",
    b"EXDATE:20240101", b"EXDATE;VALUE=DATE:20240101", b"RDATE;VALUE=PERIOD:20240101T000000Z/PT1H",
    b"RDATE;VALUE=PERIOD:20240101T000000/20231231T000000", b"RDATE:99991231T235959Z", b"RDATE;VALUE=DATE:00010101",
    b"DURATION:P1000000D", b"DURATION:-PT1H", b"DURATION:PT0S", b"DURATION:P1W2D", b"DURATION:nonsense",
    b"RECURRENCE-ID:20240101T000000", b"RECURRENCE-ID;VALUE=DATE:20240101",
    b"RECURRENCE-ID;RANGE=THISANDFUTURE:20240101T000000Z", b"DTEND;VALUE=DATE:20240101",
    b"DTSTART:99991231T235959Z", b"DTSTART:99991231T120000", b"DTSTART;VALUE=DATE:99991231", b"DTSTART:00010101T000000",
    b"DTSTART;VALUE=DATE:00010101", b"DTSTART;TZID=Pacific/Kiritimati:00010101T000000",
    b"DTSTART;TZID=Nowhere/Zone:20240101T100000", b"DTEND:20240101T100000Z", b"DTSTART:20240101T100000Z",
    b"STATUS:CANCELLED", b"UID:same", b"UID:", b"TRANSP:TRANSPARENT", b"SUMMARY:", b"ATTENDEE:", b"ATTENDEE;CN=:mailto:",
    b"BEGIN:VEVENT", b"END:VEVENT", b"BEGIN:VALARM", b"END:VALARM", b"BEGIN:VCALENDAR", b"END:VCALENDAR",
    b"X-WR-TIMEZONE:Nowhere", b"X-WR-TIMEZONE:America/New_York", b"TZID:America/New_York",
    "LOCATION:éé".encode(), b"DESCRIPTION:a\\nb\\,c",
]
PARAMETERS = [b";TZID=Nowhere/Zone", b";VALUE=DATE", b";VALUE=PERIOD", b";TZID=America/New_York", b";RANGE=THISANDFUTURE",
              b";VALUE=DATE-TIME", b";TZID=", b";VALUE=DURATION", b';CN="x"', b";TZID=/mozilla.org/20050126_1/Asia/Seoul"]
REPR = re.compile(r"\bv[A-Z][A-Za-z]+\(")  # vText(, vDDDTypes(, ...: icalendar objects printed, not their values


def mutate(content: bytes, rng: random.Random) -> bytes:
    """One to three edits of ``content``, line-wise, the way a broken exporter or a truncated
    download damages a file (and the way a byte-flipping fuzzer does)."""
    lines = content.splitlines(keepends=True) or [b""]
    for _ in range(rng.randint(1, 3)):
        op = rng.randrange(9)
        i = rng.randrange(len(lines))
        line = lines[i]
        if op == 0 and len(lines) > 1:
            del lines[i]
        elif op == 1:
            lines.insert(i, line)
        elif op == 2:
            j = rng.randrange(len(lines))
            lines[i], lines[j] = lines[j], lines[i]
        elif op == 3:
            lines.insert(i, rng.choice(LINES) + b"\r\n")
        elif op == 4 and b":" in line:
            name, _, value = line.partition(b":")
            lines[i] = name + b":" + (rng.choice(lines).partition(b":")[2] or value)
        elif op == 5 and b":" in line:
            name, _, value = line.partition(b":")
            lines[i] = name + rng.choice(PARAMETERS) + b":" + value
        elif op == 6:
            digits = [k for k, c in enumerate(line) if 48 <= c <= 57]
            if digits:
                k = rng.choice(digits)
                lines[i] = line[:k] + bytes([rng.randrange(48, 58)]) + line[k + 1:]
        elif op == 7 and line:
            k = rng.randrange(len(line))
            lines[i] = line[:k] + bytes([rng.randrange(256)]) + line[k + 1:]
        elif op == 8:
            joined = b"".join(lines)
            lines = joined[:rng.randrange(len(joined) + 1)].splitlines(keepends=True) or [b""]
    return b"".join(lines)


def mutated(path: Path, n: int) -> bytes:
    """Case ``n`` of a corpus file: 0 is the file itself."""
    content = path.read_bytes()
    return content if n == 0 else mutate(content, random.Random(f"{path.name}:{n}"))


def vevent_count(content: bytes) -> int | None:
    """How many VEVENTs icalendar reads in the file's VCALENDARs; None if it reads no VCALENDAR.
    Read as the import reads it (``ics_read.parsed``: no VTIMEZONE kept from an earlier file):
    icalendar builds a VTIMEZONE when it first meets its TZID, so a broken one failed the parse
    in a fresh process and passed once an earlier mutation had cached a good one."""
    try:
        calendars = [c for c in ics_read.parsed(content) if isinstance(c, icalendar.Calendar)]
    except Exception:  # noqa: BLE001 - icalendar raises many types on broken input
        return None
    return sum(len(c.walk("VEVENT")) for c in calendars) if calendars else None


def check_import(content: bytes) -> None:
    """The promise of ``tools.calendar.ics`` for one input (see the module docstring)."""
    vevents = vevent_count(content)
    with CalendarStore(":memory:", tz="Asia/Seoul") as store:
        try:
            report = import_bytes(store, content)
        except ValueError as refused:
            assert "\n" not in str(refused), f"a refusal of more than one line: {refused!r}"
            assert vevents is None, f"a calendar icalendar reads ({vevents} VEVENTs) was refused: {refused}"
            return
        assert vevents is not None, "a file icalendar cannot read as a VCALENDAR was imported"
        events = store.all_events()
        assert report.count + report.updated + report.exceptions + len(report.skipped) == vevents, (
            f"{vevents} VEVENTs, but {report.count} added, {report.updated} updated, {report.exceptions} exceptions, "
            f"{len(report.skipped)} skipped")
        assert report.count + report.updated == len(events)
        assert all("\n" not in line for line in report.skipped)
        for event in events:
            for text in (event.title, event.uid or "", event.location or "", event.notes or "", *event.attendees):
                assert not REPR.search(text), f"a Python repr stored as a value: {text[:80]!r}"
        exported, count = ics_bytes(store)
    with CalendarStore(":memory:", tz="Asia/Seoul") as again:
        back = import_bytes(again, exported)
        assert (back.count, back.skipped) == (count, []), "the export does not read back whole"


def test_the_whole_corpus_is_there() -> None:
    assert len(FILES) == CORPUS_SIZE, f"{len(FILES)} files in {CORPUS}"


@pytest.mark.timeout(120)
@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_a_fuzzing_corpus_file_and_its_mutations_import_without_a_traceback(path: Path) -> None:
    failures = []
    for n in range(MUTATIONS + 1):
        try:
            check_import(mutated(path, n))
        except Exception as exc:  # noqa: BLE001 - every failing case is listed, not only the first
            failures.append(f"mutated({path.name!r}, {n}): {type(exc).__name__}: {str(exc)[:300]}")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("path", FILES[::6], ids=lambda p: p.name)
def test_the_import_command_answers_a_corpus_file_in_lines_or_one_error_line(path: Path) -> None:
    """``python -m agent calendar import FILE`` (``domain.import_file``): a summary line and one
    line per skipped VEVENT (and per VEVENT kept by a rule its file broke), or one ValueError
    line that names the file."""
    with CalendarStore(":memory:", tz="Asia/Seoul") as store:
        try:
            answer = import_file(store, str(path))
        except ValueError as refused:
            assert "\n" not in str(refused) and str(refused).startswith(f"{path}: not a readable .ics file (")
            assert vevent_count(path.read_bytes()) is None
            return
        first, *named = answer.splitlines()
        assert first.startswith("imported ") and (first.endswith(f"from {path}") or f"from {path}, " in first), first
        assert all(line.startswith(("  skipped '", "  kept '")) for line in named), named
        assert len(store.all_events()) == int(first.split()[1])
