"""The series bench figure: a day search in a calendar of weekly series against one of single events.

``python -m tools.calendar.bench`` builds two in-memory calendars in one process, one with
1,000 weekly series running five years (260 occurrences each), one with 1,000 single events
spread over the same five years, and times ``events_between`` over one local day in each (the
best of ``repeats`` days, after one warm-up search). It prints one JSON line: both times, the
ratio (issue 28's goal: ≤ 3) and how many events each search returned, since a weekly calendar
has about 1,000 / 7 occurrences on any day and a calendar of singles about one.

A figure of the domain rather than of the runtime, so it lives here (``agent/bench`` imports no
domain) and runs without a model.
"""

from __future__ import annotations

import argparse
import json
import time
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from tools.calendar.store import CalendarStore

ZONE = ZoneInfo("Asia/Seoul")
FIRST = datetime(2026, 1, 5, 9, tzinfo=ZONE)  # a Monday
WEEKS = 260  # five years


def filled(kind: str, n: int) -> CalendarStore:
    """``n`` weekly series (``kind="series"``) or ``n`` single events over five years, in memory."""
    store = CalendarStore(":memory:", tz="Asia/Seoul")
    with store.transaction():
        for i in range(n):
            if kind == "series":
                start = FIRST + timedelta(days=i % 7, minutes=(i * 7) % 600)
                store.add_event(f"series {i}", start, start + timedelta(minutes=30),
                                recurrence=f"RRULE:FREQ=WEEKLY;COUNT={WEEKS}")
            else:
                start = FIRST + timedelta(days=(i * WEEKS * 7) // n, minutes=(i * 7) % 600)
                store.add_event(f"single {i}", start, start + timedelta(minutes=30))
    return store


def day_search(store: CalendarStore, repeats: int) -> tuple[float, int]:
    """Best seconds of a one-day search over ``repeats`` days in the third year, and the last count."""
    first_day = datetime(2028, 3, 1, tzinfo=ZONE)
    store.events_between(first_day - timedelta(days=1), first_day)  # warm-up (caches, statements)
    best, found = float("inf"), 0
    for k in range(repeats):
        day = first_day + timedelta(days=k)
        started = time.perf_counter()
        found = len(store.events_between(day, day + timedelta(days=1)))
        best = min(best, time.perf_counter() - started)
    return best, found


def figure(n: int = 1000, repeats: int = 14) -> dict[str, float | int]:
    with filled("series", n) as series, filled("singles", n) as singles:
        series_s, series_found = day_search(series, repeats)
        singles_s, singles_found = day_search(singles, repeats)
    return {"events": n, "series_day_search_ms": round(series_s * 1000, 3),
            "singles_day_search_ms": round(singles_s * 1000, 3),
            "ratio": round(series_s / singles_s, 1) if singles_s else float("inf"),
            "goal": 3, "series_found_per_day": series_found, "singles_found_per_day": singles_found}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.calendar.bench", description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1000, help="series and single events per calendar")
    parser.add_argument("--repeats", type=int, default=14, help="days searched; the best time counts")
    args = parser.parse_args(argv)
    print(json.dumps(figure(args.events, args.repeats)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
