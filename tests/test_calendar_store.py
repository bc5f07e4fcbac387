"""The calendar store on real SQLite files: schema, migrations, transactions, crash safety."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
from datetime import datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from tools.calendar.store import MIGRATIONS, SCHEMA_VERSION, CalendarStore

SEOUL = ZoneInfo("Asia/Seoul")
REPO = Path(__file__).resolve().parents[1]


def at(day: int, hour: int, minute: int = 0) -> datetime:
    return datetime(2026, 12, day, hour, minute, tzinfo=SEOUL)


def test_opening_creates_parent_dirs_with_wal_and_foreign_keys(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "calendar.sqlite3"
    with CalendarStore(path) as s:
        assert path.is_file()
        assert s.schema_version() == SCHEMA_VERSION
        assert s._conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert s._conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1


def test_unknown_time_zone_is_refused(tmp_path: Path) -> None:
    with pytest.raises(Exception):
        CalendarStore(tmp_path / "c.sqlite3", tz="Mars/Olympus")


def test_old_version_file_is_migrated_and_keeps_its_data(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    raw = sqlite3.connect(path)
    raw.execute("CREATE TABLE schema_version (version INTEGER NOT NULL, applied_at TEXT NOT NULL)")
    raw.executescript(MIGRATIONS[0])
    raw.execute("INSERT INTO schema_version VALUES (1, '2026-01-01T00:00:00Z')")
    raw.execute(
        "INSERT INTO events (title, start_utc, end_utc, tz, created_at, updated_at) VALUES "
        "('옛 일정', '2026-12-01T06:00:00Z', '2026-12-01T07:00:00Z', 'Asia/Seoul', '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z')"
    )
    raw.commit()
    raw.close()

    with CalendarStore(path) as s:
        assert s.schema_version() == SCHEMA_VERSION > 1
        [event] = s.all_events()
        assert (event.title, event.start) == ("옛 일정", at(1, 15))
        s.add_busy("민수", at(1, 9), at(1, 10))  # the table added by migration 2 works
        assert len(s.busy_between("민수", at(1, 0), at(2, 0))) == 1


def test_event_ids_are_never_reused_after_a_delete(store: CalendarStore) -> None:
    first = store.add_event("Dentist", at(1, 15), at(1, 16))
    assert store.delete_event(first.id)
    second = store.add_event("Board meeting", at(1, 15), at(1, 16))
    assert second.id > first.id and store.get_event(first.id) is None


def test_version_3_file_migrates_to_never_reused_ids_keeping_ids_attendees_and_reminders(tmp_path: Path) -> None:
    """A file made before AUTOINCREMENT: its rows, ids and the rows that point at them survive
    the table rebuild (no cascade), and from then on a deleted id stays unused."""
    path = tmp_path / "v3.sqlite3"
    raw = sqlite3.connect(path)
    raw.execute("PRAGMA foreign_keys = ON")
    raw.execute("CREATE TABLE schema_version (version INTEGER NOT NULL, applied_at TEXT NOT NULL)")
    for version in range(3):
        raw.executescript(MIGRATIONS[version])
        raw.execute("INSERT INTO schema_version VALUES (?, '2026-01-01T00:00:00Z')", (version + 1,))
    for event_id, title in ((1, "Keep"), (2, "Also keep"), (3, "Newest")):
        raw.execute(
            "INSERT INTO events (id, title, start_utc, end_utc, tz, created_at, updated_at) VALUES "
            "(?, ?, '2026-12-01T06:00:00Z', '2026-12-01T07:00:00Z', 'Asia/Seoul', '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z')", (event_id, title))
    raw.execute("INSERT INTO people (id, name) VALUES (1, 'Mina')")
    raw.execute("INSERT INTO event_attendees VALUES (2, 1)")
    raw.execute("INSERT INTO reminders VALUES (2, 10)")
    raw.commit()
    raw.close()

    with CalendarStore(path) as s:
        assert s.schema_version() == SCHEMA_VERSION >= 4
        assert [(e.id, e.title) for e in s.all_events()] == [(1, "Keep"), (2, "Also keep"), (3, "Newest")]
        assert s.get_event(2).attendees == ("Mina",)
        assert s.reminder_rows(at(1, 0)) and all(row[0] == 2 for row in s.reminder_rows(at(1, 0)))
        sql = s._conn.execute("SELECT sql FROM sqlite_master WHERE name = 'events'").fetchone()[0]
        assert "AUTOINCREMENT" in sql
        assert s._conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
        assert s.delete_event(3)
        assert s.add_event("Later", at(2, 9), at(2, 10)).id == 4  # 3 stays unused
        assert s.get_event(2).attendees == ("Mina",)  # deleting 3 cascaded to nothing of 2's


def test_file_from_a_newer_program_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "new.sqlite3"
    CalendarStore(path).close()
    raw = sqlite3.connect(path)
    raw.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")  # where the version lives since 5
    raw.commit()
    raw.close()
    with pytest.raises(RuntimeError, match="newer"):
        CalendarStore(path)


def test_event_round_trips_with_aware_times_and_its_zone(store: CalendarStore) -> None:
    made = store.add_event("치과 예약", at(1, 15), at(1, 16), location="강남역", notes="스케일링", attendees=["민수", "Jane"])
    got = store.get_event(made.id)
    assert got == made
    assert got.start == at(1, 15) and got.start.tzinfo is not None
    assert got.tz == "Asia/Seoul"
    assert got.attendees == ("Jane", "민수")
    assert (got.location, got.notes) == ("강남역", "스케일링")


def test_event_keeps_the_zone_it_was_made_in(store: CalendarStore) -> None:
    ny = ZoneInfo("America/New_York")
    made = store.add_event("Call", datetime(2026, 12, 1, 9, tzinfo=ny), datetime(2026, 12, 1, 10, tzinfo=ny), tz="America/New_York")
    got = store.get_event(made.id)
    assert got.tz == "America/New_York" and got.start.utcoffset() == timedelta(hours=-5)
    assert got.start == at(1, 23)


def test_naive_datetimes_are_refused(store: CalendarStore) -> None:
    with pytest.raises(ValueError, match="naive"):
        store.add_event("x", datetime(2026, 12, 1, 9), datetime(2026, 12, 1, 10))


def test_event_ending_before_it_starts_is_refused(store: CalendarStore) -> None:
    with pytest.raises(ValueError):
        store.add_event("x", at(1, 10), at(1, 10))
    assert store.all_events() == []


def test_update_changes_only_given_fields(store: CalendarStore) -> None:
    made = store.add_event("회의", at(1, 10), at(1, 11), location="본사", attendees=["민수"])
    updated = store.update_event(made.id, title="팀 회의", notes="안건 공유")
    assert (updated.title, updated.location, updated.notes, updated.attendees) == ("팀 회의", "본사", "안건 공유", ("민수",))
    assert (updated.start, updated.end) == (made.start, made.end)
    cleared = store.update_event(made.id, location=None, attendees=[])
    assert cleared.location is None and cleared.attendees == ()


def test_update_and_delete_of_missing_event_report_absence(store: CalendarStore) -> None:
    assert store.update_event(99, title="x") is None
    assert store.delete_event(99) is False


def test_delete_cascades_attendance_but_keeps_people(store: CalendarStore) -> None:
    made = store.add_event("점심", at(1, 12), at(1, 13), attendees=["민수"])
    assert store.delete_event(made.id) is True
    assert store.get_event(made.id) is None
    assert store._conn.execute("SELECT COUNT(*) FROM event_attendees").fetchone()[0] == 0
    assert [p.name for p in store.people()] == ["민수"]


def test_people_names_are_unique_ignoring_case_and_spacing(store: CalendarStore) -> None:
    a = store.ensure_person("Jane  Doe")
    b = store.ensure_person(" jane doe ")
    assert a == b and a.name == "Jane Doe"
    assert store.find_person("JANE DOE") == a
    with pytest.raises(ValueError):
        store.ensure_person("   ")


def test_events_between_uses_half_open_overlap(store: CalendarStore) -> None:
    store.add_event("A", at(1, 9), at(1, 10))
    store.add_event("B", at(1, 10), at(1, 11))
    assert [e.title for e in store.events_between(at(1, 10), at(1, 10, 30))] == ["B"]
    assert [e.title for e in store.events_between(at(1, 9, 30), at(1, 10, 30))] == ["A", "B"]
    assert store.events_between(at(1, 11), at(1, 12)) == []


def test_query_matches_title_location_notes_and_attendees(store: CalendarStore) -> None:
    store.add_event("Dentist", at(1, 9), at(1, 10))
    store.add_event("점심", at(1, 12), at(1, 13), attendees=["민수"])
    store.add_event("Call", at(1, 14), at(1, 15), location="Zoom")
    day = (at(1, 0), at(2, 0))
    assert [e.title for e in store.events_between(*day, query="dentist")] == ["Dentist"]
    assert [e.title for e in store.events_between(*day, query="민수")] == ["점심"]
    assert [e.title for e in store.events_between(*day, query="zoom")] == ["Call"]


def test_busy_between_returns_only_that_persons_overlapping_intervals(store: CalendarStore) -> None:
    store.add_busy("민수", at(1, 9), at(1, 10), "수업")
    store.add_busy("민수", at(2, 9), at(2, 10))
    store.add_busy("지영", at(1, 9), at(1, 12))
    got = store.busy_between("민수", at(1, 0), at(2, 0))
    assert [(b.person, b.start, b.label) for b in got] == [("민수", at(1, 9), "수업")]


def test_failed_transaction_leaves_nothing_behind(store: CalendarStore) -> None:
    store.add_event("before", at(1, 8), at(1, 9))
    with pytest.raises(RuntimeError):
        with store.transaction():
            store.add_event("inside", at(1, 10), at(1, 11), attendees=["새사람"])
            store.add_busy("새사람", at(1, 12), at(1, 13))
            raise RuntimeError("boom")
    assert [e.title for e in store.all_events()] == ["before"]
    assert store.people() == [] and store.all_busy() == []


def test_nested_transaction_is_undone_with_the_outer_one(store: CalendarStore) -> None:
    with pytest.raises(RuntimeError):
        with store.transaction():
            with store.transaction():
                store.add_event("inner", at(1, 10), at(1, 11))
            raise RuntimeError("outer fails after inner finished")
    assert store.all_events() == []


def test_snapshot_ignores_ids_and_insertion_order(tmp_path: Path) -> None:
    with CalendarStore(tmp_path / "a.sqlite3") as a, CalendarStore(tmp_path / "b.sqlite3") as b:
        a.add_event("점심", at(1, 12), at(1, 13), attendees=["민수", "Jane"])
        a.add_event("회의", at(1, 9), at(1, 10))
        b.add_event("회의", at(1, 9), at(1, 10))
        b.add_event("점심", at(1, 12), at(1, 13), attendees=["Jane", "민수"])
        b.add_event("delete me", at(2, 12), at(2, 13))
        b.delete_event(3)
        assert a.snapshot() == b.snapshot()
        snap = a.snapshot()
        assert snap["events"][0] == {
            "title": "회의",
            "start": "2026-12-01T09:00:00+09:00",
            "end": "2026-12-01T10:00:00+09:00",
            "location": None,
            "notes": None,
            "attendees": [],
            "reminders": [],
        }
        assert snap["people"] == ["Jane", "민수"]
        b.update_event(1, notes="changed")
        assert a.snapshot() != b.snapshot()


def test_snapshot_sees_reminders_agenda_settings_and_with_ids_event_identity(tmp_path: Path) -> None:
    with CalendarStore(tmp_path / "a.sqlite3") as a, CalendarStore(tmp_path / "b.sqlite3") as b:
        for store in (a, b):
            store.add_event("회의", at(1, 9), at(1, 10), remind_minutes_before=[10])
            store.add_event("점심", at(1, 12), at(1, 13))
        assert a.snapshot(with_ids=True) == b.snapshot(with_ids=True)
        b.update_event(1, remind_minutes_before=[30])
        assert a.snapshot() != b.snapshot()
        b.update_event(1, remind_minutes_before=[10])
        b.ledger.set_agenda_setting("chat-1", False, None)
        assert a.snapshot() != b.snapshot()
        # Deleted and re-created identically: the same content, another event.
        a.delete_event(1)
        a.add_event("회의", at(1, 9), at(1, 10), remind_minutes_before=[10])
        b.ledger.set_agenda_setting("chat-1", True, None)
        a.ledger.set_agenda_setting("chat-1", True, None)
        assert a.snapshot() == b.snapshot()
        assert a.snapshot(with_ids=True) != b.snapshot(with_ids=True)


def test_korean_text_survives_reopening(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite3"
    with CalendarStore(path) as s:
        s.add_event("엄마 생신 저녁 🎂", at(5, 18), at(5, 20), location="을지로 3가", attendees=["김민수"])
    with CalendarStore(path) as s:
        [e] = s.all_events()
        assert (e.title, e.location, e.attendees) == ("엄마 생신 저녁 🎂", "을지로 3가", ("김민수",))


def test_writes_from_several_threads_all_land(store: CalendarStore) -> None:
    def write(worker: int) -> None:
        for i in range(10):
            with store.transaction():
                store.add_event(f"w{worker}-{i}", at(1 + worker, 9) + timedelta(minutes=i), at(1 + worker, 10), attendees=[f"p{worker}"])

    threads = [threading.Thread(target=write, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    events = store.all_events()
    assert len(events) == 40
    assert all(e.attendees == (f"p{e.title[1]}",) for e in events)


_CRASHING_WRITER = textwrap.dedent(
    """
    import sys, time
    from datetime import datetime
    from zoneinfo import ZoneInfo
    from tools.calendar.store import CalendarStore
    z = ZoneInfo("Asia/Seoul")
    store = CalendarStore(sys.argv[1])
    with store.transaction():
        store.update_event(1, title="half-changed")
        for i in range(50):
            store.add_event(f"uncommitted {i}", datetime(2026, 12, 2, 9, tzinfo=z), datetime(2026, 12, 2, 10, tzinfo=z), attendees=["ghost"])
        print("inside", flush=True)
        time.sleep(600)
    """
)


def test_writer_killed_mid_transaction_leaves_store_intact(tmp_path: Path) -> None:
    path = tmp_path / "crash.sqlite3"
    with CalendarStore(path) as s:
        s.add_event("committed", at(1, 9), at(1, 10), attendees=["민수"])
        before = s.snapshot()

    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-c", _CRASHING_WRITER, str(path)], stdout=subprocess.PIPE, env=env, text=True)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "inside"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    assert proc.returncode == -signal.SIGKILL

    with CalendarStore(path) as s:
        assert s._conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert s.snapshot() == before
        s.add_event("after crash", at(3, 9), at(3, 10))  # writable again: the dead writer's lock is gone
        assert len(s.all_events()) == 2
