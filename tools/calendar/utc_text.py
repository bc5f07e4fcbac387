"""How the calendar file writes a moment: fixed-width UTC text, so string order is time order.

Its own module because both the file's layout (``schema``, whose version-8 migration fills the
occurrence index) and the code that reads and writes rows (``store``, ``occurrence_index``,
``ledger``, the CalDAV sync) need it: kept in ``schema`` it made ``schema`` and
``occurrence_index`` import each other.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

_UTC_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


def to_utc_text(moment: datetime) -> str:
    """Fixed-width UTC text; refuses naive datetimes because their instant is unknown."""
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError(f"naive datetime {moment!r}: the store needs timezone-aware times")
    return moment.astimezone(timezone.utc).strftime(_UTC_FORMAT)


def from_utc_text(text: str) -> datetime:
    """The instant of a stored time. ``fromisoformat`` reads the fixed-width "…Z" form (Python
    3.11+) several times faster than ``strptime``; a day search over a calendar of series reads
    thousands of them."""
    moment = datetime.fromisoformat(text)
    if moment.tzinfo is timezone.utc:  # the "…Z" the store writes: already what is returned
        return moment
    if moment.utcoffset() != timedelta(0):
        raise ValueError(f"{text!r} is not a stored UTC time")
    return moment.astimezone(timezone.utc)


def now_text() -> str:
    return datetime.now(timezone.utc).strftime(_UTC_FORMAT)
