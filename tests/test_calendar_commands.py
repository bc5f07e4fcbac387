"""The calendar's model-free commands: /events DAY, /week, and ``python -m agent calendar import|export``."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import date, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from tools.calendar import CalendarStore
from tools.calendar.domain import agenda, parse_day, week

SEOUL = ZoneInfo("Asia/Seoul")
TUESDAY = date(2026, 12, 1)  # a Tuesday


@pytest.mark.parametrize(
    "text, expected",
    [
        ("", TUESDAY), ("today", TUESDAY), ("오늘", TUESDAY), ("Tomorrow", date(2026, 12, 2)), ("내일", date(2026, 12, 2)),
        ("모레", date(2026, 12, 3)), ("friday", date(2026, 12, 4)), ("fri", date(2026, 12, 4)), ("금요일", date(2026, 12, 4)),
        ("tuesday", TUESDAY), ("next tuesday", date(2026, 12, 8)), ("monday", date(2026, 12, 7)), ("일요일", date(2026, 12, 6)),
        ("2027-01-15", date(2027, 1, 15)),
    ],
)
def test_day_words(text: str, expected: date) -> None:
    assert parse_day(text, TUESDAY) == expected


@pytest.mark.parametrize("text", ["someday", "2026-13-01", "next 2026-12-01", "fridays"])
def test_not_a_day_is_none(text: str) -> None:
    assert parse_day(text, TUESDAY) is None


@pytest.fixture
def store(store: CalendarStore) -> CalendarStore:
    """The shared store (tests/conftest.py) with a dentist on Wednesday and a review on Friday."""
    s = store
    s.add_event("치과", datetime(2026, 12, 2, 15, tzinfo=SEOUL), datetime(2026, 12, 2, 16, tzinfo=SEOUL), location="강남역 치과")
    s.add_event("Design review", datetime(2026, 12, 4, 10, tzinfo=SEOUL), datetime(2026, 12, 4, 11, tzinfo=SEOUL),
                attendees=("Mina", "Joon"))
    return s


NOW = datetime(2026, 12, 1, 9, 0, tzinfo=SEOUL)


def test_events_takes_day_words(store: CalendarStore) -> None:
    assert "치과" in agenda(store, "내일", now=NOW)
    assert "Design review" in agenda(store, "friday", now=NOW)
    assert agenda(store, "today", now=NOW) == "No events on 2026-12-01."
    assert agenda(store, "someday", now=NOW).startswith("Not a day: 'someday'. Use today, tomorrow, 내일, 모레")


def test_week_lists_seven_days_with_places_and_attendees(store: CalendarStore) -> None:
    text = week(store, "", now=NOW)
    lines = text.splitlines()
    assert lines[0] == "Week of 2026-12-01 (Asia/Seoul):"
    days = [line for line in lines[1:] if not line.startswith("  ")]
    assert [d.split()[1].rstrip(":") for d in days] == [f"2026-12-0{i}" for i in range(1, 8)]
    assert any("치과" in line and "@ 강남역 치과" in line for line in lines)
    assert any("Design review" in line and "with Joon, Mina" in line for line in lines)
    assert "Tue 2026-12-01: nothing" in lines


def run_agent(tmp_path: Path, data: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_", "HF_"))}
    env.update(AGENT_DATA_DIR=str(tmp_path / data))
    return subprocess.run([sys.executable, "-m", "agent", *args], capture_output=True, text=True, env=env, timeout=120)


def test_calendar_export_then_import_copies_the_events(tmp_path: Path) -> None:
    with CalendarStore(tmp_path / "a" / "calendar.sqlite3", tz="Asia/Seoul") as s:
        s.add_event("치과", datetime(2026, 12, 2, 15, tzinfo=SEOUL), datetime(2026, 12, 2, 16, tzinfo=SEOUL),
                    location="강남역", attendees=("Mina",))
    ics = tmp_path / "cal.ics"
    exported = run_agent(tmp_path, "a", "calendar", "export", str(ics))
    assert exported.returncode == 0, exported.stderr
    assert exported.stdout.strip() == f"exported 1 event to {ics}"
    imported = run_agent(tmp_path, "b", "calendar", "import", str(ics))
    assert imported.returncode == 0, imported.stderr
    assert imported.stdout.strip() == f"imported 1 event from {ics}"
    with CalendarStore(tmp_path / "b" / "calendar.sqlite3", tz="Asia/Seoul") as s:
        (event,) = s.all_events()
    assert (event.title, event.location, event.attendees) == ("치과", "강남역", ("Mina",))
    again = run_agent(tmp_path, "b", "calendar", "import", str(ics))
    assert again.returncode == 0 and "imported 0 events" in again.stdout and "updated 1 already here (same UID)" in again.stdout


@pytest.mark.parametrize("content", [None, "not an ics file"])
def test_calendar_import_of_a_bad_file_is_one_line_and_exit_2(tmp_path: Path, content: str | None) -> None:
    path = tmp_path / "bad.ics"
    if content is not None:
        path.write_text(content)
    result = run_agent(tmp_path, "a", "calendar", "import", str(path))
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {path}")


def test_file_commands_are_local_only_never_offered_to_a_chat(tmp_path: Path) -> None:
    """The bot registers every entry of ``domain.commands`` as a Telegram command; a chat user must
    not be able to make the host read or write a file, so import/export live apart."""
    from agent.config import load_settings
    from tools.calendar.domain import load_domain

    domain = load_domain(load_settings({"data_dir": str(tmp_path)}, environ={}))
    try:
        assert set(domain.commands) == {"today", "week"}
        assert set(domain.local_commands) == {"import", "export", "sync", "status"}  # sync/status: the CLI's, no path either
        assert set(domain.documents) == {"ics"}  # reads only the store: no path from the chat
    finally:
        domain.close()
