"""The CalDAV test servers, the phone and the fault proxy themselves (``tests/caldav_servers.py``).

Pinned for both Radicale and Xandikos, as a sync client sees them through ``caldav``: Basic auth
against the htpasswd file (a wrong password is a 401), a phone-made event read back by its UID, RFC
6578 sync tokens (after one phone edit only that event comes back; a deletion is reported; an
unknown token is refused with ``DAV:valid-sync-token``), 412 for a stale ``If-Match`` and for
``If-None-Match: *`` on an existing event, a ctag that moves, and data that survives a stop or a
``kill -9``. Then the proxy: it forwards faithfully and counts, ``fail`` and ``down`` make caldav
raise the errors the sync code will catch, and ``clear``/``up`` recover.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import caldav
import niquests
import pytest
from caldav.lib import error

from tests.caldav_servers import (  # noqa: F401 - fixtures
    PROBED,
    DavServer,
    FaultProxy,
    collection_ctag,
    dav_proxy,
    dav_server,
    dav_server_module,
    free_port,
    port_answers,
    start_server,
)

ICS = (
    "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//iljeong tests//EN\r\nBEGIN:VEVENT\r\n"
    "UID:{uid}\r\nDTSTAMP:20250101T000000Z\r\nDTSTART:20250301T010000Z\r\nDTEND:20250301T020000Z\r\n"
    "SUMMARY:{summary}\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n"
)
ICAL_HEADERS = {"Content-Type": "text/calendar; charset=utf-8"}


def ics(uid: str, summary: str) -> str:
    return ICS.format(uid=uid, summary=summary)


def summaries(calendar: Any) -> dict[str, str]:
    """UID -> SUMMARY of every event in ``calendar``."""
    found = {}
    for event in calendar.events():
        component = event.icalendar_component
        found[str(component["UID"])] = str(component["SUMMARY"])
    return found


def fresh_calendar(server: DavServer, name: str) -> Any:
    """A new, empty calendar on a (module-shared) server, seen by the phone."""
    return server.phone(server.make_calendar(name))


# --------------------------------------------------------------------------- auth


def test_server_refuses_a_wrong_password_with_401_and_accepts_the_right_one(dav_server_module: DavServer) -> None:
    server = dav_server_module
    with pytest.raises(error.AuthorizationError) as refused:
        server.client(password="not-the-password").calendar(url=server.calendar_url).events()
    assert refused.value.status == 401
    with pytest.raises(error.AuthorizationError) as unknown:
        server.client(username="somebody-else").principal()
    assert unknown.value.status == 401

    calendars = [str(c.url) for c in server.client().principal().calendars()]
    assert server.calendar_url in calendars


def test_password_file_is_mode_0600_and_holds_the_password(dav_server_module: DavServer, tmp_path: Path) -> None:
    path = dav_server_module.password_file(tmp_path)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert path.read_text(encoding="utf-8").strip() == dav_server_module.password


# --------------------------------------------------------------------------- the phone


def test_phone_creates_an_event_with_its_uid_and_reads_it_back(dav_server_module: DavServer) -> None:
    phone = fresh_calendar(dav_server_module, "phone reads back")
    created = phone.add_event(ics("dentist-1@iljeong.test", "치과"))
    assert created.url.canonical().path.endswith("/dentist-1%40iljeong.test.ics")

    again = dav_server_module.phone(str(phone.url)).event_by_uid("dentist-1@iljeong.test")
    assert str(again.icalendar_component["SUMMARY"]) == "치과"
    assert summaries(phone) == {"dentist-1@iljeong.test": "치과"}


def test_make_calendar_adds_a_second_collection_apart_from_the_first(dav_server_module: DavServer) -> None:
    first = fresh_calendar(dav_server_module, "first")
    second = fresh_calendar(dav_server_module, "second")
    assert str(first.url) != str(second.url)
    first.add_event(ics("only-in-first", "one"))
    assert summaries(second) == {}
    assert summaries(first) == {"only-in-first": "one"}


# --------------------------------------------------------------------------- what sync relies on


def test_sync_token_then_one_phone_edit_brings_back_only_that_event(dav_server: DavServer) -> None:
    phone = dav_server.phone()
    phone.add_event(ics("stays", "unchanged"))
    phone.add_event(ics("edited", "before"))
    first = phone.get_objects_by_sync_token(disable_fallback=True)
    assert first.sync_token and not str(first.sync_token).startswith("fake-")
    assert len(list(first)) == 2

    event = dav_server.phone().event_by_uid("edited")
    event.icalendar_component["SUMMARY"] = "after"
    event.save(increase_seqno=False)

    changed = phone.get_objects_by_sync_token(first.sync_token, disable_fallback=True, load_objects=True)
    assert [str(o.icalendar_component["UID"]) for o in changed] == ["edited"]
    assert str(list(changed)[0].icalendar_component["SUMMARY"]) == "after"
    assert changed.sync_token != first.sync_token

    unchanged = phone.get_objects_by_sync_token(changed.sync_token, disable_fallback=True)
    assert list(unchanged) == []


def test_sync_token_reports_a_phone_deletion_in_deleted_urls(dav_server: DavServer) -> None:
    phone = dav_server.phone()
    doomed = phone.add_event(ics("doomed@example.com", "gone soon"))
    token = phone.get_objects_by_sync_token(disable_fallback=True).sync_token

    dav_server.phone().event_by_uid("doomed@example.com").delete()

    after = phone.get_objects_by_sync_token(token, disable_fallback=True)
    assert {u.canonical() for u in after.deleted_urls} == {doomed.url.canonical()}


def test_unknown_sync_token_is_refused_with_valid_sync_token(dav_server: DavServer) -> None:
    """Radicale answers 403 (so caldav raises AuthorizationError), Xandikos 412 (ReportError)."""
    phone = dav_server.phone()
    with pytest.raises(error.DAVError) as refused:
        phone.get_objects_by_sync_token("http://example.com/ns/sync/unknown", disable_fallback=True)
    assert refused.value.status == PROBED[dav_server.kind]["bad_sync_token_status"]
    assert "{DAV:}valid-sync-token" in refused.value.preconditions


def test_save_with_a_stale_if_match_gets_412_and_keeps_the_server_copy(dav_server: DavServer) -> None:
    dav_server.phone().add_event(ics("contested", "original"))
    ours = dav_server.phone().event_by_uid("contested")  # caches the ETag it read
    theirs = dav_server.phone().event_by_uid("contested")
    theirs.icalendar_component["SUMMARY"] = "phone's"
    theirs.save(increase_seqno=False, precondition="etag")

    ours.icalendar_component["SUMMARY"] = "ours"
    with pytest.raises(error.ETagMismatchError) as refused:
        ours.save(increase_seqno=False, precondition="etag")
    assert refused.value.status == 412
    assert summaries(dav_server.phone()) == {"contested": "phone's"}


def test_put_with_if_none_match_star_on_an_existing_event_gets_412(dav_server: DavServer) -> None:
    client = dav_server.client()
    href = dav_server.calendar_url + "new-once.ics"
    made = client.request(href, "PUT", ics("new-once", "first"), ICAL_HEADERS | {"If-None-Match": "*"})
    assert made.status == 201
    again = client.request(href, "PUT", ics("new-once", "second"), ICAL_HEADERS | {"If-None-Match": "*"})
    assert again.status == PROBED[dav_server.kind]["if_none_match_existing_status"] == 412
    assert summaries(dav_server.phone()) == {"new-once": "first"}


def test_ctag_moves_when_the_phone_changes_the_calendar(dav_server: DavServer) -> None:
    phone = dav_server.phone()
    before = collection_ctag(phone)
    assert before
    phone.add_event(ics("moves-the-ctag", "x"))
    after = collection_ctag(phone)
    assert after and after != before
    assert collection_ctag(phone) == after


# --------------------------------------------------------------------------- the process


def test_stopped_server_refuses_connections_and_restarts_with_its_data(dav_server: DavServer) -> None:
    phone = dav_server.phone()
    phone.add_event(ics("survives-stop", "kept"))
    dav_server.stop()
    assert not dav_server.running
    with pytest.raises(niquests.exceptions.ConnectionError):
        phone.events()

    dav_server.start()
    assert dav_server.running and port_answers(dav_server.port)
    assert summaries(phone) == {"survives-stop": "kept"}


def test_killed_server_restarts_on_the_same_port_with_its_data(dav_server: DavServer) -> None:
    phone = dav_server.phone()
    phone.add_event(ics("survives-kill", "kept"))
    url = dav_server.url
    dav_server.kill()
    dav_server.start()
    assert dav_server.url == url
    assert summaries(phone) == {"survives-kill": "kept"}


def test_start_refuses_a_port_someone_else_listens_on(tmp_path: Path) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        server = DavServer(kind="radicale", root=tmp_path, port=port, username="u", password="p")
        with pytest.raises(RuntimeError, match="already listens"):
            server.start()
        assert not server.running


def test_server_that_exits_at_start_is_reported_with_its_log_tail(tmp_path: Path) -> None:
    server = DavServer(kind="xandikos", root=tmp_path, port=free_port(), username="u", password="p")
    (tmp_path / "htpasswd").write_text("a line without a separator\n", encoding="utf-8")
    with pytest.raises(RuntimeError, match="xandikos exited") as failed:
        server.start()
    assert "missing ':'" in str(failed.value)
    assert not server.running


# --------------------------------------------------------------------------- the fault proxy


def test_proxy_forwards_a_phone_session_and_counts_requests_and_bytes(dav_server: DavServer,
                                                                      dav_proxy: FaultProxy) -> None:
    through = dav_server.phone(dav_proxy.calendar_url)
    through.add_event(ics("via-proxy@example.com", "through the proxy"))
    token = through.get_objects_by_sync_token(disable_fallback=True).sync_token
    event = through.event_by_uid("via-proxy@example.com")
    event.icalendar_component["SUMMARY"] = "edited through the proxy"
    event.save(increase_seqno=False, precondition="etag")

    assert summaries(dav_server.phone()) == {"via-proxy@example.com": "edited through the proxy"}
    assert [str(o.url) for o in through.get_objects_by_sync_token(token, disable_fallback=True)] == [str(event.url)]
    seen = dav_proxy.requests
    # a fresh caldav client sends no credentials until the server's 401 asks for them
    assert [(r.method, r.status) for r in seen if r.method == "PUT"] == [("PUT", 401), ("PUT", 201), ("PUT", 204)]
    assert seen[0].path == seen[1].path and seen[1].path.endswith("/via-proxy%40example.com.ics")
    assert {r.method for r in seen} == {"PUT", "REPORT"}
    assert all(r.path.startswith("/") and r.request_bytes > 0 and r.response_bytes > 0 for r in seen)
    assert dav_proxy.bytes_total() == sum(r.request_bytes + r.response_bytes for r in seen)

    dav_proxy.reset_counts()
    through.events()
    assert [r.method for r in dav_proxy.requests] == ["REPORT"]


def test_proxy_keeps_the_servers_auth_answer(dav_server: DavServer, dav_proxy: FaultProxy) -> None:
    wrong = dav_server.client(url=dav_proxy.calendar_url, password="wrong")
    with pytest.raises(error.AuthorizationError) as refused:
        wrong.calendar(url=dav_proxy.calendar_url).events()
    assert refused.value.status == 401
    assert any(r.status == 401 for r in dav_proxy.requests)


def test_proxy_fail_503_makes_caldav_raise_and_clear_recovers(dav_server: DavServer, dav_proxy: FaultProxy) -> None:
    """caldav sends a failed (non-412) PUT once more before it raises: two PUTs per save."""
    through = dav_server.phone(dav_proxy.calendar_url)
    dav_proxy.fail(503)
    with pytest.raises(error.ReportError) as failed:
        through.events()
    assert failed.value.status == 503
    with pytest.raises(error.PutError) as failed_put:
        through.add_event(ics("not-made", "x"))
    assert failed_put.value.status == 503
    assert [(r.method, r.status) for r in dav_proxy.requests] == [("REPORT", 503), ("PUT", 503), ("PUT", 503)]

    dav_proxy.clear()
    assert summaries(through) == {}
    assert summaries(dav_server.phone()) == {}


def test_proxy_fail_hits_only_the_given_methods_the_given_times(dav_server: DavServer,
                                                                 dav_proxy: FaultProxy) -> None:
    through = dav_server.phone(dav_proxy.calendar_url)
    assert summaries(through) == {}  # signed in (the 401 challenge is behind us)
    dav_proxy.fail(507, methods={"PUT"}, times=3, body=b"quota exceeded")
    assert summaries(through) == {}  # a REPORT goes through
    with pytest.raises(error.PutError) as full:
        through.add_event(ics("retried", "x"))  # PUT 507, caldav's own retry 507
    assert full.value.status == 507
    assert full.value.body == b"quota exceeded"
    through.add_event(ics("retried", "x"))  # PUT 507 (the last one), caldav's own retry 201
    assert summaries(dav_server.phone()) == {"retried": "x"}
    assert [r.status for r in dav_proxy.requests if r.method == "PUT"] == [507, 507, 507, 201]


@pytest.mark.parametrize("status", [401, 403])
def test_proxy_fail_401_or_403_is_an_authorization_error(dav_server: DavServer, dav_proxy: FaultProxy,
                                                          status: int) -> None:
    """Once signed in, caldav raises on the first 401/403 (no retry); a fresh client would take a
    first 401 for the server's challenge and send its credentials again."""
    through = dav_server.phone(dav_proxy.calendar_url)
    assert summaries(through) == {}
    dav_proxy.reset_counts()
    dav_proxy.fail(status, times=1)
    with pytest.raises(error.AuthorizationError) as refused:
        through.events()
    assert refused.value.status == status
    assert [r.status for r in dav_proxy.requests] == [status]
    assert summaries(through) == {}


