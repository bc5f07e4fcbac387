"""The calendar tool functions behind the registry (``tools.calendar.tools``), sharing one store,
its zone and a clock.

Each tool is a plain function of its validated argument model and returns a ToolResult.
Every call runs in exactly one store transaction; a failure changes nothing.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import date, datetime, timedelta
from typing import Any, Callable, Sequence

from tools.calendar.arguments import (
    CreateEventArgs,
    DeleteEventArgs,
    FindCommonFreeTimeArgs,
    FindFreeSlotsArgs,
    SearchEventsArgs,
    UpdateEventArgs,
    parse_date,
    parse_time,
)
from tools.calendar import result_views
from tools.calendar.event_views import MAX_LISTED, WEEKDAYS, event_view, event_words, hhmm, scope_words
from tools.calendar.series_planning import moved_weekday, series_conflicts, series_start
from tools.calendar.slots import Interval, free_slots, working_windows
from tools.calendar.store import UNSET, CalendarStore, Event
from agent.tools import ToolResult

DEFAULT_REMINDERS: tuple[int, ...] = (10,)  # minutes before; the remind_minutes setting (tools.calendar.settings) overrides


def _occurrences_words(count: int | None) -> str:
    return "no end date" if count is None else f"{count} occurrence{'s' if count != 1 else ''}"


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

    def _local(self, day: date, clock: str) -> datetime:
        return datetime.combine(day, parse_time(clock), tzinfo=self.zone)

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
            start, end, recurrence = series_start(args, start, end, self.zone)
        with self.store.transaction():
            conflicts = [] if args.all_day else series_conflicts(self.store, start, end, recurrence)
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

    def new_times(self, args: UpdateEventArgs, event: Event) -> Interval | ToolResult:
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
                f"The event would end ({hhmm(end)}) before it starts ({hhmm(start)}); "
                "give end_time after start_time or use duration_minutes.",
            )
        return start, end

    def target(self, args: UpdateEventArgs | DeleteEventArgs) -> tuple[Event, Event | None, str] | ToolResult:
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
            target = self.target(args)
            if isinstance(target, ToolResult):
                return target
            event, occurrence, scope = target
            if occurrence is not None and scope == "this":
                return self._update_occurrence(args, event, occurrence)
            # the whole event or series (or, for "following", the series from that occurrence on)
            base_start = occurrence.original_start if occurrence and occurrence.original_start else event.start
            base = replace(event, start=base_start, end=base_start + (event.end - event.start))
            times = self.new_times(args, base)
            if isinstance(times, ToolResult):
                return times
            start, end = times
            shift, length = start - base.start, end - start
            recurrence = moved_weekday(event, shift)
            moved = (start, end) != (base.start, base.end)
            if moved:
                text = event.recurrence if recurrence is UNSET else recurrence
                conflicts = series_conflicts(self.store, start, end, text, exclude_id=event.id)
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
        times = self.new_times(args, occurrence)
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
            target = self.target(args)
            if isinstance(target, ToolResult):
                return target
            event, occurrence, scope = target
            if not event.is_series:
                self.store.delete_event(event.id)
                return ToolResult.success({"deleted": event_view(event, self.zone)},
                                          message=f"Deleted {event_words(event, self.zone)}.")
            shown = occurrence or event
            count = self.scope_count(event, occurrence, scope)
            if scope == "this" and occurrence is not None and occurrence.original_start is not None:
                self.store.cancel_occurrence(event.id, occurrence.original_start)
            elif scope == "following" and occurrence is not None and occurrence.original_start is not None:
                self.store.end_series_before(event.id, occurrence.original_start)
            else:
                self.store.delete_event(event.id)
        data = {"deleted": event_view(shown, self.zone), "scope": scope, "occurrences": count if count is not None else "no end"}
        return ToolResult.success(data, message=f"Deleted {scope_words(event, occurrence, scope, count, self.zone)}.")

    def scope_count(self, event: Event, occurrence: Event | None, scope: str) -> int | None:
        """How many occurrences a change with ``scope`` touches (None: every one, endless)."""
        if not event.is_series or scope == "this":
            return 1
        after = occurrence.original_start if scope == "following" and occurrence is not None else None
        return self.store.occurrence_count(event.id, after)

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
                "weekday": WEEKDAYS[s.astimezone(self.zone).weekday()],
                "start": hhmm(s.astimezone(self.zone)),
                "end": hhmm(e.astimezone(self.zone)),
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
