"""Two-way CalDAV sync against real servers: Radicale and Xandikos, started on 127.0.0.1 with
htpasswd auth (``tests.caldav_servers``), and "Google": Radicale behind a front that takes only
OAuth bearer tokens from a fake Google sign-in server (``tests.google_fakes``), the whole suite
once more with the token renewed as Google's would need. A second ``caldav`` client plays the
phone: it edits, deletes and creates straight on the server. Failures come from a fault proxy in
front of the server (down, 5xx, 507, 401/403, a held answer) and from real kill -9s of a syncing
process.
"""

from __future__ import annotations

import base64
import os
import signal
import subprocess
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Iterator
from zoneinfo import ZoneInfo

import icalendar
import pytest

from tests.caldav_servers import DavServer, FaultProxy, dav_proxy  # noqa: F401 (fixtures)
from tests.google_fakes import GoogleDav, dav_server, sync_account as account  # noqa: F401 (fixture: the servers and Google)
from tools.calendar.store import CalendarStore
from tools.calendar.sync.engine import CalDAVSync
from tools.calendar.sync.settings import Account
from tools.calendar.sync.state import SyncState

ROOT = Path(__file__).resolve().parents[1]
SEOUL = ZoneInfo("Asia/Seoul")
T = datetime(2026, 12, 7, 10, tzinfo=SEOUL)  # a Monday
HOUR = timedelta(hours=1)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[CalendarStore]:
    with CalendarStore(tmp_path / "calendar.sqlite3", tz="Asia/Seoul") as s:
        yield s




def engine(store: CalendarStore, server: DavServer, url: str | None = None, password: str | None = None) -> CalDAVSync:
    return CalDAVSync(store, account(server, url, password))


def synced(sync: CalDAVSync) -> Any:
    report = sync.sync()
    assert report.ok, report.error
    return report


def phone_event(server: DavServer, uid: str) -> icalendar.Event:
    return server.phone().event_by_uid(uid).icalendar_component


def phone_edit(server: DavServer, uid: str, **props: Any) -> None:
    obj = server.phone().event_by_uid(uid)
    component = obj.icalendar_component
    for name, value in props.items():
        if name in component:
            del component[name]
        component.add(name, value)
    obj.save(increase_seqno=False)


def phone_uids(server: DavServer) -> list[str]:
    return sorted(str(e.icalendar_component["uid"]) for e in server.phone().events())


def occurrences(store: CalendarStore) -> list[tuple[str, datetime, datetime]]:
    return [(e.title, e.start, e.end) for e in store.events_between(T - timedelta(days=1), T + timedelta(days=70))]


# -- up and down ---------------------------------------------------------------------------------


def test_a_local_create_update_and_delete_reach_the_server(dav_server: DavServer, store: CalendarStore) -> None:
    sync = engine(store, dav_server)
    event = store.add_event("치과", T, T + HOUR, location="Gangnam")
    assert synced(sync).pushed == 1
    assert str(phone_event(dav_server, event.uid)["summary"]) == "치과"
    store.update_event(event.id, title="치과 예약", start=T + 2 * HOUR, end=T + 3 * HOUR)
    assert synced(sync).pushed == 1
    theirs = phone_event(dav_server, event.uid)
    assert str(theirs["summary"]) == "치과 예약"
    assert theirs.decoded("dtstart") == T + 2 * HOUR
    store.delete_event(event.id)
    assert synced(sync).removed_there == 1
    assert phone_uids(dav_server) == []
    assert SyncState(store).queued() == []


def test_a_phone_edit_delete_and_create_come_down(dav_server: DavServer, store: CalendarStore) -> None:
    sync = engine(store, dav_server)
    kept = store.add_event("팀 회의", T, T + HOUR)
    gone = store.add_event("점심", T + 3 * HOUR, T + 4 * HOUR)
    synced(sync)
    phone_edit(dav_server, kept.uid, summary="팀 회의 (3층)", dtstart=T + HOUR, dtend=T + 2 * HOUR)
    dav_server.phone().event_by_uid(gone.uid).delete()
    dav_server.phone().save_event(dtstart=T + timedelta(days=1), dtend=T + timedelta(days=1) + HOUR,
                                  summary="from the phone", uid="phone-made-1@example.com")
    report = synced(sync)
    assert (report.pulled, report.removed_here, report.pushed) == (2, 1, 0)
    assert store.get_event(kept.id).title == "팀 회의 (3층)"
    assert store.get_event(kept.id).start == T + HOUR
    assert store.get_event(gone.id) is None
    made = store.find_uid("phone-made-1@example.com")
    assert made is not None and made.title == "from the phone"
    assert SyncState(store).queued() == []  # what came down is not sent back up
    assert synced(sync).pushed == 0


