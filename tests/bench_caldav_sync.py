"""The sync figures, in one run against real servers on 127.0.0.1:

- the first sync of a 1,000-event calendar (900 single events and 100 weekly series, one of
  them with a cancelled and a moved occurrence): requests, bytes, seconds;
- an incremental sync after one change on the phone: requests (goal ≤ 3) and bytes, as a ratio
  to a full re-download (a second, empty store pulling the whole calendar).

``python -m tests.bench_caldav_sync [--server radicale|xandikos] [--events 1000]`` prints one
JSON line per server. It lives beside the tests because it starts their servers
(``tests.caldav_servers``); it asserts nothing and no test runs it.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from datetime import datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

from tests.caldav_servers import SERVER_KINDS, start_server
from tools.calendar.store import CalendarStore
from tools.calendar.sync.engine import CalDAVSync
from tools.calendar.sync.report import SyncReport
from tools.calendar.sync.settings import Account

SEOUL = ZoneInfo("Asia/Seoul")
FIRST = datetime(2026, 12, 7, 9, tzinfo=SEOUL)


def filled(store: CalendarStore, n: int) -> None:
    series = max(1, n // 10)
    with store.transaction():
        for i in range(n - series):
            start = FIRST + timedelta(days=i % 365, minutes=(i * 7) % 600)
            store.add_event(f"event {i}", start, start + timedelta(minutes=30), location=f"room {i % 9}")
        for i in range(series):
            start = FIRST + timedelta(days=i % 7, hours=1 + i % 8)
            made = store.add_event(f"weekly {i}", start, start + timedelta(hours=1), recurrence="RRULE:FREQ=WEEKLY;COUNT=52")
        store.cancel_occurrence(made.id, made.start + timedelta(days=7))
        store.override_occurrence(made.id, made.start + timedelta(days=14), start=made.start + timedelta(days=14, hours=2),
                                  end=made.start + timedelta(days=14, hours=3))


def figures(report: SyncReport) -> dict[str, float | int]:
    return {"requests": report.requests, "bytes": report.bytes_sent + report.bytes_received,
            "seconds": round(report.seconds, 3), "pushed": report.pushed, "pulled": report.pulled}


def run(kind: str, n: int) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        server = start_server(kind, root / "server")
        try:
            account = Account(server.calendar_url, server.username, server.password, timeout_s=60)
            with CalendarStore(root / "here.sqlite3") as store:
                filled(store, n)
                sync = CalDAVSync(store, account)
                first = sync.sync()
                obj = server.phone().event_by_uid(store.all_events()[n // 2].uid)
                obj.icalendar_component["summary"] = "changed on the phone"
                obj.save(increase_seqno=False)
                incremental = sync.sync()
            with CalendarStore(root / "elsewhere.sqlite3") as other:
                download = CalDAVSync(other, account).sync()
                kept = len(other.all_events())
        finally:
            server.close()
    for report in (first, incremental, download):
        assert report.ok, report.error
    full = download.bytes_sent + download.bytes_received
    return {
        "server": kind, "events": n, "downloaded_events": kept,
        "first_sync": figures(first), "incremental_one_change": figures(incremental), "full_download": figures(download),
        "incremental_bytes_ratio": round((incremental.bytes_sent + incremental.bytes_received) / full, 5),
    }


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.bench_caldav_sync", description=__doc__.splitlines()[0])
    parser.add_argument("--server", choices=SERVER_KINDS, action="append", help="default: both")
    parser.add_argument("--events", type=int, default=1000)
    args = parser.parse_args()
    for kind in args.server or SERVER_KINDS:
        print(json.dumps(run(kind, args.events)), flush=True)


if __name__ == "__main__":
    main()
