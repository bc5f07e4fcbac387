"""The words the approval gate shows before update_event or delete_event runs: what would change,
which occurrences the scope reaches and how many, and that a synced calendar changes too. Built
from the store as it is now (through the tool functions' own reading of the call), never from
the model's words, so the person approves what will really happen."""

from __future__ import annotations

from tools.calendar.arguments import DeleteEventArgs, UpdateEventArgs
from tools.calendar.event_views import scope_words, span_words
from tools.calendar.shown import names as shown_names, notes as shown_notes, place as shown_place, title as shown_title
from tools.calendar.tool_functions import CalendarTools
from agent.tools import ToolResult


def describe_update(tools: CalendarTools, args: UpdateEventArgs) -> str:
    """"Change <what the scope reaches>: <each field's new value>" (or why the call will fail)."""
    target = tools.target(args)
    if isinstance(target, ToolResult):
        return f"Update event #{args.event_id} ({'no such event; ' if target.error == 'not_found' and 'No event' in target.message else ''}the call will fail: {target.message})"
    event, occurrence, scope = target
    shown = occurrence if occurrence is not None and scope == "this" else event
    changes: list[str] = []
    if args.title is not None and args.title != shown.title:
        changes.append(f"title → '{shown_title(args.title)}'")
    times = tools.new_times(args, occurrence or shown)
    if isinstance(times, tuple) and times != ((occurrence or shown).start, (occurrence or shown).end):
        changes.append(f"time → {span_words(times[0], times[1], tools.zone)}")
    if args.location is not None:
        changes.append(f"location → '{shown_place(args.location)}'" if args.location else "remove location")
    if args.notes is not None:
        changes.append(f"notes → '{shown_notes(args.notes)}'" if args.notes else "remove notes")
    if args.attendees is not None:
        changes.append(f"attendees → {shown_names(args.attendees) or 'none'}")
    if args.remind_minutes_before is not None:
        minutes = ", ".join(f"{m} min" for m in args.remind_minutes_before) or "none"
        changes.append(f"reminders → {minutes} before")
    what = scope_words(event, occurrence, scope, tools.scope_count(event, occurrence, scope), tools.zone, to_person=True)
    return f"Change {what}: {'; '.join(changes) or 'no visible change'}{_reach(tools)}"


def describe_delete(tools: CalendarTools, args: DeleteEventArgs) -> str:
    """"Delete <what the scope reaches> with <attendees>" (or why the call will fail)."""
    target = tools.target(args)
    if isinstance(target, ToolResult):
        return f"Delete event #{args.event_id} ({'no such event; ' if target.error == 'not_found' and 'No event' in target.message else ''}the call will fail: {target.message})"
    event, occurrence, scope = target
    with_whom = f" with {shown_names(event.attendees)}" if event.attendees else ""
    what = scope_words(event, occurrence, scope, tools.scope_count(event, occurrence, scope), tools.zone, to_person=True)
    return f"Delete {what}{with_whom}{_reach(tools)}"


def _reach(tools: CalendarTools) -> str:
    return f" (also in your {tools.also_on} calendar)" if tools.also_on else ""
