"""Google sign-in: where the bearer token may go, and the rules for the files that hold it.

These need no OAuth server. A grant whose access token ends far in the future is used as it is
(``GoogleToken.bearer`` asks no token endpoint), so the real engine and the real caldav library
run with a bearer token against the stdlib recording servers of ``test_caldav_secrets``.

The attacks, as they would be tried:
- a CalDAV server whose current-user-principal or calendar-home-set names another origin, or
  that redirects there (301/302/307/308), and asks for a login there;
- a 401 from the home server, to make the sync refresh again and again (one refresh, then stop);
- a grant file others can read, or one that is broken; a temp file left beside it;
- an OAuth client file (Google's downloaded JSON) whose token_uri or auth_uri names a collector,
  or plain http, so that the code or the refresh token would go there;
- ``AGENT_CALDAV_URL`` left pointing at another provider while signed in to Google, which would
  send Google's token there;
- the plist (readable by other local users), a log record, a repr holding a token.
"""

from __future__ import annotations

import json
import logging
import os
import plistlib
import socket
import stat
import subprocess
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Callable

import pytest

from agent import known_secrets
from agent.config import load_settings
from bot.launchd_plist import service_plist
from bot.masking import MaskingFormatter
from launchd.plist import plist_bytes
from tests.recording_server import Answer, RecordingServer, Seen
from tests.test_caldav_secrets import agent_cli, collector, home_set_elsewhere, principal_elsewhere, redirect_elsewhere
from tools.calendar.store import CalendarStore
from tools.calendar.sync.engine import CalDAVSync
from tools.calendar.sync.google_signin import (CALDAV_ROOT, check_endpoint, check_caldav_url, login, logout,
                                               primary_calendar_url, read_client)
from tools.calendar.sync.google_token import GRANT_FILENAME, LOGIN_COMMAND, Grant, GoogleToken, load_grant, save_grant
from tools.calendar.sync.settings import Account, account
from tools.calendar.sync.state import SyncState

EMAIL = "alice.kim@gmail.com"
CLIENT_ID = "4242-abcdefg.apps.googleusercontent.com"
CLIENT_SECRET = "GOCSPX-client-Secret-for-tests-0042"
REFRESH = "1//0refresh-Token-for-tests-only-xyz987"
ACCESS = "ya29.access-Token-for-tests-only-abc123"
ACCESS_2 = "ya29.second-Token-after-a-refresh-456"
SECRETS = (CLIENT_SECRET, REFRESH, ACCESS)
T = datetime(2026, 12, 14, 9, 0, tzinfo=timezone.utc)


