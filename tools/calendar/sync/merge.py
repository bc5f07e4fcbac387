"""The three-way merge of one event changed both here and on the server (the phone).

Each field is compared with the common ancestor (the server's copy at the last sync):
changed on one side only, that side's value is kept; changed on both sides to different
values, the server wins and the local value goes into a conflict record, so nothing is lost
and the user is told once ("changed on your phone too: kept the phone's time 15:00; mine was
16:00"). Without an ancestor (the same UID created on both sides) every differing field is such
a conflict.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from zoneinfo import ZoneInfo

from agent.visible import visible_line
from tools.calendar import shown
from tools.calendar.sync.identity import refusal_line
from tools.calendar.sync.objects import FIELDS, Snapshot
from tools.calendar.utc_text import from_utc_text

FIELD_WORDS = {"title": "title", "when": "time", "location": "place", "notes": "notes", "attendees": "attendees",
               "transparent": "free/busy", "occurrences": "changed occurrences"}


@dataclass(frozen=True)
class Merge:
    local_wins: frozenset[str]  # fields only we changed: the push sends them
    conflicts: tuple[str, ...] = field(default=())  # fields both changed: the server's value is kept

    @property
    def server_as_is(self) -> bool:
        """Nothing of ours survives: the server's copy is the result, nothing to send back."""
        return not self.local_wins


def merge(base: Snapshot | None, local: Snapshot, server: Snapshot) -> Merge:
    wins: set[str] = set()
    conflicts: list[str] = []
    for name in FIELDS:
        mine, theirs = local[name], server[name]
        if mine == theirs:
            continue
        ancestor = base[name] if base is not None else None
        if base is not None and theirs == ancestor:
            wins.add(name)
        elif base is not None and mine == ancestor:
            continue
        else:
            conflicts.append(name)
    return Merge(frozenset(wins), tuple(conflicts))


def value_words(name: str, value: str, zone: ZoneInfo) -> str:
    """A field's value as a person reads it: a time as "12-05 15:00", a list joined."""
    if name == "when":
        start, end, _tz, all_day, _rule = json.loads(value)
        first = from_utc_text(start).astimezone(zone)
        return first.strftime("%m-%d") + ("" if all_day else first.strftime(" %H:%M"))
    if name == "attendees":
        return ", ".join(json.loads(value)) or "nobody"
    if name == "transparent":
        return "free" if json.loads(value) else "busy"
    if name == "occurrences":
        return f"{len(json.loads(value))} changed"
    return value or "(empty)"


def conflict_line(title: str, name: str, local: str | None, server: str | None, provider: str,
                  zone: ZoneInfo) -> str:
    """The one line a user is told, in the receipt's voice. The title and both values are outside
    text (the server's, or a field the import took in): each goes through ``agent.visible`` and is
    cut, so a note cannot start a fake line or fill the chat."""
    where = "your phone" if provider in ("iCloud", "Google", "Fastmail", "Nextcloud") else provider
    title = shown.title(title)
    what = FIELD_WORDS.get(name, name)
    if name == "refused":  # not a merge: an object refused by ``identity`` (local: why, server: where)
        return refusal_line(title, local or "", server or "", where)
    if name == "deleted":
        return f"'{title}' was deleted on {where} while you changed it here: deleted (your change is kept in `calendar status`)"
    if name == "restored":
        return f"'{title}' was changed on {where} while you deleted it here: kept the phone's"
    theirs = visible_line(value_words(name, server, zone), shown.NOTES_LIMIT) if server is not None else "(none)"
    mine = visible_line(value_words(name, local, zone), shown.NOTES_LIMIT) if local is not None else "(none)"
    return f"'{title}' changed on {where} too: kept the phone's {what} {theirs}; mine was {mine}"
