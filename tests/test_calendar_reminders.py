"""Reminders and the daily agenda, against a real SQLite store and an explicit ``now``.

A "restart" is a fresh ``CalendarStore``/``CalendarNotifier`` on the same file.
"""

from __future__ import annotations

import io
import logging
from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from types import SimpleNamespace
from zoneinfo import ZoneInfo

import pytest

from agent.domain import Domain
from agent.repl import handle_command, show_due_reminders
from tools.calendar.arguments import CreateEventArgs
from tools.calendar.reminders import (
    CalendarNotifier,
    agenda_text,
    due_reminders,
    mark_sent,
    next_due,
    skip_missed,
    upcoming_text,
)
from tools.calendar.store import SCHEMA_VERSION, CalendarStore
from tools.calendar.tools import build_registry
from agent.tools import Registry

SEOUL, BERLIN = ZoneInfo("Asia/Seoul"), ZoneInfo("Europe/Berlin")
GRACE = timedelta(minutes=30)
UTC = timezone.utc


def at(zone: ZoneInfo, text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=zone)


def store_at(path: Path, tz: str = "Asia/Seoul") -> CalendarStore:
    return CalendarStore(path / "calendar.sqlite3", tz=tz)


def dentist(store: CalendarStore, zone: ZoneInfo = SEOUL, minutes: tuple[int, ...] = (10,), day: str = "2026-12-01"):
    start = at(zone, f"{day}T15:00")
    return store.add_event("치과", start, start + timedelta(hours=1), remind_minutes_before=minutes)


def call(registry: Registry, name: str, arguments: dict):
    """Validate then run, as the agent loop does."""
    args = registry.validate(name, arguments)
    return args if not hasattr(args, "model_dump") else registry.execute(name, args)


def sent_now(store: CalendarStore, now: datetime) -> list[str]:
    """Send what is due (as a frontend would) and return the keys sent."""
    keys = []
    for reminder in due_reminders(store, now, GRACE).send:
        if mark_sent(store, reminder, now):
            keys.append(reminder.key)
    return keys


def test_schema_has_reminder_tables_and_they_follow_the_event(tmp_path: Path) -> None:
    with store_at(tmp_path) as store:
        assert store.schema_version() == SCHEMA_VERSION >= 3
        event = dentist(store, minutes=(30, 10))
        assert event.remind_minutes_before == (10, 30)
        moved = store.update_event(event.id, remind_minutes_before=[5])
        assert moved is not None and moved.remind_minutes_before == (5,)
        assert store.update_event(event.id, title="치과 검진").remind_minutes_before == (5,)  # untouched
        assert store.delete_event(event.id)
        assert store.reminder_rows(at(SEOUL, "2000-01-01T00:00")) == []


def test_fires_once_at_local_time_in_seoul(tmp_path: Path) -> None:
    with store_at(tmp_path) as store:
        dentist(store)
        assert sent_now(store, at(SEOUL, "2026-12-01T14:49:59")) == []
        assert next_due(store, at(SEOUL, "2026-12-01T14:00")) == at(SEOUL, "2026-12-01T14:50")
        now = at(SEOUL, "2026-12-01T14:50")
        (reminder,) = due_reminders(store, now, GRACE).send
        notifier = CalendarNotifier(store)
        assert [n.text for n in notifier.due(now)] == ["⏰ In 10 min: '치과' at 15:00"]
        assert mark_sent(store, reminder, now)
        assert not mark_sent(store, reminder, now)  # a second claim loses: never sent twice
        assert sent_now(store, at(SEOUL, "2026-12-01T14:51")) == []
        assert next_due(store, at(SEOUL, "2026-12-01T14:51")) is None


