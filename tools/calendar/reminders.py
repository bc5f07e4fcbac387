"""Which reminders and agendas are due, computed from the store and a given ``now``.

Nothing here reads a clock or sleeps: a frontend (the bot's tick loop, the REPL) asks with
its own ``now``. The schedule is the store itself, so it survives restarts and sleep: a
reminder missed while the process was down is still sent if it is at most ``grace`` old
(its text then states the time it was due), older ones are recorded as skipped and logged.
Sent reminders are recorded in the delivery ledger (``ledger.DeliveryLedger``) by (event,
minutes before, due time): each goes out once, and moving an event gives new due times, which
re-arms its reminders.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, timezone

from agent.domain import Notice
from tools.calendar import shown
from tools.calendar.store import CalendarStore, Event, to_utc_text
from tools.calendar.event_views import event_words, events_on_day

log = logging.getLogger(__name__)

LATE_AFTER = timedelta(minutes=2)  # sent later than this after its time: say it is late
LOOKBACK = timedelta(days=2)  # reminders missed longer ago than this are not even looked at
SNOOZE = timedelta(minutes=10)
_WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")


@dataclass(frozen=True)
class Reminder:
    """One reminder occurrence; ``minutes_before`` is None for a snooze."""

    event: Event
    minutes_before: int | None
    due: datetime  # UTC
    snooze_id: int | None = None

    @property
    def key(self) -> str:
        if self.snooze_id is not None:
            return f"snooze:{self.snooze_id}"
        return f"rem:{self.event.id}:{self.minutes_before}:{to_utc_text(self.due)}"


@dataclass(frozen=True)
class DueReminders:
    send: list[Reminder]  # due now, or late but within grace
    skip: list[Reminder]  # missed by more than grace


def _candidates(store: CalendarStore, now: datetime, grace: timedelta) -> list[Reminder]:
    """Reminders due at or before ``now`` that were neither sent nor skipped yet."""
    since = now - max(grace, LOOKBACK)
    settled = store.ledger.settled_reminders(since - timedelta(days=8))
    found: list[Reminder] = []
    for event_id, minutes, start in store.reminder_rows(since):
        due = start - timedelta(minutes=minutes)
        if due > now or (event_id, minutes, to_utc_text(due)) in settled:
            continue
        event = store.event_at(event_id, start)  # a series' occurrence: its own start and title
        if event is not None:
            found.append(Reminder(event, minutes, due))
    for snooze_id, event_id, due in store.ledger.open_snoozes():
        event = _snoozed(store, event_id, due)
        if due <= now and event is not None:
            found.append(Reminder(event, None, due, snooze_id))
    found.sort(key=lambda r: (r.due, r.event.id))
    return found


def _snoozed(store: CalendarStore, event_id: int, due: datetime) -> Event | None:
    """The event a snooze is about; for a series, the occurrence nearest the snooze's time (a
    snooze follows a reminder of an occurrence that starts at most a week later, or began lately)."""
    event = store.get_event(event_id)
    if event is None or not event.is_series:
        return event
    near = store.occurrences(event_id, due - timedelta(days=1), due + timedelta(days=8))
    return min(near, key=lambda o: abs(o.start - due), default=event)


def due_reminders(store: CalendarStore, now: datetime, grace: timedelta) -> DueReminders:
    """What to send now; late ones within ``grace`` carry their original time."""
    send, skip = [], []
    for reminder in _candidates(store, now, grace):
        (send if now - reminder.due <= grace else skip).append(reminder)
    return DueReminders(send, skip)


def mark_sent(store: CalendarStore, reminder: Reminder, now: datetime, outcome: str = "sent") -> bool:
    """Record the reminder as sent (or skipped); False if it already was: then do not send it."""
    if reminder.snooze_id is not None:
        return store.ledger.settle_snooze(reminder.snooze_id, now)
    assert reminder.minutes_before is not None
    return store.ledger.settle_reminder(reminder.event.id, reminder.minutes_before, reminder.due, now, outcome)


def skip_missed(store: CalendarStore, reminders: list[Reminder], now: datetime) -> None:
    """Record reminders missed by more than the grace period, so they are logged once."""
    for reminder in reminders:
        if mark_sent(store, reminder, now, outcome="skipped"):
            log.warning(
                "skipped reminder %s for event #%s: due %s, now %s is past the grace period",
                reminder.key, reminder.event.id, to_utc_text(reminder.due), to_utc_text(now),
            )


def next_due(store: CalendarStore, now: datetime, grace: timedelta = timedelta(0)) -> datetime | None:
    """The earliest due time of a reminder still to send (it may be in the past, within grace)."""
    since = now - grace
    settled = store.ledger.settled_reminders(since - timedelta(days=8))
    times = [
        start - timedelta(minutes=minutes)
        for event_id, minutes, start in store.reminder_rows(since)
        if start - timedelta(minutes=minutes) > since
        and (event_id, minutes, to_utc_text(start - timedelta(minutes=minutes))) not in settled
    ]
    times += [due for _, _, due in store.ledger.open_snoozes() if due > since]
    return min(times) if times else None


def _when(moment: datetime, zone_now: datetime) -> str:
    """"15:00" today, else "15:00 Tue 2026-12-01" (local time)."""
    hhmm = moment.strftime("%H:%M")
    if moment.date() == zone_now.date():
        return hhmm
    return f"{hhmm} {_WEEKDAYS[moment.weekday()]} {moment.date().isoformat()}"


def reminder_text(reminder: Reminder, store: CalendarStore, now: datetime) -> str:
    """Title and local start time; a late one states when it was due."""
    zone = store.zone
    local_now = now.astimezone(zone)
    start = reminder.event.start.astimezone(zone)
    what = f"'{shown.title(reminder.event.title)}' at {_when(start, local_now)}"
    if reminder.snooze_id is not None:
        head = f"⏰ Snoozed reminder: {what}"
    elif now - reminder.due > LATE_AFTER:
        head = f"⏰ Late reminder (was due at {_when(reminder.due.astimezone(zone), local_now)}): {what}"
    elif reminder.minutes_before:
        head = f"⏰ In {_duration(reminder.minutes_before)}: {what}"
    else:
        head = f"⏰ Now: {what}"
    return head + (f"\n📍 {shown.place(reminder.event.location)}" if reminder.event.location else "")


def _duration(minutes: int) -> str:
    if minutes % (24 * 60) == 0:
        days = minutes // (24 * 60)
        return f"{days} day{'s' if days > 1 else ''}"
    if minutes >= 60 and minutes % 60 == 0:
        return f"{minutes // 60} h"
    return f"{minutes} min"


def agenda_text(store: CalendarStore, day: date) -> str:
    """The day's events in local time, for the morning message."""
    zone = store.zone
    events = events_on_day(store, day)
    head = f"📅 Agenda for {_WEEKDAYS[day.weekday()]} {day.isoformat()}"
    if not events:
        return f"{head}: nothing scheduled."
    lines = [head + ":"]
    for event in events:
        s, e = event.start.astimezone(zone), event.end.astimezone(zone)
        where = f" @ {shown.place(event.location)}" if event.location else ""
        series = f" ({event.series_words(korean=True)})" if event.is_series else ""
        when = "all day" if event.all_day else f"{s.strftime('%H:%M')}-{e.strftime('%H:%M')}"
        lines.append(f"{when} {shown.title(event.title)}{where}{series}")
    return "\n".join(lines)


