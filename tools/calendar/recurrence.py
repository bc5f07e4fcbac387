"""A series' recurrence as stored text, and its expansion into occurrences (``dateutil.rrule``).

The store keeps a series' recurrence as iCalendar content lines, one property per line::

    RRULE:FREQ=WEEKLY;BYDAY=MO;UNTIL=20271231T145959Z
    RDATE:20261203T010000Z
    EXDATE:20261207T010000Z

RDATE and EXDATE are UTC instants and UNTIL is UTC, so the text means one thing whatever
the reader's zone. The rule itself runs in the series' own zone on its local wall time: a
rule started at Monday 10:00 in Asia/Seoul or America/New_York yields 10:00 local on every
Monday, on either side of a DST change (``dateutil`` keeps the wall clock of an aware
``dtstart`` and only the offset changes). Expansion is ``dateutil``'s job; nothing here
counts weekdays. DTSTART always counts as the first occurrence (RFC 5545 3.8.5.3), as
``recurring-ical-events`` has it, even where a rule from another program does not match it.

Sub-daily rules (HOURLY, MINUTELY, SECONDLY) are refused: a calendar person does not keep
them, and they would turn a day search into thousands of occurrences; so is a daily or longer
rule with several BYHOUR, BYMINUTE or BYSECOND values, which is the same thing spelled otherwise,
and an INTERVAL below 1, on which ``dateutil`` never yields a second start.

Every walk is bounded (``bounded_rules``): a rule ends once ``dateutil`` has walked 50 years of
months without an occurrence, and ``check`` refuses a rule that gives none after DTSTART in that
span (``FREQ=DAILY;BYMONTH=2;BYMONTHDAY=30`` walked to year 9999, seconds per rule, whatever its
UNTIL or COUNT). Sparse rules that do match (yearly on Feb 29) are untouched.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from bisect import bisect_left
from functools import lru_cache
from typing import Iterable

from dateutil import rrule as du

from tools.calendar import bounded_rules
from tools.calendar.limits import SERIES_SPAN_YEARS

_UTC_FORMAT = "%Y%m%dT%H%M%SZ"
FREQUENCIES = ("DAILY", "WEEKLY", "MONTHLY", "YEARLY")
WEEKDAY_CODES = ("MO", "TU", "WE", "TH", "FR", "SA", "SU")
FREQ_WORDS = {"DAILY": "daily", "WEEKLY": "weekly", "MONTHLY": "monthly", "YEARLY": "yearly"}
FREQ_WORDS_KO = {"DAILY": "매일", "WEEKLY": "매주", "MONTHLY": "매월", "YEARLY": "매년"}
LAST_SCAN = 20_000  # occurrences walked to find a finite series' last one; beyond, it counts as endless


@dataclass(frozen=True)
class Recurrence:
    """The parts of a stored recurrence text."""

    rrules: tuple[str, ...] = ()  # RRULE values, e.g. "FREQ=WEEKLY;BYDAY=MO"
    rdates: tuple[datetime, ...] = ()  # aware, UTC
    exdates: tuple[datetime, ...] = ()

    def text(self) -> str | None:
        lines = [f"RRULE:{r}" for r in self.rrules]
        if self.rdates:
            lines.append("RDATE:" + ",".join(utc_stamp(d) for d in sorted(set(self.rdates))))
        if self.exdates:
            lines.append("EXDATE:" + ",".join(utc_stamp(d) for d in sorted(set(self.exdates))))
        return "\n".join(lines) or None

    def with_exdate(self, moment: datetime) -> Recurrence:
        return Recurrence(self.rrules, self.rdates, (*self.exdates, moment.astimezone(timezone.utc)))

    def shifted(self, delta: timedelta) -> Recurrence:
        """Every instant in it moved by ``delta`` (the whole series moved): RDATE, EXDATE, UNTIL."""
        rules = []
        for rule in self.rrules:
            until = rule_part(rule, "UNTIL")
            if until is not None and re.fullmatch(r"\d{8}T\d{6}Z", until):
                rule = _set_part(rule, "UNTIL", utc_stamp(_parse_stamp(until) + delta))
            rules.append(rule)
        return Recurrence(tuple(rules), tuple(d + delta for d in self.rdates), tuple(d + delta for d in self.exdates))

    def with_until(self, until: datetime) -> Recurrence:
        """Every rule ends at ``until`` (inclusive); RDATEs after it go. For "this and following"."""
        limit = until.astimezone(timezone.utc)
        rules = tuple(_set_part(_drop_part(r, "COUNT"), "UNTIL", utc_stamp(limit)) if not _ends_before(r, limit) else r
                      for r in self.rrules)
        return Recurrence(rules, tuple(d for d in self.rdates if d <= limit), tuple(d for d in self.exdates if d <= limit))

    def from_start(self, start: datetime, last: datetime | None) -> Recurrence:
        """The same recurrence for a new series starting at ``start`` (an occurrence of this one):
        a COUNT becomes UNTIL the old series' ``last`` start (a COUNT counts from DTSTART, so it
        cannot carry over); RDATEs and EXDATEs before ``start`` go."""
        rules = []
        for rule in self.rrules:
            if rule_part(rule, "COUNT") and last is not None:
                rule = _set_part(_drop_part(rule, "COUNT"), "UNTIL", utc_stamp(last))
            rules.append(rule)
        keep = start.astimezone(timezone.utc)
        return Recurrence(tuple(rules), tuple(d for d in self.rdates if d >= keep),
                          tuple(d for d in self.exdates if d >= keep))


def utc_stamp(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).strftime(_UTC_FORMAT)


def _parse_stamp(text: str) -> datetime:
    return datetime.strptime(text.strip(), _UTC_FORMAT).replace(tzinfo=timezone.utc)


def rule_part(rule: str, name: str) -> str | None:
    for part in rule.split(";"):
        key, _, value = part.partition("=")
        if key.upper() == name:
            return value
    return None


def _drop_part(rule: str, name: str) -> str:
    return ";".join(p for p in rule.split(";") if p.partition("=")[0].upper() != name)


def _set_part(rule: str, name: str, value: str) -> str:
    return ";".join([*[p for p in rule.split(";") if p.partition("=")[0].upper() != name], f"{name}={value}"])


def _ends_before(rule: str, limit: datetime) -> bool:
    until = rule_part(rule, "UNTIL")
    return until is not None and re.fullmatch(r"\d{8}T\d{6}Z", until) is not None and _parse_stamp(until) <= limit


def parse(text: str | None) -> Recurrence:
    """The stored text's parts; ValueError on a line that is not RRULE, RDATE or EXDATE."""
    if not text:
        return Recurrence()
    rrules, rdates, exdates = [], [], []
    for line in text.splitlines():
        if not line.strip():
            continue
        name, _, value = line.partition(":")
        name = name.upper()
        if name == "RRULE":
            rrules.append(value)
        elif name in ("RDATE", "EXDATE"):
            (rdates if name == "RDATE" else exdates).extend(_parse_stamp(v) for v in value.split(",") if v.strip())
        else:
            raise ValueError(f"not a recurrence line: {line!r}")
    return Recurrence(tuple(rrules), tuple(rdates), tuple(exdates))


