"""Argument models of the calendar tools: strict ISO dates/times, small and tight JSON schemas.

Validation lives here so a bad call is refused by ``Registry.validate`` (error code
``invalid_arguments``) before anything touches the store. Ambiguous forms ("3pm", "tomorrow",
"12/01") are rejected with the expected form spelled out; nothing is guessed.

The JSON schemas say what the validators accept, because the tool-call grammar is built from
them (``agent.formats.gbnf``): dates carry a ``YYYY-MM-DD`` pattern, times ``HH:MM``, ids and minutes
their ranges, and every string and list a maximum length. A small model under that grammar
cannot write ``"2023-01-08T12:00:00Z"`` for a date or an attendee list that never ends. Where a
validator has a friendlier message than pydantic's (dates, times, reminders), the schema is
attached with ``WithJsonSchema`` and the validator stays the one that refuses.
"""

from __future__ import annotations

import re
from datetime import date, time
from typing import Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, WithJsonSchema, model_validator

MAX_RANGE_DAYS = 62  # a search or slot query longer than this is almost surely a mistake
MAX_DURATION_MINUTES = 24 * 60
MAX_REMIND_MINUTES = 7 * 24 * 60  # a reminder up to a week ahead
MAX_REMINDERS = 5
MAX_TITLE = 200  # characters
MAX_NAME = 50  # characters of one attendee's name
MAX_ATTENDEES = 20
MAX_LOCATION = 200
MAX_NOTES = 500
MAX_QUERY = 100
MAX_INTERVAL = 30  # every 30 days/weeks/months/years at most
MAX_COUNT = 500  # occurrences of a series with a count (daily for over a year)
MAX_ALL_DAY_DAYS = 31  # an all-day event spans at most a month (a vacation, not a semester)

# The canonical forms, as JSON-schema patterns (anchored; plain character classes, because
# llama-cpp-python's pattern converter copies ``\d`` through as a literal). The validators below
# also accept a few non-canonical spellings (surrounding blanks, ``HH:MM:SS``) from other clients.
DATE_PATTERN = r"^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])$"
TIME_PATTERN = r"^([01][0-9]|2[0-3]):[0-5][0-9]$"

_DATE_RE = re.compile(r"\d{4}-\d{2}-\d{2}")
_TIME_RE = re.compile(r"(\d{2}):(\d{2})(?::(\d{2}))?")


def check_date(value: str) -> str:
    text = value.strip()
    try:
        if not _DATE_RE.fullmatch(text):
            raise ValueError
        date.fromisoformat(text)
    except ValueError:
        raise ValueError(
            f"{value!r} is not a date in the form YYYY-MM-DD (e.g. 2026-12-01); "
            "turn words like 'tomorrow'/'내일' into the actual date first"
        ) from None
    return text


def check_time(value: str) -> str:
    text = value.strip()
    match = _TIME_RE.fullmatch(text)
    if match is None or int(match[1]) > 23 or int(match[2]) > 59 or int(match[3] or 0) > 59:
        raise ValueError(
            f"{value!r} is not a 24-hour time HH:MM (e.g. 15:00 for 3 pm / 오후 3시, 09:30 for 9:30 am)"
        )
    return text if match[3] and match[3] != "00" else f"{match[1]}:{match[2]}"


def check_name(value: str) -> str:
    cleaned = " ".join(value.split())
    if not cleaned:
        raise ValueError("names cannot be empty")
    return cleaned


def check_title(value: str) -> str:
    cleaned = " ".join(value.split())
    if not cleaned:
        raise ValueError("title cannot be empty")
    return cleaned


def parse_date(text: str) -> date:
    return date.fromisoformat(text)


def parse_time(text: str) -> time:
    return time.fromisoformat(text)


IsoDate = Annotated[str, AfterValidator(check_date), WithJsonSchema({"type": "string", "pattern": DATE_PATTERN})]
IsoTime = Annotated[str, AfterValidator(check_time), WithJsonSchema({"type": "string", "pattern": TIME_PATTERN})]
Name = Annotated[str, Field(max_length=MAX_NAME), AfterValidator(check_name)]
Title = Annotated[str, Field(max_length=MAX_TITLE), AfterValidator(check_title)]
Minutes = Annotated[int, Field(ge=1, le=MAX_DURATION_MINUTES)]
EventId = Annotated[int, Field(ge=1)]