def upcoming_text(store: CalendarStore, now: datetime, limit: int = 10) -> str:
    """The next reminders still to come, for /reminders."""
    zone = store.zone
    local_now = now.astimezone(zone)
    settled = store.ledger.settled_reminders(now - timedelta(days=8))
    rows = []
    for event_id, minutes, start in store.reminder_rows(now):
        due = start - timedelta(minutes=minutes)
        if due > now and (event_id, minutes, to_utc_text(due)) not in settled:
            rows.append((due, event_id, f"{_duration(minutes)} before"))
    rows += [(due, event_id, "snoozed") for _, event_id, due in store.ledger.open_snoozes() if due > now]
    rows.sort()
    if not rows:
        return "No upcoming reminders."
    lines = ["Upcoming reminders:"]
    for due, event_id, kind in rows[:limit]:
        event = store.get_event(event_id)  # a series' title (an occurrence retitled alone shows the series')
        if event is not None:
            lines.append(f"{_when(due.astimezone(zone), local_now)} – '{shown.title(event.title)}' ({kind})")
    return "\n".join(lines)


class CalendarNotifier:
    """The calendar's ``agent.domain.Notifier``: reminders and a per-chat daily agenda."""

    def __init__(self, store: CalendarStore, agenda_time: str = "08:00", grace: timedelta = timedelta(minutes=30)):
        self.store = store
        self.agenda_time = agenda_time
        self.grace = grace
        self._pending: dict[str, Reminder | tuple[str, date]] = {}

    def due(self, now: datetime) -> list[Notice]:
        found = due_reminders(self.store, now, self.grace)
        skip_missed(self.store, found.skip, now)
        notices = []
        for reminder in found.send:
            self._pending[reminder.key] = reminder
            notices.append(Notice(reminder.key, reminder_text(reminder, self.store, now), reminder.event.id))
        return notices

    def claim(self, notice: Notice, now: datetime) -> bool:
        item = self._pending.pop(notice.key, None)
        if isinstance(item, Reminder):
            return mark_sent(self.store, item, now)
        if isinstance(item, tuple):
            return self.store.ledger.record_agenda(item[0], item[1].isoformat(), now)
        return False

    def next_due(self, now: datetime) -> datetime | None:
        return next_due(self.store, now, self.grace)

    def upcoming(self, now: datetime) -> str:
        return upcoming_text(self.store, now)

    def snooze(self, subject_id: int, now: datetime) -> str:
        until = now + SNOOZE
        if not self.store.ledger.add_snooze(subject_id, until):
            return "That event no longer exists."
        return f"Snoozed: I'll remind you again at {until.astimezone(self.store.zone).strftime('%H:%M')}."

    def show(self, subject_id: int) -> str:
        event = self.store.get_event(subject_id)
        if event is None:
            return "That event no longer exists."
        lines = [event_words(event, self.store.zone, to_person=True)]
        if event.location:
            lines.append(f"Where: {shown.place(event.location)}")
        if event.attendees:
            lines.append(f"With: {shown.names(event.attendees)}")
        if event.notes:
            lines.append(f"Notes: {shown.notes(event.notes, shown.NOTES_VIEW_LIMIT)}")
        if event.remind_minutes_before:
            lines.append("Reminders: " + ", ".join(f"{_duration(m)} before" for m in event.remind_minutes_before))
        return "\n".join(lines)

    def _agenda_setting(self, target: str) -> tuple[bool, str]:
        setting = self.store.ledger.agenda_setting(target)
        if setting is None:
            return True, self.agenda_time
        return setting[0], setting[1] or self.agenda_time

    def agenda_due(self, target: str, now: datetime) -> Notice | None:
        """Today's agenda if its local time has come (within grace) and it was not sent yet."""
        enabled, at_text = self._agenda_setting(target)
        if not enabled:
            return None
        local = now.astimezone(self.store.zone)
        at = datetime.combine(local.date(), time.fromisoformat(at_text), self.store.zone).astimezone(timezone.utc)
        if not at <= now.astimezone(timezone.utc) <= at + self.grace or self.store.ledger.agenda_recorded(target, local.date().isoformat()):
            return None
        key = f"agenda:{target}:{local.date().isoformat()}"
        self._pending[key] = (target, local.date())
        return Notice(key, agenda_text(self.store, local.date()))

    def agenda_command(self, target: str, argument: str) -> str:
        """``/agenda``, ``/agenda on``, ``/agenda off``, ``/agenda HH:MM`` for one chat."""
        enabled, at_text = self._agenda_setting(target)
        word = argument.strip().lower()
        if word in ("on", "off"):
            stored = self.store.ledger.agenda_setting(target)
            self.store.ledger.set_agenda_setting(target, word == "on", stored[1] if stored else None)
            enabled = word == "on"
        elif word:
            try:
                at_text = time.fromisoformat(word).strftime("%H:%M")
            except ValueError:
                return "Use /agenda on, /agenda off, or /agenda HH:MM (24-hour, e.g. /agenda 07:30)."
            self.store.ledger.set_agenda_setting(target, True, at_text)
            enabled = True
        if not enabled:
            return "Daily agenda: off. /agenda on turns it back on."
        return f"Daily agenda: on, every day at {at_text} ({self.store.tz})."