def closed_port() -> int:
    """A port nothing listens on (bound, then let go)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def make_grant(token_uri: str = "", **changes: object) -> Grant:
    token_uri = token_uri or f"https://127.0.0.1:{closed_port()}/token"
    grant = Grant(account=EMAIL, client_id=CLIENT_ID, client_secret=CLIENT_SECRET, refresh_token=REFRESH,
                  token_uri=token_uri, revoke_uri=token_uri.rsplit("/", 1)[0] + "/revoke",
                  scopes=("https://www.googleapis.com/auth/calendar",), access_token=ACCESS,
                  expiry=(datetime.now(timezone.utc) + timedelta(days=30)).isoformat())
    return replace(grant, **changes)  # type: ignore[arg-type]


def grant_file(directory: Path, grant: Grant | None = None) -> Path:
    path = directory / GRANT_FILENAME
    save_grant(path, grant or make_grant())
    return path




def shows_no_secret(text: str) -> bool:
    return not any(secret in text for secret in SECRETS)


# ---- where the bearer token goes ---------------------------------------------------------------------


@pytest.mark.parametrize("other_host", ["127.0.0.2", "127.0.0.1"], ids=["other-host", "other-port"])
@pytest.mark.parametrize("lure", ["principal", "home-set", "301", "302", "307", "308"])
def test_discovery_or_a_redirect_to_another_origin_never_carries_the_bearer_token(
        store: CalendarStore, tmp_path: Path, other_host: str, lure: str) -> None:
    with RecordingServer(collector, other_host) as elsewhere, RecordingServer(None, "127.0.0.1") as token_endpoint:
        token = GoogleToken(grant_file(tmp_path, make_grant(f"{token_endpoint.origin}/token")))
        answers = {"principal": principal_elsewhere(elsewhere.origin), "home-set": home_set_elsewhere(elsewhere.origin)}
        answer = answers.get(lure) or redirect_elsewhere(int(lure), elsewhere.origin)
        with RecordingServer(answer, "127.0.0.1") as home:
            report = CalDAVSync(store, Account(f"{home.origin}/", EMAIL, "", timeout_s=5, token=token)).sync()
    if lure != "principal":  # caldav 3.6 refuses to join a principal URL on another origin (ValueError)
        assert elsewhere.requests, "the lure was not followed: this test would prove nothing"
    assert elsewhere.authorizations() == []
    assert home.requests and home.authorizations() == [f"Bearer {ACCESS}"] * len(home.requests)
    assert token_endpoint.requests == []  # a 401 where no token went is no reason to renew one
    assert not report.ok and shows_no_secret(report.error or "")


def test_the_configured_server_gets_the_bearer_token_on_every_request(store: CalendarStore, tmp_path: Path) -> None:
    token = GoogleToken(grant_file(tmp_path))
    with RecordingServer(home_set_elsewhere(""), "127.0.0.1") as home:  # the calendar home on the same server
        CalDAVSync(store, Account(f"{home.origin}/", EMAIL, "", timeout_s=5, token=token)).sync()
    assert len(home.requests) >= 2 and home.authorizations() == [f"Bearer {ACCESS}"] * len(home.requests)
    assert not any(a.startswith("Basic ") for a in home.authorizations())


def refused_with_bearer(seen: Seen, _server: RecordingServer) -> Answer:
    return Answer(401, {"WWW-Authenticate": 'Bearer realm="calendar", error="invalid_token"'}, b"")


def test_a_401_makes_one_refresh_attempt_and_an_unreachable_token_endpoint_keeps_the_change_queued(
        store: CalendarStore, tmp_path: Path) -> None:
    token = GoogleToken(grant_file(tmp_path))  # token_uri: https on a closed port of 127.0.0.1
    attempts: list[str | None] = []
    real_refresh = token.refresh

    def counted(rejected: str | None = None) -> str:
        attempts.append(rejected)
        return real_refresh(rejected)

    token.refresh = counted  # type: ignore[method-assign]
    event = store.add_event("Dentist", T, T + timedelta(hours=1))
    assert [uid for uid, _seq in SyncState(store).queued()] == [event.uid]
    with RecordingServer(refused_with_bearer, "127.0.0.1") as home:
        report = CalDAVSync(store, Account(f"{home.origin}/", EMAIL, "", timeout_s=5, token=token)).sync()
    assert attempts == [ACCESS], attempts
    assert len(home.requests) == 1  # the 401'd request was not sent again with a token that did not change
    assert not report.ok and report.kind == "unreachable", (report.kind, report.error)
    line = report.line()
    assert len(line.splitlines()) == 1 and "Google" in line and shows_no_secret(line)
    assert [uid for uid, _seq in SyncState(store).queued()] == [event.uid]  # still waiting to go out


def token_endpoint_answering(new_token: str) -> Callable[[Seen, RecordingServer], Answer]:
    def answer(seen: Seen, _server: RecordingServer) -> Answer:
        body = json.dumps({"access_token": new_token, "expires_in": 3599, "token_type": "Bearer"}).encode()
        return Answer(200, {"Content-Type": "application/json"}, body)
    return answer


def test_a_grant_naming_a_plain_http_token_endpoint_never_gets_the_refresh_token(
        store: CalendarStore, tmp_path: Path) -> None:
    """A hand-edited (or planted) grant file cannot send the refresh token and the client secret
    anywhere but Google's https endpoints (or https on this machine): the sync stops first."""
    with RecordingServer(token_endpoint_answering(ACCESS_2), "127.0.0.1") as token_endpoint:
        path = grant_file(tmp_path, make_grant(f"{token_endpoint.origin}/token"))
        token = GoogleToken(path)
        event = store.add_event("Dentist", T, T + timedelta(hours=1))
        with RecordingServer(refused_with_bearer, "127.0.0.1") as home:
            report = CalDAVSync(store, Account(f"{home.origin}/", EMAIL, "", timeout_s=5, token=token)).sync()
    assert token_endpoint.requests == []
    assert home.authorizations() == [f"Bearer {ACCESS}"]
    assert not report.ok and report.kind == "signin" and LOGIN_COMMAND in (report.error or "")
    assert "not Google's" in (report.error or "") and shows_no_secret(report.line())
    assert [uid for uid, _seq in SyncState(store).queued()] == [event.uid]


# ---- the grant file -----------------------------------------------------------------------------------