def test_a_series_with_an_exdate_and_a_moved_occurrence_round_trips(dav_server: DavServer, tmp_path: Path,
                                                                     store: CalendarStore) -> None:
    series = store.add_event("요가", T, T + HOUR, recurrence="RRULE:FREQ=WEEKLY;COUNT=8")
    store.cancel_occurrence(series.id, T + timedelta(days=7))
    store.override_occurrence(series.id, T + timedelta(days=14), title="요가 (야외)",
                              start=T + timedelta(days=15), end=T + timedelta(days=15) + HOUR)
    synced(engine(store, dav_server))
    components = list(icalendar.Calendar.from_ical(
        dav_server.phone().event_by_uid(series.uid).data).walk("VEVENT"))
    assert sum("recurrence-id" in c for c in components) == 1
    master = next(c for c in components if "recurrence-id" not in c)
    assert "RRULE" in master and "EXDATE" in master
    with CalendarStore(tmp_path / "elsewhere.sqlite3", tz="Asia/Seoul") as other:
        synced(engine(other, dav_server))
        assert occurrences(other) == occurrences(store)
        assert len(occurrences(other)) == 7


def test_a_valarm_set_on_the_phone_survives_our_title_edit(dav_server: DavServer, store: CalendarStore) -> None:
    sync = engine(store, dav_server)
    event = store.add_event("치과", T, T + HOUR)
    synced(sync)
    obj = dav_server.phone().event_by_uid(event.uid)
    alarm = icalendar.Alarm()
    alarm.add("action", "DISPLAY")
    alarm.add("description", "치과")
    alarm.add("trigger", timedelta(minutes=-30))
    obj.icalendar_component.add_component(alarm)
    obj.icalendar_component.add("x-phone-color", "red")
    obj.save(increase_seqno=False)
    synced(sync)  # the alarm comes down
    store.update_event(event.id, title="치과 예약")
    assert synced(sync).pushed == 1
    theirs = phone_event(dav_server, event.uid)
    assert str(theirs["summary"]) == "치과 예약"
    alarms = theirs.walk("VALARM")
    assert len(alarms) == 1 and alarms[0].decoded("trigger") == timedelta(minutes=-30)
    assert str(theirs["x-phone-color"]) == "red"


def test_an_attendees_parameters_from_the_phone_survive_our_edit(dav_server: DavServer, store: CalendarStore) -> None:
    sync = engine(store, dav_server)
    cal = icalendar.Calendar()
    cal.add("prodid", "-//phone//EN")
    cal.add("version", "2.0")
    vevent = icalendar.Event()
    vevent.add("uid", "with-bob@example.com")
    vevent.add("summary", "1:1")
    vevent.add("dtstart", T)
    vevent.add("dtend", T + HOUR)
    bob = icalendar.vCalAddress("mailto:bob@example.com")
    bob.params["CN"] = "Bob"
    bob.params["PARTSTAT"] = "ACCEPTED"
    vevent.add("attendee", bob, encode=False)
    cal.add_component(vevent)
    dav_server.phone().save_event(ical=cal.to_ical().decode())
    synced(sync)
    local = store.find_uid("with-bob@example.com")
    assert local is not None and local.attendees == ("Bob",)
    store.update_event(local.id, title="1:1 with Bob")
    synced(sync)
    attendee = phone_event(dav_server, "with-bob@example.com")["attendee"]
    assert str(attendee) == "mailto:bob@example.com"
    assert attendee.params["PARTSTAT"] == "ACCEPTED"


# -- conflicts -------------------------------------------------------------------------------------


def test_changes_to_different_fields_on_both_sides_are_merged(dav_server: DavServer, store: CalendarStore) -> None:
    sync = engine(store, dav_server)
    event = store.add_event("치과", T, T + HOUR)
    synced(sync)
    phone_edit(dav_server, event.uid, summary="치과 (phone)")
    store.update_event(event.id, location="Gangnam")
    report = synced(sync)
    assert report.conflicts == 0
    here = store.get_event(event.id)
    assert (here.title, here.location) == ("치과 (phone)", "Gangnam")
    theirs = phone_event(dav_server, event.uid)
    assert (str(theirs["summary"]), str(theirs["location"])) == ("치과 (phone)", "Gangnam")
    assert SyncState(store).queued() == []


