"""The CalDAV password reaches the configured server only, and no line or log shows it.

The attacks, as they were found or would be tried:
- a server (hostile, hijacked, or with an injected answer) whose current-user-principal or
  calendar-home-set names another host, or that answers with a 301/302/307/308 to one, and
  then asks for Basic auth there (a collector on 127.0.0.2, or on another port of 127.0.0.1);
- ``AGENT_CALDAV_URL=http://user:pass@host/``, which ``calendar status`` used to print;
- ``AGENT_CALDAV_URL=http://<another host>/`` with the password going out in plain http;
- the password in a log record.
The fake CalDAV servers are stdlib listeners on loopback addresses that record every request;
the sync is the real engine with the real caldav library. Seen here with caldav 3.6 on niquests:
the library's own ``HTTPBasicAuth`` sends the password to a calendar-home-set on another host
(the lure these tests must catch); niquests strips it from 3xx redirects to another origin; caldav
refuses to join a principal URL on another origin. The last two are kept as cases so that a
change in either library cannot quietly reopen them.
"""

from __future__ import annotations

import base64
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Callable, Iterator

import pytest

from agent import known_secrets
from agent.config import load_settings
from agent.url_policy import ALLOW_ENV, origin_of
from bot.masking import MaskingFormatter
from tests.recording_server import Answer, RecordingServer, Seen, non_loopback_address
from tools.calendar.store import CalendarStore
from tools.calendar.sync.auth import OriginBoundAuth
from tools.calendar.sync.engine import CalDAVSync
from tools.calendar.sync.settings import Account, account

ROOT = Path(__file__).resolve().parents[1]
USER = "alice"
PASSWORD = "correct-Horse-battery-9"


def multistatus(href: str, prop: str) -> Answer:
    ns = 'xmlns:d="DAV:" xmlns:c="urn:ietf:params:xml:ns:caldav"'
    body = (f'<?xml version="1.0" encoding="utf-8"?><d:multistatus {ns}><d:response><d:href>/</d:href>'
            f"<d:propstat><d:prop><{prop}><d:href>{href}</d:href></{prop}></d:prop>"
            "<d:status>HTTP/1.1 200 OK</d:status></d:propstat></d:response></d:multistatus>")
    return Answer(207, {"Content-Type": "application/xml; charset=utf-8"}, body.encode())


def collector(_seen: Seen, _server: RecordingServer) -> Answer:
    """Asks for the password, as a host collecting it would."""
    return Answer(401, {"WWW-Authenticate": 'Basic realm="calendar"'}, b"")


def principal_elsewhere(target: str) -> Callable[[Seen, RecordingServer], Answer]:
    return lambda seen, _server: multistatus(f"{target}/principals/{USER}/", "d:current-user-principal")


def home_set_elsewhere(target: str) -> Callable[[Seen, RecordingServer], Answer]:
    def answer(seen: Seen, server: RecordingServer) -> Answer:
        if b"calendar-home-set" in seen.body:
            return multistatus(f"{target}/calendars/{USER}/", "c:calendar-home-set")
        return multistatus(f"/principals/{USER}/", "d:current-user-principal")
    return answer


def redirect_elsewhere(status: int, target: str) -> Callable[[Seen, RecordingServer], Answer]:
    return lambda seen, _server: Answer(status, {"Location": f"{target}{seen.path}"}, b"")


@pytest.fixture
def store(tmp_path: Path) -> Iterator[CalendarStore]:
    s = CalendarStore(tmp_path / "calendar.sqlite3", tz="Asia/Seoul")
    yield s
    s.close()


def password_file(tmp_path: Path) -> Path:
    path = tmp_path / "caldav_password"
    path.write_text(PASSWORD + "\n")
    path.chmod(0o600)
    return path


def agent_cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_", "TELEGRAM_"))}
    return subprocess.run([sys.executable, "-m", "agent", *args], cwd=ROOT, env={**base, "PYTHONPATH": str(ROOT), **env},
                          capture_output=True, text=True, timeout=120)


# ---- discovery and redirects that leave the server ------------------------------------------------


@pytest.mark.parametrize("other_host", ["127.0.0.2", "127.0.0.1"], ids=["other-host", "other-port"])
@pytest.mark.parametrize("lure", ["principal", "home-set", "301", "302", "307", "308"])
def test_discovery_or_a_redirect_to_another_origin_never_carries_the_password(
        store: CalendarStore, other_host: str, lure: str) -> None:
    with RecordingServer(collector, other_host) as elsewhere:
        answers = {"principal": principal_elsewhere(elsewhere.origin), "home-set": home_set_elsewhere(elsewhere.origin)}
        answer = answers.get(lure) or redirect_elsewhere(int(lure), elsewhere.origin)
        with RecordingServer(answer, "127.0.0.1") as home:
            report = CalDAVSync(store, Account(f"{home.origin}/", USER, PASSWORD, timeout_s=5)).sync()
    if lure != "principal":  # caldav 3.6 refuses to join a principal URL on another origin (ValueError)
        assert elsewhere.requests, "the lure was not followed: this test would prove nothing"
    assert elsewhere.authorizations() == []
    assert home.authorizations() and all(a.startswith("Basic ") for a in home.authorizations())
    assert not report.ok and PASSWORD not in (report.error or "")