def test_a_grant_file_others_can_read_is_refused_with_chmod_600_and_without_the_token(tmp_path: Path) -> None:
    path = grant_file(tmp_path)
    path.chmod(0o644)
    for read in (load_grant, GoogleToken):
        with pytest.raises(ValueError) as refused:
            read(path)
        message = str(refused.value)
        assert f"chmod 600 {path}" in message and shows_no_secret(message) and len(message.splitlines()) == 1


@pytest.mark.parametrize("text", [
    "{not json",
    "",
    "[]",
    "null",
    json.dumps({"account": EMAIL, "client_id": CLIENT_ID, "client_secret": CLIENT_SECRET, "token_uri": "https://x/"}),
    json.dumps({"account": EMAIL, "client_id": CLIENT_ID, "client_secret": CLIENT_SECRET, "refresh_token": "",
                "token_uri": "https://oauth2.googleapis.com/token", "revoke_uri": ""}),
    json.dumps({"account": EMAIL, "client_id": CLIENT_ID, "client_secret": CLIENT_SECRET, "refresh_token": 12345678,
                "token_uri": "https://oauth2.googleapis.com/token", "revoke_uri": "", "expiry": 5}),
    json.dumps({"account": EMAIL, "client_id": CLIENT_ID, "client_secret": CLIENT_SECRET, "refresh_token": [REFRESH],
                "token_uri": "https://oauth2.googleapis.com/token", "revoke_uri": ""}),
    json.dumps({"account": EMAIL, "client_id": CLIENT_ID, "client_secret": CLIENT_SECRET, "refresh_token": REFRESH,
                "token_uri": "https://oauth2.googleapis.com/token", "revoke_uri": "", "scopes": [1, 2]}),
    json.dumps({"account": EMAIL, "client_id": CLIENT_ID, "client_secret": CLIENT_SECRET, "refresh_token": REFRESH,
                "token_uri": "https://oauth2.googleapis.com/token", "revoke_uri": "", "unknown": "x"}),
], ids=["broken", "empty", "list", "null", "no-refresh-token", "empty-refresh-token", "numbers", "list-token",
        "number-scopes", "unknown-field"])
def test_a_broken_or_incomplete_grant_file_says_to_sign_in_again(tmp_path: Path, text: str) -> None:
    path = tmp_path / GRANT_FILENAME
    path.write_text(text)
    path.chmod(0o600)
    with pytest.raises(ValueError) as refused:
        GoogleToken(path)
    message = str(refused.value)
    assert LOGIN_COMMAND in message and len(message.splitlines()) == 1 and shows_no_secret(message)


def test_save_grant_writes_mode_600_and_replaces_the_file_whole(tmp_path: Path) -> None:
    path = tmp_path / "data" / GRANT_FILENAME
    path.parent.mkdir()
    path.write_text("an old grant, left readable by others\n")
    path.chmod(0o644)
    before = path.stat().st_ino
    grant = make_grant()
    with open(path) as old_reader:
        old = os.umask(0)
        try:
            save_grant(path, grant)
        finally:
            os.umask(old)
        assert old_reader.read() == "an old grant, left readable by others\n"  # a reader sees one grant or the other
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.stat().st_ino != before  # a new file put in place (rename), not the old one rewritten
    assert sorted(p.name for p in path.parent.iterdir()) == [GRANT_FILENAME]  # no temp file left
    assert load_grant(path) == grant


def test_no_repr_shows_a_secret(tmp_path: Path) -> None:
    token = GoogleToken(grant_file(tmp_path))
    shown = " ".join(map(repr, (token.grant, token, Account(primary_calendar_url(EMAIL), EMAIL, "", token=token))))
    assert EMAIL in shown and shows_no_secret(shown)


# ---- the OAuth client file ----------------------------------------------------------------------------


def client_file(tmp_path: Path, kind: str = "installed", mode: int = 0o600, **changes: str) -> Path:
    client = {"client_id": CLIENT_ID, "project_id": "iljeong-test", "client_secret": CLIENT_SECRET,
              "auth_uri": "https://accounts.google.com/o/oauth2/auth",
              "token_uri": "https://oauth2.googleapis.com/token",
              "auth_provider_x509_cert_url": "https://www.googleapis.com/oauth2/v1/certs",
              "redirect_uris": ["http://localhost"], **changes}
    path = tmp_path / "google-client.json"
    path.write_text(json.dumps({kind: client}))
    path.chmod(mode)
    return path


def test_a_desktop_app_client_on_google_s_hosts_is_read(tmp_path: Path) -> None:
    assert read_client(client_file(tmp_path)) == {
        "client_id": CLIENT_ID, "client_secret": CLIENT_SECRET,
        "auth_uri": "https://accounts.google.com/o/oauth2/auth", "token_uri": "https://oauth2.googleapis.com/token"}


