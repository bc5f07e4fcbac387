"""The calendar's 📅 receipt: what a turn really did to the calendar, in one line.

Built from the turn's call records (the gate's: status, arguments and the exact result text)
and the store, never from the model's reply: ``📅 created #3 '치과 예약' Fri 12-04 15:00–16:00``,
``📅 nothing changed (you declined: move '치과 예약')``. In Korean when the user wrote Korean.
A change the store no longer holds (created, then deleted in the same turn) is not reported as
standing: the later deletion is. ``agent.receipt`` decides when the line is shown.

One entry per change tool; a series adds its rule on creation and, on a change, how much of it
the scope touched ("(1 of 10)", "(all 52)"). The tool-to-kind table (``replies.CHANGE_TOOL_KINDS``) is also the verifier's: a reply that
claims a kind of change no call of that kind made is a false claim.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agent.prompt import unstamp_user_text
from agent.receipt import MARK, Receipt
from agent.records import CallRecord, CallStatus, Turn
from agent.tools import TARGET_CHANGED
from tools.calendar.replies import CHANGE_TOOL_KINDS, claimed_changes, in_language
from tools.calendar.result_views import result_body
from tools.calendar.shown import title as shown_title
from tools.calendar.store import CalendarStore

MAX_ITEMS = 5  # entries in one line; the rest are counted ("and 3 more")
_TIME_FIELDS = ("date", "start_time", "end_time", "duration_minutes")
_WEEKDAYS_KO = {"Mon": "월", "Tue": "화", "Wed": "수", "Thu": "목", "Fri": "금", "Sat": "토", "Sun": "일"}


@dataclass(frozen=True)
class Words:
    created: str
    moved: str
    updated: str
    deleted: str
    nothing: str
    declined: str
    failed: str
    more: str
    # the declined or failed action, by tool: "move '치과'" / "'치과' 옮기기"
    actions: dict[str, str]
    # how much of a series a change touched ("(1 of 10)"), see CalendarReceipt._scope
    scope_one: str = " (this one only)"
    scope_one_of: str = " (1 of {n})"
    scope_following: str = " ({n} from this one on)"
    scope_all: str = " (all {n})"
    scope_endless: str = " (every one, no end date)"
    # a yes that came after the event changed (the gate's ``target_changed``): said in words,
    # because the person, not the model, is who has to ask again
    changed: str = "not done: it changed after you were asked"
    korean: bool = False


EN = Words("created", "moved", "updated", "deleted", "nothing changed", "you declined", "failed", "and {n} more",
           {"create_event": "create {what}", "update_event": "change {what}", "move": "move {what}",
            "delete_event": "delete {what}"})
KO = Words("추가", "옮김", "수정", "삭제", "바뀐 것 없음", "거절하심", "실패", "외 {n}건",
           {"create_event": "{what} 추가", "update_event": "{what} 수정", "move": "{what} 옮기기",
            "delete_event": "{what} 삭제"},
          " (이번 한 번만)", " ({n}회 중 1회)", " (이번부터 {n}회)", " ({n}회 모두)", " (끝없는 반복 전체)",
          "안 함: 물어본 뒤에 바뀌었어요", korean=True)


def _arguments(call: CallRecord) -> dict[str, Any]:
    return call.arguments if isinstance(call.arguments, dict) else {}


def _moves(call: CallRecord) -> bool:
    """An update that changes when the event is (a move), not only what it says."""
    return call.name == "update_event" and any(k in _arguments(call) for k in _TIME_FIELDS)


class CalendarReceipt:
    """The domain's ``receipt`` hook (``agent.receipt.ReceiptFn``), bound to the live store."""

    def __init__(self, store: CalendarStore) -> None:
        self.store = store

    def __call__(self, turn: Turn) -> Receipt:
        words = KO if in_language(unstamp_user_text(turn.user_text), "ko") else EN
        done: list[str] = []
        declined: list[str] = []
        failed: list[str] = []
        for call in turn.calls:
            if call.name not in CHANGE_TOOL_KINDS:
                continue
            if call.status is CallStatus.OK:
                entry = self._done(call, words)
                if entry:
                    done.append(entry)
            elif call.status is CallStatus.DENIED:
                declined.append(self._action(call, words))
            elif call.status is CallStatus.FAILED:
                error = shown_title(result_body(call).get("error", "error"))  # a stable code, kept short whatever it is
                if error == TARGET_CHANGED:
                    failed.append(f"{self._action(call, words)} {words.changed}")
                else:
                    failed.append(f"{self._action(call, words)} {words.failed}: {error}")
        touched = bool(done or declined or failed)
        notes = ([f"{words.declined}: {_listed(declined, words)}"] if declined else []) + failed
        if done:
            text = f"{MARK} {_listed(done, words)}" + "".join(f"; {n}" for n in notes)
        else:
            text = f"{MARK} {words.nothing}" + (f" ({'; '.join(notes)})" if notes else "")
        # A reply that says it changed something when nothing ran gets the line too.
        return Receipt(text, touched or bool(claimed_changes(turn.reply)))

    def _done(self, call: CallRecord, words: Words) -> str | None:
        data = result_body(call).get("data") or {}
        if call.name == "delete_event":
            view = data.get("deleted") if isinstance(data, dict) else None
            if not isinstance(view, dict):
                return None
            return f"{words.deleted} {_event(view, words)}{self._scope(data, view, words)}"
        if not isinstance(data, dict) or "id" not in data:
            return None
        event = self.store.get_event(int(data["id"]))
        if event is None:  # gone again within the turn: its deletion says so
            return None
        if call.name == "create_event":
            rule = f" ({event.series_words(korean=words.korean)})" if event.is_series else ""
            return f"{words.created} {_event(data, words)}{rule}"
        verb = words.moved if _moves(call) else words.updated
        return f"{verb} {_event(data, words)}{self._scope(data, data, words)}"

    def _scope(self, data: dict[str, Any], view: dict[str, Any], words: Words) -> str:
        """How much of a series a change touched, from the tool's result: "(1 of 10)" for one
        occurrence, "(4 from this one on)", "(all 52)"; nothing for a one-off event."""
        if "repeats" not in view and "scope" not in data:
            return ""
        scope, touched = data.get("scope"), data.get("occurrences")
        if scope == "this":
            left = self.store.occurrence_count(int(view["id"])) if "id" in view else None
            if left is None:
                return words.scope_one
            # a deleted occurrence is no longer counted; a moved one still is
            total = left + 1 if "deleted" in data else left
            return words.scope_one_of.format(n=total)
        if not isinstance(touched, int):
            return words.scope_endless
        return (words.scope_following if scope == "following" else words.scope_all).format(n=touched)

    def _action(self, call: CallRecord, words: Words) -> str:
        """What the call would have done, in words: "move '치과 예약'"."""
        arguments = _arguments(call)
        what = f"'{shown_title(arguments['title'])}'" if arguments.get("title") else "?"
        event_id = arguments.get("event_id")
        if isinstance(event_id, int) and not isinstance(event_id, bool):
            event = self.store.get_event(event_id)
            what = f"'{shown_title(event.title)}'" if event is not None else f"#{event_id}"
        key = "move" if _moves(call) else call.name
        return words.actions.get(key, call.name + " {what}").format(what=what)


def _listed(items: list[str], words: Words) -> str:
    shown = "; ".join(items[:MAX_ITEMS])
    return shown + (f" {words.more.format(n=len(items) - MAX_ITEMS)}" if len(items) > MAX_ITEMS else "")


def _event(view: dict[str, Any], words: Words) -> str:
    """``#3 '치과 예약' Fri 12-04 15:00–16:00`` (Korean: ``12-04(금)``), from a tool's event view."""
    day = str(view.get("date", ""))[5:]
    weekday = str(view.get("weekday", ""))
    when = f"{day}({_WEEKDAYS_KO.get(weekday, weekday)})" if words.korean else f"{weekday} {day}"
    end = str(view.get("end", ""))
    if view.get("end_date"):
        end = f"{str(view['end_date'])[5:]} {end}"
    return f"#{view.get('id')} '{shown_title(view.get('title'))}' {when} {view.get('start')}–{end}"
