"""One sync with a CalDAV server: push what changed here, then pull what changed there.

The client is the ``caldav`` library (discovery, sync-collection, calendar-multiget); a PUT or
DELETE is sent through it with the precondition written out, because the precondition *is*
the guarantee: ``If-None-Match: *`` for an event the server has never had (so a push retried
after a crash can never make a second copy: the URL comes from the UID) and ``If-Match: <ETag>``
for one it has (so a change made on the phone since is never overwritten: the server answers
412 and the two are merged, see ``merge``).

A pull fetches only what changed: one sync-collection REPORT with the last token, then one
calendar-multiget per 100 changed objects (a server without sync tokens gets the library's
ETag-comparison fallback). An object we wrote ourselves comes back with the ETag we stored and
is not fetched again.

Failures are one line and lose nothing: the queue stays until the server takes it. A refused
password stops the sync at the first request (no retry storm) and the password never appears
in a message (``connection``). One process syncs at a time (``lock``: an exclusive lock beside
the calendar file, which the kernel lets go when the process dies, even by kill -9).
"""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import quote

from tools.calendar import ics
from tools.calendar.store import CalendarStore, Event
from tools.calendar.sync import identity, objects
from tools.calendar.sync.connection import Connection, body as _body, etag as _etag, header as _header
from tools.calendar.sync.identity import url_key as _key
from tools.calendar.sync.lock import exclusive
from tools.calendar.sync.merge import merge
from tools.calendar.sync.report import SyncFailed, SyncReport
from tools.calendar.sync.settings import Account
from tools.calendar.sync.state import Item, SyncState

MULTIGET_BATCH = 100


