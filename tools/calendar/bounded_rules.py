"""``dateutil``'s expansion of one RRULE, stopped after ``RULE_QUIET_PERIODS`` quiet months.

``dateutil`` walks a rule period by period and looks at UNTIL and COUNT only on a date that
passed every BY filter. A rule no date passes (``FREQ=DAILY;BYMONTH=2;BYMONTHDAY=30``) is
walked day by day to year 9999 whatever its UNTIL or COUNT: 2.9 million steps, 4-19 s here,
and ``dateutil`` has no option that stops it (dateutil/dateutil#1393 asks for one). A thread
cannot be stopped and a subprocess would make the answer depend on the machine's speed, so the
walk is counted instead, in ``dateutil``'s own steps: its ``_iterinfo.rebuild`` reads the
rule's ``_byeaster`` each time the walk enters a new month (or a new period of a MONTHLY or
YEARLY rule). ``BoundedRule`` counts those reads between two occurrences; past the budget the
rule ends there, as if its UNTIL had come (it is marked ``cut_short``), so a series stored
before the check keeps its DTSTART and RDATEs. The expansion itself stays ``dateutil``'s.

That read is a private detail of ``dateutil`` (2.8 and 2.9 do it alike); the test that a rule
which never matches is refused quickly is what notices if a release stops doing it.
"""

from __future__ import annotations

import threading
from datetime import datetime
from typing import Any, Iterator

from dateutil import rrule as du

from tools.calendar.limits import RULE_QUIET_PERIODS

QUIET_YEARS = RULE_QUIET_PERIODS // 12


class RuleTooSparse(ValueError):
    """A rule's expansion went ``RULE_QUIET_PERIODS`` months without an occurrence."""


_walk = threading.local()  # the steps left to the walk running on this thread (None: not counting)


class BoundedRule(du.rrule):
    """A ``dateutil`` rule whose every search for its next occurrence is bounded."""

    cut_short = False  # True once a walk ended on the budget rather than on UNTIL, COUNT or year 9999

    @property  # type: ignore[override]
    def _byeaster(self) -> Any:
        left = getattr(_walk, "left", None)
        if left is not None:
            if left <= 0:
                raise RuleTooSparse(f"no occurrence in {QUIET_YEARS} years of months")
            _walk.left = left - 1
        return self.__dict__["_byeaster"]

    @_byeaster.setter
    def _byeaster(self, value: Any) -> None:
        self.__dict__["_byeaster"] = value

    def _iter(self) -> Iterator[datetime]:
        inner = super()._iter()
        while True:
            outer = getattr(_walk, "left", None)  # a walk suspended on this thread keeps its own count
            _walk.left = RULE_QUIET_PERIODS
            try:
                moment = next(inner)
            except StopIteration:
                return
            except RuleTooSparse:
                self.cut_short = True
                return
            finally:
                _walk.left = outer
            yield moment


def parse(rule: str, start: datetime) -> du.rrule:
    """``dateutil``'s rule for the RRULE value ``rule`` from ``start``, its walks bounded."""
    parsed = du.rrulestr(rule, dtstart=start)
    if type(parsed) is not du.rrule:  # one RRULE value always parses to one rule
        raise ValueError(f"RRULE:{rule}: not a single rule")
    parsed.__class__ = BoundedRule  # the same object and state; only the walk is counted
    return parsed


def require_occurrence(rule: str, start: datetime) -> None:
    """RuleTooSparse naming the rule if it gives no occurrence after ``start`` (its DTSTART)
    within ``QUIET_YEARS`` years of months. An UNTIL or COUNT does not save such a rule:
    ``dateutil`` reads them only on a date that passed every filter, so the walk is as long, and
    the rule adds nothing to its DTSTART anyway. A rule that ends after an occurrence is kept."""
    bounded = parse(rule, start)
    if any(moment > start for moment in bounded) or not bounded.cut_short:  # type: ignore[attr-defined]
        return
    raise RuleTooSparse(
        f"RRULE:{rule}: no occurrence in the {QUIET_YEARS} years after {start.date().isoformat()} "
        "(a rule that never matches is not kept)"
    )
