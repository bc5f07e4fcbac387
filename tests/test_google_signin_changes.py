"""A Google sign-in changed by another process while the chat or the bot runs.

The bot holds its grant for days. ``calendar login google`` (what "sign in again" asks for) and
``calendar logout google`` run beside it, in another process, and change only the file: the bot
must sync with the new grant, and must never write the grant it held back over a sign-out.
And a planted sign-in file cannot steer the refresh token at sign-out, nor the terminal.
"""

from __future__ import annotations

import os
import subprocess
import threading
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from tests.google_fakes import GoogleDav, google_dav  # noqa: F401 (fixture)
from tests.recording_server import RecordingServer
from tools.calendar.store import CalendarStore
from tools.calendar.sync.engine import CalDAVSync
from tools.calendar.sync.google_signin import login, logout
from tools.calendar.sync.google_token import Grant, GoogleToken, load_grant, save_grant
from tools.calendar.sync.service import SyncService
from tools.calendar.sync.settings import Account, CalDAVSettings
from tools.calendar.sync.state import SyncState

T = datetime(2026, 12, 7, 10, tzinfo=timezone.utc)
HOUR = timedelta(hours=1)


def test_a_sign_in_renewed_by_another_process_is_used_without_a_restart(google_dav: GoogleDav, tmp_path: Path) -> None:
    token = GoogleToken(google_dav.grant_file(tmp_path))
    account = Account(google_dav.calendar_url, google_dav.email, "", timeout_s=5, token=token)
    with CalendarStore(tmp_path / "calendar.sqlite3", tz="Asia/Seoul") as store:
        sync = CalDAVSync(store, account)
        google_dav.oauth.revoke_all()  # the sign-in lapsed
        store.add_event("치과", T, T + HOUR)
        lapsed = sync.sync()
        assert not lapsed.ok and lapsed.kind == "signin", (lapsed.kind, lapsed.error)
        renewed = load_grant(google_dav.grant_file(tmp_path))  # `calendar login google`, in another process
        report = sync.sync()
    assert report.ok and report.pushed == 1, report.error
    assert renewed is not None and token.grant.refresh_token == renewed.refresh_token


def test_a_running_sync_never_brings_back_a_sign_in_removed_by_logout(google_dav: GoogleDav, tmp_path: Path) -> None:
    path = google_dav.grant_file(tmp_path, with_access=False)  # the next request must renew the token
    token = GoogleToken(path)
    path.unlink()  # `calendar logout google` in another process, Google not reached
    with CalendarStore(tmp_path / "calendar.sqlite3", tz="Asia/Seoul") as store:
        store.add_event("치과", T, T + HOUR)
        report = CalDAVSync(store, Account(google_dav.calendar_url, google_dav.email, "", timeout_s=5,
                                           token=token)).sync()
    assert not report.ok and report.kind == "signin" and "signed out" in (report.error or "")
    assert google_dav.oauth.token_requests == []  # the forgotten refresh token was not used
    assert not path.exists()


def test_logout_never_sends_the_refresh_token_to_a_revoke_address_that_is_not_google_s(
        google_dav: GoogleDav, tmp_path: Path) -> None:
    with RecordingServer(None, "127.0.0.1") as collector:
        path = google_dav.grant_file(tmp_path)
        planted = load_grant(path)
        assert planted is not None
        for revoke_uri in (f"{collector.origin}/revoke", "https://collector.example/revoke"):
            save_grant(path, type(planted)(**{**planted.__dict__, "revoke_uri": revoke_uri}))
            line = logout(path)
            assert "could not be told" in line and planted.refresh_token not in line
            assert not path.exists()
    assert collector.requests == []


def test_once_the_sign_in_is_mended_the_next_turn_pushes_without_waiting_for_the_interval(
        google_dav: GoogleDav, tmp_path: Path) -> None:
    account = Account(google_dav.calendar_url, google_dav.email, "", timeout_s=5,
                      token=GoogleToken(google_dav.grant_file(tmp_path)))
    with CalendarStore(tmp_path / "calendar.sqlite3", tz="Asia/Seoul") as store:
        service = SyncService(store, account, CalDAVSettings(caldav_interval_s=3600, caldav_refresh_wait_s=20))
        try:
            google_dav.oauth.revoke_all()
            store.add_event("치과", T, T + HOUR)
            service.before_turn()
            assert service.after_turn() and SyncState(store).status().queued == 1  # lapsed: told, held off
            google_dav.grant_file(tmp_path)  # `calendar login google`, in another process
            assert "pushed 1" in service.sync_now(wait_s=30)  # /sync
            store.add_event("점심", T + 3 * HOUR, T + 4 * HOUR)
            service.after_turn()  # the turn that added it
            assert SyncState(store).status().queued == 0
        finally:
            service.close()