def _dedupe(names: list[str] | None) -> list[str] | None:
    if names is None:
        return None
    seen: dict[str, str] = {}
    for name in names:
        seen.setdefault(name.casefold(), name)
    return list(seen.values())


def check_reminders(minutes: list[int] | None) -> list[int] | None:
    """Sorted, without repeats; range checked here so the schema stays a plain integer list."""
    if minutes is None:
        return None
    values = sorted(set(minutes))
    if any(m < 0 or m > MAX_REMIND_MINUTES for m in values):
        raise ValueError(f"remind_minutes_before: minutes from 0 to {MAX_REMIND_MINUTES} (one week), e.g. [30]")
    if len(values) > MAX_REMINDERS:
        raise ValueError(f"remind_minutes_before: at most {MAX_REMINDERS} reminders")
    return values


Attendees = Annotated[list[Name], Field(max_length=MAX_ATTENDEES), AfterValidator(_dedupe)]
Reminders = Annotated[
    list[int], AfterValidator(check_reminders),
    WithJsonSchema({"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": MAX_REMIND_MINUTES},
                    "maxItems": MAX_REMINDERS}),
]
REMIND_HELP = "Minutes before the start to remind the user, e.g. 30분 전에 알려줘 → [30]; [] for none."


class ToolArgs(BaseModel):
    """Base: unknown fields are errors (a hallucinated field should be reported, not ignored)."""

    model_config = ConfigDict(extra="forbid")

    @classmethod
    def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:  # type: ignore[override]
        return compact_schema(super().model_json_schema(*args, **kwargs))


