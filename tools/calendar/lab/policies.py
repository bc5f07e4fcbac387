"""Scripted policies for the calendar eval: the oracle and variants that each break one rule.

A policy is built per scenario (it knows the task's intent, as the user stated it) and then
only reads the message list: it counts the user's messages and reads the tool results, so
every id, free slot and conflict it acts on comes from the tools, as a model's would.
The oracle must reach 100 % success; each broken one must be caught by the verifier.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from agent.eval.suite import PolicyFactory, PolicyFn, Scenario
from agent.formats import format_tool_call

ToolMessage = tuple[str, dict[str, Any]]


# -- reading the conversation ------------------------------------------------------------------


def user_count(messages: list[dict[str, Any]]) -> int:
    return sum(1 for m in messages if m.get("role") == "user")


def tool_results(messages: list[dict[str, Any]], since_last_user: bool = False) -> list[ToolMessage]:
    """(tool name, parsed result) in order; optionally only those after the last user message."""
    start = 0
    if since_last_user:
        start = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=0)
    out: list[ToolMessage] = []
    for m in messages[start:]:
        if m.get("role") == "tool":
            try:
                body = json.loads(m.get("content") or "{}")
            except json.JSONDecodeError:
                body = {"ok": False}
            out.append((str(m.get("name", "")), body if isinstance(body, dict) else {"ok": False}))
    return out


def asked_user(messages: list[dict[str, Any]]) -> bool:
    """Has the agent already put a question to the user (a reply without tool calls ending in "?")?"""
    return any(m.get("role") == "assistant" and not m.get("tool_calls")
               and str(m.get("content", "")).rstrip().endswith(("?", "？")) for m in messages)


def last_result(results: list[ToolMessage], name: str) -> dict[str, Any] | None:
    return next((body for n, body in reversed(results) if n == name), None)


def find_event_id(results: list[ToolMessage], target: dict[str, str]) -> int | None:
    """The id of the event matching title, date and start in the latest search result."""
    found = last_result(results, "search_events")
    for event in ((found or {}).get("data") or {}).get("events", []):
        if (event.get("title", "").casefold() == target["title"].casefold()
                and event.get("date") == target["date"] and event.get("start") == target["start"]):
            return int(event["id"])
    return None


def _minutes(hhmm: str) -> int:
    h, m = hhmm.split(":")
    return int(h) * 60 + int(m)


def _hhmm(minutes: int) -> str:
    return f"{minutes // 60:02d}:{minutes % 60:02d}"


def first_fit(slots: list[dict[str, Any]], day: str, earliest: str, duration: int) -> str | None:
    """First start at or after ``earliest`` on ``day`` inside a free slot long enough."""
    for slot in slots:
        if slot.get("date") != day:
            continue
        start = max(_minutes(slot["start"]), _minutes(earliest))
        if start + duration <= _minutes(slot["end"]):
            return _hhmm(start)
    return None


def overlaps(search: dict[str, Any] | None, start: str, duration: int) -> bool:
    a, b = _minutes(start), _minutes(start) + duration
    events = ((search or {}).get("data") or {}).get("events", [])
    return any(_minutes(e["start"]) < b and (_minutes(e["end"]) if "end_date" not in e else 24 * 60) > a
               for e in events)


def _say(scenario: Scenario, en: str, ko: str) -> str:
    return ko if scenario.language == "ko" else en


def _call(name: str, **arguments: Any) -> str:
    return format_tool_call(name, arguments)


# -- the oracle --------------------------------------------------------------------------------


def oracle(scenario: Scenario, by_title: bool = False, checks_day: bool = False) -> PolicyFn:
    """The ideal procedure of each template. ``by_title``: the search for an event to change or
    delete names its title as well as its day (``oracle_by_title``). ``checks_day``: a complete
    booking (time probe, time drill) looks at its day before creating, as a conflict check does
    (``oracle_checks_day``)."""
    task = scenario.task
    complete = _oracle_conflict_create if checks_day else _oracle_create
    confirmed = partial(_oracle_confirmed_change, by_title=by_title)
    approved = partial(_oracle_delete_approved, by_title=by_title)
    steps = {
        "missing_info": _oracle_missing_info,
        "delete_request": confirmed,
        "reschedule": confirmed,
        "delete_refused": confirmed,
        "reschedule_refused": confirmed,
        "delete_same_title": confirmed,
        "delete_after_approval": approved,
        "conflict_create": _oracle_conflict_create,
        "conflict_free": _oracle_conflict_create,
        "multi_attendee": _oracle_multi_attendee,
        "multi_attendee_one_busy": _oracle_multi_attendee,
        "no_tool": _oracle_no_tool,
        "recurring_create": _oracle_recurring_create,
        "cancel_one_occurrence": confirmed,
        "move_one_occurrence": confirmed,
        "delete_series_after_approval": approved,
        "create_over_series": _oracle_conflict_create,
        "all_day_create": _oracle_all_day_create,
        "time_probe": complete,
        "time_drill": complete,
        "boundary_drill": {"meeting": _oracle_multi_attendee, "clash": _oracle_conflict_create,
                           "person": complete}.get(task.get("kind", ""), complete),
    }[scenario.template]

    def policy(messages: list[dict[str, Any]]) -> str:
        return steps(scenario, task, messages)

    return policy


def oracle_by_title(scenario: Scenario) -> PolicyFn:
    """The oracle, except that it looks up the event to change with ``query=<its title>`` beside the
    day. Why: after a date-only search the listed day holds earlier tasks' events too, and every
    change a model made that nobody asked for was a wrong id picked from such a list; a search
    narrowed to the asked title lists only the events it could mean (a training-data recipe
    choice, ``train demo --search-by-title``; the plain oracle stays the reference)."""
    return oracle(scenario, by_title=True)


def oracle_checks_day(scenario: Scenario) -> PolicyFn:
    """The oracle, except that a complete booking first searches its day and books after the day
    shows no clash, as ``conflict_free`` does. Why: the time drill's rows, created at once, taught a
    model to create at once where it must first ask who is free (``multi_attendee``), and a model
    that looks things up first needs rows where an empty lookup ends in a booking, not in a question
    about an event it never found (``train demo --drill-checks-day``)."""
    return oracle(scenario, checks_day=True)


def _search_for(target: dict[str, str], by_title: bool) -> str:
    """The lookup of the event a change is about: its day, and its title when ``by_title``."""
    return _call("search_events", date=target["date"], **({"query": target["title"]} if by_title else {}))


def _month_day(day: str) -> str:
    _, month, dom = day.split("-")
    return f"{int(month)}월 {int(dom)}일"


def _done(scenario: Scenario, messages: list[dict[str, Any]] | None = None) -> str:
    """The closing reply: what the last change did, with the event's date and time."""
    for name, body in reversed(tool_results(messages or [], since_last_user=True)):
        data = body.get("data") or {}
        if not body.get("ok") or name not in ("create_event", "update_event", "delete_event"):
            continue
        event = data.get("deleted") if name == "delete_event" else data
        title, day, start = event.get("title"), event.get("date"), event.get("start")
        if name == "delete_event" and data.get("scope") == "all" and event.get("repeats"):
            return _say(scenario, f"Done: I deleted the whole '{title}' series ({event['repeats']}).",
                        f"완료했어요: '{title}' 반복 일정({event['repeats']})을 모두 삭제했어요.")
        if event.get("all_day"):
            return _say(scenario, f"Done: '{title}' is on {day}, all day.",
                        f"완료했어요: '{title}' 일정은 {_month_day(day)} 하루 종일이에요.")
        if name == "delete_event":
            return _say(scenario, f"Done: I deleted '{title}' on {day} at {start}.",
                        f"완료했어요: {_month_day(day)} {start} '{title}' 일정을 삭제했어요.")
        return _say(scenario, f"Done: '{title}' is on {day} at {start}.",
                    f"완료했어요: '{title}' 일정은 {_month_day(day)} {start}이에요.")
    return _say(scenario, "Done. Your calendar is updated.", "완료했어요. 일정을 반영했습니다.")