def test_a_web_application_client_is_refused_naming_desktop_app(tmp_path: Path) -> None:
    with pytest.raises(ValueError) as refused:
        read_client(client_file(tmp_path, kind="web"))
    assert "Desktop app" in str(refused.value) and shows_no_secret(str(refused.value))


def test_a_client_file_others_can_read_is_refused(tmp_path: Path) -> None:
    path = client_file(tmp_path, mode=0o644)
    with pytest.raises(ValueError) as refused:
        read_client(path)
    assert f"chmod 600 {path}" in str(refused.value) and shows_no_secret(str(refused.value))


@pytest.mark.parametrize("field,url", [
    ("token_uri", "https://collector.example/token"),
    ("token_uri", "http://oauth2.googleapis.com/token"),
    ("token_uri", "https://oauth2.googleapis.com.collector.example/token"),
    ("token_uri", "https://oauth2.googleapis.com@collector.example/token"),
    ("auth_uri", "http://accounts.google.com/o/oauth2/auth"),
    ("auth_uri", "https://collector.example/o/oauth2/auth"),
])
def test_a_client_file_naming_another_host_or_plain_http_is_refused_before_any_request(
        tmp_path: Path, field: str, url: str) -> None:
    asked: list[str] = []
    with pytest.raises(ValueError) as refused:
        login(client_file(tmp_path, **{field: url}), tmp_path / GRANT_FILENAME, browser=False,
              read_line=lambda prompt: asked.append(prompt) or "", say=asked.append)
    message = str(refused.value)
    assert field in message and shows_no_secret(message) and len(message.splitlines()) == 1
    assert asked == [] and not (tmp_path / GRANT_FILENAME).exists()


def test_a_client_file_naming_a_plain_http_listener_here_makes_no_connection(tmp_path: Path) -> None:
    with RecordingServer(None, "127.0.0.1") as listener:
        path = client_file(tmp_path, auth_uri=f"{listener.origin}/auth", token_uri=f"{listener.origin}/token")
        with pytest.raises(ValueError):
            login(path, tmp_path / GRANT_FILENAME, browser=False, read_line=lambda _p: "code", say=lambda _l: None)
    assert listener.connections == 0


@pytest.mark.parametrize("url,ok", [
    ("https://accounts.google.com/o/oauth2/auth", True),
    ("https://oauth2.googleapis.com/token", True),
    ("https://127.0.0.1:8443/token", True),  # a stand-in on this machine
    ("https://localhost/token", True),
    ("http://127.0.0.1:8443/token", False),
    ("http://accounts.google.com/o/oauth2/auth", False),
    ("https://collector.example/token", False),
    ("https://evil.example/accounts.google.com/", False),
    ("https://accounts.google.com.evil.example/", False),
    ("https://accounts.google.com@evil.example/", False),
    ("https://192.168.1.20/token", False),
    ("ftp://accounts.google.com/", False),
])
def test_check_endpoint_takes_https_on_google_s_hosts_or_this_machine_only(url: str, ok: bool) -> None:
    if ok:
        assert check_endpoint(url, "token_uri") == url
    else:
        with pytest.raises(ValueError, match="not Google's"):
            check_endpoint(url, "token_uri")


# ---- settings: a grant in the data directory makes the account Google's ------------------------------------


def signed_in_environment(tmp_path: Path, **extra: str) -> dict[str, str]:
    data = tmp_path / "data"
    data.mkdir(exist_ok=True)
    grant_file(data)
    return {"AGENT_DATA_DIR": str(data), **extra}


def test_a_grant_in_the_data_directory_makes_the_account_google_s_primary_calendar(tmp_path: Path) -> None:
    found = account(load_settings(environ=signed_in_environment(tmp_path)))
    assert found is not None and found.token is not None
    assert (found.provider, found.username, found.password) == ("Google", EMAIL, "")
    assert found.url == primary_calendar_url(EMAIL) and found.url.startswith("https://apidata.googleusercontent.com/")


def test_calendars_by_name_start_from_the_account_s_principal(tmp_path: Path) -> None:
    found = account(load_settings(environ=signed_in_environment(tmp_path, AGENT_CALDAV_CALENDARS="Work, Family")))
    assert found is not None and found.url == f"{CALDAV_ROOT}{EMAIL}/user" and found.calendars == ("Work", "Family")
    assert found.url.startswith("https://apidata.googleusercontent.com/caldav/v2/")


