"""Which local event a CalDAV object may touch: one object stands for one UID, and one UID
lives at one collection and href.

A server object is outside data. RFC 4791 (4.1) wants a calendar object resource to hold one
UID (the event, and its overrides: VEVENTs of that UID with a RECURRENCE-ID), but nothing makes
a server check it, and a calendar shared with the user is written by someone else. Imported as
it stands, one object could carry a second VEVENT with the UID of one of the user's own events
and overwrite it here (the next push then writes the forgery over the server's copy too), and a
shared calendar could reuse the UID of an event of a private one and take it over. So nothing
of an object reaches the store before two checks:

- ``vet``: the object stands for one UID: the one its href is known to hold, else its first
  VEVENT's. Every VEVENT with another UID, or with none, is cut out, refused and named once (a
  ``caldav_conflicts`` row, told in the chat the way a conflict is); the rest goes on as usual.
- ``Gate.claim``: the UID may be taken at this collection and href only if nothing else owns
  it: an item (``caldav_items``: where the server keeps an event) at another collection or
  href, or a local event not yet pushed that belongs to another collection. Refused and named.
  A UID belongs to the calendar it was first met in (on a first sync, the order of
  ``caldav_calendars``); it follows the event only when the old href is gone from the server (a
  move on the phone), which a calendar shared with the user cannot bring about.

A deletion at an href deletes only the event that href still holds (``owns``): the state is
keyed by collection and href, the UID being what the object at that address stands for.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable
from urllib.parse import unquote

import icalendar
from caldav.lib.url import URL

from agent.visible import visible_line
from tools.calendar import ics_read
from tools.calendar.ics_fields import first_text as ics_text  # the import's own reading of a UID (see _uid)
from tools.calendar.store import CalendarStore
from tools.calendar.sync.state import Item, SyncState

# why a refusal was made: kept in its conflict record (field "refused"; ``merge.conflict_line``
# words it through ``refusal_line``)
SECOND, NO_UID, OWNED = "second-uid", "no-uid", "owned"


@dataclass(frozen=True)
class Refusal:
    reason: str  # SECOND | NO_UID | OWNED
    uid: str  # the refused VEVENT's UID ("" when it has none)
    obj: str  # the object's name (its href's last segment); for OWNED, the calendar it came from


@dataclass(frozen=True)
class Vetted:
    uid: str | None  # the UID the object stands for (None: no VEVENT with a UID)
    text: str  # the object without what was refused (as the server sent it when nothing was)
    holds_own: bool  # whether a VEVENT of ``uid`` is left to import
    refused: tuple[Refusal, ...] = ()


def url_key(url: Any) -> str:
    """One spelling of a URL for comparing and storing (the library's canonical form: the path
    quoted, '@' as '%40'), since servers and the library differ in how they quote an href: the
    collection and href an item is keyed by are always in this form."""
    return str(URL.objectify(str(url)).canonical())


def object_name(href: str) -> str:
    return unquote(href.rstrip("/").rsplit("/", 1)[-1])


def vet(text: str, name: str, uid: str | None = None) -> Vetted:
    """The object cut down to the VEVENTs of ``uid`` (the UID its href holds), or, when the href
    is new, of its first VEVENT with a UID. Text icalendar cannot read comes back whole (the
    import names it); so does an object with nothing to cut, byte for byte."""
    try:
        calendars = [c for c in ics_read.parsed(text) if isinstance(c, icalendar.Calendar)]  # zone cache: see parsed
    except Exception:  # noqa: BLE001 - the import says why, as it does for any broken object
        return Vetted(uid, text, False)
    vevents = [v for c in calendars for v in c.walk("VEVENT")]
    own = uid or next((u for u in map(_uid, vevents) if u), None)
    refused: dict[tuple[str, str], Refusal] = {}
    for vevent in vevents:
        found = _uid(vevent)
        if found != own:
            reason = SECOND if found else NO_UID
            refused.setdefault((reason, found), Refusal(reason, found, name))
    holds_own = own is not None and any(_uid(v) == own for v in vevents)
    if not refused:
        return Vetted(own, text, holds_own)
    for calendar in calendars:
        _cut(calendar, own)
    try:
        kept = b"".join(c.to_ical() for c in calendars).decode("utf-8", "replace")
    except Exception:  # noqa: BLE001 - what cannot be written back is not imported at all
        kept, holds_own = "", False
    return Vetted(own, kept, holds_own, tuple(refused.values()))


def owns(state: SyncState, uid: str, collection: str, href: str) -> bool:
    """Whether the object at ``href`` in ``collection`` is where ``uid`` lives now, so that its
    deletion there may delete the event here (an event moved to another href stays)."""
    item = state.item(uid)
    return item is not None and (item.collection, item.href) == (collection, href)


class Gate:
    """The checks the engine calls before an object from the server touches the store.

    ``calendars`` gives the synced collections (the first is where new events are pushed),
    ``status`` the HTTP status of a GET of an href (to tell whether the server still has it)."""

    def __init__(self, state: SyncState, calendars: Callable[[], list[Any]], status: Callable[[str], int]) -> None:
        self.state = state
        self.store: CalendarStore = state.store
        self.calendars = calendars
        self.status = status

    def home(self) -> str:
        return url_key(self.calendars()[0].url)

    def gone(self, href: str) -> bool:
        return self.status(href) in (404, 410)

    def label(self, collection: str) -> str:
        """A collection's name as the user knows it (its display name), else its URL."""
        for calendar in self.calendars():
            if url_key(calendar.url) == collection:
                try:
                    return str(calendar.get_display_name() or collection)
                except Exception:  # noqa: BLE001 - a calendar without a name is named by its URL
                    return collection
        return collection

    def admit(self, collection: str, held: Item | None, href: str, data: str | bytes | None,
              skipped: list[str]) -> tuple[str, str, str] | None:
        """A pulled object: (its UID, the text to import, its name), or None when nothing of it
        may be applied. ``held`` is the item this href held when the pull began."""
        name = object_name(href)
        text = data.decode("utf-8", "replace") if isinstance(data, bytes) else (data or "")
        vetted = vet(text, name, held.uid if held is not None else None)
        self.refuse(vetted.refused, skipped)
        if vetted.uid is None or not vetted.holds_own:
            # no VEVENT of its own (a task list's object, or the href's event is no longer in it)
            if not vetted.refused and ("VEVENT" in text.upper() or not text):
                skipped.append(f"{name}: not an event we can read")
            return None
        if held is None and not self.claim(vetted.uid, collection, href):
            self.refuse([Refusal(OWNED, vetted.uid, self.label(collection))], skipped)
            return None
        return vetted.uid, vetted.text, name

    def vetted(self, text: str, href: str, uid: str, skipped: list[str]) -> str:
        """The server's copy of ``uid`` fetched at its own href (a 412 to merge, a deletion to
        undo): only the VEVENTs of ``uid`` go on; the rest is refused and named."""
        vetted = vet(text, object_name(href), uid)
        self.refuse(vetted.refused, skipped)
        return vetted.text

    def claim(self, uid: str, collection: str, href: str) -> bool:
        """Whether ``uid``, met at an href this collection did not hold, may live there.

        - Nobody has it: yes.
        - An item has it at another collection or href: no, unless the server no longer has that
          href: then the event was moved (on the phone, into this calendar or within it) and the
          item now points here. A calendar shared with the user cannot fake that: it cannot
          delete what another of the user's calendars holds.
        - A local event not yet pushed has it (no item, or only a PUT the server never confirmed,
          say one it refused): it belongs to the collection its push goes to (the first one,
          ``home``, or the one that PUT went to). From any other collection: no. From that one:
          yes, and it is taken as the same event made on both sides (an invitation imported
          here from a file that the server also put into the calendar), merged without an
          ancestor as before: each field that differs keeps the server's value and records ours
          as a conflict, told once; the server already owns every event of that calendar, so
          this gives it nothing it did not have.
        """
        item = self.state.item(uid)
        if item is not None and item.etag is None and item.base is None and item.sent is not None \
                and (item.collection, item.href) != (collection, href):
            if collection != item.collection:
                return False
            self.state.forget(uid)  # the push meets the server's copy as one made on both sides
            return True
        if item is None:
            return self.store.find_uid(uid) is None or collection == self.home()
        if (item.collection, item.href) == (collection, href):
            return True
        if not self.gone(item.href):
            return False
        self.state.saved(uid, collection, href, None, item.base)  # no ETag: the next PUT must not overwrite blindly
        return True

    def refuse(self, refusals: Iterable[Refusal], skipped: list[str]) -> None:
        """Record each refusal once (however often the server sends the same object) for the chat
        to name (``SyncService.notices``), and name a new one in the sync's own report."""
        for refusal in refusals:
            event = self.store.find_uid(refusal.uid) if refusal.uid else None
            title = shown(event.title) if event is not None else shown(refusal.uid) or "(no UID)"
            if self.state.refused(refusal.uid, title, refusal.reason, shown(refusal.obj)):
                skipped.append(refusal_line(title, refusal.reason, shown(refusal.obj), "the server"))


