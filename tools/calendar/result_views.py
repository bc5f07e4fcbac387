"""What one calendar tool result may put in front of the model, and the words for what it leaves out.

Each event's view is cut (``limits.VIEW_*``: title, location, notes, attendees) and each list of
events, slots or conflicts is cut to ``limits.RESULT_CHARS`` of JSON. Whatever is cut is said in
words the model can act on or pass on ("notes cut at 500 of 1,048,576 characters", "… 37 more
events: search a narrower date range or add a query"), never dropped silently: a model that
believes it saw the whole day answers "nothing else that day". The sizes of the originals come
from the import's marks (``capped_fields``), so a note the store already holds cut is reported
at its true length. The store and the exports are never changed here.

``agent.result_ceiling`` is the domain-free last line behind this one; it should never be the
one that cuts a calendar result.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Protocol

from agent.tools import ToolResult
from tools.calendar import capped_fields
from tools.calendar.bounded_rules import RuleTooSparse
from tools.calendar.limits import RESULT_CHARS, VIEW_ATTENDEES, VIEW_LOCATION, VIEW_NOTES, VIEW_TITLE

NEVER_MATCHES = "recurrence_never_matches"  # the stable code of a series whose rule would give no occurrence
_TEXT = (("title", "SUMMARY", VIEW_TITLE), ("location", "LOCATION", VIEW_LOCATION), ("notes", "DESCRIPTION", VIEW_NOTES))


def capped_view(view: dict[str, Any], extra: str | None) -> dict[str, Any]:
    """``view`` (``tools.event_view``) with its text fields and attendees cut, and a ``cut``
    entry saying what was cut and how big it is; ``extra``: the event's ``ics_extra``."""
    whole = capped_fields.whole_sizes(extra)
    said: list[str] = []
    for key, name, limit in _TEXT:
        text = view.get(key)
        if not isinstance(text, str):
            continue
        size = max(whole.get(name, 0), len(text))
        if size > limit:
            view[key] = text[:limit] + "…"
            said.append(f"{key} cut at {limit:,} of {size:,} characters")
    names = view.get("attendees")
    if isinstance(names, list):
        count = max(whole.get("ATTENDEE", 0), len(names))
        if count > VIEW_ATTENDEES:
            view["attendees"] = names[:VIEW_ATTENDEES]
            said.append(f"attendees: the first {VIEW_ATTENDEES} of {count:,} shown")
    if said:
        view["cut"] = "; ".join(said) + " (the user's calendar app shows them whole)"
    return view


def fit(data: dict[str, Any], key: str, noun: str, narrower: str) -> dict[str, Any]:
    """``data[key]`` (a list, already at most ``MAX_LISTED`` long) cut to ``RESULT_CHARS`` of
    JSON, always keeping the first; if anything of ``data["count"]`` is not listed, ``truncated``
    and ``more`` say how many and what to ask instead (``narrower``)."""
    items = data.get(key) or []
    kept: list[Any] = []
    used = 0
    for item in items:
        used += len(json.dumps(item, ensure_ascii=False, separators=(", ", ": "), default=str)) + 2
        if kept and used > RESULT_CHARS:
            break
        kept.append(item)
    total = max(int(data.get("count", len(items))), len(items))
    data[key] = kept
    if total > len(kept):
        data["truncated"] = True
        data["more"] = f"… {total - len(kept):,} more {noun} not listed: {narrower}"
    return data


def refusing_rules_that_never_match(store: Any, run: Callable[[Any], ToolResult]) -> Callable[[Any], ToolResult]:
    """``run`` (a tool that makes, moves or changes a series) with a rule that would give no
    occurrence (``bounded_rules``) answered as a failure with a stable code, and nothing it
    wrote kept (a savepoint: the gate may run the call inside its own transaction)."""

    def guarded(args: Any) -> ToolResult:
        with store.savepoint() as rollback:
            try:
                return run(args)
            except RuleTooSparse as exc:
                rollback()
                return ToolResult.failure(
                    NEVER_MATCHES,
                    f"Nothing was changed: {exc}. Keep the series on a date its rule allows (see "
                    "search_events), or ask the user which days it should repeat on.",
                )

    return guarded


class HasResult(Protocol):
    """A recorded call (the runtime's ``CallRecord``, eval's ``TracedCall``): its exact result text."""

    result: str | None


def result_body(call: HasResult) -> dict[str, Any]:
    """The JSON object of a call's exact result text ({} if it is not one): how the receipt and the
    verifier read back what a tool answered."""
    try:
        body = json.loads(call.result or "{}")
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}
