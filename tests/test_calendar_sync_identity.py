"""CalDAV sync identity, attacked: one server object stands for one UID (and that UID's moved
occurrences), and one UID lives in one calendar.

Played the way an attacker would: against real Radicale and Xandikos on 127.0.0.1 (a phone client
writes straight to the server; a second calendar plays one shared with the user), and, because a
real server may check and refuse a PUT that carries two UIDs, through a proxy in front of
Radicale that serves a chosen object with a smuggled VEVENT added (``FaultProxy.rewrite``): a
server that does not check. After each attack the user's own event is unchanged here, and still
unchanged on the server after the next push; the refusal is named once in the chat (the lines
``SyncService.notices`` gives the REPL and the bot after a turn) and never again.
"""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Callable, Iterator
from zoneinfo import ZoneInfo

import pytest

from tests.caldav_servers import DavServer, FaultProxy, dav_proxy, start_server  # noqa: F401 (fixtures)
from tests.google_fakes import GoogleDav, dav_server, sync_account  # noqa: F401 (fixture: the servers and Google)
from tools.calendar import ics
from tools.calendar.store import CalendarStore, Event
from tools.calendar.sync.identity import vet
from tools.calendar.sync.service import SyncService
from tools.calendar.sync.settings import CalDAVSettings
from tools.calendar.sync.state import SyncState

ROOT = Path(__file__).resolve().parents[1]
SEOUL = ZoneInfo("Asia/Seoul")
T = datetime(2026, 12, 9, 14, tzinfo=SEOUL)
HOUR = timedelta(hours=1)
THESIS = "thesis-defense@example.com"
EVIL = "evil-1@attacker.example"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[CalendarStore]:
    with CalendarStore(tmp_path / "calendar.sqlite3", tz="Asia/Seoul") as s:
        yield s


@pytest.fixture
def radicale(tmp_path: Path) -> Iterator[DavServer]:
    server = start_server("radicale", tmp_path / "radicale")
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def lying(radicale: DavServer) -> Iterator[FaultProxy]:
    """Radicale behind a proxy that can serve what Radicale would never have taken."""
    proxy = FaultProxy(radicale)
    try:
        yield proxy
    finally:
        proxy.close()


def service(store: CalendarStore, server: DavServer, url: str, calendars: tuple[str, ...] = ()) -> SyncService:
    """What the REPL and the bot run (its thread not started: each test syncs when it wants)."""
    return SyncService(store, sync_account(server, url, calendars=calendars), CalDAVSettings())


def synced(sync: SyncService) -> Any:
    report = sync.engine.sync()
    assert report.ok, report.error
    return report


def refusals(sync: SyncService) -> list[str]:
    """The refusal lines the chat shows now (each line is told once, then marked told)."""
    return [line for line in sync.notices() if "refused" in line]


def vevent(uid: str | None, summary: str, start: str = "20261209T050000Z", end: str = "20261209T070000Z") -> list[str]:
    return ["BEGIN:VEVENT", *([f"UID:{uid}"] if uid is not None else []), "DTSTAMP:20261201T000000Z",
            f"DTSTART:{start}", f"DTEND:{end}", f"SUMMARY:{summary}", "END:VEVENT"]


def calendar_text(*vevents: list[str]) -> str:
    lines = ["BEGIN:VCALENDAR", "VERSION:2.0", "PRODID:-//attacker//EN"]
    for v in vevents:
        lines += v
    return "\r\n".join([*lines, "END:VCALENDAR", ""])


def thesis(store: CalendarStore) -> Event:
    """The user's own event, made here (14:00-16:00 Seoul, 05:00-07:00 UTC)."""
    return store.add_event("Thesis defense", T, T + 2 * HOUR, location="Hall B", uid=THESIS)


def thesis_on_the_phone(server: DavServer) -> None:
    """The user's own event, made on the phone in the personal calendar."""
    mine = vevent(THESIS, "Thesis defense")
    server.phone().save_event(ical=calendar_text([*mine[:-1], "LOCATION:Hall B", mine[-1]]))


def put_raw(server: DavServer, collection_url: str, name: str, body: str) -> int:
    """PUT ``body`` as it is (no client-side checks) on the server itself; its status."""
    from caldav.lib import error as dav_error

    if isinstance(server, GoogleDav):  # the sharer's PUT reaches the calendar itself, not through our front
        collection_url = server.direct(collection_url) or collection_url
    try:
        return int(server.client().request(collection_url + name, "PUT", body.encode(),
                                           {"Content-Type": "text/calendar; charset=utf-8"}).status)
    except dav_error.DAVError as exc:
        return int(getattr(exc, "status", 0) or 0)