def test_proxy_fail_500_on_delete_is_a_delete_error(dav_server: DavServer, dav_proxy: FaultProxy) -> None:
    through = dav_server.phone(dav_proxy.calendar_url)
    through.add_event(ics("undeletable", "x"))
    event = through.event_by_uid("undeletable")
    dav_proxy.fail(500, methods={"DELETE"})
    with pytest.raises(error.DeleteError) as failed:
        event.delete()
    assert failed.value.status == 500
    assert summaries(dav_server.phone()) == {"undeletable": "x"}


def test_proxy_down_refuses_and_resets_connections_and_up_recovers(dav_server: DavServer,
                                                                    dav_proxy: FaultProxy) -> None:
    through = dav_server.phone(dav_proxy.calendar_url)
    assert summaries(through) == {}  # the client now holds a kept-alive connection
    port = dav_proxy.port

    dav_proxy.down()
    assert not dav_proxy.is_up and not port_answers(port)
    with pytest.raises(niquests.exceptions.ConnectionError):
        through.events()
    with pytest.raises(niquests.exceptions.ConnectionError):
        through.add_event(ics("while-down", "x"))

    dav_proxy.up()
    assert dav_proxy.port == port and port_answers(port)
    through.add_event(ics("after-up", "x"))
    assert summaries(dav_server.phone()) == {"after-up": "x"}