def check(text: str | None, start: datetime) -> str | None:
    """The text if a series starting at ``start`` can run on it (ValueError with the reason if not)."""
    recurrence = parse(text)
    for rule in recurrence.rrules:
        freq = (rule_part(rule, "FREQ") or "").upper()
        if freq not in FREQUENCIES:
            raise ValueError(f"FREQ={freq or '?'}: only DAILY, WEEKLY, MONTHLY and YEARLY series are kept")
        until = rule_part(rule, "UNTIL")
        if until is not None and not re.fullmatch(r"\d{8}T\d{6}Z", until):
            raise ValueError(f"UNTIL={until}: must be a UTC time (YYYYMMDDTHHMMSSZ)")
        interval = rule_part(rule, "INTERVAL")
        if interval is not None and not (interval.isdigit() and int(interval) >= 1):
            # dateutil accepts INTERVAL=0 and then never yields the next start (a hang, not an error)
            raise ValueError(f"INTERVAL={interval}: must be a whole number of at least 1")
        for part in ("BYHOUR", "BYMINUTE", "BYSECOND"):
            if len((rule_part(rule, part) or "").split(",")) > 1:
                # FREQ=WEEKLY;BYHOUR=0,...,23;BYMINUTE=0,...,59 is a sub-daily series under another FREQ
                raise ValueError(f"{part}={rule_part(rule, part)}: several occurrences a day are not kept")
    _ruleset(recurrence.text() or "", start)  # dateutil refuses what it cannot run
    for rule in recurrence.rrules:
        bounded_rules.require_occurrence(rule, start)  # RuleTooSparse: BYMONTH=2;BYMONTHDAY=30
    return recurrence.text()


def _ruleset(text: str, start: datetime) -> du.rruleset:
    """``dateutil``'s set for the text, DTSTART included (cached: a day search reuses it). The
    zone is part of the cache key: aware datetimes of one instant compare (and hash) equal
    across zones, but a rule run in UTC and one run in New York are different series."""
    return _cached_ruleset(text, start, start.tzinfo)


@lru_cache(maxsize=4096)
def _cached_ruleset(text: str, start: datetime, zone: object) -> du.rruleset:
    recurrence = parse(text)
    rules = du.rruleset()
    rules.rdate(start)
    for rule in recurrence.rrules:
        try:
            rules.rrule(bounded_rules.parse(rule, start))  # ends after 50 years without an occurrence
        except (ValueError, TypeError, KeyError, IndexError) as exc:
            raise ValueError(f"RRULE:{rule}: {exc}") from None
    for moment in recurrence.rdates:
        rules.rdate(moment.astimezone(start.tzinfo))
    for moment in recurrence.exdates:
        rules.exdate(moment.astimezone(start.tzinfo))
    return rules