def assert_unchanged_here_and_there(sync: SyncService, store: CalendarStore, server: DavServer,
                                    collection_url: str) -> None:
    """The user's event is as they made it here, nothing of it waits to go out, and the next
    push (a change of place) reaches the server with the title and time still theirs."""
    mine = store.find_uid(THESIS)
    assert mine is not None and (mine.title, mine.start, mine.end, mine.location) == (
        "Thesis defense", T, T + 2 * HOUR, "Hall B")
    assert THESIS not in [uid for uid, _seq in SyncState(store).queued()]
    store.update_event(mine.id, location="Room 301")
    assert synced(sync).pushed == 1
    theirs = server.phone(collection_url).event_by_uid(THESIS).icalendar_component
    assert (str(theirs["summary"]), str(theirs["location"])) == ("Thesis defense", "Room 301")
    assert theirs.decoded("dtstart") == T


def smuggle(marker: str, extra: list[str], before: bool = False) -> Callable[[str, str, bytes], bytes]:
    """A proxy edit: in any GET or REPORT answer holding ``marker`` (an object's UID line), the
    object carries ``extra`` too (after its own VEVENT, or ``before`` it), in the line ending the
    answer uses (a REPORT's XML may spell CR as ``&#13;``)."""

    def edit(method: str, path: str, body: bytes) -> bytes:
        text = body.decode("utf-8", "replace")
        at = text.find(marker)
        if method not in ("GET", "REPORT") or at < 0:
            return body
        begin = text.rfind("BEGIN:VEVENT", 0, at)
        close = text.find("END:VEVENT", at) + len("END:VEVENT")
        newline = text[close:text.find("END:VCALENDAR", close)]
        block = newline.join(extra) + newline
        where = begin if before else close + len(newline)
        return (text[:where] + block + text[where:]).encode()

    return edit


def strip_uid(marker: str) -> Callable[[str, str, bytes], bytes]:
    """A proxy edit: the object holding ``marker`` (its UID line) comes without that line."""

    def edit(method: str, path: str, body: bytes) -> bytes:
        text = body.decode("utf-8", "replace")
        at = text.find(marker)
        if method not in ("GET", "REPORT") or at < 0:
            return body
        return (text[:at] + text[text.find("\n", at) + 1:]).encode()

    return edit


# -- one object, one UID: a server that does not check (the proxy) ---------------------------------


@pytest.mark.parametrize("position", ["after", "before"])
def test_a_second_vevent_with_the_uid_of_the_users_event_changes_nothing_here_or_there(
        position: str, radicale: DavServer, lying: FaultProxy, store: CalendarStore) -> None:
    sync = service(store, radicale, lying.calendar_url)
    thesis(store)
    synced(sync)
    radicale.phone().save_event(ical=calendar_text(vevent(EVIL, "lunch", "20261210T030000Z", "20261210T040000Z")))
    lying.rewrite(smuggle(f"UID:{EVIL}", vevent(THESIS, "HACKED"), before=position == "before"))
    report = synced(sync)
    assert store.find_uid(THESIS).title == "Thesis defense"
    assert any("Thesis defense" in why for why in report.skipped)
    told = refusals(sync)
    assert len([line for line in told if "Thesis defense" in line]) == 1, told
    if position == "after":  # the object's own event still comes down
        assert store.find_uid(EVIL).title == "lunch" and len(told) == 1
    else:  # its first VEVENT names the user's event: that is the UID it claims, and that is taken
        assert store.find_uid(EVIL) is None
    again = synced(sync)  # served the same way at the next sync: not named again
    assert not any("refused" in why for why in again.skipped) and refusals(sync) == []
    assert_unchanged_here_and_there(sync, store, radicale, radicale.calendar_url)
    assert refusals(sync) == []


def test_a_vevent_without_a_uid_smuggled_into_an_object_is_refused_and_never_pushed(
        radicale: DavServer, lying: FaultProxy, store: CalendarStore) -> None:
    sync = service(store, radicale, lying.calendar_url)
    thesis(store)
    synced(sync)
    radicale.phone().save_event(ical=calendar_text(vevent(EVIL, "lunch", "20261210T030000Z", "20261210T040000Z")))
    lying.rewrite(smuggle(f"UID:{EVIL}", vevent(None, "Thesis defense moved to 3 AM")))
    report = synced(sync)
    assert sorted(e.title for e in store.all_events()) == ["Thesis defense", "lunch"]
    assert len([why for why in report.skipped if "without a UID" in why]) == 1
    assert len(refusals(sync)) == 1
    synced(sync)
    assert refusals(sync) == [] and len(radicale.phone().events()) == 2  # nothing made here went up
    assert_unchanged_here_and_there(sync, store, radicale, radicale.calendar_url)


