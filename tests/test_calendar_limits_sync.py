"""A server's oversized event, synced down cut and edited here, goes back up whole: the store's
caps (``tools.calendar.limits``) never cost the server a byte. Real Radicale and Xandikos on
127.0.0.1 (``tests.caldav_servers``); "the phone" is a second client writing straight to them.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Iterator
from zoneinfo import ZoneInfo

import icalendar
import pytest

from tests.caldav_servers import DavServer
from tests.google_fakes import dav_server, sync_account  # noqa: F401 (fixture: the servers and Google)
from tools.calendar.limits import IMPORT_ATTENDEES, IMPORT_NOTES
from tools.calendar.store import CalendarStore
from tools.calendar.sync.engine import CalDAVSync

T = datetime(2026, 12, 7, 10, tzinfo=ZoneInfo("Asia/Seoul"))
NOTES = "안건 " + "y" * 200_000
GUESTS = 500


@pytest.fixture
def store(tmp_path: Path) -> Iterator[CalendarStore]:
    with CalendarStore(tmp_path / "calendar.sqlite3", tz="Asia/Seoul") as s:
        yield s


def test_an_oversized_event_edited_here_reaches_the_server_whole(dav_server: DavServer, store: CalendarStore) -> None:
    cal = icalendar.Calendar()
    cal.add("prodid", "-//phone//EN")
    cal.add("version", "2.0")
    vevent = icalendar.Event()
    vevent.add("uid", "all-hands@example.com")
    vevent.add("summary", "All hands")
    vevent.add("dtstart", T)
    vevent.add("dtend", T + timedelta(hours=1))
    vevent.add("description", NOTES)
    for i in range(GUESTS):
        guest = icalendar.vCalAddress(f"mailto:guest{i}@example.com")
        guest.params["CN"] = f"Guest {i:03d}"
        guest.params["PARTSTAT"] = "ACCEPTED"
        vevent.add("attendee", guest, encode=False)
    cal.add_component(vevent)
    dav_server.phone().save_event(ical=cal.to_ical().decode())
    sync = CalDAVSync(store, sync_account(dav_server, timeout_s=10))
    assert sync.sync().ok
    local = store.find_uid("all-hands@example.com")
    assert local is not None and len(local.notes or "") == IMPORT_NOTES and len(local.attendees) == IMPORT_ATTENDEES

    store.update_event(local.id, title="All hands (moved room)")
    report = sync.sync()
    assert report.ok and report.pushed == 1
    theirs = dav_server.phone().event_by_uid("all-hands@example.com").icalendar_component
    assert str(theirs["summary"]) == "All hands (moved room)"
    assert str(theirs["description"]) == NOTES
    assert len(theirs["attendee"]) == GUESTS and theirs["attendee"][GUESTS - 1].params["PARTSTAT"] == "ACCEPTED"
    assert "X-ILJEONG-CUT" not in theirs
