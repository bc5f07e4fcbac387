"""Google Calendar as a user meets it, with no network: sign in once, then sync like any CalDAV calendar.

Google's sign-in server is ``FakeGoogleOAuth`` (https with a throwaway CA, as strict about
parameters as Google's), Google's CalDAV front is a ``BearerProxy`` over a real Radicale that
takes only the bearer tokens that server issued and still honours, and the browser is
``tests/fake_browser.py`` (a ``BROWSER=`` command that clicks Allow). The login runs as the user
runs it: ``python -m agent calendar login google`` in a child process.
"""

from __future__ import annotations

import os
import queue
import stat
import subprocess
import sys
import threading
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from tests.google_fakes import GoogleDav, google_dav  # noqa: F401 (fixture)
from tools.calendar.store import CalendarStore
from tools.calendar.sync import google_limits
from tools.calendar.sync.engine import CalDAVSync
from tools.calendar.sync.google_token import SIGNIN_EXPIRED, GoogleToken, grant_path, load_grant, save_grant
from tools.calendar.sync.service import SyncService
from tools.calendar.sync.settings import Account, CalDAVSettings
from tools.calendar.sync.state import SyncState

ROOT = Path(__file__).resolve().parents[1]
SEOUL = ZoneInfo("Asia/Seoul")
T = datetime(2026, 12, 7, 10, tzinfo=SEOUL)
HOUR = timedelta(hours=1)


