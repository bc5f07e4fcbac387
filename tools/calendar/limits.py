"""How much of the outside world the calendar takes in, and how much of it the model reads.

An imported file, a CalDAV server or a shared calendar is written by someone else, and one
event may carry megabytes (a 1 MB DESCRIPTION and 5,000 ATTENDEEs made one day's
``search_events`` result 1,069,071 characters long), or a rule that never matches
(``FREQ=DAILY;BYMONTH=2;BYMONTHDAY=30``: ``dateutil`` then walks day by day to year 9999,
~4-19 s per rule, with the database in use). Every number that bounds this lives here.

Three layers, each with its own job:

- the store keeps imported and synced fields cut to ``IMPORT_*`` (``capped_fields``), while the
  whole original property stays in the event's unmodelled lines and goes back out on export and
  sync as it came, as long as the field was not changed here: nothing is lost on the server;
- the model reads each event cut to ``VIEW_*`` and each calendar tool result cut to
  ``RESULT_CHARS``, with words saying what was left out and what to do (``result_views``);
- a rule's expansion stops after ``RULE_QUIET_PERIODS`` months (or rule periods) without an
  occurrence, and a rule that gives none in that span is refused where it comes in
  (``bounded_rules``).
"""

from __future__ import annotations

# -- what the store keeps of an imported or synced event ---------------------------------------

IMPORT_TITLE = 500
"""Characters of SUMMARY. The longest titles in real calendars (Outlook subjects with "FW: RE:"
chains, Google's auto-titles) stay under ~250; twice that keeps every real one whole."""

IMPORT_LOCATION = 1_000
"""Characters of LOCATION. A street address plus a video-call link with its passcode is ~300."""

IMPORT_NOTES = 20_000
"""Characters of DESCRIPTION. A Teams or Zoom invitation body is 2-5k characters and a long
meeting agenda ~10k; 20k keeps those whole and cuts a 1 MB attack to 2 %."""

IMPORT_ATTENDEES = 200
"""ATTENDEEs kept as names. Each becomes a person row the user can ask about; an all-hands
invite past a couple of hundred names is a mailing list, not people to plan with."""

IMPORT_DATES = 1_000
"""RDATE values, and EXDATE values, of one series (each list on its own). A daily series with
every weekend cancelled for four years has ~420 EXDATEs; every one of them is read again
whenever the series is expanded, so a list of 100,000 would make each search slow."""

# -- what the model reads ------------------------------------------------------------------------

VIEW_TITLE = 200
"""Characters of a title in a tool result: the longest title the model may write itself
(``arguments.MAX_TITLE``)."""

VIEW_LOCATION = 200
"""Characters of a location in a tool result (``arguments.MAX_LOCATION``)."""

VIEW_NOTES = 500
"""Characters of notes in a tool result (``arguments.MAX_NOTES``): enough to answer "what did I
note for the dentist", short enough that 10 events with notes fit the budget below."""

VIEW_ATTENDEES = 20
"""Attendee names in a tool result (``arguments.MAX_ATTENDEES``)."""

RESULT_CHARS = 6_000
"""Characters of one calendar tool result's event or slot list, as JSON. The served model runs
with an 8,192-token context; Korean text is ~1-1.5 characters a token, so 6,000 characters can
cost ~4,000 tokens, about half the context, and still hold ~40 ordinary events."""

# -- how far a rule's expansion may walk without finding anything ------------------------------

RULE_QUIET_PERIODS = 600
"""Months (or the rule's own periods, when those are longer: a YEARLY rule counts years)
``dateutil`` may walk without finding an occurrence before the walk stops. Every weekday and
date combination of the Gregorian calendar comes back within 40 years (Feb 29 on a Monday:
2072, then 2112, across the 2100 that is not a leap year), so 50 years of months keeps every
sparse rule a person keeps (yearly on Feb 29, the fifth Friday of February) and stops one that
never matches after ~18,000 day steps (tens of milliseconds) instead of ~2.9 million."""

SERIES_SPAN_YEARS = 100
"""A series with a COUNT or UNTIL whose last occurrence is further than this from its start is
treated as endless (indexed up to a horizon, like one with no end): working out its last
occurrence would walk the rule that far, and a century is beyond any person's planning."""
