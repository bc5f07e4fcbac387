"""A newcomer's first chat, as a test: three requests into ``python -m agent --demo`` on a real pty.

The README's first command ends in this chat. A person with one event already (a yoga class
next week) books a dentist appointment, then asks for a weekly team meeting, then asks
what is on tomorrow; every approval question is answered no.
Whether the second and third requests reach for the first event (a call that would move or delete
it) is what the demo model decides, so the test records it (``record_property`` and one printed
line, shown with ``-s``) and asserts only what the runtime guarantees whatever the model writes:
the chat ends cleanly, every turn is logged, and an event the person never approved a change to
is exactly as it was after the first turn (the yoga class always, the dentist if it was booked).
"""

from __future__ import annotations

import json
import sqlite3
from datetime import datetime, time, timedelta
from pathlib import Path
from typing import Any, Callable
from zoneinfo import ZoneInfo

from tools.calendar.store import CalendarStore

from tests.test_repl import Terminal

REQUESTS = ("내일 오후 3시에 치과 예약 추가해줘", "매주 월요일 오전 10시에 팀 회의 잡아줘", "What's on my calendar tomorrow?")
QUESTION = "Approve? [y/N] "
PROMPT = "you> "


def _events(data: Path) -> dict[int, tuple[Any, ...]]:
    with sqlite3.connect(data / "calendar.sqlite3") as db:
        return {row[0]: tuple(row) for row in db.execute("SELECT * FROM events ORDER BY id")}


def _turns(data: Path) -> list[dict[str, Any]]:
    with sqlite3.connect(data / "trajectories.sqlite3") as db:
        return [json.loads(turn) for (turn,) in db.execute("SELECT turn FROM turns ORDER BY id")]


def _touches(turn: dict[str, Any], event_id: int) -> bool:
    """Did a call of this turn that changes or deletes an event name ``event_id``? (A gated call:
    the gate marks every call that asks first as destructive, whatever the domain calls it.)"""
    for step in turn["steps"]:
        for call in step["calls"]:
            arguments = call["arguments"] if isinstance(call["arguments"], dict) else {}
            if call["destructive"] and str(arguments.get("event_id")) == str(event_id):
                return True
    return False


def _play(term: Terminal, text: str, prompts: int, questions: int) -> tuple[int, int]:
    """Type one request; answer every approval question with no until the prompt is back."""
    term.type(text.encode() + b"\r")
    while True:
        term.wait_any((PROMPT, prompts + 1), (QUESTION, questions + 1))
        if term.seen.count(QUESTION.encode()) > questions:
            questions += 1
            term.type(b"n\r")
            continue
        return prompts + 1, questions


def test_a_newcomers_three_requests_leave_the_first_event_as_it_was_unless_approved(
        tmp_path: Path, gemma3: Path, record_property: Callable[[str, object], None]) -> None:
    data = tmp_path / "data"
    data.mkdir()
    zone = ZoneInfo("Asia/Seoul")
    evening = datetime.combine(datetime.now(zone).date() + timedelta(days=8), time(18), tzinfo=zone)
    with CalendarStore(data / "calendar.sqlite3", tz="Asia/Seoul") as store:
        store.add_event("Yoga class", evening, evening + timedelta(hours=1))
    term = Terminal(tmp_path)
    try:
        term.wait_for(PROMPT)
        prompts, questions = _play(term, REQUESTS[0], 1, 0)
        after_first = _events(data)
        for text in REQUESTS[1:]:
            prompts, questions = _play(term, text, prompts, questions)
        term.type(b"\x04")
        assert term.exit_code() == 0
    finally:
        term.close()
    screen = term.seen.decode(errors="replace")
    assert "Traceback" not in screen
    turns = _turns(data)
    assert len(turns) == 3, "every request is one logged turn"
    after_all = _events(data)
    for event_id, row in after_first.items():  # no approval was given, so nothing earlier changed
        assert after_all.get(event_id) == row, f"event {event_id} changed without an approval"
    assert len(after_first) >= 1  # the yoga class, whatever the model did
    first = max(after_first) if len(after_first) > 1 else None  # the dentist, if the first request booked it
    record = {"first_event_created": first is not None, "questions_denied": questions,
              **{f"request_{i + 1}_touched_first": first is not None and _touches(turns[i], first) for i in (1, 2)}}
    record_property("newcomer_chat", record)
    print(f"newcomer chat (the Gemma 3 270M demo, greedy): {json.dumps(record)}")