def agent_cli(*args: str, env: dict[str, str], stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_", "TELEGRAM_", "SSH_"))}
    return subprocess.run([sys.executable, "-m", "agent", *args], cwd=ROOT, env={**base, **env}, input=stdin,
                          capture_output=True, text=True, timeout=120)


def user_env(google: GoogleDav, tmp_path: Path) -> dict[str, str]:
    """What a user has set after the README's steps: the client file, and (for the stand-in, which
    is not Google's host) the calendar's URL on this machine."""
    return {"AGENT_DATA_DIR": str(tmp_path / "data"),
            "AGENT_GOOGLE_CLIENT_FILE": str(google.oauth.client_file(tmp_path)),
            "AGENT_CALDAV_URL": google.calendar_url,
            "REQUESTS_CA_BUNDLE": str(google.oauth.ca_bundle)}




def signed_in(google: GoogleDav, directory: Path, **options: Any) -> Account:
    token = GoogleToken(google.grant_file(directory, **options))
    return Account(google.calendar_url, google.email, "", timeout_s=5, token=token)


def browser_steps(log: Path, count: int, within_s: float = 30.0) -> list[str]:
    """The fake browser's log once it holds ``count`` lines: its forked child writes the last one
    after the login's server answered, which may be after the login process has exited."""
    deadline = time.monotonic() + within_s
    while True:
        lines = log.read_text().splitlines() if log.exists() else []
        if len(lines) >= count or time.monotonic() > deadline:
            return lines
        time.sleep(0.05)


# -- signing in ----------------------------------------------------------------------------------------


def test_login_in_a_browser_keeps_a_0600_grant_and_then_sync_status_and_doctor_work(
        google_dav: GoogleDav, tmp_path: Path, gemma3: Path) -> None:
    env = user_env(google_dav, tmp_path)
    log = tmp_path / "browser.log"
    env.update(BROWSER=f"{sys.executable} {ROOT / 'tests' / 'fake_browser.py'} %s", FAKE_BROWSER_LOG=str(log))
    done = agent_cli("calendar", "login", "google", env=env)
    assert done.returncode == 0, done.stderr
    assert f"signed in to Google as {google_dav.email}" in done.stdout
    steps = browser_steps(log, 2)
    assert steps[0].startswith("authorize 302 http://127.0.0.1:") and steps[1] == "redirect 200", steps
    [asked] = google_dav.oauth.authorizations
    assert asked["code_challenge_method"] == "S256" and asked["redirect_uri"].startswith("http://127.0.0.1:")
    assert asked["access_type"] == "offline"
    grant = grant_path(tmp_path / "data")
    assert stat.S_IMODE(grant.stat().st_mode) == 0o600
    kept = load_grant(grant)
    assert kept is not None and kept.account == google_dav.email and kept.refresh_token
    assert kept.refresh_token not in done.stdout + done.stderr and kept.client_secret not in done.stdout

    with CalendarStore(tmp_path / "data" / "calendar.sqlite3") as store:
        store.add_event("치과", T, T + HOUR)
    synced = agent_cli("calendar", "sync", env=env)
    assert synced.returncode == 0, synced.stderr
    assert synced.stdout.startswith("pulled 0, pushed 1, conflicts 0")
    assert [str(e.icalendar_component["summary"]) for e in google_dav.phone().events()] == ["치과"]
    assert {r.auth_scheme for r in google_dav.proxy.requests} == {"Bearer"}

    status = agent_cli("calendar", "status", env=env)
    assert status.returncode == 0
    line = next(x for x in status.stdout.splitlines() if x.startswith("Google sign-in: "))
    assert f"Google sign-in: {google_dav.email}, token valid until 20" in line and "kept until revoked" in line
    doctor = agent_cli("doctor", "--demo", "--no-generate", env=env)
    assert "  " + line in doctor.stdout.splitlines()  # the same line as calendar status
    for text in (status.stdout, doctor.stdout):
        assert kept.refresh_token not in text and kept.client_secret not in text
        assert load_grant(grant).access_token not in text


def test_login_without_a_browser_takes_the_pasted_address(google_dav: GoogleDav, tmp_path: Path) -> None:
    env = user_env(google_dav, tmp_path)
    process = subprocess.Popen(
        [sys.executable, "-m", "agent", "calendar", "login", "google", "--no-browser"], cwd=ROOT,
        env={**{k: v for k, v in os.environ.items() if not k.startswith("AGENT_")}, **env},
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert process.stdout is not None and process.stdin is not None
    lines: queue.Queue[str] = queue.Queue()  # read in a thread: a child that hangs fails here, at a deadline
    threading.Thread(target=lambda: [lines.put(line) for line in iter(process.stdout.readline, "")],
                     daemon=True).start()
    url = ""
    while not url:
        try:
            line = lines.get(timeout=120)
        except queue.Empty:
            process.kill()
            pytest.fail("the login printed no sign-in address within 120 s")
        url = line.strip() if line.startswith(google_dav.oauth.auth_uri) else ""
    landing = google_dav.oauth.browser_approve(url)  # on a phone: the page that does not load
    process.stdin.write(landing + "\n")
    process.stdin.close()
    assert process.wait(timeout=60) == 0, process.stderr.read() if process.stderr else ""
    out = ""
    while not lines.empty() or not out.endswith("\n"):
        out += lines.get(timeout=30)
        if f"signed in to Google as {google_dav.email}" in out:
            break
    assert f"signed in to Google as {google_dav.email}" in out
    assert load_grant(grant_path(tmp_path / "data")) is not None


def test_a_pasted_address_from_another_sign_in_is_refused_and_nothing_is_kept(
        google_dav: GoogleDav, tmp_path: Path) -> None:
    env = user_env(google_dav, tmp_path)
    stale = "http://127.0.0.1:1/?state=someone-elses&code=4/0Fake-stolen&scope=x"
    done = agent_cli("calendar", "login", "google", "--no-browser", env=env, stdin=stale + "\n")
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "does not start with" in done.stderr or "another sign-in" in done.stderr
    assert not grant_path(tmp_path / "data").exists()
    assert google_dav.oauth.token_requests == []  # the stolen code never reached the token endpoint


def test_logout_revokes_at_google_and_forgets_the_grant(google_dav: GoogleDav, tmp_path: Path) -> None:
    env = user_env(google_dav, tmp_path)
    grant = google_dav.grant_file(tmp_path / "data")
    access = load_grant(grant).access_token
    assert google_dav.oauth.token_valid(access)
    done = agent_cli("calendar", "logout", "google", env=env)
    assert done.returncode == 0 and "access revoked" in done.stdout
    assert not grant.exists() and not google_dav.oauth.token_valid(access)
    after = agent_cli("calendar", "sync", env={k: v for k, v in env.items() if k != "AGENT_CALDAV_URL"})
    assert after.returncode == 2 and "not set up" in after.stderr


# -- the token at run time -------------------------------------------------------------------------------


def test_an_ended_access_token_is_renewed_before_the_first_request(
        google_dav: GoogleDav, store: CalendarStore, tmp_path: Path) -> None:
    account = signed_in(google_dav, tmp_path, with_access=False)
    store.add_event("치과", T, T + HOUR)
    report = CalDAVSync(store, account).sync()
    assert report.ok, report.error
    assert [kind for kind, _form in google_dav.oauth.token_requests] == ["refresh_token"]
    assert all(r.status != 401 for r in google_dav.proxy.requests)  # no request went out with a dead token
    assert load_grant(account.token.path).access_token == google_dav.oauth.issued[-1]  # kept for the next process


def test_a_401_renews_the_token_once_and_the_request_goes_through(
        google_dav: GoogleDav, store: CalendarStore, tmp_path: Path) -> None:
    account = signed_in(google_dav, tmp_path)
    sync = CalDAVSync(store, account)
    assert sync.sync().ok
    google_dav.oauth.expire_access_tokens()  # revoked early, or the clocks disagree: ours still looks valid
    google_dav.proxy.reset_counts()
    store.add_event("치과", T, T + HOUR)
    report = sync.sync()
    assert report.ok and report.pushed == 1, report.error
    assert [kind for kind, _form in google_dav.oauth.token_requests] == ["refresh_token"]
    assert [r.status for r in google_dav.proxy.requests].count(401) == 1


def test_a_revoked_sign_in_stops_sync_with_one_line_told_once_and_the_changes_wait(
        google_dav: GoogleDav, store: CalendarStore, tmp_path: Path) -> None:
    account = signed_in(google_dav, tmp_path)
    service = SyncService(store, account, CalDAVSettings(caldav_interval_s=3600, caldav_refresh_wait_s=20))
    try:
        google_dav.oauth.revoke_all()  # the user removed the app, or a "testing" app's 7 days ran out
        event = store.add_event("치과", T, T + HOUR)
        service.before_turn()  # the pull before a turn (never pulled yet) meets the revoked grant
        told = service.after_turn()
        assert told == [f"📅 {SIGNIN_EXPIRED}. Your calendar here keeps working; changes wait until then."]
        assert SIGNIN_EXPIRED in service.status()
        before = len(google_dav.proxy.requests), len(google_dav.oauth.token_requests)
        store.update_event(event.id, title="치과 (2층)")
        service.before_turn()
        assert service.after_turn() == []  # told once
        assert (len(google_dav.proxy.requests), len(google_dav.oauth.token_requests)) == before  # no retry per turn
        assert [uid for uid, _seq in SyncState(store).queued()] == [event.uid]
        assert store.find_uid(event.uid).title == "치과 (2층)"  # the local calendar kept working

        fresh = load_grant(google_dav.grant_file(tmp_path / "again"))  # signed in again
        save_grant(account.token.path, fresh)
        account.token.grant = fresh
        assert "pushed 1" in service.sync_now(wait_s=30)
        assert [str(e.icalendar_component["summary"]) for e in google_dav.phone().events()] == ["치과 (2층)"]
    finally:
        service.close()


def test_google_down_during_a_refresh_is_an_outage_not_a_sign_in_to_renew(
        google_dav: GoogleDav, store: CalendarStore, tmp_path: Path) -> None:
    account = signed_in(google_dav, tmp_path, with_access=False)
    google_dav.oauth.fail_token(503, "temporarily_unavailable", times=5)
    store.add_event("치과", T, T + HOUR)
    report = CalDAVSync(store, account).sync()
    assert not report.ok and report.kind == "unreachable", (report.kind, report.error)
    assert "login" not in (report.error or "")  # nothing sends the user to sign in again for an outage
    assert SyncState(store).status().queued == 1


# -- Google's limits -------------------------------------------------------------------------------------


def test_a_rate_limit_is_backed_off_and_a_lasting_one_keeps_the_changes_queued(
        google_dav: GoogleDav, store: CalendarStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    waits: list[float] = []
    monkeypatch.setattr(google_limits, "sleep", waits.append)
    sync = CalDAVSync(store, signed_in(google_dav, tmp_path))
    store.add_event("치과", T, T + HOUR)
    google_dav.proxy.rate_limit(2)
    report = sync.sync()
    assert report.ok and report.pushed == 1, report.error
    assert waits == list(google_limits.RATE_LIMIT_WAITS[:2])  # 1 s, then 2 s: exponential, as Google asks

    waits.clear()
    store.add_event("점심", T + 3 * HOUR, T + 4 * HOUR)
    google_dav.proxy.rate_limit(100)
    report = sync.sync()
    assert not report.ok and report.kind == "limited" and "rateLimitExceeded" in report.line()
    assert waits == list(google_limits.RATE_LIMIT_WAITS)
    assert SyncState(store).status().queued == 1
    google_dav.proxy.clear()
    assert sync.sync().pushed == 1


def test_a_sync_asks_google_only_what_its_caldav_serves(
        google_dav: GoogleDav, store: CalendarStore, tmp_path: Path) -> None:
    """No MKCALENDAR, no free-busy query, VEVENTs only (a series, an all-day event, an alarm), and
    sync-collection after the first sync: one request when nothing changed."""
    sync = CalDAVSync(store, signed_in(google_dav, tmp_path))
    store.add_event("팀 회의", T, T + HOUR, recurrence="RRULE:FREQ=WEEKLY;BYDAY=MO", tz="Asia/Seoul", remind_minutes_before=[10])
    store.add_event("휴가", datetime(2026, 12, 24, tzinfo=SEOUL), datetime(2026, 12, 26, tzinfo=SEOUL), all_day=True)
    report = sync.sync()
    assert report.ok and report.pushed == 2, report.error
    methods = {r.method for r in google_dav.proxy.requests}
    assert "MKCALENDAR" not in methods and "MKCOL" not in methods
    assert all(r.status not in (400, 403) for r in google_dav.proxy.requests)
    google_dav.proxy.reset_counts()
    assert sync.sync().ok
    assert [(r.method, r.status) for r in google_dav.proxy.requests] == [("REPORT", 207)]
    [token] = [t for _url, t in store.db.fetchall("SELECT url, sync_token FROM caldav_collections")]
    assert token and not str(token).startswith("fake-")  # a real sync-collection token, not a listing