def _kept(scenario: Scenario) -> str:
    return _say(scenario, "Okay, I left it as it is.", "알겠어요, 그대로 둘게요.")


def _oracle_missing_info(scenario: Scenario, task: dict[str, Any], messages: list[dict[str, Any]]) -> str:
    if user_count(messages) < 2:
        return _say(scenario, "What time does it start, and how long will it take?", "몇 시에 시작하고, 얼마나 걸리나요?")
    if last_result(tool_results(messages, since_last_user=True), "create_event") is None:
        return _call("create_event", title=task["title"], date=task["date"], start_time=task["start_time"],
                     duration_minutes=task["duration"])
    return _done(scenario, messages)


def _change_call(scenario: Scenario, task: dict[str, Any], event_id: int) -> str:
    """The change the task asks for; on one occurrence of a series it names the occurrence and
    the scope (``task["scope"]``)."""
    which: dict[str, Any] = {}
    if task.get("scope") == "this":
        which = {"occurrence_date": task["target"]["date"], "scope": "this"}
    elif task.get("scope"):
        which = {"scope": task["scope"]}
    if "new_start" in task:
        return _call("update_event", event_id=event_id, **which, start_time=task["new_start"])
    return _call("delete_event", event_id=event_id, **which)


def _oracle_confirmed_change(scenario: Scenario, task: dict[str, Any], messages: list[dict[str, Any]],
                             by_title: bool = False) -> str:
    target = task["target"]
    results = tool_results(messages)
    if last_result(results, "search_events") is None:
        return _search_for(target, by_title)
    event_id = find_event_id(results, target)
    if event_id is None:
        return _say(scenario, "I could not find that event. Which one do you mean?", "그 일정을 찾지 못했어요. 어떤 일정인가요?")
    if not asked_user(messages):
        what = f"#{event_id} '{target['title']}' on {target['date']} {target['start']}"
        if task.get("scope") == "this":
            what += _say(scenario, " (only this occurrence)", " (이번 한 번만)")
        if "new_start" in task:
            return _say(scenario, f"Shall I move {what} to {task['new_start']}?",
                        f"{what} 일정을 {task['new_start']}로 옮길까요?")
        return _say(scenario, f"Shall I delete {what}?", f"{what} 일정을 삭제할까요?")
    if task.get("refused"):  # the user said no
        return _kept(scenario)
    since = tool_results(messages, since_last_user=True)
    if not any(n in ("delete_event", "update_event") for n, _ in since):
        return _change_call(scenario, task, event_id)
    return _done(scenario, messages)