class _Expansion:
    """The starts ``dateutil`` yields for one series, kept in order as far as they were needed, so
    a later search bisects instead of walking the rule from DTSTART again (the expansion is still
    dateutil's; this only remembers it)."""

    def __init__(self, rules: du.rruleset) -> None:
        self._next = iter(rules)
        self.starts: list[datetime] = []
        self.complete = False

    def between(self, lower: datetime, upper: datetime) -> list[datetime]:
        self._walk(upper)
        return self.starts[bisect_left(self.starts, lower):bisect_left(self.starts, upper)]

    def before(self, upper: datetime | None) -> list[datetime]:
        """Every start before ``upper``; every one there is when ``upper`` is None."""
        self._walk(upper)
        return list(self.starts) if upper is None else self.starts[:bisect_left(self.starts, upper)]

    def _walk(self, upper: datetime | None) -> None:
        """Take starts from dateutil until one reaches ``upper`` (to the end when None)."""
        while not self.complete and (upper is None or not self.starts or self.starts[-1] < upper):
            try:
                self.starts.append(next(self._next))
            except StopIteration:
                self.complete = True


@lru_cache(maxsize=4096)
def _expansion(text: str, start: datetime, zone: object) -> _Expansion:
    return _Expansion(_cached_ruleset(text, start, zone))


def starts_between(text: str, start: datetime, lower: datetime, upper: datetime) -> list[datetime]:
    """Original starts of the series (first one ``start``, aware in the series' zone) in [lower, upper)."""
    return _expansion(text, start, start.tzinfo).between(lower, upper)


def starts_before(text: str, start: datetime, upper: datetime | None) -> list[datetime]:
    """Every original start of the series before ``upper``, from its earliest (an RDATE may come
    before DTSTART); all of them when ``upper`` is None, which only a finite series (one whose
    ``last_start`` is not None) may ask. What the occurrence index is filled from."""
    return _expansion(text, start, start.tzinfo).before(upper)


def last_start(text: str, start: datetime) -> datetime | None:
    """The last original start of a finite series; None if it is endless (or too long to walk)."""
    recurrence = parse(text)
    if any(rule_part(r, "COUNT") is None and rule_part(r, "UNTIL") is None for r in recurrence.rrules):
        return None
    last, far = start, start + timedelta(days=round(365.25 * SERIES_SPAN_YEARS))
    for index, moment in enumerate(_ruleset(text, start)):
        if index > LAST_SCAN or moment > far:
            return None
        last = moment
    return last


def count_from(text: str, start: datetime, after: datetime | None = None) -> int | None:
    """How many occurrences at or after ``after`` (all if None); None for an endless series."""
    if last_start(text, start) is None:
        return None
    return sum(1 for moment in _ruleset(text, start) if after is None or moment >= after)


def weekly_rule(freq: str, interval: int = 1, weekdays: Iterable[str] = (), count: int | None = None,
                until: datetime | None = None) -> str:
    """An RRULE value from the tool's ``repeat`` parts (already validated)."""
    parts = [f"FREQ={freq}"]
    if interval != 1:
        parts.append(f"INTERVAL={interval}")
    days = [d for d in WEEKDAY_CODES if d in set(weekdays)]
    if days:
        parts.append("BYDAY=" + ",".join(days))
    if count is not None:
        parts.append(f"COUNT={count}")
    if until is not None:
        parts.append(f"UNTIL={utc_stamp(until)}")
    return ";".join(parts)


def describe(text: str | None, start: datetime, korean: bool = False, all_day: bool = False) -> str:
    """A short phrase for a series: "weekly, Mon 10:00" / "매주 월 10:00"; "" for no series."""
    recurrence = parse(text)
    if not recurrence.rrules:
        return ("반복" if korean else "repeats") if recurrence.rdates else ""
    rule = recurrence.rrules[0]
    freq = (rule_part(rule, "FREQ") or "").upper()
    interval = int(rule_part(rule, "INTERVAL") or 1)
    if freq not in FREQUENCIES:
        return "반복" if korean else "repeats"
    unit = FREQUENCIES.index(freq)
    if korean:
        word = FREQ_WORDS_KO[freq] if interval == 1 else f"{interval}{'일주월년'[unit]}마다"
    else:
        word = FREQ_WORDS[freq] if interval == 1 else f"every {interval} {('days', 'weeks', 'months', 'years')[unit]}"
    names = ("월", "화", "수", "목", "금", "토", "일") if korean else ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
    days = [d[-2:] for d in (rule_part(rule, "BYDAY") or "").split(",") if d[-2:] in WEEKDAY_CODES]
    if days:
        when = ",".join(names[WEEKDAY_CODES.index(d)] for d in days) + " "
    elif freq == "WEEKLY":
        when = names[start.weekday()] + " "
    else:
        when = ""
    clock = "" if all_day else start.strftime("%H:%M")
    return f"{word}{' ' if korean else ', '}{when}{clock}".strip().rstrip(",")

