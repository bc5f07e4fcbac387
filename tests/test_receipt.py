"""The 📅 receipt: built from what ran and the store, never from the model's words.

The runtime with the real calendar domain (a real SQLite store under a temporary data dir) and
a scripted model, so each case is forced: what the model calls, what the gate answers.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from agent.app import build_runtime
from agent.approval import ApproveAll, DenyAll
from agent.backends.scripted import ScriptedBackend
from agent.config import load_settings
from agent.formats import format_tool_call
from agent.receipt import Receipt, receipt_line
from agent.records import Turn
from bot.text import TELEGRAM_LIMIT, split_message, with_receipt

DAY = "2026-12-04"  # a Friday
DENTIST = {"title": "치과 예약", "date": DAY, "start_time": "15:00", "end_time": "16:00"}


def runtime_for(tmp_path: Path, outputs: list[str], receipt: str | None = None):  # type: ignore[no-untyped-def]
    settings = load_settings({"data_dir": str(tmp_path / "data"), "receipt": receipt}, environ={})
    return build_runtime(settings, ScriptedBackend(outputs))


def call(name: str, arguments: dict[str, Any]) -> str:
    return format_tool_call(name, arguments)


def test_created_moved_and_deleted_events_each_show_their_fields(tmp_path: Path) -> None:
    runtime = runtime_for(tmp_path, [
        call("create_event", DENTIST), "Booked.",
        call("update_event", {"event_id": 1, "start_time": "17:00"}), "Moved.",
        call("update_event", {"event_id": 1, "location": "Gangnam"}), "Noted.",
        call("delete_event", {"event_id": 1}), "Deleted.",
    ])
    lines = [runtime.handle("repl", text, ApproveAll()).receipt
             for text in ("book the dentist", "move it to 5 pm", "it is in Gangnam", "delete it")]
    runtime.close()
    assert lines == [
        "📅 created #1 '치과 예약' Fri 12-04 15:00–16:00",
        "📅 moved #1 '치과 예약' Fri 12-04 17:00–18:00",
        "📅 updated #1 '치과 예약' Fri 12-04 17:00–18:00",
        "📅 deleted #1 '치과 예약' Fri 12-04 17:00–18:00",
    ]


def test_a_claimed_deletion_after_a_denial_gets_nothing_changed(tmp_path: Path) -> None:
    """The issue's case: the user said no, the model says it deleted the dentist anyway."""
    runtime = runtime_for(tmp_path, [
        call("create_event", DENTIST), "잡았어요.",
        call("delete_event", {"event_id": 1}), "완료했어요: 12월 4일 15:00 '치과 예약' 일정을 삭제했어요.",
    ])
    runtime.handle("repl", "치과 예약 잡아줘", ApproveAll())
    turn = runtime.handle("repl", "치과 지워줘", DenyAll())
    events = runtime.domain.commands["today"](DAY)
    runtime.close()
    assert "삭제했어요" in turn.reply  # what the model claimed ...
    assert turn.receipt == "📅 바뀐 것 없음 (거절하심: '치과 예약' 삭제)"  # ... and what happened
    assert "치과 예약" in events


def test_the_english_denial_names_the_declined_move(tmp_path: Path) -> None:
    runtime = runtime_for(tmp_path, [
        call("create_event", DENTIST), "Booked.",
        call("update_event", {"event_id": 1, "date": "2026-12-07"}), "Done: I moved the dentist to Monday.",
    ])
    runtime.handle("repl", "book the dentist", ApproveAll())
    turn = runtime.handle("repl", "move the dentist to monday", DenyAll())
    runtime.close()
    assert turn.receipt == "📅 nothing changed (you declined: move '치과 예약')"


def test_korean_user_gets_a_korean_receipt_with_the_weekday(tmp_path: Path) -> None:
    runtime = runtime_for(tmp_path, [call("create_event", DENTIST), "잡았어요."])
    turn = runtime.handle("repl", "금요일 3시에 치과 잡아줘", ApproveAll())
    runtime.close()
    assert turn.receipt == "📅 추가 #1 '치과 예약' 12-04(금) 15:00–16:00"


def test_a_failed_change_says_so_and_that_nothing_changed(tmp_path: Path) -> None:
    runtime = runtime_for(tmp_path, [call("delete_event", {"event_id": 9}), "Deleted it."])
    turn = runtime.handle("repl", "delete event 9", ApproveAll())
    runtime.close()
    assert turn.receipt == "📅 nothing changed (delete #9 failed: not_found)"


@pytest.mark.parametrize(("mode", "expected"), [("changes", None), ("on", "📅 nothing changed"), ("off", None)])
def test_a_read_only_turn_shows_a_line_only_when_the_setting_asks(tmp_path: Path, mode: str, expected: str | None) -> None:
    runtime = runtime_for(tmp_path, [call("search_events", {"query": "dentist"}), "Nothing on the calendar."],
                          receipt=mode)
    turn = runtime.handle("repl", "is there a dentist?", ApproveAll())
    runtime.close()
    assert turn.receipt == expected


def test_off_hides_even_a_change_and_changes_shows_a_claim_without_a_call(tmp_path: Path) -> None:
    runtime = runtime_for(tmp_path, [call("create_event", DENTIST), "Booked."], receipt="off")
    assert runtime.handle("repl", "book the dentist", ApproveAll()).receipt is None
    runtime.close()
    # No call at all, but the reply says it deleted something: the line says nothing changed.
    runtime = runtime_for(tmp_path, ["I deleted the dentist appointment."])
    assert runtime.handle("repl", "delete the dentist", ApproveAll()).receipt == "📅 nothing changed"
    runtime.close()