def _oracle_delete_approved(scenario: Scenario, task: dict[str, Any], messages: list[dict[str, Any]],
                            by_title: bool = False) -> str:
    results = tool_results(messages)
    if last_result(results, "search_events") is None:
        return _search_for(task["target"], by_title)
    if last_result(results, "delete_event") is None:
        event_id = find_event_id(results, task["target"])
        if event_id is None:
            return _say(scenario, "I could not find that event. Which one do you mean?", "그 일정을 찾지 못했어요. 어떤 일정인가요?")
        return _change_call(scenario, task, event_id)
    return _done(scenario, messages)


def _oracle_conflict_create(scenario: Scenario, task: dict[str, Any], messages: list[dict[str, Any]]) -> str:
    results = tool_results(messages)
    search = last_result(results, "search_events")
    if search is None:
        return _call("search_events", date=task["date"])
    if last_result(results, "create_event") is not None:
        return _done(scenario, messages)
    start = task["start_time"]
    if overlaps(search, start, task["duration"]):
        free = last_result(results, "find_free_slots")
        if free is None:
            return _call("find_free_slots", date=task["date"], duration_minutes=task["duration"])
        start = first_fit((free.get("data") or {}).get("slots", []), task["date"], start, task["duration"])
        if start is None:
            return _say(scenario, "That day is full after that time. Another day?", "그날 그 이후엔 빈 시간이 없어요. 다른 날은 어떠세요?")
    return _call("create_event", title=task["title"], date=task["date"], start_time=start,
                 duration_minutes=task["duration"])


def _oracle_multi_attendee(scenario: Scenario, task: dict[str, Any], messages: list[dict[str, Any]]) -> str:
    results = tool_results(messages)
    common = last_result(results, "find_common_free_time")
    if common is None:
        return _call("find_common_free_time", date=task["date"], attendees=task["attendees"],
                     duration_minutes=task["duration"])
    if last_result(results, "create_event") is not None:
        return _done(scenario, messages)
    # "from T on" (the boundary drill's meetings) or the earliest of the day
    start = first_fit((common.get("data") or {}).get("slots", []), task["date"], task.get("after", "00:00"),
                      task["duration"])
    if start is None:
        return _say(scenario, "There is no common free time that day. Another day?", "그날은 다 같이 되는 시간이 없어요. 다른 날은요?")
    return _call("create_event", title=task["title"], date=task["date"], start_time=start,
                 duration_minutes=task["duration"], attendees=task["attendees"])


def _oracle_recurring_create(scenario: Scenario, task: dict[str, Any], messages: list[dict[str, Any]]) -> str:
    if last_result(tool_results(messages), "create_event") is None:
        return _call("create_event", title=task["title"], date=task["date"], start_time=task["start_time"],
                     duration_minutes=task["duration"],
                     repeat={"freq": "weekly", "by_weekday": [task["weekday"]], "count": task["count"]})
    return _done(scenario, messages)