def reason_words(reason: str, title: str, where: str) -> str:
    source = f" from {where}"
    if reason == NO_UID:
        return f"refused an event{source} without a UID: not imported"
    if reason == OWNED:
        return f"refused another copy of '{title}'{source}: that event already lives elsewhere; yours is unchanged"
    return f"refused a second event, '{title}', carried inside another{source}: not imported; nothing here changed"


def refusal_line(title: str, reason: str, detail: str, where: str) -> str:
    """The line the chat shows for a refusal (``detail``: the object, or the calendar it came from)."""
    if reason == OWNED:
        return reason_words(reason, title, f"the calendar '{detail}' on {where}")
    return reason_words(reason, title, f"{where} ({detail})")


def shown(text: str | None, limit: int = 60) -> str:
    """Outside text (a UID, an href, a calendar's name) as one short line that only reads as
    text (``agent.visible``: an ESC cannot move the cursor, an RLO cannot reverse what follows)."""
    return visible_line(text or "", limit)


def _uid(vevent: Any) -> str:
    """A VEVENT's UID exactly as ``ics`` reads it when importing (the first of repeated ones, a
    typed value as its text), so the check and the import can never disagree about it."""
    return ics_text(vevent, "uid").strip()


def _cut(component: Any, own: str | None) -> None:
    """Drop, at any depth, every VEVENT whose UID is not ``own`` (the import walks every depth)."""
    kept = []
    for sub in component.subcomponents:
        if sub.name == "VEVENT" and _uid(sub) != own:
            continue
        _cut(sub, own)
        kept.append(sub)
    component.subcomponents[:] = kept