def test_berlin_reminders_follow_the_dst_change(tmp_path: Path) -> None:
    """2026-03-29: Berlin goes from UTC+1 to UTC+2 at 02:00 local."""
    with store_at(tmp_path, "Europe/Berlin") as store:
        morning = at(BERLIN, "2026-03-29T09:00")
        store.add_event("Brunch", morning, morning + timedelta(hours=1), remind_minutes_before=[10])
        early = at(BERLIN, "2026-03-29T03:30")  # 01:30 UTC, just after the change
        store.add_event("Flight", early, early + timedelta(hours=1), remind_minutes_before=[120])
        # 120 minutes before 03:30 CEST is 00:30 CET (real elapsed time, not wall-clock arithmetic)
        assert sent_now(store, datetime(2026, 3, 28, 23, 29, tzinfo=UTC)) == []
        flight = due_reminders(store, datetime(2026, 3, 28, 23, 30, tzinfo=UTC), GRACE).send
        assert [r.event.title for r in flight] == ["Flight"]
        assert flight[0].due.astimezone(BERLIN).strftime("%H:%M %Z") == "00:30 CET"
        notifier = CalendarNotifier(store)
        assert notifier.due(datetime(2026, 3, 28, 23, 30, tzinfo=UTC))[0].text == "⏰ In 2 h: 'Flight' at 03:30"  # 00:30 local: same day
        sent_now(store, datetime(2026, 3, 28, 23, 30, tzinfo=UTC))
        # 08:50 CEST is 06:50 UTC (it would be 07:50 UTC under the winter offset)
        assert sent_now(store, datetime(2026, 3, 29, 6, 49, tzinfo=UTC)) == []
        assert len(sent_now(store, datetime(2026, 3, 29, 6, 50, tzinfo=UTC))) == 1
        assert sent_now(store, datetime(2026, 3, 29, 7, 50, tzinfo=UTC)) == []


def test_restart_before_due_time_still_fires(tmp_path: Path) -> None:
    with store_at(tmp_path) as store:
        dentist(store)
    with store_at(tmp_path) as store:  # the process came back before 14:50
        assert sent_now(store, at(SEOUL, "2026-12-01T14:50")) != []
    with store_at(tmp_path) as store:  # and again after it: nothing is repeated
        assert sent_now(store, at(SEOUL, "2026-12-01T14:55")) == []


def test_restart_after_due_time_late_within_grace_states_original_time(tmp_path: Path) -> None:
    with store_at(tmp_path) as store:
        dentist(store)
    with store_at(tmp_path) as store:
        now = at(SEOUL, "2026-12-01T15:10")  # 20 minutes late
        (notice,) = CalendarNotifier(store, grace=GRACE).due(now)
        assert notice.text == "⏰ Late reminder (was due at 14:50): '치과' at 15:00"
        assert CalendarNotifier(store).claim(notice, now) is False  # claims only what it handed out
    with store_at(tmp_path) as store:
        notifier = CalendarNotifier(store, grace=GRACE)
        (notice,) = notifier.due(now)
        assert notifier.claim(notice, now)
    with store_at(tmp_path) as store:
        assert CalendarNotifier(store, grace=GRACE).due(at(SEOUL, "2026-12-01T15:11")) == []


def test_restart_past_grace_skips_and_logs_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with store_at(tmp_path) as store:
        dentist(store)
    caplog.set_level(logging.WARNING, "tools.calendar.reminders")
    with store_at(tmp_path) as store:
        now = at(SEOUL, "2026-12-01T15:21")  # 31 minutes late
        found = due_reminders(store, now, GRACE)
        assert found.send == [] and len(found.skip) == 1
        assert CalendarNotifier(store, grace=GRACE).due(now) == []  # records the skip
        assert CalendarNotifier(store, grace=GRACE).due(now) == []
    assert sum("skipped reminder" in r.message for r in caplog.records) == 1
    with store_at(tmp_path) as store:
        found = due_reminders(store, at(SEOUL, "2026-12-01T15:30"), GRACE)
        assert found.send == found.skip == []
        skip_missed(store, found.skip, at(SEOUL, "2026-12-01T15:30"))