def test_the_same_field_changed_on_both_sides_keeps_the_phones_and_records_ours(
        dav_server: DavServer, store: CalendarStore) -> None:
    from tools.calendar.sync.service import SyncService
    from tools.calendar.sync.settings import CalDAVSettings

    event = store.add_event("치과", T, T + HOUR)
    service = SyncService(store, account(dav_server), CalDAVSettings(caldav_interval_s=3600))
    try:
        assert synced(service.engine).pushed == 1
        phone_edit(dav_server, event.uid, dtstart=T + 5 * HOUR, dtend=T + 6 * HOUR)  # 15:00 on the phone
        store.update_event(event.id, start=T + 6 * HOUR, end=T + 7 * HOUR)  # 16:00 here
        report = synced(service.engine)
        assert report.conflicts == 1
        assert store.get_event(event.id).start == T + 5 * HOUR
        assert phone_event(dav_server, event.uid).decoded("dtstart") == T + 5 * HOUR
        [kept] = service.engine.state.conflicts()
        assert kept.field == "when"
        told = service.notices()
        assert len(told) == 1 and "kept the phone's time 12-07 15:00; mine was 12-07 16:00" in told[0]
        assert service.notices() == []  # told once
    finally:
        service.close()


def test_an_event_deleted_on_the_phone_while_changed_here_is_deleted_and_our_change_kept(
        dav_server: DavServer, store: CalendarStore) -> None:
    sync = engine(store, dav_server)
    event = store.add_event("치과", T, T + HOUR)
    synced(sync)
    dav_server.phone().event_by_uid(event.uid).delete()
    store.update_event(event.id, title="치과 (moved)")
    report = synced(sync)
    assert store.get_event(event.id) is None
    [kept] = SyncState(store).conflicts()
    assert kept.field == "deleted" and "치과 (moved)" in (kept.local_value or "")
    assert report.conflicts == 1 and phone_uids(dav_server) == []


# -- failures ----------------------------------------------------------------------------------------


def test_a_server_that_is_down_keeps_the_queue_and_gets_everything_once_back(
        dav_server: DavServer, dav_proxy: FaultProxy, store: CalendarStore) -> None:
    sync = engine(store, dav_server, url=dav_proxy.calendar_url)
    synced(sync)
    dav_proxy.down()
    made = [store.add_event(f"event {i}", T + i * HOUR, T + (i + 1) * HOUR) for i in range(3)]
    report = sync.sync()
    assert not report.ok and report.kind == "unreachable" and "\n" not in report.line()
    status = SyncState(store).status()
    assert status.offline_since is not None and status.queued == 3
    assert sync.sync().kind == "unreachable"  # a second failure keeps the first moment of the outage
    assert SyncState(store).status().offline_since == status.offline_since
    dav_proxy.up()
    assert synced(sync).pushed == 3
    assert synced(sync).pushed == 0
    assert phone_uids(dav_server) == sorted(e.uid for e in made)
    assert SyncState(store).status().offline_since is None


@pytest.mark.parametrize("status", [500, 503, 507])
def test_a_server_error_or_a_full_disk_keeps_the_change_queued(
        status: int, dav_server: DavServer, dav_proxy: FaultProxy, store: CalendarStore) -> None:
    sync = engine(store, dav_server, url=dav_proxy.calendar_url)
    synced(sync)
    event = store.add_event("치과", T, T + HOUR)
    dav_proxy.fail(status, methods={"PUT"}, times=1)
    report = sync.sync()
    assert report.kind == "unreachable" and str(status) in report.error
    assert [m for m, *_ in dav_proxy.requests].count("PUT") == 1  # no retry storm
    assert SyncState(store).queued()[0][0] == event.uid
    assert synced(sync).pushed == 1
    assert phone_uids(dav_server) == [event.uid]