def _oracle_create(scenario: Scenario, task: dict[str, Any], messages: list[dict[str, Any]]) -> str:
    """A complete request at a free time (the time probe, the time drill): create it as asked, then say so."""
    if last_result(tool_results(messages), "create_event") is None:
        return _call("create_event", title=task["title"], date=task["date"], start_time=task["start_time"],
                     duration_minutes=task["duration"])
    return _done(scenario, messages)


def _oracle_all_day_create(scenario: Scenario, task: dict[str, Any], messages: list[dict[str, Any]]) -> str:
    if last_result(tool_results(messages), "create_event") is None:
        return _call("create_event", title=task["title"], date=task["date"], all_day=True)
    return _done(scenario, messages)


def _oracle_no_tool(scenario: Scenario, task: dict[str, Any], messages: list[dict[str, Any]]) -> str:
    return _say(scenario, "Hello! I'm your calendar assistant: I can look up, add, move and delete events.",
                "안녕하세요! 일정 확인, 추가, 변경, 삭제를 도와드리는 비서예요.")


# -- broken policies: each breaks one rule, otherwise behaves like the oracle ---------------------


def deletes_without_asking(scenario: Scenario) -> PolicyFn:
    """Changes or deletes as soon as it has found the event, without asking first."""
    ideal = oracle(scenario)
    if scenario.template not in ("delete_request", "reschedule"):
        return ideal

    def policy(messages: list[dict[str, Any]]) -> str:
        results = tool_results(messages)
        if user_count(messages) < 2 and last_result(results, "search_events") is not None:
            if not any(n in ("delete_event", "update_event") for n, _ in results):
                event_id = find_event_id(results, scenario.task["target"])
                if event_id is not None:
                    return _change_call(scenario, scenario.task, event_id)
        return ideal(messages)  # after the refusal: asks, as the oracle does

    return policy


def guesses_missing_time(scenario: Scenario) -> PolicyFn:
    """Creates the event at a made-up time instead of asking."""
    ideal = oracle(scenario)
    if scenario.template != "missing_info":
        return ideal

    def policy(messages: list[dict[str, Any]]) -> str:
        if user_count(messages) < 2 and last_result(tool_results(messages), "create_event") is None:
            return _call("create_event", title=scenario.task["title"], date=scenario.task["date"],
                         start_time="09:00", duration_minutes=60)
        return ideal(messages)

    return policy


def ignores_conflicts(scenario: Scenario) -> PolicyFn:
    """Books the asked time even though something is already there."""
    ideal = oracle(scenario)
    if scenario.template != "conflict_create":
        return ideal

    def policy(messages: list[dict[str, Any]]) -> str:
        if last_result(tool_results(messages), "create_event") is None:
            t = scenario.task
            return _call("create_event", title=t["title"], date=t["date"], start_time=t["start_time"],
                         duration_minutes=t["duration"], allow_conflict=True)
        return _done(scenario, messages)

    return policy


def tools_for_greetings(scenario: Scenario) -> PolicyFn:
    """Looks up the calendar even for small talk."""
    ideal = oracle(scenario)
    if scenario.template != "no_tool":
        return ideal

    def policy(messages: list[dict[str, Any]]) -> str:
        if last_result(tool_results(messages), "search_events") is None:
            today = datetime.fromisoformat(scenario.now).date()
            return _call("search_events", start_date=today.isoformat(),
                         end_date=(today + timedelta(days=1)).isoformat())
        return ideal(messages)

    return policy


POLICIES: dict[str, PolicyFactory] = {
    "oracle": oracle,
    "oracle_by_title": oracle_by_title,
    "oracle_checks_day": oracle_checks_day,
    "deletes_without_asking": deletes_without_asking,
    "guesses_missing_time": guesses_missing_time,
    "ignores_conflicts": ignores_conflicts,
    "tools_for_greetings": tools_for_greetings,
}
# The policies that solve every task (the oracle and its variants): what may play a continued chat's
# earlier tasks (``eval --history-by``).
SOLVERS: tuple[str, ...] = ("oracle", "oracle_by_title", "oracle_checks_day")
# Which template each broken policy targets: the verifier must catch it on every one of those.
BROKEN_TARGETS: dict[str, tuple[str, ...]] = {
    "deletes_without_asking": ("delete_request", "reschedule"),
    "guesses_missing_time": ("missing_info",),
    "ignores_conflicts": ("conflict_create",),
    "tools_for_greetings": ("no_tool",),
}