class CalDAVSync:
    """Syncs one store with one account. Keep one per process: it remembers the discovered
    calendars and its connection, so a later sync costs only what changed."""

    def __init__(self, store: CalendarStore, account: Account) -> None:
        self.store = store
        self.account = account
        self.state = SyncState(store)
        self.connection = Connection(account)
        self.gate = identity.Gate(self.state, self.connection.collections,
                                  lambda href: self.connection.request(href, "GET", "", {}).status)

    # -- the one entry point -------------------------------------------------------------------

    def sync(self, push_only: bool = False, lock_wait_s: float = 30.0) -> SyncReport:
        """Push, then pull (with ``push_only``, only if something was pushed). Never raises for
        the server's or the network's failures: the report says what went wrong, and the status
        table remembers since when. A change made on both sides meets in the push (412)."""
        report = SyncReport()
        started = time.perf_counter()
        before = list(self.connection.counts)
        try:
            with exclusive(self.store.path, lock_wait_s):
                self._push(report)
                # then pull, so the sync token covers our own pushes: a server need not report
                # the deletion of an object made after the token a client holds (RFC 6578)
                if not push_only or report.pushed or report.removed_there:
                    for calendar in self.connection.collections():
                        self._pull(calendar, report)
        except SyncFailed as failed:
            report.error, report.kind = self.connection.clean(str(failed)), failed.kind
        except Exception as exc:  # noqa: BLE001 - the library and the network raise many types
            failed = self.connection.classify(exc)
            report.error, report.kind = self.connection.clean(str(failed)), failed.kind
        report.seconds = time.perf_counter() - started
        report.requests, report.bytes_sent, report.bytes_received = (a - b for a, b in zip(self.connection.counts, before))
        if report.ok:
            self.state.succeeded(report.line())
        elif report.kind != "busy":
            self.state.unreachable(report.error or "failed")
        return report

    # -- pull ------------------------------------------------------------------------------------

    def _pull(self, calendar: Any, report: SyncReport) -> None:
        collection = _key(calendar.url)
        token = self.state.sync_token(collection)
        result = calendar.get_objects_by_sync_token(sync_token=token, load_objects=False)
        known = self.state.items(collection)
        deleted = {_key(u) for u in getattr(result, "deleted_urls", ())}
        listed: set[str] = set()
        fetch: list[Any] = []
        for obj in result.objects:
            href = _key(obj.url)
            if href in deleted or href.rstrip("/") == collection.rstrip("/"):
                continue  # iCloud lists the collection itself as a member of its sync report
            listed.add(href)
            etag = _etag(obj)
            item = known.get(href)
            if item is not None and etag is not None and item.etag == etag:
                continue  # what we hold already (our own push echoed back)
            data = getattr(obj, "_data", None)
            if data:
                self._apply(collection, known, href, etag, obj.data, report)
            else:
                fetch.append(obj)
        for batch in range(0, len(fetch), MULTIGET_BATCH):
            for loaded in calendar.multiget([o.url for o in fetch[batch:batch + MULTIGET_BATCH]]):
                self._apply(collection, known, _key(loaded.url), _etag(loaded), loaded.data, report)
        if str(result.sync_token or "").startswith("fake-") or token is None:
            # a full listing (first sync, or a server without sync tokens): what we knew and it
            # no longer lists is gone there
            if token is None or result.objects:
                deleted |= set(known) - listed
        for href in deleted:
            item = known.get(href)
            if item is not None and identity.owns(self.state, item.uid, collection, href):  # not moved since
                self._apply_deletion(item.uid, report)
        self.state.pulled(collection, str(result.sync_token) if result.sync_token else None)

    def _apply(self, collection: str, known: dict[str, Item], href: str, etag: str | None, data: Any, report: SyncReport) -> None:
        """One object from the server into the store, as far as ``identity`` lets it, unless a local
        change of the same event is queued: then the push merges the two (it will be told 412)."""
        admitted = self.gate.admit(collection, known.get(href), href, data, report.skipped)
        if admitted is None:
            return
        uid, text, name = admitted
        with self.store.transaction():
            if self.state.is_queued(uid) and self.store.find_uid(uid) is not None:
                if self.state.item(uid) is not None:
                    return  # a change of ours waits: its push is told 412 and merges the two
                # the same UID made on both sides, or first met here: merge without an ancestor
                self._merge_into_store(uid, None, text, objects.snapshot(text, uid, self.store.tz), report)
                self.state.saved(uid, collection, href, etag, text)
                return
            try:
                result = ics.import_bytes(self.store, text.encode())
            except ValueError as exc:
                report.skipped.append(f"{name}: {exc}")
                self.state.saved(uid, collection, href, etag, None)
                return
            report.skipped += [f"{name}: {why}" for why in result.skipped]
            self.state.saved(uid, collection, href, etag, text)
            self.state.dequeue(uid)
            report.pulled += 1

    def _apply_deletion(self, uid: str, report: SyncReport) -> None:
        """Deleted on the server: deleted here. A local change still queued loses (the server
        wins), but is kept, as the object it would have been, in a conflict record."""
        with self.store.transaction():
            event = self.store.find_uid(uid)
            if event is not None:
                if self.state.is_queued(uid):
                    item = self.state.item(uid)
                    mine = objects.object_bytes(self.store, event, item.base if item else None).decode()
                    self.state.conflict(uid, event.title, "deleted", mine, None)
                    report.conflicts += 1
                self.store.delete_event(event.id)
                report.removed_here += 1
            self.state.forget(uid)
            self.state.dequeue(uid)

    # -- push ------------------------------------------------------------------------------------

    def _push(self, report: SyncReport) -> None:
        if not self.state.queued():
            return
        calendars = self.connection.collections()
        for uid, seq in self.state.queued():
            event = self.store.find_uid(uid)
            item = self.state.item(uid)
            if event is None:
                if item is None:
                    self.state.done(uid, seq)
                else:
                    self._push_deletion(uid, seq, item, report)
                continue
            if item is None:  # new there: its URL is made from its UID, in the first calendar
                href = _key(calendars[0].url.join(quote(uid.replace("/", "_"), safe="@") + ".ics"))
                item = Item(uid, _key(calendars[0].url), href, None, None)
            self._push_event(seq, event, item, report)

    def _push_event(self, seq: int, event: Event, item: Item, report: SyncReport, retried: bool = False) -> None:
        """PUT the event: ``If-Match`` its ETag, or ``If-None-Match: *`` when the server should
        not have it (never made there, or a PUT whose answer a crash lost, ``item.sent``: then
        412 and a merge against it)."""
        uid, collection, href = item.uid, item.collection, item.href
        body = objects.object_bytes(self.store, event, item.base).decode("utf-8")
        headers = {"Content-Type": "text/calendar; charset=utf-8"}
        headers.update({"If-Match": item.etag} if item.etag else {"If-None-Match": "*"})
        self.state.sending(uid, collection, href, body)
        response = self.connection.request(href, "PUT", body, headers)
        status = response.status
        if status in (200, 201, 204):
            new_etag = _header(response, "ETag") or self.connection.etag_of(href)
            with self.store.transaction():
                self.state.saved(uid, collection, href, new_etag, body)
                self.state.done(uid, seq)
            report.pushed += 1
        elif status == 412 and not retried:
            self._resolve(item, report)
        else:
            self._refused(uid, href, status, report)

    def _resolve(self, item: Item, report: SyncReport) -> None:
        """The server's copy moved under a queued change (412): fetch it, merge, keep the result
        here, and send it back if anything of ours survived. If the server's copy is our own
        earlier PUT whose answer was lost (``item.sent``), that is the common ancestor."""
        uid, collection, href = item.uid, item.collection, item.href
        response = self.connection.request(href, "GET", "", {})
        if response.status == 404:
            self._apply_deletion(uid, report)
            return
        if response.status != 200:
            self._refused(uid, href, response.status, report)
            return
        theirs = self.gate.vetted(_body(response), href, uid, report.skipped)
        server = objects.snapshot(theirs, uid, self.store.tz)
        base = item.base
        if item.sent is not None and objects.snapshot(item.sent, uid, self.store.tz) == server:
            base = item.sent  # the server holds our own push whose answer was lost: no one else changed it
        with self.store.transaction():
            self._merge_into_store(uid, base, theirs, server, report)
            self.state.saved(uid, collection, href, _header(response, "ETag"), theirs)
        queued = dict(self.state.queued())
        event = self.store.find_uid(uid)
        merged = self.state.item(uid)
        if uid in queued and event is not None and merged is not None:
            self._push_event(queued[uid], event, merged, report, retried=True)

    def _merge_into_store(self, uid: str, base: str | None, theirs: str, server: objects.Snapshot | None,
                          report: SyncReport) -> None:
        """Inside a transaction: the server's copy in, then the fields only we changed on top;
        each field both changed is recorded. Leaves the UID queued only if ours survived."""
        event = self.store.find_uid(uid)
        assert event is not None
        local = objects.event_snapshot(self.store, event)
        local_overrides = self.store.overrides(event.id) if event.is_series else []
        if server is None:
            report.skipped.append(f"{uid}: the server's copy cannot be read; kept ours")
            return
        result = merge(objects.snapshot(base, uid, self.store.tz), local, server)
        ics.import_bytes(self.store, theirs.encode())
        for name in result.conflicts:
            self.state.conflict(uid, event.title, name, local[name], server[name])
        report.conflicts += len(result.conflicts)
        if result.server_as_is:
            self.state.dequeue(uid)
            return
        merged = self.store.find_uid(uid)
        assert merged is not None
        changes: dict[str, Any] = {}
        if "title" in result.local_wins:
            changes["title"] = event.title
        if "location" in result.local_wins:
            changes["location"] = event.location
        if "notes" in result.local_wins:
            changes["notes"] = event.notes
        if "attendees" in result.local_wins:
            changes["attendees"] = list(event.attendees)
        if "transparent" in result.local_wins:
            changes["transparent"] = event.transparent
        if "when" in result.local_wins:
            changes.update(start=event.start, end=event.end, recurrence=event.recurrence, all_day=event.all_day)
        if changes:
            self.store.update_event(merged.id, **changes)
        if "occurrences" in result.local_wins:
            self.store.clear_overrides(merged.id)
            for moved in local_overrides:
                if moved.original_start is not None:
                    self.store.override_occurrence(merged.id, moved.original_start, title=moved.title, start=moved.start,
                                                   end=moved.end, location=moved.location, notes=moved.notes)

    def _push_deletion(self, uid: str, seq: int, item: Item, report: SyncReport) -> None:
        href = item.href
        response = self.connection.request(href, "DELETE", "", {"If-Match": item.etag} if item.etag else {})
        if response.status in (200, 204, 404, 410):
            with self.store.transaction():
                self.state.forget(uid)
                self.state.done(uid, seq)
            report.removed_there += 1
        elif response.status == 412:
            # changed on the phone after we last saw it, deleted here: the phone's copy comes back
            got = self.connection.request(href, "GET", "", {})
            if got.status == 200:
                theirs = self.gate.vetted(_body(got), href, uid, report.skipped)
                with self.store.transaction():
                    ics.import_bytes(self.store, theirs.encode())
                    restored = self.store.find_uid(uid)
                    self.state.conflict(uid, restored.title if restored else uid, "restored", None, None)
                    self.state.saved(uid, item.collection, href, _header(got, "ETag"), theirs)
                    self.state.dequeue(uid)
                report.conflicts += 1
                report.pulled += 1
            else:
                with self.store.transaction():
                    self.state.forget(uid)
                    self.state.done(uid, seq)
        else:
            self._refused(uid, href, response.status, report)

    def _refused(self, uid: str, href: str, status: int, report: SyncReport) -> None:
        """A status that is not the precondition's: the server's trouble stops the push (the
        queue waits); an object it will not take is named and the rest go on."""
        if status == 401:
            raise SyncFailed("auth", "the server refused the login (HTTP 401): check caldav_username and the password")
        if status == 507:
            raise SyncFailed("unreachable", "the server is out of space (HTTP 507 Insufficient Storage); changes stay queued")
        if status >= 500 or status == 429:
            raise SyncFailed("unreachable", f"the server failed (HTTP {status}); changes stay queued")
        why = f"the server refused it (HTTP {status})"
        self.state.failed(uid, why)
        event = self.store.find_uid(uid)
        report.skipped.append(f"'{event.title if event else uid}': {why}")