def test_the_trajectory_records_the_receipt_beside_the_reply(tmp_path: Path) -> None:
    runtime = runtime_for(tmp_path, [call("create_event", DENTIST), "Booked."])
    runtime.handle("repl", "book the dentist", ApproveAll())
    runtime.close()
    with sqlite3.connect(tmp_path / "data" / "trajectories.sqlite3") as db:
        (recorded,) = db.execute("SELECT turn FROM turns").fetchone()
    turn = json.loads(recorded)
    assert (turn["reply"], turn["receipt"]) == ("Booked.", "📅 created #1 '치과 예약' Fri 12-04 15:00–16:00")


def test_a_created_event_deleted_in_the_same_turn_is_reported_deleted_only(tmp_path: Path) -> None:
    runtime = runtime_for(tmp_path, [call("create_event", DENTIST), call("delete_event", {"event_id": 1}), "Done."])
    turn = runtime.handle("repl", "book and then drop the dentist", ApproveAll())
    runtime.close()
    assert turn.receipt == "📅 deleted #1 '치과 예약' Fri 12-04 15:00–16:00"


def test_a_failing_hook_costs_the_line_not_the_turn() -> None:
    def broken(turn: Turn) -> Receipt:
        raise RuntimeError("boom")

    turn = Turn(session_id=None, user_text="hi", reply="hello")
    assert receipt_line(broken, turn, "on") is None
    assert receipt_line(lambda t: Receipt("multi\nline", True), turn) == "📅 multi line"


def test_a_bad_receipt_setting_is_one_line_naming_the_choices(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="receipt: expected on or off or changes, got 'always'"):
        load_settings({"data_dir": str(tmp_path)}, environ={"AGENT_RECEIPT": "always"})


def test_the_receipt_stays_in_the_one_message_a_reply_fits() -> None:
    receipt = "📅 created #1 'x' Fri 12-04 15:00–16:00"
    assert with_receipt("Booked.", receipt) == f"Booked.\n\n{receipt}"
    assert with_receipt("Booked.", None) == "Booked."
    almost_full = "a" * (TELEGRAM_LIMIT - 5)
    [piece] = split_message(with_receipt(almost_full, receipt))
    assert piece.endswith(f"…\n\n{receipt}") and len(piece) <= TELEGRAM_LIMIT
    pieces = split_message(with_receipt("word " * 1500, receipt))  # already several messages
    assert len(pieces) > 1 and pieces[-1].endswith(receipt) and all(receipt not in p for p in pieces[:-1])


def test_the_flag_overrides_the_environment_which_overrides_the_file(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from agent.__main__ import build_parser, settings_from

    data = tmp_path / "data"
    data.mkdir()
    (data / "config.toml").write_text('receipt = "off"\n')
    monkeypatch.setenv("AGENT_DATA_DIR", str(data))
    assert settings_from(build_parser().parse_args([])).receipt == "off"
    monkeypatch.setenv("AGENT_RECEIPT", "on")
    assert settings_from(build_parser().parse_args([])).receipt == "on"
    assert settings_from(build_parser().parse_args(["--receipt", "changes"])).receipt == "changes"
    assert settings_from(build_parser().parse_args(["chat", "--receipt", "off"])).receipt == "off"


def test_a_series_receipt_names_its_rule_and_how_much_of_it_a_change_touched(tmp_path: Path) -> None:
    """Created with its rule; one occurrence deleted is "(1 of 10)"; one moved is "(1 of 9)";
    the rest of the series from an occurrence on, then all of what is left, with their counts."""
    weekly = {"title": "팀 회의", "date": "2026-12-07", "start_time": "10:00", "duration_minutes": 60,
              "repeat": {"freq": "weekly", "by_weekday": ["MO"], "count": 10}}
    runtime = runtime_for(tmp_path, [
        call("create_event", weekly), "Done.",
        call("delete_event", {"event_id": 1, "occurrence_date": "2026-12-14", "scope": "this"}), "Done.",
        call("update_event", {"event_id": 1, "occurrence_date": "2026-12-21", "scope": "this",
                              "start_time": "11:00"}), "Done.",
        call("delete_event", {"event_id": 1, "occurrence_date": "2027-01-25", "scope": "following"}), "Done.",
        call("delete_event", {"event_id": 1, "scope": "all"}), "Done.",
    ])
    lines = [runtime.handle("repl", text, ApproveAll()).receipt
             for text in ("weekly team meeting", "cancel the 14th", "move the 21st to 11", "stop it from jan 25",
                          "delete the whole series")]
    runtime.close()
    assert lines[0] == "📅 created #1 '팀 회의' Mon 12-07 10:00–11:00 (weekly, Mon 10:00)"
    assert lines[1] == "📅 deleted #1 '팀 회의' Mon 12-14 10:00–11:00 (1 of 10)"
    assert lines[2] == "📅 moved #1 '팀 회의' Mon 12-21 11:00–12:00 (1 of 9)"
    assert lines[3] == "📅 deleted #1 '팀 회의' Mon 01-25 10:00–11:00 (3 from this one on)"
    assert lines[4].startswith("📅 deleted #1 '팀 회의' ") and lines[4].endswith(" (all 6)")