def test_logout_shows_an_account_name_with_terminal_controls_neutralised(tmp_path: Path) -> None:
    """The sign-in file is the user's, but hand-edited (or planted) text in it reaches a terminal."""
    data = tmp_path / "data"
    save_grant(data / "google-signin.json", Grant(
        account="\x1b]0;pwned\x07eve\u202e@example.com", client_id="c", client_secret="s", refresh_token="r" * 20,
        token_uri="https://oauth2.googleapis.com/token", revoke_uri="https://collector.example/revoke"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_")}
    done = subprocess.run([sys.executable, "-m", "agent", "calendar", "logout", "google"], capture_output=True,
                          text=True, timeout=120, cwd=Path(__file__).resolve().parents[1],
                          env={**env, "AGENT_DATA_DIR": str(data)})
    assert done.returncode == 0, done.stderr
    assert "signed out here" in done.stdout
    assert "\x1b" not in done.stdout and "\u202e" not in done.stdout and "\x07" not in done.stdout


def test_logout_forgets_a_sign_in_file_it_cannot_read(tmp_path: Path) -> None:
    path = tmp_path / "google-signin.json"
    path.write_text('{"account": "alice@example.com", "refresh_token": ')  # cut short
    path.chmod(0o600)
    line = logout(path)
    assert "signed out here" in line and "myaccount.google.com/permissions" in line
    assert not path.exists()



def test_a_grant_that_cannot_be_put_in_place_leaves_no_copy_of_its_secrets(tmp_path: Path) -> None:
    path = tmp_path / "google-signin.json"
    (path / "in-the-way").mkdir(parents=True)  # the rename cannot replace a directory that holds something
    with pytest.raises(OSError):
        save_grant(path, Grant(account="alice@example.com", client_id="c", client_secret="s" * 12,
                               refresh_token="r" * 20, token_uri="https://oauth2.googleapis.com/token",
                               revoke_uri="https://oauth2.googleapis.com/revoke"))
    assert [p.name for p in tmp_path.iterdir()] == ["google-signin.json"]


def test_threads_that_meet_the_same_401_renew_the_token_once(google_dav: GoogleDav, tmp_path: Path) -> None:
    """The bot's sync thread and a /sync can both be refused the same token: one renewal, one new token."""
    token = GoogleToken(google_dav.grant_file(tmp_path))
    rejected = token.grant.access_token
    start = threading.Barrier(4)
    got: list[str] = []

    def renew() -> None:
        start.wait(timeout=30)
        got.append(token.refresh(rejected=rejected))

    threads = [threading.Thread(target=renew) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert len(got) == 4 and len(set(got)) == 1 and rejected not in got
    assert [kind for kind, _form in google_dav.oauth.token_requests] == ["refresh_token"]


def test_a_calendar_box_left_unticked_at_sign_in_says_to_allow_calendar_access(
        google_dav: GoogleDav, tmp_path: Path) -> None:
    """Google's consent page lets each permission be unticked; oauthlib then raises a bare
    "Scope has changed" Warning, which must reach the user as what to do."""
    shown: list[str] = []

    def paste(_prompt: str) -> str:
        [url] = [line for text in shown for line in text.splitlines() if line.startswith(google_dav.oauth.auth_uri)]
        return google_dav.oauth.browser_approve(url, scopes=("openid", "https://www.googleapis.com/auth/userinfo.email"))

    grant = tmp_path / "data" / "google-signin.json"
    with pytest.raises(ValueError) as failed:
        login(google_dav.oauth.client_file(tmp_path), grant, browser=False, read_line=paste, say=shown.append)
    assert "allow access to your calendar" in str(failed.value) and "Scope has changed" not in str(failed.value)
    assert not grant.exists()
