"""What a calendar approval covers, and when a creation asks first.

Two rules the runtime's gate applies through the tool contract (``agent.tools.Tool``), without
knowing what an event is:

- An approval is bound to what the person was shown. ``target_fingerprint`` hashes the stored
  rows an update or delete would change: every stored field of the event's row (its UID, times,
  recurrence with its EXDATEs, the iCalendar properties kept as they came), its attendees and
  reminders, and for a series the occurrence overrides the scope reaches and which occurrence
  ``occurrence_date`` names now. The gate takes it when it asks; the tool's
  transaction reads it again before the write, and a sync, another chat or another device that
  changed any of it in between makes the call fail with ``target_changed`` instead of changing
  the new version blind.
- Bulk changes ask first. One creation runs unasked (the person just said so), but a model that
  fills the calendar in one turn, or one invitation to a crowd (CalDAV servers e-mail every
  attendee), waits for a yes: ``create_question`` gives the words, or None to run unasked.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Mapping

from tools.calendar.arguments import CreateEventArgs, EventTargetArgs, parse_date
from tools.calendar.store import CalendarStore
from tools.calendar.utc_text import to_utc_text

MAX_CREATES_UNASKED = 3  # creations in one turn that run without asking; the 4th asks
MAX_ATTENDEES_UNASKED = 10  # attendees one new event may have without asking (each gets an invitation)
CREATE_TOOL = "create_event"
WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")  # as the other questions write them, in any locale
NAMES_SHOWN = 5  # attendees named in the question; the rest are counted
# An event row's columns an approval is not bound to: ``updated_at`` moves when any occurrence of
# a series is overridden (so an approval for one occurrence would die of a change to another),
# and a rewrite with the same content changes nothing the person approved.
UNBOUND_COLUMNS = frozenset({"updated_at"})


def ordinal(n: int) -> str:
    """1st, 2nd, 3rd, 4th, 11th, 12th, 13th, 21st ..."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _when(args: CreateEventArgs) -> str:
    """The new event's time as the call gives it: "Fri 2026-12-04 15:00-16:00"."""
    day = parse_date(args.date)
    head = f"{WEEKDAYS[day.weekday()]} {day.isoformat()}"
    if args.all_day:
        return f"{head}–{args.end_date} (all day)" if args.end_date and args.end_date != args.date else f"{head} (all day)"
    length = f"-{args.end_time}" if args.end_time else f", {args.duration_minutes} min"
    return f"{head} {args.start_time}{length}" + (", repeating" if args.repeat is not None else "")


def create_question(args: CreateEventArgs, ran: Mapping[str, int], also_on: str | None = None) -> str | None:
    """The approval question for a creation that is a bulk change in this turn, or None.

    ``ran``: calls that already ran (ok) in this turn, by tool (the gate's ledger). Both rules
    may hold at once; the question then names both."""
    nth = ran.get(CREATE_TOOL, 0) + 1
    crowd = len(args.attendees or ())
    if nth <= MAX_CREATES_UNASKED and crowd <= MAX_ATTENDEES_UNASKED:
        return None
    many = nth > MAX_CREATES_UNASKED
    article = "an" if str(nth).startswith("8") or nth in (11, 18) else "a"
    what = f"{article} {ordinal(nth)} event this turn: '{args.title}'" if many else f"'{args.title}'"
    question = f"Create {what} {_when(args)}"
    if crowd > MAX_ATTENDEES_UNASKED:
        names = list(args.attendees or ())
        listed = ", ".join(names[:NAMES_SHOWN]) + (f" and {len(names) - NAMES_SHOWN} more" if len(names) > NAMES_SHOWN else "")
        question += f" with {crowd} attendees (invitations will be sent): {listed}"
    return question + (f" (also in your {also_on} calendar)" if also_on else "")


def target_fingerprint(store: CalendarStore, args: EventTargetArgs) -> str:
    """A hash of everything an update or delete of ``args`` would change, as stored now.

    Read in one transaction (joining the caller's: the re-check before the write runs inside
    the tool's). An event that does not exist has a fingerprint too: a call on a missing id
    fails anyway, and ids are never reused (schema version 4)."""
    with store.transaction():
        row = store.db.fetchone("SELECT * FROM events WHERE id = ?", (args.event_id,))
        payload: dict[str, Any] = {"event": None if row is None else {
            key: row[key] for key in row.keys() if key not in UNBOUND_COLUMNS}}
        if row is None:
            return _digest(payload)
        payload["attendees"] = [name for (name,) in store.db.fetchall(
            "SELECT p.name FROM event_attendees a JOIN people p ON p.id = a.person_id WHERE a.event_id = ? "
            "ORDER BY p.name", (args.event_id,))]
        payload["reminders"] = [m for (m,) in store.db.fetchall(
            "SELECT minutes_before FROM reminders WHERE event_id = ? ORDER BY minutes_before", (args.event_id,))]
        if row["recurrence"] is not None:
            payload.update(_series_part(store, args))
    return _digest(payload)


def _series_part(store: CalendarStore, args: EventTargetArgs) -> dict[str, Any]:
    """Which occurrence ``occurrence_date`` names now, and the overrides the scope reaches: that
    occurrence's alone (``this``), it and every later one (``following``), or all of them."""
    original = None
    if args.occurrence_date is not None:
        occurrence = store.occurrence_on(args.event_id, parse_date(args.occurrence_date))
        if occurrence is not None and occurrence.original_start is not None:
            original = to_utc_text(occurrence.original_start)
    query = "SELECT * FROM event_overrides WHERE event_id = ?"
    params: tuple[Any, ...] = (args.event_id,)
    if original is not None and args.scope == "this":
        query, params = query + " AND original_utc = ?", (args.event_id, original)
    elif original is not None and args.scope == "following":
        query, params = query + " AND original_utc >= ?", (args.event_id, original)
    overrides = [list(r) for r in store.db.fetchall(query + " ORDER BY original_utc", params)]
    return {"occurrence": original, "overrides": overrides}


def _digest(payload: dict[str, Any]) -> str:
    text = json.dumps(payload, ensure_ascii=False, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()