def test_moving_an_event_rearms_its_reminder(tmp_path: Path) -> None:
    with store_at(tmp_path) as store:
        event = dentist(store)
        assert len(sent_now(store, at(SEOUL, "2026-12-01T14:50"))) == 1
        later = at(SEOUL, "2026-12-01T17:00")
        store.update_event(event.id, start=later, end=later + timedelta(hours=1))
        assert sent_now(store, at(SEOUL, "2026-12-01T16:49")) == []
        assert len(sent_now(store, at(SEOUL, "2026-12-01T16:50"))) == 1
        store.delete_event(event.id)
        assert upcoming_text(store, at(SEOUL, "2026-12-01T10:00")) == "No upcoming reminders."


def test_snooze_sends_again_ten_minutes_later_once(tmp_path: Path) -> None:
    with store_at(tmp_path) as store:
        event = dentist(store)
        notifier = CalendarNotifier(store)
        now = at(SEOUL, "2026-12-01T14:50")
        for notice in notifier.due(now):
            notifier.claim(notice, now)
        assert notifier.snooze(event.id, now) == "Snoozed: I'll remind you again at 15:00."
        assert notifier.snooze(9999, now) == "That event no longer exists."
        assert notifier.due(at(SEOUL, "2026-12-01T14:59")) == []
        assert "15:00 – '치과' (snoozed)" in notifier.upcoming(at(SEOUL, "2026-12-01T14:55"))
        (notice,) = notifier.due(at(SEOUL, "2026-12-01T15:00"))
        assert notice.text == "⏰ Snoozed reminder: '치과' at 15:00" and notice.subject_id == event.id
        assert notifier.claim(notice, at(SEOUL, "2026-12-01T15:00"))
        assert notifier.due(at(SEOUL, "2026-12-01T15:05")) == []


def test_show_event_for_the_open_button(tmp_path: Path) -> None:
    with store_at(tmp_path) as store:
        start = at(SEOUL, "2026-12-01T15:00")
        event = store.add_event("치과", start, start + timedelta(hours=1), location="강남역", remind_minutes_before=[10, 60])
        assert CalendarNotifier(store).show(event.id) == (
            "#1 '치과' Tue 2026-12-01 15:00-16:00\nWhere: 강남역\nReminders: 10 min before, 1 h before"
        )


def test_agenda_content_time_opt_out_and_once_per_day(tmp_path: Path) -> None:
    with store_at(tmp_path) as store:
        dentist(store)
        start = at(SEOUL, "2026-12-01T09:30")
        store.add_event("Standup", start, start + timedelta(minutes=15), location="Zoom")
        expected = "📅 Agenda for Tue 2026-12-01:\n09:30-09:45 Standup @ Zoom\n15:00-16:00 치과"
        assert agenda_text(store, date(2026, 12, 1)) == expected
        assert agenda_text(store, date(2026, 12, 2)) == "📅 Agenda for Wed 2026-12-02: nothing scheduled."

        notifier = CalendarNotifier(store, "08:00", GRACE)
        assert notifier.agenda_due("telegram:1", at(SEOUL, "2026-12-01T07:59")) is None
        notice = notifier.agenda_due("telegram:1", at(SEOUL, "2026-12-01T08:00"))
        assert notice is not None and notice.text == expected
        assert notifier.claim(notice, at(SEOUL, "2026-12-01T08:00"))
        assert notifier.agenda_due("telegram:1", at(SEOUL, "2026-12-01T08:01")) is None  # once a day
        assert notifier.agenda_due("telegram:1", at(SEOUL, "2026-12-01T12:00")) is None

        assert notifier.agenda_command("telegram:2", "off") == "Daily agenda: off. /agenda on turns it back on."
        assert notifier.agenda_due("telegram:2", at(SEOUL, "2026-12-01T08:00")) is None
        assert notifier.agenda_command("telegram:3", "07:30") == "Daily agenda: on, every day at 07:30 (Asia/Seoul)."
        assert notifier.agenda_command("telegram:3", "soon").startswith("Use /agenda on")
    with store_at(tmp_path) as store:  # settings survive a restart
        notifier = CalendarNotifier(store, "08:00", GRACE)
        assert notifier.agenda_command("telegram:3", "") == "Daily agenda: on, every day at 07:30 (Asia/Seoul)."
        assert notifier.agenda_due("telegram:3", at(SEOUL, "2026-12-02T07:30")) is not None
        assert notifier.agenda_due("telegram:2", at(SEOUL, "2026-12-02T08:00")) is None
        assert notifier.agenda_command("telegram:2", "on") == "Daily agenda: on, every day at 08:00 (Asia/Seoul)."
        assert notifier.agenda_due("telegram:2", at(SEOUL, "2026-12-02T08:00")) is not None