@pytest.mark.parametrize("status", [401, 403])
def test_a_refused_login_is_one_line_without_retries_and_never_shows_the_password(
        status: int, dav_server: DavServer, dav_proxy: FaultProxy, store: CalendarStore,
        caplog: pytest.LogCaptureFixture) -> None:
    secret = "s3cret-Passw0rd-xyz"
    sync = engine(store, dav_server, url=dav_proxy.calendar_url, password=secret)
    store.add_event("치과", T, T + HOUR)
    dav_proxy.fail(status)
    with caplog.at_level("DEBUG"):
        report = sync.sync()
    assert report.kind == "auth" and "refused the login" in report.line()
    assert len(dav_proxy.requests) == 1
    assert secret not in report.line() and secret not in caplog.text
    basic = base64.b64encode(f"{dav_server.username}:{secret}".encode()).decode()
    assert basic not in caplog.text  # nor as the Authorization header a debug log could quote
    assert secret not in (SyncState(store).status().last_error or "")
    assert SyncState(store).status().queued == 1


def test_a_wrong_password_against_the_real_server_is_refused(dav_server: DavServer, store: CalendarStore) -> None:
    report = engine(store, dav_server, password="not-the-password").sync()
    assert report.kind == "auth"


def test_an_event_the_server_holds_that_cannot_be_read_is_named_and_the_rest_come_down(
        dav_server: DavServer, store: CalendarStore) -> None:
    too_long = (
        "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//phone//EN\r\nBEGIN:VEVENT\r\nUID:too-long@example.com\r\n"
        "DTSTAMP:20261201T000000Z\r\nDTSTART:20261207T010000Z\r\nDTEND:20291207T010000Z\r\nSUMMARY:three years\r\n"
        "END:VEVENT\r\nEND:VCALENDAR\r\n"
    )
    dav_server.phone().save_event(ical=too_long)
    dav_server.phone().save_event(dtstart=T, dtend=T + HOUR, summary="fine", uid="fine@example.com")
    report = synced(engine(store, dav_server))
    assert store.find_uid("fine@example.com") is not None
    assert store.find_uid("too-long@example.com") is None
    assert any("three years" in why or "too-long" in why for why in report.skipped)


# -- crashes and a second process -------------------------------------------------------------------

SYNC_SCRIPT = """
import sys
from tools.calendar.store import CalendarStore
from tools.calendar.sync.engine import CalDAVSync
from tools.calendar.sync.settings import Account
from tools.calendar.sync.settings import read_password_file
from pathlib import Path
from tools.calendar.sync.google_token import GoogleToken
store = CalendarStore(sys.argv[1], tz="Asia/Seoul")
if sys.argv[3] == "--google":
    token = GoogleToken(Path(sys.argv[4]))
    account = Account(sys.argv[2], token.account, "", timeout_s=30, token=token)
else:
    account = Account(sys.argv[2], sys.argv[3], read_password_file(Path(sys.argv[4])), timeout_s=30)
report = CalDAVSync(store, account).sync()
print(report.line())
"""


