"""Google's CalDAV refusing with a 403: each cause told as its own fix, none as a lapsed sign-in.

A 403 is not renewed (only a 401 is), so "sign in again" mends only the one 403 that comes from
the sign-in itself (calendar access left out at the consent screen). The commonest 403 on a first
sync is the project's CalDAV API left off in Google Cloud Console: signing in again would go round
in circles, so the line names the switch.
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path

from tests.google_fakes import GoogleDav, google_dav  # noqa: F401 (fixture)
from tools.calendar.store import CalendarStore
from tools.calendar.sync.engine import CalDAVSync
from tools.calendar.sync.google_token import LOGIN_COMMAND, GoogleToken, load_grant, save_grant
from tools.calendar.sync.report import SyncReport
from tools.calendar.sync.settings import Account
from tools.calendar.sync.state import SyncState

T = datetime(2026, 12, 7, 10, tzinfo=timezone.utc)
SERVICE_DISABLED = json.dumps({"error": {
    "code": 403, "status": "PERMISSION_DENIED",
    "message": "CalDAV API has not been used in project 4242 before or it is disabled. Enable it by visiting "
               "https://console.developers.google.com/apis/api/caldav.googleapis.com/overview?project=4242",
    "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "SERVICE_DISABLED"}]}}).encode()


def first_sync(google: GoogleDav, grant_file: Path, tmp_path: Path) -> SyncReport:
    account = Account(google.calendar_url, google.email, "", timeout_s=5, token=GoogleToken(grant_file))
    with CalendarStore(tmp_path / "calendar.sqlite3", tz="Asia/Seoul") as store:
        store.add_event("치과", T, T + timedelta(hours=1))
        report = CalDAVSync(store, account).sync()
        assert SyncState(store).status().queued == 1  # whatever the refusal, the change waits
    return report


def test_the_caldav_api_left_off_names_the_console_switch_not_a_new_sign_in(
        google_dav: GoogleDav, tmp_path: Path) -> None:
    google_dav.proxy.fail(403, body=SERVICE_DISABLED, headers={"Content-Type": "application/json; charset=UTF-8"})
    report = first_sync(google_dav, google_dav.grant_file(tmp_path), tmp_path)
    assert not report.ok and report.kind == "refused", (report.kind, report.error)
    assert "CalDAV API" in (report.error or "") and LOGIN_COMMAND not in (report.error or "")
    assert google_dav.oauth.token_requests == []  # a 403 renews nothing


def test_a_sign_in_without_calendar_access_asks_to_sign_in_again_and_allow_it(
        google_dav: GoogleDav, tmp_path: Path) -> None:
    path = google_dav.grant_file(tmp_path)
    narrow = google_dav.oauth.mint_grant(("openid",))  # the calendar box left unticked at the consent screen
    grant = load_grant(path)
    assert grant is not None
    save_grant(path, replace(grant, refresh_token=narrow, access_token=google_dav.oauth.mint_access(narrow)))
    report = first_sync(google_dav, path, tmp_path)
    assert not report.ok and report.kind == "signin", (report.kind, report.error)
    assert LOGIN_COMMAND in (report.error or "") and "allow access to your calendar" in (report.error or "")


def test_a_403_without_a_known_reason_is_a_refusal_not_a_lapsed_sign_in(google_dav: GoogleDav, tmp_path: Path) -> None:
    google_dav.proxy.fail(403, body=b'{"error": {"code": 403, "message": "Forbidden"}}')
    report = first_sync(google_dav, google_dav.grant_file(tmp_path), tmp_path)
    assert not report.ok and report.kind == "refused" and "HTTP 403" in (report.error or ""), report.error
    assert "renewed" not in (report.error or "")