def compact_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Collapse ``anyOf: [X, null]`` + ``default: null`` into X: shorter for small models. A
    nested model (``repeat``) is written in place instead of through ``$defs``/``$ref``, so the
    schema stays one plain object a small model reads top to bottom."""
    defs = schema.pop("$defs", {})
    for nested in defs.values():
        compact_schema(nested)

    def inline(node: Any) -> Any:
        if isinstance(node, list):
            return [inline(n) for n in node]
        if not isinstance(node, dict):
            return node
        if "$ref" in node:
            target = dict(defs[node["$ref"].rsplit("/", 1)[-1]])
            target.pop("title", None)
            target["properties"] = {k: {f: v for f, v in p.items() if f != "title"}
                                    for k, p in target.get("properties", {}).items()}
            return {**inline(target), **{k: inline(v) for k, v in node.items() if k != "$ref"}}
        return {k: inline(v) for k, v in node.items()}

    if defs:
        schema.update(inline({k: v for k, v in schema.items()}))
    props = schema.get("properties", {})
    for name, prop in list(props.items()):
        options = prop.get("anyOf")
        if options and len(options) == 2 and {"type": "null"} in options:
            other = next(o for o in options if o != {"type": "null"})
            merged = {k: v for k, v in prop.items() if k != "anyOf"}
            merged.update(other)
            if merged.get("default", 0) is None:
                del merged["default"]
            props[name] = merged
    return schema


class PeriodArgs(ToolArgs):
    """One day (``date``) or an inclusive range (``start_date`` + ``end_date``), never both."""

    date: IsoDate | None = Field(None, description="One day, YYYY-MM-DD (내일 → e.g. 2026-12-01).")
    start_date: IsoDate | None = Field(None, description="First day of a range, YYYY-MM-DD.")
    end_date: IsoDate | None = Field(None, description="Last day of a range (inclusive), YYYY-MM-DD.")

    period_optional: ClassVar[bool] = False

    @model_validator(mode="after")
    def _one_period(self) -> PeriodArgs:
        has_range = self.start_date is not None or self.end_date is not None
        if self.date is not None and has_range:
            raise ValueError("give either date or start_date+end_date, not both")
        if self.date is None and not has_range:
            if self.period_optional:
                return self
            raise ValueError("missing the day: give date (one day) or start_date and end_date (a range)")
        if has_range:
            if self.start_date is None or self.end_date is None:
                raise ValueError("start_date and end_date must be given together (or use date for one day)")
            days = (parse_date(self.end_date) - parse_date(self.start_date)).days
            if days < 0:
                raise ValueError("end_date is before start_date")
            if days >= MAX_RANGE_DAYS:
                raise ValueError(f"the range is too long; at most {MAX_RANGE_DAYS} days")
        return self

    def days(self) -> tuple[date, date] | None:
        """First and last day (inclusive), or None when no period was given."""
        if self.date is not None:
            day = parse_date(self.date)
            return day, day
        if self.start_date is not None and self.end_date is not None:
            return parse_date(self.start_date), parse_date(self.end_date)
        return None


class SearchEventsArgs(PeriodArgs):
    query: str | None = Field(
        None, max_length=MAX_QUERY, description="Text to match in title, location, notes or attendee names, e.g. '치과'."
    )

    period_optional: ClassVar[bool] = True

    @model_validator(mode="after")
    def _something_to_search(self) -> SearchEventsArgs:
        if self.days() is None and not (self.query and self.query.strip()):
            raise ValueError("give date, start_date+end_date, or a query")
        return self


class WorkingHoursArgs(ToolArgs):
    """The slot finders' length and working hours; mixed in after the period (and the people).

    A mixin rather than a base of ``PeriodArgs`` because pydantic orders fields base-first, and
    the order of the fields is the order the call grammar admits them in: a call says when, who,
    then how long (``find_common_free_time(date, attendees, duration_minutes)``).
    """

    duration_minutes: Minutes = Field(description="Length of the wanted slot in minutes, e.g. 60.")
    working_hours_start: IsoTime = Field("09:00", description="Earliest start, HH:MM.")
    working_hours_end: IsoTime = Field("18:00", description="Latest end, HH:MM.")

    @model_validator(mode="after")
    def _hours_in_order(self) -> WorkingHoursArgs:
        if parse_time(self.working_hours_end) <= parse_time(self.working_hours_start):
            raise ValueError("working_hours_end must be after working_hours_start")
        return self


class FindFreeSlotsArgs(WorkingHoursArgs, PeriodArgs):
    pass


class _PeriodAndPeople(PeriodArgs):
    attendees: Attendees = Field(min_length=1, description="People who must all be free, e.g. ['민수', 'Jane'].")


class FindCommonFreeTimeArgs(WorkingHoursArgs, _PeriodAndPeople):
    pass


Weekday = Literal["MO", "TU", "WE", "TH", "FR", "SA", "SU"]
Scope = Literal["this", "following", "all"]
OCCURRENCE_HELP = "Repeating event: occurrence_date from search_events."
SCOPE_HELP = "Repeating event: this occurrence, following ones too, or all."


# A series: 매주 화요일 → {"freq": "weekly", "by_weekday": ["TU"]}; it ends at ``until`` or after
# ``count`` occurrences, or never. (A comment, not a docstring: the docstring would go into the
# schema every prompt carries.)
class RepeatArgs(ToolArgs):
    freq: Literal["daily", "weekly", "monthly", "yearly"]
    interval: int = Field(1, ge=1, le=MAX_INTERVAL, description="2 = 격주.")
    by_weekday: list[Weekday] | None = Field(None, max_length=7, description="e.g. ['TU'].")
    until: IsoDate | None = Field(None, description="Last day.")
    count: int | None = Field(None, ge=1, le=MAX_COUNT, description="Occurrences.")

    @model_validator(mode="after")
    def _one_end(self) -> RepeatArgs:
        if self.until is not None and self.count is not None:
            raise ValueError("repeat: give until or count, not both")
        if self.by_weekday and self.freq != "weekly":
            raise ValueError("repeat.by_weekday is for weekly series only")
        return self


class CreateEventArgs(ToolArgs):
    title: Title = Field(description="Short title, e.g. '치과 예약' or 'Team sync'.")
    date: IsoDate = Field(description="YYYY-MM-DD. 내일 오후 3시 → date=2026-12-01, start_time=15:00.")
    start_time: IsoTime | None = Field(None, description="Local 24-hour HH:MM, e.g. 15:00.")
    duration_minutes: Minutes | None = Field(None, description="Length in minutes (give this or end_time).")
    end_time: IsoTime | None = Field(None, description="Local end HH:MM on the same day (or duration_minutes).")
    all_day: bool = Field(False, description="Whole-day event (휴가): no times.")
    end_date: IsoDate | None = Field(None, description="Last day of a multi-day all_day event.")
    repeat: RepeatArgs | None = Field(None, description="Only for a repeating event (매주 ...).")
    attendees: Attendees | None = Field(None, description="Names of people attending, e.g. ['민수'].")
    location: str | None = Field(None, max_length=MAX_LOCATION, description="Where, e.g. '강남역'.")
    notes: str | None = Field(None, max_length=MAX_NOTES, description="Free-text notes.")
    remind_minutes_before: Reminders | None = Field(None, description=REMIND_HELP + " Omit for the default.")
    allow_conflict: bool = Field(False, description="true only if the user accepts overlapping another event.")

    @model_validator(mode="after")
    def _one_length(self) -> CreateEventArgs:
        if self.all_day:
            if self.start_time is not None or self.end_time is not None or self.duration_minutes is not None:
                raise ValueError("an all_day event has no start_time, end_time or duration_minutes")
            if self.end_date is not None:
                days = (parse_date(self.end_date) - parse_date(self.date)).days
                if days < 0:
                    raise ValueError("end_date is before date")
                if days >= MAX_ALL_DAY_DAYS:
                    raise ValueError(f"an all_day event spans at most {MAX_ALL_DAY_DAYS} days")
            return self
        if self.end_date is not None:
            raise ValueError("end_date is for all_day events; a timed event past midnight uses duration_minutes")
        if self.start_time is None:
            raise ValueError("missing start_time (or all_day=true for a whole-day event)")
        if self.duration_minutes is not None and self.end_time is not None:
            raise ValueError("give either duration_minutes or end_time, not both")
        if self.duration_minutes is None and self.end_time is None:
            raise ValueError("missing the length: give duration_minutes or end_time (ask the user if unknown)")
        if self.end_time is not None and parse_time(self.end_time) <= parse_time(self.start_time):
            raise ValueError(
                "end_time must be after start_time on the same day; for events past midnight use duration_minutes"
            )
        return self


class EventTargetArgs(ToolArgs):
    """Which event a change acts on: its id and, for a series, which occurrences (the fields
    come first in the call, in this order)."""

    event_id: EventId = Field(description="id from search_events.")
    occurrence_date: IsoDate | None = Field(None, description=OCCURRENCE_HELP)
    scope: Scope = Field("this", description=SCOPE_HELP)


class UpdateEventArgs(EventTargetArgs):
    title: Title | None = Field(None, description="New title.")
    date: IsoDate | None = Field(None, description="New day YYYY-MM-DD (keeps the time unless given).")
    start_time: IsoTime | None = Field(None, description="New start HH:MM (keeps the length unless given).")
    duration_minutes: Minutes | None = Field(None, description="New length in minutes.")
    end_time: IsoTime | None = Field(None, description="New end HH:MM, same day as the start.")
    attendees: Attendees | None = Field(
        None, description="Full new attendee list (replaces the old one; [] removes all)."
    )
    location: str | None = Field(None, max_length=MAX_LOCATION, description="New location ('' clears it).")
    notes: str | None = Field(None, max_length=MAX_NOTES, description="New notes ('' clears them).")
    remind_minutes_before: Reminders | None = Field(None, description=REMIND_HELP)
    allow_conflict: bool = Field(False, description="true only if the user accepts overlapping another event.")

    @model_validator(mode="after")
    def _something_to_change(self) -> UpdateEventArgs:
        if self.duration_minutes is not None and self.end_time is not None:
            raise ValueError("give either duration_minutes or end_time, not both")
        changes = self.model_dump(exclude={"event_id", "allow_conflict", "occurrence_date", "scope"}, exclude_none=True)
        if not changes:
            raise ValueError("nothing to change: give at least one field to update")
        return self


class DeleteEventArgs(EventTargetArgs):
    pass