def test_the_configured_server_itself_still_gets_the_login_from_the_first_request(store: CalendarStore) -> None:
    with RecordingServer(home_set_elsewhere(""), "127.0.0.1") as home:  # calendar home on the same server
        CalDAVSync(store, Account(f"{home.origin}/", USER, PASSWORD, timeout_s=5)).sync()
    expected = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    assert home.requests and home.authorizations() == [expected] * len(home.requests)


@pytest.mark.parametrize("url,gets", [
    ("https://p42-caldav.icloud.com/123/calendars/", True),  # iCloud keeps calendars on another host
    ("https://p42-caldav.icloud.com:8443/123/calendars/", False),
    ("http://p42-caldav.icloud.com/123/calendars/", False),
    ("https://icloud.com.evil.example/", False),
    ("https://evilicloud.com/", False),
])
def test_only_icloud_s_own_hosts_share_an_icloud_login(url: str, gets: bool) -> None:
    auth = OriginBoundAuth("https://caldav.icloud.com/", USER, PASSWORD)
    assert auth.may_receive(origin_of(url)) is gets
    assert not OriginBoundAuth("https://cal.example.com/", USER, PASSWORD).may_receive(
        origin_of("https://p42-caldav.icloud.com/"))


# ---- the URL: credentials in it, plain http to another host -----------------------------------------


def test_a_password_in_the_caldav_url_is_refused_and_printed_nowhere(tmp_path: Path) -> None:
    env = {"AGENT_DATA_DIR": str(tmp_path / "data"), "AGENT_CALDAV_URL": f"http://{USER}:{PASSWORD}@127.0.0.1:9/dav/",
           "AGENT_CALDAV_USERNAME": USER, "AGENT_CALDAV_PASSWORD_FILE": str(password_file(tmp_path))}
    with pytest.raises(ValueError) as refused:
        account(load_settings(environ=env))
    assert PASSWORD not in str(refused.value) and "AGENT_CALDAV_PASSWORD_FILE" in str(refused.value)
    for command in ("status", "sync"):
        result = agent_cli("calendar", command, env=env)
        assert result.returncode == 2, result.stdout + result.stderr
        assert PASSWORD not in result.stdout + result.stderr
        assert len(result.stderr.strip().splitlines()) == 1 and "user name or password" in result.stderr


def test_plain_http_to_another_host_is_refused_before_a_connection_unless_named(tmp_path: Path) -> None:
    address = non_loopback_address()
    if address is None:
        pytest.skip("this machine has no non-loopback address to stand for another host")
    with RecordingServer(collector, address) as server:
        env = {"AGENT_DATA_DIR": str(tmp_path / "data"), "AGENT_CALDAV_URL": f"{server.origin}/dav/",
               "AGENT_CALDAV_USERNAME": USER, "AGENT_CALDAV_PASSWORD_FILE": str(password_file(tmp_path))}
        refused = agent_cli("calendar", "sync", env=env)
        assert server.connections == 0
        allowed = agent_cli("calendar", "sync", env={**env, ALLOW_ENV: address})
    assert refused.returncode == 2
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and ALLOW_ENV in lines[0] and address in lines[0], refused.stderr
    assert server.requests and server.authorizations()  # named: the same server gets the login
    assert PASSWORD not in refused.stderr + allowed.stdout + allowed.stderr


def test_an_account_made_by_hand_is_checked_again_before_the_client_connects(store: CalendarStore) -> None:
    report = CalDAVSync(store, Account("http://calendar.invalid/dav/", USER, PASSWORD)).sync()
    assert not report.ok and ALLOW_ENV in (report.error or "") and report.requests == 0


# ---- masks ------------------------------------------------------------------------------------------


def test_a_log_record_holding_the_password_or_its_basic_header_is_masked(tmp_path: Path) -> None:
    env = {"AGENT_DATA_DIR": str(tmp_path / "data"), "AGENT_CALDAV_URL": "https://cal.example.com/dav/",
           "AGENT_CALDAV_USERNAME": USER, "AGENT_CALDAV_PASSWORD_FILE": str(password_file(tmp_path))}
    assert account(load_settings(environ=env)).password == PASSWORD  # read as the bot reads it
    header = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    formatter = MaskingFormatter(logging.Formatter("%(message)s"), "123456:ABCdefGHIjklMNOpqrSTUvwxYZ012345678")
    record = logging.LogRecord("caldav", logging.DEBUG, __file__, 1,
                               "login %s failed; sent Authorization: Basic %s", (PASSWORD, header), None)
    shown = formatter.format(record)
    assert PASSWORD not in shown and header not in shown
    assert shown.count("<caldav password>") == 2


def test_an_exception_traceback_in_the_log_is_masked_too(tmp_path: Path) -> None:
    known_secrets.remember(PASSWORD, "<caldav password>")
    formatter = MaskingFormatter(logging.Formatter("%(message)s"), None)
    try:
        raise RuntimeError(f"server said: bad password {PASSWORD}")
    except RuntimeError:
        record = logging.LogRecord("x", logging.ERROR, __file__, 1, "sync failed", None, sys.exc_info())
    shown = formatter.format(record)
    assert "RuntimeError" in shown and PASSWORD not in shown
