"""The calendar tools the model calls, bound to one store: ``build_registry(store)``.

Each tool is a plain function of its validated argument model and returns a ToolResult.
Every call runs in exactly one store transaction; a failure changes nothing.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta
from typing import Any, Callable, Sequence
from zoneinfo import ZoneInfo

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

_WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")


def _hhmm(moment: datetime) -> str:
    return moment.strftime("%H:%M") if moment.second == 0 else moment.strftime("%H:%M:%S")


def event_view(event: Event, zone: ZoneInfo) -> dict[str, Any]:
    """The compact dict the model sees for one event (local times in the store's zone)."""
    start, end = event.start.astimezone(zone), event.end.astimezone(zone)
    view: dict[str, Any] = {
        "id": event.id,
        "title": event.title,
        "date": start.date().isoformat(),
        "weekday": _WEEKDAYS[start.weekday()],
        "start": _hhmm(start),
        "end": _hhmm(end),
    }
    if end.date() != start.date():
        view["end_date"] = end.date().isoformat()
    if event.attendees:
        view["attendees"] = list(event.attendees)
    if event.location:
        view["location"] = event.location
    if event.notes:
        view["notes"] = event.notes
    return view


def event_words(event: Event, zone: ZoneInfo) -> str:
    """One line a human can check: "#3 '치과' Tue 2026-12-01 15:00-16:00"."""
    return f"#{event.id} '{event.title}' {span_words(event.start, event.end, zone)}"


def span_words(start: datetime, end: datetime, zone: ZoneInfo) -> str:
    start, end = start.astimezone(zone), end.astimezone(zone)
    tail = _hhmm(end) if end.date() == start.date() else f"{end.date().isoformat()} {_hhmm(end)}"
    return f"{_WEEKDAYS[start.weekday()]} {start.date().isoformat()} {_hhmm(start)}-{tail}"


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
    ) -> None:
        self.store = store
        self.zone = store.zone
        self.now = now or (lambda: datetime.now(self.zone))
        self.default_reminders = tuple(default_reminders)

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
            data={"conflicts": [event_view(e, self.zone) for e in conflicts[:MAX_LISTED]]},
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
        return ToolResult.success(data)

    def create_event(self, args: CreateEventArgs) -> ToolResult:
        day = parse_date(args.date)
        start = self._local(day, args.start_time)
        if args.duration_minutes is not None:
            end = start + timedelta(minutes=args.duration_minutes)
        else:
            assert args.end_time is not None
            end = self._local(day, args.end_time)
        with self.store.transaction():
            conflicts = self.store.conflicts(start, end)
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
            )
        return ToolResult.success(
            _with_reminders(event_view(event, self.zone), event, args.remind_minutes_before), message=f"Created {event_words(event, self.zone)}."
        )

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

    def update_event(self, args: UpdateEventArgs) -> ToolResult:
        with self.store.transaction():
            event = self.store.get_event(args.event_id)
            if event is None:
                return self._not_found(args.event_id)
            times = self._new_times(args, event)
            if isinstance(times, ToolResult):
                return times
            start, end = times
            moved = (start, end) != (event.start, event.end)
            if moved:
                conflicts = self.store.conflicts(start, end, exclude_id=event.id)
                if conflicts and not args.allow_conflict:
                    return self._conflict_failure(conflicts)
            updated = self.store.update_event(
                event.id,
                title=args.title if args.title is not None else UNSET,
                start=start,
                end=end,
                location=(args.location or None) if args.location is not None else UNSET,
                notes=(args.notes or None) if args.notes is not None else UNSET,
                attendees=args.attendees if args.attendees is not None else UNSET,
                remind_minutes_before=(
                    args.remind_minutes_before if args.remind_minutes_before is not None else UNSET
                ),
            )
        assert updated is not None
        return ToolResult.success(
            _with_reminders(event_view(updated, self.zone), updated, args.remind_minutes_before),
            message=f"Updated {event_words(updated, self.zone)}.",
        )

    def delete_event(self, args: DeleteEventArgs) -> ToolResult:
        with self.store.transaction():
            event = self.store.get_event(args.event_id)
            if event is None:
                return self._not_found(args.event_id)
            self.store.delete_event(event.id)
        return ToolResult.success({"deleted": event_view(event, self.zone)}, message=f"Deleted {event_words(event, self.zone)}.")

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
        return data

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
        event = self.store.get_event(args.event_id)
        if event is None:
            return f"Update event #{args.event_id} (no such event; the call will fail)"
        changes: list[str] = []
        if args.title is not None and args.title != event.title:
            changes.append(f"title → '{args.title}'")
        times = self._new_times(args, event)
        if isinstance(times, tuple) and times != (event.start, event.end):
            changes.append(f"time → {span_words(times[0], times[1], self.zone)}")
        if args.location is not None:
            changes.append(f"location → '{args.location}'" if args.location else "remove location")
        if args.notes is not None:
            changes.append(f"notes → '{args.notes}'" if args.notes else "remove notes")
        if args.attendees is not None:
            changes.append(f"attendees → {', '.join(args.attendees) or 'none'}")
        if args.remind_minutes_before is not None:
            minutes = ", ".join(f"{m} min" for m in args.remind_minutes_before) or "none"
            changes.append(f"reminders → {minutes} before")
        return f"Change {event_words(event, self.zone)}: {'; '.join(changes) or 'no visible change'}"

    def describe_delete(self, args: DeleteEventArgs) -> str:
        event = self.store.get_event(args.event_id)
        if event is None:
            return f"Delete event #{args.event_id} (no such event; the call will fail)"
        with_whom = f" with {', '.join(event.attendees)}" if event.attendees else ""
        return f"Delete {event_words(event, self.zone)}{with_whom}"


def build_registry(
    store: CalendarStore,
    now: Callable[[], datetime] | None = None,
    default_reminders: Sequence[int] = DEFAULT_REMINDERS,
) -> Registry:
    """The calendar tools bound to ``store``; ``now`` is the clock (tests and evals freeze it);
    ``default_reminders`` are the minutes-before a new event gets when the call names none."""
    t = CalendarTools(store, now, default_reminders)
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
                t.create_event,
                mutates=True,
            ),
            Tool(
                "update_event",
                "Change an existing event; give only the fields to change. Needs the user's confirmation.",
                UpdateEventArgs,
                t.update_event,
                destructive=True,
                mutates=True,
                describe=t.describe_update,
            ),
            Tool(
                "delete_event",
                "Delete an event by id. Needs the user's confirmation.",
                DeleteEventArgs,
                t.delete_event,
                destructive=True,
                mutates=True,
                describe=t.describe_delete,
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