def test_an_object_whose_only_vevent_has_no_uid_is_refused_and_named_once(
        radicale: DavServer, lying: FaultProxy, store: CalendarStore) -> None:
    sync = service(store, radicale, lying.calendar_url)
    thesis(store)
    synced(sync)
    radicale.phone().save_event(ical=calendar_text(vevent(EVIL, "planted", "20261210T030000Z", "20261210T040000Z")))
    lying.rewrite(strip_uid(f"UID:{EVIL}"))
    synced(sync)
    assert [e.title for e in store.all_events()] == ["Thesis defense"]
    assert len(refusals(sync)) == 1
    synced(sync)
    assert refusals(sync) == []
    assert_unchanged_here_and_there(sync, store, radicale, radicale.calendar_url)


def test_a_smuggled_vevent_in_the_copy_fetched_to_merge_a_412_leaves_the_other_event_alone(
        radicale: DavServer, lying: FaultProxy, store: CalendarStore) -> None:
    """The push meets a change made on the phone (412) and fetches the server's copy with a GET:
    that copy carries another of the user's events, retitled. Only the pushed event is merged."""
    sync = service(store, radicale, lying.calendar_url)
    thesis(store)
    dentist = store.add_event("Dentist", T + 24 * HOUR, T + 25 * HOUR, uid="dentist@example.com")
    synced(sync)
    obj = radicale.phone().event_by_uid(dentist.uid)
    obj.icalendar_component["location"] = "Gangnam"
    obj.save(increase_seqno=False)
    store.update_event(dentist.id, notes="bring the card")
    lying.rewrite(smuggle("UID:dentist@example.com", vevent(THESIS, "HACKED")))
    report = synced(sync)
    merged = store.find_uid(dentist.uid)
    assert (merged.location, merged.notes) == ("Gangnam", "bring the card") and report.pushed == 1
    assert len([line for line in refusals(sync) if "Thesis defense" in line]) == 1
    lying.rewrite(None)
    assert_unchanged_here_and_there(sync, store, radicale, radicale.calendar_url)


def test_the_attack_through_the_command_line_names_the_refusal_once_and_changes_nothing(
        radicale: DavServer, lying: FaultProxy, tmp_path: Path) -> None:
    """The attack as found: `python -m agent calendar sync` against a server serving the object."""
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("AGENT_", "TELEGRAM_"))},
           "AGENT_DATA_DIR": str(tmp_path / "data"), "AGENT_CALDAV_URL": lying.calendar_url,
           "AGENT_CALDAV_USERNAME": radicale.username,
           "AGENT_CALDAV_PASSWORD_FILE": str(radicale.password_file(tmp_path))}
    (tmp_path / "data").mkdir()
    with CalendarStore(tmp_path / "data" / "calendar.sqlite3") as store:
        thesis(store)

    def cli_sync() -> str:
        done = subprocess.run([sys.executable, "-m", "agent", "calendar", "sync"], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=180)
        assert done.returncode == 0, done.stderr
        return done.stdout

    cli_sync()
    radicale.phone().save_event(ical=calendar_text(vevent(EVIL, "lunch", "20261210T030000Z", "20261210T040000Z")))
    lying.rewrite(smuggle(f"UID:{EVIL}", vevent(THESIS, "HACKED")))
    first, second = cli_sync(), cli_sync()
    assert first.count("refused") == 1 and "Thesis defense" in first and "refused" not in second
    with CalendarStore(tmp_path / "data" / "calendar.sqlite3") as store:
        assert store.find_uid(THESIS).title == "Thesis defense"
        assert SyncState(store).queued() == []
    assert str(radicale.phone().event_by_uid(THESIS).icalendar_component["summary"]) == "Thesis defense"


def test_a_refusal_names_what_it_refused_without_the_controls_in_it(
        radicale: DavServer, lying: FaultProxy, store: CalendarStore) -> None:
    """The refused UID is the attacker's text: an RLO in it would show the chat line reversed."""
    sync = service(store, radicale, lying.calendar_url)
    synced(sync)
    radicale.phone().save_event(ical=calendar_text(vevent(EVIL, "lunch", "20261210T030000Z", "20261210T040000Z")))
    lying.rewrite(smuggle(f"UID:{EVIL}", vevent("evil-2\u202e@attacker.example", "HACKED")))
    synced(sync)
    [line] = refusals(sync)
    assert "evil-2" in line and "\u202e" not in line and "\x1b" not in line