def start_sync_process(store_path: Path, url: str, server: DavServer) -> subprocess.Popen[str]:
    """A separate process syncing ``store_path`` (the password or the Google sign-in from a 0600
    file, never argv; the child inherits the sign-in CA through REQUESTS_CA_BUNDLE)."""
    if isinstance(server, GoogleDav):
        who, secret_file = "--google", server.grant_file(store_path.parent / "signin")
    else:
        who, secret_file = server.username, server.password_file(store_path.parent)
    return subprocess.Popen([sys.executable, "-c", SYNC_SCRIPT, str(store_path), url, who, str(secret_file)],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def kill_when_held(process: subprocess.Popen[str], proxy: FaultProxy, method: str) -> None:
    deadline = time.monotonic() + 60
    while not any(m == method for m, _ in proxy.held):
        assert process.poll() is None, process.stderr.read() if process.stderr else ""
        assert time.monotonic() < deadline, "the sync process never reached the held request"
        time.sleep(0.05)
    os.kill(process.pid, signal.SIGKILL)
    process.wait(timeout=30)


def test_kill_9_after_the_server_took_a_push_makes_no_second_copy(
        dav_server: DavServer, dav_proxy: FaultProxy, tmp_path: Path) -> None:
    path = tmp_path / "calendar.sqlite3"
    with CalendarStore(path, tz="Asia/Seoul") as store:
        event = store.add_event("치과", T, T + HOUR)
        store.add_event("점심", T + 3 * HOUR, T + 4 * HOUR)
    dav_proxy.hold_answer(25, methods={"PUT"}, times=1)  # the server stores it; the answer never arrives
    kill_when_held(start_sync_process(path, dav_proxy.calendar_url, dav_server), dav_proxy, "PUT")
    dav_proxy.clear()
    with CalendarStore(path, tz="Asia/Seoul") as store:
        store.update_event(event.id, location="Gangnam")  # and a change made after the crash
        synced(engine(store, dav_server, url=dav_proxy.calendar_url))
        assert len(phone_uids(dav_server)) == 2 == len(set(phone_uids(dav_server)))
        assert str(phone_event(dav_server, event.uid)["location"]) == "Gangnam"
        assert SyncState(store).queued() == [] and len(store.all_events()) == 2


def test_kill_9_in_the_middle_of_a_pull_leaves_no_duplicate(
        dav_server: DavServer, dav_proxy: FaultProxy, tmp_path: Path) -> None:
    from tools.calendar.sync.engine import MULTIGET_BATCH

    phone = dav_server.phone()
    count = MULTIGET_BATCH + 20  # two calendar-multiget requests: the second one's answer is held
    for i in range(count):
        phone.save_event(dtstart=T + i * HOUR, dtend=T + i * HOUR + timedelta(minutes=30), summary=f"p{i}",
                         uid=f"p{i}@example.com")
    path = tmp_path / "calendar.sqlite3"
    CalendarStore(path, tz="Asia/Seoul").close()
    dav_proxy.hold_answer(25, methods={"REPORT"}, times=1, skip=2)  # sync-collection, multiget 1 pass
    kill_when_held(start_sync_process(path, dav_proxy.calendar_url, dav_server), dav_proxy, "REPORT")
    dav_proxy.clear()
    with CalendarStore(path, tz="Asia/Seoul") as store:
        partial = len(store.all_events())
        assert 0 < partial < count  # killed half-way through applying
        report = synced(engine(store, dav_server, url=dav_proxy.calendar_url))
        uids = [e.uid for e in store.all_events()]
        assert len(uids) == count == len(set(uids))
        assert report.pushed == 0 and SyncState(store).queued() == []
    assert len(phone_uids(dav_server)) == count


def test_two_processes_syncing_at_once_make_no_duplicate_and_lose_no_change(
        dav_server: DavServer, tmp_path: Path) -> None:
    path = tmp_path / "calendar.sqlite3"
    with CalendarStore(path, tz="Asia/Seoul") as store:
        made = [store.add_event(f"event {i}", T + i * HOUR, T + (i + 1) * HOUR) for i in range(6)]
    first, second = (start_sync_process(path, dav_server.calendar_url, dav_server) for _ in range(2))
    outputs = [p.communicate(timeout=120) for p in (first, second)]
    assert [p.returncode for p in (first, second)] == [0, 0], outputs
    assert all(out.startswith("pulled") for out, _err in outputs), outputs  # both finished, one after the other
    assert phone_uids(dav_server) == sorted(e.uid for e in made)
    with CalendarStore(path, tz="Asia/Seoul") as store:
        assert SyncState(store).queued() == []


# -- cost ----------------------------------------------------------------------------------------------


def test_an_incremental_sync_with_one_change_costs_at_most_three_requests(
        dav_server: DavServer, dav_proxy: FaultProxy, store: CalendarStore) -> None:
    sync = engine(store, dav_server, url=dav_proxy.calendar_url)
    made = [store.add_event(f"event {i}", T + i * HOUR, T + (i + 1) * HOUR) for i in range(20)]
    synced(sync)
    phone_edit(dav_server, made[7].uid, summary="changed on the phone")
    dav_proxy.reset_counts()
    report = synced(sync)
    assert report.pulled == 1 and store.get_event(made[7].id).title == "changed on the phone"
    assert len(dav_proxy.requests) <= 3, dav_proxy.requests
    assert report.requests == len(dav_proxy.requests)
    dav_proxy.reset_counts()
    assert synced(sync).pulled == 0 and len(dav_proxy.requests) == 1  # nothing changed: one REPORT


# -- quirks of servers we cannot run here (from the caldav library's compatibility notes) -----------


def test_a_put_the_server_forbids_names_that_event_and_the_rest_go_out(
        dav_server: DavServer, dav_proxy: FaultProxy, store: CalendarStore) -> None:
    """iCloud answers 403 to a UID another of the user's calendars holds (the library's hints:
    save.duplicate-uid.cross-calendar); a read-only calendar does the same. That is the object
    refused, not the login: it is named, stays queued, and the other changes go out."""
    sync = engine(store, dav_server, url=dav_proxy.calendar_url)
    synced(sync)
    refused = store.add_event("refused", T, T + HOUR)
    fine = store.add_event("fine", T + 2 * HOUR, T + 3 * HOUR)
    first = SyncState(store).queued()[0][0]
    dav_proxy.fail(403, methods={"PUT"}, times=1)
    report = synced(sync)
    assert report.pushed == 1 and len(report.skipped) == 1 and "HTTP 403" in report.skipped[0]
    assert phone_uids(dav_server) == [fine.uid if first == refused.uid else refused.uid]
    assert [uid for uid, _seq in SyncState(store).queued()] == [first]


def test_a_sync_report_that_lists_the_collection_itself_is_not_taken_for_an_event(
        dav_server: DavServer, store: CalendarStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """iCloud ignores DAV:limit and lists the collection itself as a member of a sync report
    (the library's hints: sync-token.limit). Played here by adding the collection to what the
    real server's report returned."""
    sync = engine(store, dav_server)
    [calendar] = sync.connection.collections()
    real = calendar.get_objects_by_sync_token

    def with_itself(*args: Any, **kwargs: Any) -> Any:
        result = real(*args, **kwargs)
        result.objects = [*result.objects, calendar]
        return result

    monkeypatch.setattr(calendar, "get_objects_by_sync_token", with_itself)
    dav_server.phone().save_event(dtstart=T, dtend=T + HOUR, summary="from the phone", uid="phone-2@example.com")
    report = synced(sync)
    assert report.pulled == 1 and report.skipped == [] and [e.title for e in store.all_events()] == ["from the phone"]


# -- which calendars ------------------------------------------------------------------------------


def test_from_the_server_root_the_event_calendars_are_found_and_a_task_list_left_out(
        dav_server: DavServer, store: CalendarStore) -> None:
    principal = dav_server.client().principal()
    principal.make_calendar(name="Reminders", cal_id="reminders", supported_calendar_component_set=["VTODO"])
    sync = engine(store, dav_server, url=dav_server.url)
    event = store.add_event("치과", T, T + HOUR)
    assert synced(sync).pushed == 1
    assert [str(c.url) for c in sync.connection.collections()] == [dav_server.calendar_url]
    assert phone_uids(dav_server) == [event.uid]


def test_calendars_are_chosen_by_name_and_an_unknown_name_is_one_line(dav_server: DavServer,
                                                                      store: CalendarStore) -> None:
    work_url = dav_server.make_calendar("Work", "work")
    work = account(dav_server, dav_server.url, calendars=("Work",))
    event = store.add_event("standup", T, T + HOUR)
    assert synced(CalDAVSync(store, work)).pushed == 1
    assert [str(e.icalendar_component["uid"]) for e in dav_server.phone(work_url).events()] == [event.uid]
    assert phone_uids(dav_server) == []  # not in the default calendar
    wrong = account(dav_server, dav_server.url, calendars=("Holidays",))
    report = CalDAVSync(store, wrong).sync()
    assert report.kind == "refused" and "no calendar named 'Holidays'" in report.line() and "Work" in report.line()


def test_a_server_without_sync_tokens_is_compared_by_etag_deletions_and_all(
        dav_server: DavServer, store: CalendarStore) -> None:
    """Where a server offers no sync-collection, the library lists the calendar and compares
    ETags (its "fake-" tokens); a deletion is then what we knew and the listing no longer has.
    Played against the real server by telling the client it has no sync tokens."""
    sync = engine(store, dav_server)
    sync.connection.client().features.set_feature("sync-token", {"support": "unsupported"})
    kept = store.add_event("팀 회의", T, T + HOUR)
    gone = store.add_event("점심", T + 3 * HOUR, T + 4 * HOUR)
    synced(sync)
    assert all(str(SyncState(store).sync_token(c)).startswith("fake-")
               for c in [r[0] for r in store.db.fetchall("SELECT url FROM caldav_collections")])
    assert synced(sync).pulled == 0  # nothing changed: nothing fetched, nothing applied
    phone_edit(dav_server, kept.uid, summary="팀 회의 (3층)")
    dav_server.phone().event_by_uid(gone.uid).delete()
    report = synced(sync)
    assert (report.pulled, report.removed_here) == (1, 1)
    assert store.get_event(kept.id).title == "팀 회의 (3층)" and store.get_event(gone.id) is None
