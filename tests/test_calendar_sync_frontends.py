"""CalDAV sync as a user meets it: `python -m agent calendar sync|status`, the runtime around a
turn (the push after it, the approval naming the server, a conflict told once, a dead server not
waited on), the REPL's banner and /sync. Real Radicale and Xandikos on 127.0.0.1, and "Google"
(Radicale behind a bearer-only front, signed in through a fake Google sign-in server, the grant in
the data directory as ``calendar login google`` leaves it); the model is a scripted backend, so
every call is forced.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Iterator
from zoneinfo import ZoneInfo

import pytest

from agent.app import build_runtime
from agent.approval import ApprovalRequest, Decision
from agent.backends.scripted import ScriptedBackend
from agent.config import load_settings
from agent.formats import format_tool_call
from agent.repl import banner, handle_command
from tests.caldav_servers import DavServer, FaultProxy, dav_proxy  # noqa: F401 (fixtures)
from tests.google_fakes import GoogleDav, dav_server  # noqa: F401 (fixture: the servers and Google)
from tools.calendar.store import CalendarStore
from tools.calendar.sync.state import SyncState

ROOT = Path(__file__).resolve().parents[1]
SEOUL = ZoneInfo("Asia/Seoul")
DENTIST = {"title": "치과 예약", "date": "2026-12-04", "start_time": "15:00", "end_time": "16:00"}




def provider(server: DavServer) -> str:
    """The name the user is shown for ``server``: Google by name, a local server by its host."""
    return "Google" if isinstance(server, GoogleDav) else "127.0.0.1"


def caldav_env(tmp_path: Path, server: DavServer, url: str | None = None) -> dict[str, str]:
    """The settings a user has after setting up ``server``: a password file, or a Google sign-in in
    the data directory (then only the URL of Google's stand-in, which is on this machine)."""
    data = tmp_path / "data"
    if isinstance(server, GoogleDav):
        server.grant_file(data)
        return {"AGENT_DATA_DIR": str(data), "AGENT_CALDAV_URL": url or server.calendar_url,
                "REQUESTS_CA_BUNDLE": str(server.oauth.ca_bundle)}
    return {
        "AGENT_DATA_DIR": str(data),
        "AGENT_CALDAV_URL": url or server.calendar_url,
        "AGENT_CALDAV_USERNAME": server.username,
        "AGENT_CALDAV_PASSWORD_FILE": str(server.password_file(tmp_path)),
    }


def agent_cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_", "TELEGRAM_"))}
    return subprocess.run([sys.executable, "-m", "agent", *args], cwd=ROOT, env={**base, **env},
                          capture_output=True, text=True, timeout=180)


class Recording:
    """Approves, and keeps what the human was shown."""

    def __init__(self) -> None:
        self.shown: list[str] = []

    def decide(self, request: ApprovalRequest) -> Decision:
        self.shown.append(request.description)
        return Decision(True, "user")


# -- the command line ------------------------------------------------------------------------------


def test_calendar_sync_prints_one_line_and_exits_0_in_step(dav_server: DavServer, tmp_path: Path) -> None:
    env = caldav_env(tmp_path, dav_server)
    data = tmp_path / "data"
    data.mkdir(exist_ok=True)
    with CalendarStore(data / "calendar.sqlite3") as store:
        start = datetime(2026, 12, 4, 15, tzinfo=SEOUL)
        store.add_event("치과", start, start + timedelta(hours=1))
    done = agent_cli("calendar", "sync", env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("pulled 0, pushed 1, conflicts 0") and done.stdout.count("\n") == 1
    status = agent_cli("calendar", "status", env=env)
    assert status.returncode == 0 and "waiting to be sent: 0" in status.stdout and "last sync: 20" in status.stdout


def test_calendar_sync_with_a_refused_password_is_one_line_exit_2_without_the_password(
        dav_server: DavServer, tmp_path: Path) -> None:
    if isinstance(dav_server, GoogleDav):
        pytest.skip("a bearer-only server takes no password (test_google_calendar.py: a revoked sign-in)")
    env = caldav_env(tmp_path, dav_server)
    wrong = tmp_path / "wrong"
    wrong.write_text("not-the-password-4711")
    wrong.chmod(0o600)
    env["AGENT_CALDAV_PASSWORD_FILE"] = str(wrong)
    done = agent_cli("calendar", "sync", env=env)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "refused the login" in done.stderr
    assert "not-the-password-4711" not in done.stderr + done.stdout


def test_calendar_sync_to_a_server_that_is_down_exits_2_naming_it(dav_server: DavServer, tmp_path: Path) -> None:
    env = caldav_env(tmp_path, dav_server)
    if isinstance(dav_server, GoogleDav):
        dav_server.proxy.down()  # Google's front itself unreachable, not a 502 from it
    else:
        dav_server.stop()
    done = agent_cli("calendar", "sync", env=env)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "cannot reach 127.0.0.1" in done.stderr


@pytest.mark.parametrize("change, says", [
    ({"AGENT_CALDAV_URL": "http://caldav.example.com/dav/"}, "plain http to another host"),
    ({"AGENT_CALDAV_USERNAME": ""}, "caldav_username is not"),
    ({"AGENT_CALDAV_PASSWORD_FILE": "open"}, "readable by others (mode 644): run chmod 600"),
    ({"AGENT_CALDAV_PASSWORD_FILE": "missing"}, "does not exist"),
    ({"AGENT_CALDAV_PASSWORD_FILE": ""}, "no CalDAV password: write it to a file with mode 600"),  # and no Keychain
])
def test_a_caldav_setup_that_cannot_work_is_one_line_and_exit_2(change: dict[str, str], says: str,
                                                                  tmp_path: Path) -> None:
    env = {"AGENT_DATA_DIR": str(tmp_path / "data"), "AGENT_CALDAV_URL": "https://caldav.example.com/",
           "AGENT_CALDAV_USERNAME": "me", "AGENT_CALDAV_PASSWORD_FILE": str(tmp_path / "pw")}
    (tmp_path / "pw").write_text("secret")
    (tmp_path / "pw").chmod(0o600)
    (tmp_path / "open").write_text("secret")
    (tmp_path / "open").chmod(0o644)
    env.update({k: str(tmp_path / v) if v in ("open", "missing") else v for k, v in change.items()})
    done = agent_cli("calendar", "sync", env=env)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert says in done.stderr


def test_calendar_sync_without_a_server_says_how_to_set_one_up(tmp_path: Path) -> None:
    done = agent_cli("calendar", "sync", env={"AGENT_DATA_DIR": str(tmp_path / "data")})
    assert done.returncode == 2 and "AGENT_CALDAV_URL" in done.stderr


# -- around a turn ---------------------------------------------------------------------------------


@pytest.fixture
def runtime_with(tmp_path: Path) -> Iterator[Any]:
    made: list[Any] = []

    def build(server: DavServer, outputs: list[str], url: str | None = None, **flags: Any) -> Any:
        env = caldav_env(tmp_path, server, url)
        settings = load_settings({"data_dir": env["AGENT_DATA_DIR"], **flags}, environ=env)
        runtime = build_runtime(settings, ScriptedBackend(outputs))
        made.append(runtime)
        return runtime

    yield build
    for runtime in made:
        runtime.close()


def test_a_turn_that_creates_an_event_puts_it_on_the_server_and_names_it_in_the_approval(
        dav_server: DavServer, runtime_with: Any) -> None:
    runtime = runtime_with(dav_server, [
        format_tool_call("create_event", DENTIST), "Booked.",
        format_tool_call("delete_event", {"event_id": 1}), "Deleted.",
    ], caldav_refresh_wait_s=60)
    turn = runtime.handle("repl", "book the dentist", Recording())
    assert turn.receipt.startswith("📅 created #1 '치과 예약'")
    [uid] = [str(e.icalendar_component["uid"]) for e in dav_server.phone().events()]
    assert str(dav_server.phone().event_by_uid(uid).icalendar_component["summary"]) == "치과 예약"
    approver = Recording()
    runtime.handle("repl", "delete it", approver)
    assert approver.shown == [f"Delete #1 '치과 예약' Fri 2026-12-04 15:00-16:00 (also in your {provider(dav_server)} calendar)"]
    assert dav_server.phone().events() == []


def test_a_conflict_is_told_once_after_the_turn(dav_server: DavServer, runtime_with: Any) -> None:
    runtime = runtime_with(dav_server, [
        format_tool_call("create_event", DENTIST), "Booked.",
        format_tool_call("update_event", {"event_id": 1, "start_time": "17:00", "end_time": "18:00"}), "Moved.",
        "Nothing to do.",
    ], caldav_refresh_wait_s=60, caldav_refresh_after_s=3600)
    runtime.handle("repl", "book the dentist", Recording())
    obj = dav_server.phone().events()[0]
    component = obj.icalendar_component
    del component["dtstart"], component["dtend"]
    component.add("dtstart", datetime(2026, 12, 4, 16, tzinfo=SEOUL))
    component.add("dtend", datetime(2026, 12, 4, 17, tzinfo=SEOUL))
    obj.save(increase_seqno=False)  # the phone moves it to 16:00 while we move it to 17:00
    moved = runtime.handle("repl", "move it to 5 pm", Recording())
    lines = moved.receipt.splitlines()
    where = "your phone" if isinstance(dav_server, GoogleDav) else "127.0.0.1"
    assert lines[-1] == f"📅 '치과 예약' changed on {where} too: kept the phone's time 12-04 16:00; mine was 12-04 17:00"
    assert runtime.handle("repl", "thanks", Recording()).receipt is None  # told once


def test_a_turn_does_not_wait_for_a_server_that_does_not_answer(
        dav_server: DavServer, dav_proxy: FaultProxy, runtime_with: Any) -> None:
    runtime = runtime_with(dav_server, [format_tool_call("create_event", DENTIST), "Booked."],
                           url=dav_proxy.calendar_url, caldav_refresh_wait_s=0.2)
    dav_proxy.slow(30)  # every request held for 30 s
    turn = runtime.handle("repl", "book the dentist", Recording())
    assert turn.receipt.startswith("📅 created #1")
    assert dav_proxy.requests == []  # the turn ended while the server still had not answered anything
    assert SyncState(runtime.domain.remote.engine.store).status().queued == 1  # kept here, waiting


def test_the_banner_and_sync_command_show_the_servers_state(dav_server: DavServer, runtime_with: Any) -> None:
    runtime = runtime_with(dav_server, [])
    assert any(line.startswith(f"{provider(dav_server)} calendar sync: ") for line in banner(runtime, "Asia/Seoul"))
    out = io.StringIO()
    handle_command("/sync", runtime, out)
    assert out.getvalue().startswith("pulled 0, pushed 0, conflicts 0")
    assert "in step at" in runtime.domain.remote.status()


def test_calendar_names_in_the_environment_are_separated_by_commas_not_spaces(tmp_path: Path) -> None:
    from tools.calendar.sync.settings import load_caldav_settings

    settings = load_settings({"data_dir": str(tmp_path)}, environ={"AGENT_CALDAV_CALENDARS": "My Calendar, Work;Family"})
    assert load_caldav_settings(settings).caldav_calendars == ("My Calendar", "Work", "Family")


def test_without_a_password_file_the_password_comes_from_the_keychain(tmp_path: Path) -> None:
    """The Keychain itself cannot run here: the real ``keyring`` library with an in-memory
    backend stands in for it, so the lookup (service name, user name) is ours, for real."""
    import keyring
    from keyring.backend import KeyringBackend

    from tools.calendar.sync.settings import KEYRING_SERVICE, account

    class InMemory(KeyringBackend):
        priority = 1  # type: ignore[assignment]

        def __init__(self) -> None:
            super().__init__()
            self.items: dict[tuple[str, str], str] = {}

        def get_password(self, service: str, username: str) -> str | None:
            return self.items.get((service, username))

        def set_password(self, service: str, username: str, password: str) -> None:
            self.items[(service, username)] = password

        def delete_password(self, service: str, username: str) -> None:
            self.items.pop((service, username), None)

    previous = keyring.get_keyring()
    keyring.set_keyring(InMemory())
    try:
        keyring.set_password(KEYRING_SERVICE, "me@icloud.com", "abcd-efgh-ijkl-mnop")
        settings = load_settings({"data_dir": str(tmp_path)}, environ={
            "AGENT_CALDAV_URL": "https://caldav.icloud.com/", "AGENT_CALDAV_USERNAME": "me@icloud.com"})
        found = account(settings)
        assert found is not None and found.password == "abcd-efgh-ijkl-mnop" and found.provider == "iCloud"
        assert "abcd" not in repr(found)
        other = load_settings({"data_dir": str(tmp_path)}, environ={
            "AGENT_CALDAV_URL": "https://caldav.icloud.com/", "AGENT_CALDAV_USERNAME": "someone-else"})
        with pytest.raises(ValueError, match="no CalDAV password"):
            account(other)
    finally:
        keyring.set_keyring(previous)


def test_sync_is_offered_only_where_a_server_is_set_up(dav_server: DavServer, runtime_with: Any,
                                                       tmp_path: Path) -> None:
    from tools.calendar.domain import load_domain

    plain = load_domain(load_settings({"data_dir": str(tmp_path / "plain")}, environ={}))
    try:
        assert "sync" not in plain.commands and "sync" not in plain.descriptions and plain.remote is None
    finally:
        plain.close()
    runtime = runtime_with(dav_server, [])
    assert runtime.domain.descriptions["sync"] == f"sync with your {provider(dav_server)} calendar now"