# -- one object, one UID: real servers -------------------------------------------------------------


# Measured (Radicale 3.9.0, Xandikos 0.4.10): Radicale refuses an object with a second UID or a
# VEVENT without one (400); Xandikos stores and serves it as it came (201).
TAKES_WHAT_IT_GETS = {"radicale": False, "xandikos": True, "google": False}  # "google" is Radicale behind the front


@pytest.mark.parametrize("extra", [vevent(THESIS, "HACKED"), vevent(None, "planted")], ids=["second-uid", "no-uid"])
def test_an_object_with_a_second_uid_or_none_put_on_a_real_server_changes_nothing(
        extra: list[str], dav_server: DavServer, store: CalendarStore) -> None:
    """The attack put on the real server with a raw PUT. Xandikos takes it, so there it is the
    sync that must refuse it; Radicale refuses it itself (pinned here: the proxy plays a server
    that does not)."""
    sync = service(store, dav_server, dav_server.calendar_url)
    thesis(store)
    synced(sync)
    status = put_raw(dav_server, dav_server.calendar_url, "evil-1.ics",
                     calendar_text(vevent(EVIL, "lunch", "20261210T030000Z", "20261210T040000Z"), extra))
    report = synced(sync)
    if TAKES_WHAT_IT_GETS[dav_server.kind]:
        assert status in (201, 204)
        assert len([why for why in report.skipped if "refused" in why]) == 1 and len(refusals(sync)) == 1
        assert store.find_uid(EVIL).title == "lunch" and len(store.all_events()) == 2
    else:
        assert status == 400 and report.skipped == [] and refusals(sync) == []
    assert store.find_uid(THESIS).title == "Thesis defense"
    synced(sync)
    assert refusals(sync) == []
    assert_unchanged_here_and_there(sync, store, dav_server, dav_server.calendar_url)


# -- one UID, one calendar --------------------------------------------------------------------------


@pytest.mark.parametrize("order", [("Calendar", "Shared"), ("Shared", "Calendar")], ids=["personal-first", "shared-first"])
def test_a_shared_calendar_reusing_the_uid_of_a_personal_event_cannot_touch_it(
        order: tuple[str, str], dav_server: DavServer, store: CalendarStore) -> None:
    shared_url = dav_server.make_calendar("Shared", "shared")
    sync = service(store, dav_server, dav_server.url, calendars=order)
    thesis_on_the_phone(dav_server)
    synced(sync)
    assert store.find_uid(THESIS).title == "Thesis defense"
    dav_server.phone(shared_url).save_event(ical=calendar_text(vevent(THESIS, "HACKED")))
    report = synced(sync)
    assert store.find_uid(THESIS).title == "Thesis defense"
    told = refusals(sync)
    assert len(told) == 1 and "Thesis defense" in told[0] and "Shared" in told[0] and len(report.skipped) == 1
    dav_server.phone(shared_url).event_by_uid(THESIS).delete()  # nor can its deletion there
    synced(sync)
    assert refusals(sync) == []
    assert_unchanged_here_and_there(sync, store, dav_server, dav_server.calendar_url)


def test_a_local_event_not_yet_pushed_cannot_be_taken_by_a_shared_calendar(
        dav_server: DavServer, dav_proxy: FaultProxy, store: CalendarStore) -> None:
    """Made here, its first PUT refused (403): it belongs to the first calendar, where its push
    goes. The shared calendar's object with its UID is refused; the next push takes it home."""
    shared_url = dav_server.make_calendar("Shared", "shared")
    sync = service(store, dav_server, dav_proxy.url, calendars=("Calendar", "Shared"))
    synced(sync)
    thesis(store)
    dav_server.phone(shared_url).save_event(ical=calendar_text(vevent(THESIS, "HACKED")))
    dav_proxy.fail(403, methods={"PUT"}, times=1)
    report = sync.engine.sync()
    assert report.ok and report.pushed == 0
    assert store.find_uid(THESIS).title == "Thesis defense"
    assert [uid for uid, _seq in SyncState(store).queued()] == [THESIS]
    assert len([line for line in refusals(sync) if "Thesis defense" in line]) == 1
    assert synced(sync).pushed == 1
    assert refusals(sync) == []
    assert str(dav_server.phone(shared_url).event_by_uid(THESIS).icalendar_component["summary"]) == "HACKED"
    assert_unchanged_here_and_there(sync, store, dav_server, dav_server.calendar_url)