def test_tools_set_reminders_with_configured_default(tmp_path: Path) -> None:
    with store_at(tmp_path) as store:
        registry = build_registry(store, default_reminders=(15,))
        base = {"title": "치과", "date": "2026-12-01", "start_time": "15:00", "duration_minutes": 60}
        plain = call(registry, "create_event", base)
        assert plain.ok and "remind_minutes_before" not in plain.data
        assert store.get_event(plain.data["id"]).remind_minutes_before == (15,)
        asked = call(
            registry, "create_event", {**base, "start_time": "17:00", "remind_minutes_before": [30, 30, 0]}
        )
        assert asked.ok and asked.data["remind_minutes_before"] == [0, 30]
        changed = call(registry, "update_event", {"event_id": plain.data["id"], "remind_minutes_before": []})
        assert changed.ok and store.get_event(plain.data["id"]).remind_minutes_before == ()
        bad = call(registry, "create_event", {**base, "date": "2026-12-02", "remind_minutes_before": [-5]})
        assert not bad.ok and bad.error == "invalid_arguments"
    schema = CreateEventArgs.model_json_schema()["properties"]["remind_minutes_before"]
    assert schema["type"] == "array" and "30분 전에 알려줘 → [30]" in schema["description"]


def test_repl_shows_due_reminders_once_and_lists_upcoming(tmp_path: Path) -> None:
    with store_at(tmp_path) as store:
        dentist(store)
        domain = Domain("calendar", Registry.of([]), "", notifier=CalendarNotifier(store))
        runtime = SimpleNamespace(domain=domain)
        out = io.StringIO()
        handle_command("/reminders", runtime, out, lambda: at(SEOUL, "2026-12-01T09:00"))  # type: ignore[arg-type]
        assert out.getvalue() == "Upcoming reminders:\n14:50 – '치과' (10 min before)\n"
        out = io.StringIO()
        clock = lambda: at(SEOUL, "2026-12-01T14:50")  # noqa: E731
        assert show_due_reminders(runtime, out, clock) == 1  # type: ignore[arg-type]
        assert show_due_reminders(runtime, out, clock) == 0  # type: ignore[arg-type]
        assert out.getvalue() == "⏰ In 10 min: '치과' at 15:00\n"


def test_reminder_settings_from_environment_and_config_file(tmp_path: Path) -> None:
    from agent import config
    from tools.calendar.settings import load_settings as calendar_settings

    def load_settings(environ: dict[str, str]):  # the calendar's own keys, from the runtime's sources
        return calendar_settings(config.load_settings(environ=environ))

    env = {"AGENT_DATA_DIR": str(tmp_path), "AGENT_REMIND_MINUTES": "60, 10",
           "AGENT_AGENDA_TIME": "07:30", "AGENT_REMINDER_GRACE_MINUTES": "15"}
    settings = load_settings(environ=env)
    assert (settings.remind_minutes, settings.agenda_time, settings.reminder_grace_minutes) == ((10, 60), "07:30", 15.0)
    (tmp_path / "config.toml").write_text('remind_minutes = [30]\nagenda_time = "09:00"\n')
    settings = load_settings(environ={"AGENT_DATA_DIR": str(tmp_path)})
    assert (settings.remind_minutes, settings.agenda_time, settings.reminder_grace_minutes) == ((30,), "09:00", 30.0)
    with pytest.raises(ValueError, match="agenda_time"):
        load_settings(environ={**env, "AGENT_AGENDA_TIME": "8am"})
    with pytest.raises(ValueError, match="remind_minutes"):
        load_settings(environ={**env, "AGENT_REMIND_MINUTES": "ten"})
