"""Comparing calendar store snapshots: what counts as the same state, and what changed.

The verifier's ``final`` component and its collateral rule stand on this: a snapshot is
normalized (titles and names folded, ids kept only where they carry identity), events compare
as a multiset (two identical events are two), and a difference can be put in words for the
episode's errors. Kept apart from the reward so each can be read, and changed, on its own.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any, Iterable


def fold(text: str | None) -> str | None:
    """Case and runs of spaces do not matter: '"Team  Sync"' and 'team sync' are one title."""
    return " ".join(text.split()).casefold() if isinstance(text, str) else text


def _sorted(items: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(items, key=lambda i: json.dumps(i, sort_keys=True, ensure_ascii=False))


# How a series is written down (its RRULE text, its zone, its exceptions' rows) is not compared:
# its expanded occurrences are (``CalendarStore.snapshot``), so BYDAY=TU and a Tuesday DTSTART
# without BYDAY are the same series, and a wrong weekday or an hour's drift at DST is not.
_SPELLING = ("recurrence", "overrides", "tz")


def normalized(snapshot: dict[str, Any], keep_ids: set[int] | frozenset[int] = frozenset()) -> dict[str, Any]:
    """Snapshot with titles and names folded (so '"Dentist"' vs 'dentist' is not a failure) and
    event ids kept only where they carry identity: ``keep_ids`` (the initial events not deleted
    in the episode); every other event's id is None, since a new event's id is the store's choice."""
    events = _sorted(
        {**{k: v for k, v in e.items() if k not in _SPELLING}, "id": e.get("id") if e.get("id") in keep_ids else None,
         "title": fold(e["title"]), "attendees": sorted(fold(a) for a in e.get("attendees", [])),
         **({"occurrences": [[s, end, fold(t)] for s, end, t in e["occurrences"]]} if "occurrences" in e else {})}
        for e in snapshot.get("events", [])
    )
    busy = _sorted({**b, "person": fold(b["person"])} for b in snapshot.get("busy", []))
    people = sorted(fold(p) for p in snapshot.get("people", []))
    return {"events": events, "busy": busy, "people": people, "agenda": _sorted(snapshot.get("agenda", []))}


def multiset(items: list[dict[str, Any]]) -> Counter[str]:
    """A multiset, so that two identical events are two."""
    return Counter(json.dumps(i, sort_keys=True, ensure_ascii=False) for i in items)


def event_diff(before: dict[str, Any], after: dict[str, Any]) -> tuple[Counter[str], Counter[str]]:
    """(removed, added) events between two normalized snapshots, duplicates counted."""
    old, new = multiset(before["events"]), multiset(after["events"])
    return old - new, new - old


def diff_words(final: dict[str, Any], expected: dict[str, Any]) -> str:
    """How the final store differs from the expected one, in one line for the episode's errors."""
    missing = [json.loads(k) for k in (multiset(expected["events"]) - multiset(final["events"])).elements()]
    extra = [json.loads(k) for k in (multiset(final["events"]) - multiset(expected["events"])).elements()]

    def short(e: dict[str, Any]) -> str:
        return f"'{e['title']}' {e['start'][:16]}-{e['end'][11:16]}"

    parts = []
    if missing:
        parts.append("missing " + ", ".join(short(e) for e in missing))
    if extra:
        parts.append("unexpected " + ", ".join(short(e) for e in extra))
    if final["busy"] != expected["busy"]:
        parts.append("busy times changed")
    if final["people"] != expected["people"] or final["agenda"] != expected["agenda"]:
        parts.append("people or agenda settings changed")
    return "final store differs: " + ("; ".join(parts) or "details differ")