def test_a_local_event_not_yet_pushed_meeting_its_uid_in_its_own_calendar_is_merged_and_the_difference_told(
        dav_server: DavServer, dav_proxy: FaultProxy, store: CalendarStore) -> None:
    """The decision documented in ``identity.Gate.claim``: the same UID in the calendar the event
    is pushed to is the same event made on both sides; the server's differing fields are kept,
    ours recorded and told once, as a conflict (not a refusal)."""
    sync = service(store, dav_server, dav_proxy.url, calendars=("Calendar",))
    synced(sync)
    thesis(store)
    dav_server.phone().save_event(ical=calendar_text(vevent(THESIS, "Thesis defense (room 301)")))
    dav_proxy.fail(403, methods={"PUT"}, times=1)
    assert sync.engine.sync().ok  # the push refused; the pull meets the phone's copy (merged now, or ...
    synced(sync)  # ... when the push meets it: 412 where the phone put it at the same address)
    assert store.find_uid(THESIS).title == "Thesis defense (room 301)" and SyncState(store).queued() == []
    told = sync.notices()
    assert not any("refused" in line for line in told)
    assert len([line for line in told if "kept the phone's title Thesis defense (room 301)" in line]) == 1
    assert sync.notices() == []


@pytest.mark.parametrize("order", [("Calendar", "Shared"), ("Shared", "Calendar")], ids=["personal-first", "shared-first"])
def test_an_event_the_user_moves_to_another_calendar_on_the_phone_follows_it(
        order: tuple[str, str], dav_server: DavServer, store: CalendarStore) -> None:
    """A move is a deletion in one calendar and the same UID in the other: not an attack (the
    shared calendar cannot delete what the personal one holds), so nothing is refused."""
    shared_url = dav_server.make_calendar("Shared", "shared")
    sync = service(store, dav_server, dav_server.url, calendars=order)
    thesis_on_the_phone(dav_server)
    synced(sync)
    moved = dav_server.phone().event_by_uid(THESIS)
    body = moved.data
    moved.delete()
    dav_server.phone(shared_url).save_event(ical=body)
    synced(sync)
    assert store.find_uid(THESIS).title == "Thesis defense" and sync.notices() == []
    assert SyncState(store).item(THESIS).collection.rstrip("/").endswith("shared")
    assert_unchanged_here_and_there(sync, store, dav_server, shared_url)


# -- the cut itself ---------------------------------------------------------------------------------


def test_a_vevent_hidden_inside_another_component_is_cut_too(store: CalendarStore) -> None:
    """The import walks every depth of an object, so the cut does too."""
    thesis(store)
    hidden = ["BEGIN:X-WRAPPER", *vevent(THESIS, "HACKED"), "END:X-WRAPPER"]
    text = calendar_text(vevent(EVIL, "lunch", "20261210T030000Z", "20261210T040000Z"), hidden)
    vetted = vet(text, "evil-1.ics")
    assert vetted.uid == EVIL and [r.uid for r in vetted.refused] == [THESIS]
    ics.import_bytes(store, vetted.text.encode())
    assert store.find_uid(THESIS).title == "Thesis defense" and store.find_uid(EVIL).title == "lunch"


def test_an_object_with_nothing_to_cut_is_passed_on_byte_for_byte() -> None:
    """What the server sent stays the merge's ancestor as it was: nothing is re-serialized."""
    text = calendar_text(vevent(EVIL, "lunch"), ["BEGIN:VEVENT", f"UID:{EVIL}", "RECURRENCE-ID:20261209T050000Z",
                                                  "DTSTAMP:20261201T000000Z", "SUMMARY:moved", "END:VEVENT"])
    vetted = vet(text, "evil-1.ics")
    assert (vetted.text, vetted.refused, vetted.holds_own) == (text, (), True)


@pytest.mark.parametrize("uid_lines", [["UID:  spaced@example.com  "], ["UID:first@example.com", "UID:second@example.com"],
                                       ["UID;VALUE=DURATION:P1D"]], ids=["spaces", "repeated", "typed"])
def test_the_cut_reads_a_uid_exactly_as_the_import_does(uid_lines: list[str], store: CalendarStore) -> None:
    """Were they to disagree, a VEVENT the cut takes for the object's own could be imported
    under another event's UID."""
    text = calendar_text(["BEGIN:VEVENT", *uid_lines, *vevent(None, "x")[1:]])
    vetted = vet(text, "a.ics")
    ics.import_bytes(store, text.encode())
    [event] = store.all_events()
    assert vetted.uid == event.uid and vetted.refused == ()
