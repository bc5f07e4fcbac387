"""The calendar tools the model calls, bound to one store: ``build_registry(store)``.

Each tool is a plain function of its validated argument model and returns a ToolResult.
Every call runs in exactly one store transaction; a failure changes nothing.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import date, datetime, timedelta
from typing import Any, Callable, Sequence
from zoneinfo import ZoneInfo

from tools.calendar import recurrence as rec
from tools.calendar.arguments import (
    CreateEventArgs,
    DeleteEventArgs,
    FindCommonFreeTimeArgs,
    FindFreeSlotsArgs,
    SearchEventsArgs,
    UpdateEventArgs,
    WorkingHoursArgs,
    parse_date,
    parse_time,
)
from tools.calendar import result_views
from tools.calendar.shown import names as shown_names, notes as shown_notes, place as shown_place, title as shown_title
from tools.calendar.approval_rules import create_question, target_fingerprint
from tools.calendar.slots import Interval, free_slots, working_windows
from tools.calendar.store import UNSET, CalendarStore, Event
from agent.tools import Registry, Tool, ToolResult

CALENDAR_TOOL_NAMES: tuple[str, ...] = (
    "search_events",
    "create_event",
    "update_event",
    "delete_event",
    "find_free_slots",
    "find_common_free_time",
)

DOMAIN_PROMPT = (
    "You manage the user's calendar with tools: search_events to look things up, create_event, "
    "update_event and delete_event to change it, find_free_slots and find_common_free_time to find "
    "open times. Dates are YYYY-MM-DD and times 24-hour HH:MM in the user's local time zone; turn "
    "words like 'tomorrow' into real dates yourself. If a needed detail (day, time, length, which "
    "event) is missing or unclear, ask instead of guessing. Look up the event id with search_events "
    "before changing or deleting it, and tell the user exactly what will change; the user confirms "
    "every change or deletion.\n"
    "사용자는 한국어로 말할 수 있습니다: 한국어로 답하고, 정보가 부족하면 추측하지 말고 물어보세요."
)

# The same for the ``short`` prompt style (SmolLM2-class models): the rules that are the
# calendar's own, once and in English; asking and confirming are the general prompt's lines.
DOMAIN_PROMPT_SHORT = (
    "You manage the user's calendar with the tools below. Dates are YYYY-MM-DD and times 24-hour "
    "HH:MM, local time. Find an event's id with search_events before changing or deleting it."
)

DEFAULT_REMINDERS: tuple[int, ...] = (10,)  # minutes before; the remind_minutes setting (tools.calendar.settings) overrides
MAX_LISTED = 50  # results beyond this are cut (with "truncated": true) to keep the context small
SERIES_CONFLICT_WINDOW = timedelta(days=366)  # a new series is checked for conflicts over its first year


def _occurrences_words(count: int | None) -> str:
    return "no end date" if count is None else f"{count} occurrence{'s' if count != 1 else ''}"

_WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")


def _hhmm(moment: datetime) -> str:
    return moment.strftime("%H:%M") if moment.second == 0 else moment.strftime("%H:%M:%S")


def event_view(event: Event, zone: ZoneInfo) -> dict[str, Any]:
    """The compact dict the model sees for one event or occurrence (local times in the store's
    zone). An occurrence of a series carries ``occurrence_date`` (its original date: with the id,
    the key update_event and delete_event take) and ``repeats``; an all-day event has no times."""
    start, end = event.start.astimezone(zone), event.end.astimezone(zone)
    view: dict[str, Any] = {
        "id": event.id,
        "title": event.title,
        "date": start.date().isoformat(),
        "weekday": _WEEKDAYS[start.weekday()],
    }
    if event.all_day:
        view["all_day"] = True
        last = (end - timedelta(days=1)).date()
        if last != start.date():
            view["end_date"] = last.isoformat()
    else:
        view["start"] = _hhmm(start)
        view["end"] = _hhmm(end)
        if end.date() != start.date():
            view["end_date"] = end.date().isoformat()
    if event.is_series:
        view["repeats"] = event.series_words()
        if event.original_start is not None:
            view["occurrence_date"] = event.original_start.astimezone(zone).date().isoformat()
    if event.attendees:
        view["attendees"] = list(event.attendees)
    if event.location:
        view["location"] = event.location
    if event.notes:
        view["notes"] = event.notes
    return result_views.capped_view(view, event.ics_extra)  # what the model reads is cut, and says so


def event_words(event: Event, zone: ZoneInfo, to_person: bool = False) -> str:
    """One line a human can check: "#3 '치과' Tue 2026-12-01 15:00-16:00"; a series' occurrence
    adds its rule ("(매주 월 10:00)", "(매일 09:00)"), an all-day event shows days only.
    ``to_person``: the title made visible and cut (``tools.calendar.shown``); the model reads it as stored."""
    mark = f" ({event.series_words(korean=True)})" if event.is_series else ""
    name = shown_title(event.title) if to_person else event.title
    return f"#{event.id} '{name}' {span_words(event.start, event.end, zone, event.all_day)}{mark}"


def span_words(start: datetime, end: datetime, zone: ZoneInfo, all_day: bool = False) -> str:
    start, end = start.astimezone(zone), end.astimezone(zone)
    if all_day:
        last = (end - timedelta(days=1)).date()
        tail = "" if last == start.date() else f"–{_WEEKDAYS[last.weekday()]} {last.isoformat()}"
        return f"{_WEEKDAYS[start.weekday()]} {start.date().isoformat()}{tail} (all day)"
    tail = _hhmm(end) if end.date() == start.date() else f"{end.date().isoformat()} {_hhmm(end)}"
    return f"{_WEEKDAYS[start.weekday()]} {start.date().isoformat()} {_hhmm(start)}-{tail}"


def events_on_day(store: CalendarStore, day: date) -> list[Event]:
    """The events and occurrences of one local day, all-day ones first (as calendars show them):
    what /today, /events, /week and the daily agenda list."""
    start = datetime.combine(day, datetime.min.time(), tzinfo=store.zone)
    found = store.events_between(start, start + timedelta(days=1))
    return sorted(found, key=lambda e: (not e.all_day, e.start, e.id))


def _with_reminders(view: dict[str, Any], event: Event, asked: list[int] | None) -> dict[str, Any]:
    """When the call set reminders, the result confirms them (otherwise results stay as before)."""
    if asked is not None:
        view["remind_minutes_before"] = list(event.remind_minutes_before)
    return view


class CalendarTools:
    """The tool functions, sharing one store, its zone and a clock."""

    def __init__(
        self,
        store: CalendarStore,
        now: Callable[[], datetime] | None = None,
        default_reminders: Sequence[int] = DEFAULT_REMINDERS,
        also_on: str | None = None,
    ) -> None:
        self.store = store
        self.zone = store.zone
        self.now = now or (lambda: datetime.now(self.zone))
        self.default_reminders = tuple(default_reminders)
        # The server the calendar is synced with ("iCloud"): the approval names it, since the
        # change reaches the user's phone too.
        self.also_on = also_on

    def _local(self, day: date, hhmm: str) -> datetime:
        return datetime.combine(day, parse_time(hhmm), tzinfo=self.zone)

    def _day_bounds(self, first: date, last: date) -> Interval:
        start = datetime.combine(first, datetime.min.time(), tzinfo=self.zone)
        return start, datetime.combine(last + timedelta(days=1), datetime.min.time(), tzinfo=self.zone)

    def _conflict_failure(self, conflicts: list[Event]) -> ToolResult:
        listed = "; ".join(event_words(e, self.zone) for e in conflicts[:5])
        return ToolResult.failure(
            "conflict",
            f"Overlaps with {listed}. Ask the user for another time, or pass allow_conflict=true if they accept the overlap.",
            data=result_views.fit({"conflicts": [event_view(e, self.zone) for e in conflicts[:MAX_LISTED]]},
                                  "conflicts", "conflicts", "these are enough to ask the user about another time"),
        )

    def _not_found(self, event_id: int) -> ToolResult:
        return ToolResult.failure("not_found", f"No event with id {event_id}. Use search_events to find the id.")

    # -- tools -------------------------------------------------------------------------------

    def search_events(self, args: SearchEventsArgs) -> ToolResult:
        with self.store.transaction():
            days = args.days()
            if days is None:
                events = self.store.all_events(args.query)
            else:
                events = self.store.events_between(*self._day_bounds(*days), query=args.query)
        data: dict[str, Any] = {
            "count": len(events),
            "events": [event_view(e, self.zone) for e in events[:MAX_LISTED]],
        }
        if len(events) > MAX_LISTED:
            data["truncated"] = True
        result_views.fit(data, "events", "events", "search a narrower date range or add a query")
        return ToolResult.success(data)

    def create_event(self, args: CreateEventArgs) -> ToolResult:
        day = parse_date(args.date)
        if args.all_day:
            start, end = self._day_bounds(day, parse_date(args.end_date) if args.end_date else day)
        else:
            assert args.start_time is not None
            start = self._local(day, args.start_time)
            if args.duration_minutes is not None:
                end = start + timedelta(minutes=args.duration_minutes)
            else:
                assert args.end_time is not None
                end = self._local(day, args.end_time)
        recurrence = None
        if args.repeat is not None:
            start, end, recurrence = self._series_start(args, start, end)
        with self.store.transaction():
            conflicts = [] if args.all_day else self._series_conflicts(start, end, recurrence)
            if conflicts and not args.allow_conflict:
                return self._conflict_failure(conflicts)
            event = self.store.add_event(
                args.title,
                start,
                end,
                tz=self.store.tz,
                location=args.location or None,
                notes=args.notes or None,
                attendees=args.attendees or (),
                remind_minutes_before=(
                    self.default_reminders if args.remind_minutes_before is None else args.remind_minutes_before
                ),
                recurrence=recurrence,
                all_day=args.all_day,
            )
            count = self.store.occurrence_count(event.id) if event.is_series else None
        view = _with_reminders(event_view(event, self.zone), event, args.remind_minutes_before)
        message = f"Created {event_words(event, self.zone)}."
        if event.is_series:
            view["occurrences"] = count if count is not None else "no end"
            message = f"Created {event_words(event, self.zone)}, {_occurrences_words(count)}."
        return ToolResult.success(view, message=message)

    def _series_start(self, args: CreateEventArgs, start: datetime, end: datetime) -> tuple[datetime, datetime, str]:
        """The series' first occurrence (the first of its weekdays on or after ``date``) and its RRULE."""
        repeat = args.repeat
        assert repeat is not None
        codes = [rec.WEEKDAY_CODES.index(d) for d in repeat.by_weekday or ()]
        if codes:
            ahead = min((c - start.weekday()) % 7 for c in codes)
            start, end = start + timedelta(days=ahead), end + timedelta(days=ahead)
        until = None
        if repeat.until is not None:
            until = datetime.combine(parse_date(repeat.until), datetime.max.time().replace(microsecond=0),
                                     tzinfo=self.zone)
        rule = rec.weekly_rule(repeat.freq.upper(), repeat.interval, repeat.by_weekday or (), repeat.count, until)
        return start, end, f"RRULE:{rule}"

    def _series_conflicts(self, start: datetime, end: datetime, recurrence: str | None,
                          exclude_id: int | None = None) -> list[Event]:
        """Busy events overlapping the event, or any occurrence of the series in its first year."""
        if recurrence is None:
            return self.store.conflicts(start, end, exclude_id=exclude_id)
        found: list[Event] = []
        length = end - start
        # one read of the whole window (not one per occurrence: a daily series has 366), then each
        # occurrence takes what overlaps it, in the store's order
        busy = self.store.conflicts(start, start + SERIES_CONFLICT_WINDOW + length, exclude_id=exclude_id)
        for moment in rec.starts_between(rec.check(recurrence, start) or "", start, start, start + SERIES_CONFLICT_WINDOW):
            found += [e for e in busy if e.start < moment + length and e.end > moment and e not in found]
            if len(found) >= MAX_LISTED:
                break
        return found

    def _new_times(self, args: UpdateEventArgs, event: Event) -> Interval | ToolResult:
        """Where the event would move to; the old length is kept unless a new one is given."""
        old_start = event.start.astimezone(self.zone)
        day = parse_date(args.date) if args.date else old_start.date()
        start = self._local(day, args.start_time) if args.start_time else datetime.combine(
            day, old_start.timetz().replace(tzinfo=None), tzinfo=self.zone
        )
        if args.duration_minutes is not None:
            end = start + timedelta(minutes=args.duration_minutes)
        elif args.end_time is not None:
            end = self._local(day, args.end_time)
        else:
            end = start + (event.end - event.start)
        if end <= start:
            return ToolResult.failure(
                "invalid_arguments",
                f"The event would end ({_hhmm(end)}) before it starts ({_hhmm(start)}); "
                "give end_time after start_time or use duration_minutes.",
            )
        return start, end

    def _target(self, args: UpdateEventArgs | DeleteEventArgs) -> tuple[Event, Event | None, str] | ToolResult:
        """(the event or series, the occurrence named by occurrence_date or None, the scope that
        applies): a one-off event is always scope "all"; for a series, "this" and "following"
        need the occurrence's date, so a missing one is asked for, never guessed."""
        event = self.store.get_event(args.event_id)
        if event is None:
            return self._not_found(args.event_id)
        if not event.is_series:
            return event, None, "all"
        occurrence = None
        if args.occurrence_date is not None:
            occurrence = self.store.occurrence_on(event.id, parse_date(args.occurrence_date))
            if occurrence is None:
                return ToolResult.failure(
                    "not_found",
                    f"#{event.id} '{event.title}' ({event.series_words()}) has no occurrence on "
                    f"{args.occurrence_date}. Use search_events to find its dates.",
                )
        elif args.scope != "all":
            return ToolResult.failure(
                "invalid_arguments",
                f"#{event.id} '{event.title}' repeats ({event.series_words()}): give occurrence_date (the date "
                "of the occurrence from search_events) with scope this or following, or scope=all for every occurrence.",
            )
        return event, occurrence, args.scope

    def update_event(self, args: UpdateEventArgs) -> ToolResult:
        with self.store.transaction():
            target = self._target(args)
            if isinstance(target, ToolResult):
                return target
            event, occurrence, scope = target
            if occurrence is not None and scope == "this":
                return self._update_occurrence(args, event, occurrence)
            # the whole event or series (or, for "following", the series from that occurrence on)
            base_start = occurrence.original_start if occurrence and occurrence.original_start else event.start
            base = replace(event, start=base_start, end=base_start + (event.end - event.start))
            times = self._new_times(args, base)
            if isinstance(times, ToolResult):
                return times
            start, end = times
            shift, length = start - base.start, end - start
            recurrence = _moved_weekday(event, shift)
            moved = (start, end) != (base.start, base.end)
            if moved:
                text = event.recurrence if recurrence is UNSET else recurrence
                conflicts = self._series_conflicts(start, end, text, exclude_id=event.id)
                if conflicts and not args.allow_conflict:
                    return self._conflict_failure(conflicts)
            if occurrence is not None and scope == "following":
                tail = self.store.split_series(event.id, base_start)
                assert tail is not None
                event = tail
            updated = self.store.update_event(
                event.id,
                title=args.title if args.title is not None else UNSET,
                start=event.start + shift,
                end=event.start + shift + length,
                location=(args.location or None) if args.location is not None else UNSET,
                notes=(args.notes or None) if args.notes is not None else UNSET,
                attendees=args.attendees if args.attendees is not None else UNSET,
                remind_minutes_before=(
                    args.remind_minutes_before if args.remind_minutes_before is not None else UNSET
                ),
                recurrence=recurrence,
            )
            assert updated is not None
            view = _with_reminders(event_view(updated, self.zone), updated, args.remind_minutes_before)
            if updated.is_series:
                view["scope"] = scope
                view["occurrences"] = self.store.occurrence_count(updated.id) or "no end"
        return ToolResult.success(view, message=f"Updated {event_words(updated, self.zone)}.")

    def _update_occurrence(self, args: UpdateEventArgs, event: Event, occurrence: Event) -> ToolResult:
        """One occurrence moved, retitled or given a new place or notes (a RECURRENCE-ID)."""
        if args.attendees is not None or args.remind_minutes_before is not None:
            return ToolResult.failure(
                "invalid_arguments",
                "Attendees and reminders belong to the whole series: use scope=all (or following), "
                "or change only the time, title, location or notes of this occurrence.",
            )
        times = self._new_times(args, occurrence)
        if isinstance(times, ToolResult):
            return times
        start, end = times
        if (start, end) != (occurrence.start, occurrence.end):
            conflicts = self.store.conflicts(start, end, exclude_key=occurrence.key)
            if conflicts and not args.allow_conflict:
                return self._conflict_failure(conflicts)
        assert occurrence.original_start is not None
        updated = self.store.override_occurrence(
            event.id, occurrence.original_start, title=args.title if args.title is not None else UNSET,
            start=start, end=end, location=(args.location or None) if args.location is not None else UNSET,
            notes=(args.notes or None) if args.notes is not None else UNSET,
        )
        assert updated is not None
        view = event_view(updated, self.zone)
        view["scope"] = "this"
        return ToolResult.success(view, message=f"Updated {event_words(updated, self.zone)} (this occurrence only).")

    def delete_event(self, args: DeleteEventArgs) -> ToolResult:
        with self.store.transaction():
            target = self._target(args)
            if isinstance(target, ToolResult):
                return target
            event, occurrence, scope = target
            if not event.is_series:
                self.store.delete_event(event.id)
                return ToolResult.success({"deleted": event_view(event, self.zone)},
                                          message=f"Deleted {event_words(event, self.zone)}.")
            shown = occurrence or event
            count = self._scope_count(event, occurrence, scope)
            if scope == "this" and occurrence is not None and occurrence.original_start is not None:
                self.store.cancel_occurrence(event.id, occurrence.original_start)
            elif scope == "following" and occurrence is not None and occurrence.original_start is not None:
                self.store.end_series_before(event.id, occurrence.original_start)
            else:
                self.store.delete_event(event.id)
        data = {"deleted": event_view(shown, self.zone), "scope": scope, "occurrences": count if count is not None else "no end"}
        return ToolResult.success(data, message=f"Deleted {self._scope_words(event, occurrence, scope, count)}.")

    def _scope_count(self, event: Event, occurrence: Event | None, scope: str) -> int | None:
        """How many occurrences a change with ``scope`` touches (None: every one, endless)."""
        if not event.is_series or scope == "this":
            return 1
        after = occurrence.original_start if scope == "following" and occurrence is not None else None
        return self.store.occurrence_count(event.id, after)

    def _scope_words(
        self, event: Event, occurrence: Event | None, scope: str, count: int | None, to_person: bool = False
    ) -> str:
        """"all 52 occurrences of '팀 회의' (weekly, Mon 10:00)", "'팀 회의' on Mon 12-07 only", ...
        (``to_person``: for an approval question, the title made visible and cut)."""
        if not event.is_series:
            return event_words(event, self.zone, to_person)
        rule = event.series_words()
        name = shown_title(event.title) if to_person else event.title
        if scope == "this" and occurrence is not None:
            return f"'{name}' on {_day_words(occurrence.start, self.zone)} only (#{event.id}, one occurrence of {rule})"
        if scope == "following" and occurrence is not None:
            many = "every later one" if count is None else f"the {count - 1} after it" if count > 1 else "nothing after it"
            return f"'{name}' on {_day_words(occurrence.start, self.zone)} and {many} (#{event.id}, {rule})"
        many = "every occurrence" if count is None else f"all {count} occurrence{'s' if count != 1 else ''}"
        return f"{many} of '{name}' (#{event.id}, {rule})"

    def _slots(self, args: FindFreeSlotsArgs | FindCommonFreeTimeArgs, busy: list[Interval]) -> dict[str, Any]:
        days = args.days()
        assert days is not None
        windows = working_windows(
            days[0], days[1], parse_time(args.working_hours_start), parse_time(args.working_hours_end), self.zone
        )
        now = self.now()
        windows = [(max(s, now), e) for s, e in windows if e > now]  # the past is not free time
        found = free_slots(windows, busy, timedelta(minutes=args.duration_minutes))
        slots = [
            {
                "date": s.astimezone(self.zone).date().isoformat(),
                "weekday": _WEEKDAYS[s.astimezone(self.zone).weekday()],
                "start": _hhmm(s.astimezone(self.zone)),
                "end": _hhmm(e.astimezone(self.zone)),
                "minutes": int((e - s).total_seconds() // 60),
            }
            for s, e in found
        ]
        data: dict[str, Any] = {"count": len(slots), "slots": slots[:MAX_LISTED]}
        if len(slots) > MAX_LISTED:
            data["truncated"] = True
        return result_views.fit(data, "slots", "slots", "ask for fewer days or a longer duration")

    def find_free_slots(self, args: FindFreeSlotsArgs) -> ToolResult:
        days = args.days()
        assert days is not None
        with self.store.transaction():
            busy = [(e.start, e.end) for e in self.store.events_between(*self._day_bounds(*days))]
        return ToolResult.success(self._slots(args, busy))

    def find_common_free_time(self, args: FindCommonFreeTimeArgs) -> ToolResult:
        """Free for the user (every event in the store is theirs) and all attendees."""
        days = args.days()
        assert days is not None
        first, last = self._day_bounds(*days)
        with self.store.transaction():
            unknown = [name for name in args.attendees if self.store.find_person(name) is None]
            if unknown:
                known = ", ".join(p.name for p in self.store.people()[:20]) or "none yet"
                return ToolResult.failure(
                    "not_found",
                    f"No calendar data for {', '.join(unknown)}. Known people: {known}. "
                    "Check the spelling or ask the user.",
                )
            busy = [(e.start, e.end) for e in self.store.events_between(first, last)]
            for name in args.attendees:
                busy += [(b.start, b.end) for b in self.store.busy_between(name, first, last)]
        data = self._slots(args, busy)
        data["attendees"] = list(args.attendees)
        return ToolResult.success(data)

    # -- words for the approval gate ---------------------------------------------------------

    def describe_update(self, args: UpdateEventArgs) -> str:
        target = self._target(args)
        if isinstance(target, ToolResult):
            return f"Update event #{args.event_id} ({'no such event; ' if target.error == 'not_found' and 'No event' in target.message else ''}the call will fail: {target.message})"
        event, occurrence, scope = target
        shown = occurrence if occurrence is not None and scope == "this" else event
        changes: list[str] = []
        if args.title is not None and args.title != shown.title:
            changes.append(f"title → '{shown_title(args.title)}'")
        times = self._new_times(args, occurrence or shown)
        if isinstance(times, tuple) and times != ((occurrence or shown).start, (occurrence or shown).end):
            changes.append(f"time → {span_words(times[0], times[1], self.zone)}")
        if args.location is not None:
            changes.append(f"location → '{shown_place(args.location)}'" if args.location else "remove location")
        if args.notes is not None:
            changes.append(f"notes → '{shown_notes(args.notes)}'" if args.notes else "remove notes")
        if args.attendees is not None:
            changes.append(f"attendees → {shown_names(args.attendees) or 'none'}")
        if args.remind_minutes_before is not None:
            minutes = ", ".join(f"{m} min" for m in args.remind_minutes_before) or "none"
            changes.append(f"reminders → {minutes} before")
        what = self._scope_words(event, occurrence, scope, self._scope_count(event, occurrence, scope), to_person=True)
        return f"Change {what}: {'; '.join(changes) or 'no visible change'}{self._reach()}"

    def _reach(self) -> str:
        return f" (also in your {self.also_on} calendar)" if self.also_on else ""

    def describe_delete(self, args: DeleteEventArgs) -> str:
        target = self._target(args)
        if isinstance(target, ToolResult):
            return f"Delete event #{args.event_id} ({'no such event; ' if target.error == 'not_found' and 'No event' in target.message else ''}the call will fail: {target.message})"
        event, occurrence, scope = target
        with_whom = f" with {shown_names(event.attendees)}" if event.attendees else ""
        what = self._scope_words(event, occurrence, scope, self._scope_count(event, occurrence, scope), to_person=True)
        return f"Delete {what}{with_whom}{self._reach()}"


def _day_words(moment: datetime, zone: ZoneInfo) -> str:
    local = moment.astimezone(zone)
    return f"{_WEEKDAYS[local.weekday()]} {local.strftime('%m-%d')}"


def _moved_weekday(event: Event, shift: timedelta) -> Any:
    """A weekly series on one weekday moved by whole days follows to the new weekday (its BYDAY
    changes with DTSTART); anything else keeps its rule (UNSET)."""
    days = round(shift / timedelta(days=1))
    if not event.is_series or days % 7 == 0:
        return UNSET
    parts = rec.parse(event.recurrence).shifted(shift)
    rules = []
    for rule in parts.rrules:
        byday = rec.rule_part(rule, "BYDAY")
        if byday and "," not in byday and byday in rec.WEEKDAY_CODES:
            moved = rec.WEEKDAY_CODES[(rec.WEEKDAY_CODES.index(byday) + days) % 7]
            rule = ";".join(f"BYDAY={moved}" if p.startswith("BYDAY=") else p for p in rule.split(";"))
        rules.append(rule)
    return rec.Recurrence(tuple(rules), parts.rdates, parts.exdates).text()


def build_registry(
    store: CalendarStore,
    now: Callable[[], datetime] | None = None,
    default_reminders: Sequence[int] = DEFAULT_REMINDERS,
    also_on: str | None = None,
) -> Registry:
    """The calendar tools bound to ``store``; ``now`` is the clock (tests and evals freeze it);
    ``default_reminders`` are the minutes-before a new event gets when the call names none;
    ``also_on`` names the server the calendar is synced with, for the approval prompts."""
    t = CalendarTools(store, now, default_reminders, also_on)

    def bound(args: UpdateEventArgs | DeleteEventArgs) -> str:
        """What an approval covers: the rows the change would touch (``approval_rules``)."""
        return target_fingerprint(store, args)

    return Registry.of(
        [
            Tool(
                "search_events",
                "List events on a day or in a date range, optionally matching text. Returns ids for update/delete.",
                SearchEventsArgs,
                t.search_events,
            ),
            Tool(
                "create_event",
                "Add an event. Refuses to overlap another event unless allow_conflict=true.",
                CreateEventArgs,
                result_views.refusing_rules_that_never_match(store, t.create_event),
                mutates=True,
                asks_when=lambda args, ran: create_question(args, ran, also_on),  # bulk changes ask first
            ),
            Tool(
                "update_event",
                "Change an existing event; give only the fields to change. Needs the user's confirmation.",
                UpdateEventArgs,
                result_views.refusing_rules_that_never_match(store, t.update_event),
                destructive=True,
                mutates=True,
                describe=t.describe_update,
                fingerprint=bound,
                atomic=store.transaction,
            ),
            Tool(
                "delete_event",
                "Delete an event by id. Needs the user's confirmation.",
                DeleteEventArgs,
                result_views.refusing_rules_that_never_match(store, t.delete_event),
                destructive=True,
                mutates=True,
                describe=t.describe_delete,
                fingerprint=bound,
                atomic=store.transaction,
            ),
            Tool(
                "find_free_slots",
                "Find free times of at least duration_minutes within working hours, between the user's events.",
                FindFreeSlotsArgs,
                t.find_free_slots,
            ),
            Tool(
                "find_common_free_time",
                "Find times when the user and all the named people are free (e.g. 민수와 지영이 같이 되는 시간).",
                FindCommonFreeTimeArgs,
                t.find_common_free_time,
            ),
        ]
    )