@pytest.mark.parametrize("url", ["https://caldav.fastmail.com/dav/calendars/user/alice@fastmail.com/",
                                 "https://apidata.googleusercontent.com.evil.example/caldav/v2/",
                                 "https://caldav.icloud.com/"])
def test_a_caldav_url_on_another_host_while_signed_in_to_google_is_refused(tmp_path: Path, url: str) -> None:
    with pytest.raises(ValueError) as refused:
        account(load_settings(environ=signed_in_environment(tmp_path, AGENT_CALDAV_URL=url)))
    message = str(refused.value)
    assert "unset AGENT_CALDAV_URL" in message and "calendar logout google" in message and shows_no_secret(message)
    with pytest.raises(ValueError):
        check_caldav_url(url)


def test_a_caldav_url_on_this_machine_stands_in_for_google_s(tmp_path: Path) -> None:
    url = "http://127.0.0.1:5232/alice/calendar/"
    found = account(load_settings(environ=signed_in_environment(tmp_path, AGENT_CALDAV_URL=url)))
    assert found is not None and found.url == url and found.token is not None and found.provider == "Google"


# ---- launchd, logs --------------------------------------------------------------------------------------


def test_the_plist_holds_no_token_and_points_the_bot_at_the_grant(tmp_path: Path) -> None:
    env = signed_in_environment(tmp_path, TELEGRAM_BOT_TOKEN="123456789:AAHf4k3-t0k3n_for_tests_only_xyzABC",
                                TELEGRAM_ALLOWED_USERS="11")
    settings = load_settings(environ=env)
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF")
    data = plist_bytes(service_plist(settings, model_path=model, lora_path=None, token_file=tmp_path / "token",
                                     home=tmp_path / "home", environ=env))
    assert not any(secret.encode() in data for secret in SECRETS)
    plist_env = plistlib.loads(data)["EnvironmentVariables"]
    assert (Path(plist_env["AGENT_DATA_DIR"]) / GRANT_FILENAME).is_file()
    as_the_bot_reads_it = account(load_settings(environ=plist_env))
    assert as_the_bot_reads_it is not None and as_the_bot_reads_it.token is not None
    assert as_the_bot_reads_it.token.grant.refresh_token == REFRESH  # so it renews the token on its own


def test_a_log_record_holding_the_refresh_or_access_token_is_masked(tmp_path: Path) -> None:
    refresh, access = "1//0only-this-test-refresh-7781", "ya29.only-this-test-access-7781"
    text = f"refresh {refresh} gave Authorization: Bearer {access}"
    assert known_secrets.mask(text) == text  # nothing knows them before the grant is read
    load_grant(grant_file(tmp_path, make_grant(refresh_token=refresh, access_token=access)))
    formatter = MaskingFormatter(logging.Formatter("%(message)s"), None)
    record = logging.LogRecord("caldav", logging.DEBUG, __file__, 1, "refresh %s gave Authorization: Bearer %s",
                               (refresh, access), None)
    shown = formatter.format(record)
    assert refresh not in shown and access not in shown and shown.count("<google token>") == 2


# ---- the command line -------------------------------------------------------------------------------------


def one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_login_names_google_as_the_one_provider(tmp_path: Path) -> None:
    result = agent_cli("calendar", "login", "icloud", env={"AGENT_DATA_DIR": str(tmp_path / "data")})
    assert result.returncode == 2 and "google" in one_error_line(result)


def test_login_without_a_client_file_says_where_to_put_one(tmp_path: Path) -> None:
    result = agent_cli("calendar", "login", "google", env={"AGENT_DATA_DIR": str(tmp_path / "data")})
    line = one_error_line(result)
    assert result.returncode == 2 and "AGENT_GOOGLE_CLIENT_FILE" in line and 'README: "Google Calendar"' in line


def test_login_with_a_web_client_file_asks_for_a_desktop_app_client(tmp_path: Path) -> None:
    path = client_file(tmp_path, kind="web")
    result = agent_cli("calendar", "login", "google",
                       env={"AGENT_DATA_DIR": str(tmp_path / "data"), "AGENT_GOOGLE_CLIENT_FILE": str(path)})
    line = one_error_line(result)
    assert result.returncode == 2 and "Desktop app" in line and shows_no_secret(result.stdout + result.stderr)


def test_logout_without_a_sign_in_says_so_and_succeeds(tmp_path: Path) -> None:
    result = agent_cli("calendar", "logout", "google", env={"AGENT_DATA_DIR": str(tmp_path / "data")})
    assert result.returncode == 0 and "not signed in to Google" in result.stdout, result.stderr
    assert logout(tmp_path / "none" / GRANT_FILENAME) == "not signed in to Google"