def test_proxy_answers_502_when_the_server_behind_is_down(dav_server: DavServer, dav_proxy: FaultProxy) -> None:
    through = dav_server.phone(dav_proxy.calendar_url)
    dav_server.stop()
    with pytest.raises(error.DAVError) as failed:
        through.events()
    assert failed.value.status == 502
    dav_server.start()
    assert summaries(through) == {}


def test_proxy_slow_outlasts_a_short_client_timeout(dav_server: DavServer, dav_proxy: FaultProxy) -> None:
    impatient = dav_server.client(url=dav_proxy.calendar_url, timeout=1)
    dav_proxy.slow(10.0, times=1)
    with pytest.raises(niquests.exceptions.Timeout):
        impatient.calendar(url=dav_proxy.calendar_url).events()
    assert summaries(dav_server.phone(dav_proxy.calendar_url)) == {}


def test_closed_proxy_stops_listening_and_cannot_come_up(dav_server: DavServer) -> None:
    proxy = FaultProxy(dav_server)
    port = proxy.port
    assert port_answers(port)
    proxy.close()
    assert not port_answers(port)
    with pytest.raises(RuntimeError, match="closed"):
        proxy.up()


def test_fail_rejects_a_status_that_is_not_http(dav_server: DavServer, dav_proxy: FaultProxy) -> None:
    with pytest.raises(ValueError):
        dav_proxy.fail(42)
    with pytest.raises(ValueError):
        dav_proxy.slow(0)


def test_start_server_twice_gives_two_independent_servers(tmp_path: Path) -> None:
    with start_server("radicale", tmp_path / "a") as a, start_server("radicale", tmp_path / "b") as b:
        assert a.port != b.port and a.password != b.password
        a.phone().add_event(ics("in-a", "x"))
        assert summaries(b.phone()) == {}
        with pytest.raises(error.AuthorizationError):
            b.client(password=a.password).principal()

