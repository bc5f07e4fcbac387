"""The series bench figure: a day search in a calendar of weekly series against one of single events.

``python -m tools.calendar.lab.bench`` builds two in-memory calendars in one process, one with
1,000 weekly series running five years (260 occurrences each), one with 1,000 single events
spread over the same five years, and times ``events_between`` over one local day in each (the
best of ``repeats`` days, after one warm-up search). It prints one JSON line: both times, the
ratio (the goal: ≤ 3) and how many events each search returned, since a weekly calendar
has about 1,000 / 7 occurrences on any day and a calendar of singles about one (1,000 over
1,826 days: ``singles_found_per_day`` is the last day's count, often 0; the ``*_found_mean``
fields are the means over the days searched).

Since those two searches return ~143 events and ~0.5, two more figures compare like with like.
``ratio_per_returned_event`` divides each time by the mean number of events its search returned
(a search returning none counts as one: it still runs its queries). And a third calendar, built
in the same process, holds the series' occurrences on the searched days as single events (same
titles and times, one row each), searched over the same days: ``same_events_ratio`` is the
series search's time over that one's (``same_events_found_mean`` shows they return as many).

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


def searched_days(repeats: int) -> list[datetime]:
    """The warm-up day, then the ``repeats`` days timed: in the third year."""
    first_day = datetime(2028, 3, 1, tzinfo=ZONE)
    return [first_day + timedelta(days=k) for k in range(-1, repeats)]


def copies_of_occurrences(store: CalendarStore, days: list[datetime]) -> CalendarStore:
    """An in-memory calendar of single events, one per event ``store`` has on ``days``."""
    copies = CalendarStore(":memory:", tz="Asia/Seoul")
    seen: set[tuple[int, str | None]] = set()
    with copies.transaction():
        for day in days:
            for event in store.events_between(day, day + timedelta(days=1)):
                if event.key not in seen:
                    seen.add(event.key)
                    copies.add_event(event.title, event.start, event.end)
    return copies


def day_search(store: CalendarStore, repeats: int) -> tuple[float, list[int]]:
    """Best seconds of a one-day search over ``repeats`` days in the third year, and each day's count."""
    warm_up, *days = searched_days(repeats)
    store.events_between(warm_up, warm_up + timedelta(days=1))  # warm-up (caches, statements)
    best, found = float("inf"), []
    for day in days:
        started = time.perf_counter()
        found.append(len(store.events_between(day, day + timedelta(days=1))))
        best = min(best, time.perf_counter() - started)
    return best, found


def figure(n: int = 1000, repeats: int = 14) -> dict[str, float | int]:
    with filled("series", n) as series, filled("singles", n) as singles:
        series_s, series_found = day_search(series, repeats)
        singles_s, singles_found = day_search(singles, repeats)
        with copies_of_occurrences(series, searched_days(repeats)) as copies:
            copies_s, copies_found = day_search(copies, repeats)
    series_mean, singles_mean = sum(series_found) / repeats, sum(singles_found) / repeats
    per_event = (series_s / max(series_mean, 1)) / (singles_s / max(singles_mean, 1)) if singles_s else float("inf")
    return {"events": n, "series_day_search_ms": round(series_s * 1000, 3),
            "singles_day_search_ms": round(singles_s * 1000, 3),
            "ratio": round(series_s / singles_s, 1) if singles_s else float("inf"),
            "goal": 3, "series_found_per_day": series_found[-1], "singles_found_per_day": singles_found[-1],
            "series_found_mean": round(series_mean, 2), "singles_found_mean": round(singles_mean, 2),
            "ratio_per_returned_event": round(per_event, 3),
            "same_events_singles_day_search_ms": round(copies_s * 1000, 3),
            "same_events_found_mean": round(sum(copies_found) / repeats, 2),
            "same_events_ratio": round(series_s / copies_s, 2) if copies_s else float("inf")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.calendar.lab.bench", description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1000, help="series and single events per calendar")
    parser.add_argument("--repeats", type=int, default=14, help="days searched; the best time counts")
    args = parser.parse_args(argv)
    print(json.dumps(figure(args.events, args.repeats)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
