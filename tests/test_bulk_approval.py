"""Bulk changes ask first: a 4th creation in one turn, or one event inviting more than 10 people.

A small model that misreads a message (or obeys text planted in an invitation) can fill the
calendar, or send invitations to a crowd through the CalDAV server, in one turn. The scripted
model makes those moves; the runtime with the real calendar domain must ask before each one, name
how many, and run nothing that was declined. One creation stays unasked, as before.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

from agent.app import build_runtime
from agent.approval import ApprovalRequest, Decision
from agent.backends.scripted import ScriptedBackend
from agent.config import load_settings
from agent.formats import format_tool_call
from agent.records import CallStatus
from agent.repl import CONVERSATION
from tools.calendar.approval_rules import MAX_ATTENDEES_UNASKED, MAX_CREATES_UNASKED, create_question, ordinal
from tools.calendar.arguments import CreateEventArgs

DAY = "2026-12-04"  # a Friday


class Answering:
    """The person: answers every question with ``yes`` and keeps what they were shown."""

    def __init__(self, yes: bool) -> None:
        self.yes = yes
        self.shown: list[str] = []

    def decide(self, request: ApprovalRequest) -> Decision:
        self.shown.append(request.description)
        return Decision(self.yes, "user")


def create(title: str, hour: int, attendees: list[str] | None = None) -> str:
    arguments: dict[str, Any] = {"title": title, "date": DAY, "start_time": f"{hour:02d}:00", "duration_minutes": 30}
    if attendees is not None:
        arguments["attendees"] = attendees
    return format_tool_call("create_event", arguments)


def turn_of(tmp_path: Path, outputs: list[str], approver: Answering, text: str = "plan my friday") -> tuple[Any, list[str]]:
    """One turn of the runtime with the scripted model; the turn and the titles stored after it."""
    settings = load_settings({"data_dir": str(tmp_path / "data")}, environ={})
    runtime = build_runtime(settings, ScriptedBackend(outputs))
    try:
        turn = runtime.handle(CONVERSATION, text, approver)
    finally:
        runtime.close()
    with closing(sqlite3.connect(settings.data_dir / "calendar.sqlite3")) as calendar:
        titles = [title for (title,) in calendar.execute("SELECT title FROM events ORDER BY id")]
    return turn, titles


def test_a_fourth_creation_in_one_turn_asks_naming_it_and_a_no_keeps_it_out(tmp_path: Path) -> None:
    outputs = [create(f"Block {i}", 9 + i) for i in range(1, 5)] + ["Done: four blocks."]
    person = Answering(yes=False)
    turn, titles = turn_of(tmp_path, outputs, person)
    assert person.shown == ["Create a 4th event this turn: 'Block 4' Fri 2026-12-04 13:00, 30 min"]
    assert [c.status for c in turn.calls] == [CallStatus.OK] * 3 + [CallStatus.DENIED]
    assert titles == ["Block 1", "Block 2", "Block 3"]
    assert "you declined: create 'Block 4'" in (turn.receipt or "")


def test_four_creations_in_one_reply_ask_on_the_fourth_and_run_it_on_yes(tmp_path: Path) -> None:
    one_reply = "".join(create(f"Block {i}", 9 + i) for i in range(1, 5))
    person = Answering(yes=True)
    turn, titles = turn_of(tmp_path, [one_reply, "Done."], person)
    assert len(person.shown) == 1 and person.shown[0].startswith("Create a 4th event this turn: 'Block 4'")
    assert titles == ["Block 1", "Block 2", "Block 3", "Block 4"]
    assert turn.calls[3].approval == {"approved": True, "reason": "user"}


def test_three_creations_and_one_per_turn_never_ask(tmp_path: Path) -> None:
    person = Answering(yes=False)
    turn, titles = turn_of(tmp_path, [create(f"Block {i}", 9 + i) for i in range(1, 4)] + ["Done."], person)
    assert person.shown == [] and len(titles) == MAX_CREATES_UNASKED
    assert all(c.approval is None for c in turn.calls)


def test_the_count_is_per_turn(tmp_path: Path) -> None:
    """Four creations over two turns: none of them is a bulk change."""
    settings = load_settings({"data_dir": str(tmp_path / "data")}, environ={})
    outputs = [create("A", 9), create("B", 10), "ok", create("C", 11), create("D", 12), "ok"]
    runtime = build_runtime(settings, ScriptedBackend(outputs))
    person = Answering(yes=False)
    try:
        first = runtime.handle(CONVERSATION, "two please", person)
        second = runtime.handle(CONVERSATION, "two more", person)
    finally:
        runtime.close()
    assert person.shown == [] and [c.status for c in first.calls + second.calls] == [CallStatus.OK] * 4


def test_creations_that_failed_are_not_counted(tmp_path: Path) -> None:
    """Two tries refused as conflicts do not count: the 4th and 5th calls are the 2nd and 3rd
    creations and run unasked; the 6th call is the 4th creation and asks."""
    person = Answering(yes=False)
    outputs = [create("A", 9), create("B", 9), create("C", 9), create("D", 10), create("E", 11), create("F", 12), "ok"]
    turn, titles = turn_of(tmp_path, outputs, person)
    assert [c.status for c in turn.calls] == [CallStatus.OK, CallStatus.FAILED, CallStatus.FAILED, CallStatus.OK,
                                              CallStatus.OK, CallStatus.DENIED]
    assert person.shown == ["Create a 4th event this turn: 'F' Fri 2026-12-04 12:00, 30 min"]
    assert titles == ["A", "D", "E"]


def test_twelve_attendees_ask_naming_the_invitations_and_a_no_creates_nothing(tmp_path: Path) -> None:
    crowd = [f"Guest {i}" for i in range(1, 13)]
    person = Answering(yes=False)
    turn, titles = turn_of(tmp_path, [create("All hands", 10, crowd), "Invited everyone."], person)
    assert person.shown == ["Create 'All hands' Fri 2026-12-04 10:00, 30 min with 12 attendees (invitations will be "
                            "sent): Guest 1, Guest 2, Guest 3, Guest 4, Guest 5 and 7 more"]
    assert turn.calls[0].status is CallStatus.DENIED and titles == []


def test_ten_attendees_do_not_ask_and_eleven_do(tmp_path: Path) -> None:
    ten = [f"P{i}" for i in range(MAX_ATTENDEES_UNASKED)]
    assert create_question(CreateEventArgs(title="Ten", date=DAY, start_time="10:00", duration_minutes=30,
                                           attendees=ten), {}) is None
    eleven = CreateEventArgs(title="Eleven", date=DAY, start_time="10:00", duration_minutes=30, attendees=ten + ["P10"])
    assert "with 11 attendees (invitations will be sent)" in (create_question(eleven, {}) or "")
    person = Answering(yes=False)
    _, titles = turn_of(tmp_path, [create("Ten", 10, ten), "ok"], person)
    assert person.shown == [] and titles == ["Ten"]


def test_a_fourth_creation_with_a_crowd_names_both() -> None:
    args = CreateEventArgs(title="Party", date=DAY, start_time="19:00", end_time="22:00",
                           attendees=[f"G{i}" for i in range(12)])
    question = create_question(args, {"create_event": 3}, also_on="iCloud")
    assert question == ("Create a 4th event this turn: 'Party' Fri 2026-12-04 19:00-22:00 with 12 attendees "
                        "(invitations will be sent): G0, G1, G2, G3, G4 and 7 more (also in your iCloud calendar)")
    assert [ordinal(n) for n in (4, 11, 12, 13, 21, 22, 23, 101)] == \
        ["4th", "11th", "12th", "13th", "21st", "22nd", "23rd", "101st"]
    eighth = create_question(args.model_copy(update={"attendees": None}), {"create_event": 7})
    assert eighth is not None and eighth.startswith("Create an 8th event this turn")
