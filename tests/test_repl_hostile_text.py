"""The REPL on a real pseudo-terminal, against a hostile shared calendar and a hostile model.

The calendar holds a weekly series (``tests.hostile_text``) whose title holds ``\\x1b[2J\\x1b[H``
(clear the screen, cursor home), a C1 CSI, U+202E and U+2066, runs to 10,000 characters and has
5,000 attendees, and whose place holds "\\r\\n📅 deleted everything". The scripted model asks to delete it, writes
those characters into its own reply and passes them as tool arguments. What the terminal
receives (the bytes read from the pty master) must hold none of them, while the approval
prompt still names the action, the scope and the count.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.hostile_text import (
    ATTENDEES, C1_CSI, ESC_SEQUENCE, HOSTILE_PLACE, LRI, PDI, RLO, TITLE_HEAD, WEEKS, add_hostile_series,
)
from tests.test_repl import Terminal
from tools.calendar.store import CalendarStore

# Sequences that must not reach the terminal as bytes (the REPL's own dim/clear-line codes may).
FORBIDDEN = [ESC_SEQUENCE.encode(), b"\x1b[31m", C1_CSI.encode(), RLO.encode(), LRI.encode(), PDI.encode(),
             "\u2028".encode(), "\U000e0041".encode()]


def call(name: str, arguments: dict) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments}, ensure_ascii=False)}</tool_call>"


SCRIPT = {"rules": [
    {"match": "^drop", "steps": [call("delete_event", {"event_id": 1, "scope": "all"}), "Deleted: {result}"]},
    {"match": "^move", "steps": [call("update_event", {"event_id": 1, "scope": "all", "location": HOSTILE_PLACE,
                                                       "notes": f"x{ESC_SEQUENCE}{RLO}y"}), "Moved."]},
    {"match": "^say", "steps": [f"Done{ESC_SEQUENCE}\rXX {RLO}evil{C1_CSI} {LRI}end{PDI}\nsecond line"]},
]}


def test_hostile_titles_places_replies_and_arguments_reach_the_terminal_only_as_text(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    with CalendarStore(data / "calendar.sqlite3", tz="Asia/Seoul") as store:
        assert add_hostile_series(store) == 1
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT, ensure_ascii=False), encoding="utf-8")
    term = Terminal(tmp_path, ["-m", "tests.repl_scripted", str(script)])
    try:
        term.wait_for("you> ")
        prompts = 1
        for command in ("/week 2026-12-01", "/events 2026-12-01", "say something"):
            term.type(command.encode() + b"\r")
            prompts += 1
            term.wait_for("you> ", count=prompts)
        term.type(b"move it\r")  # the model's own arguments carry the place's "\r\n" and an ESC
        term.wait_for("Approve? [y/N] ")
        term.type(b"n\r")
        prompts += 1
        term.wait_for("you> ", count=prompts)
        term.type(b"drop it\r")
        term.wait_for("Approve? [y/N] ", count=2)
        term.type(b"y\r")
        prompts += 1
        term.wait_for("you> ", count=prompts)
        term.type(b"\x04")
        assert term.exit_code() == 0
    finally:
        term.close()

    seen = term.seen
    for bad in FORBIDDEN:
        assert bad not in seen, bad
    screen = seen.decode(errors="replace")
    assert "Traceback" not in screen
    # lines as a person reads them: the REPL's own "thinking" indicator is cleared by "\r\x1b[K"
    lines = [line.split("\r\x1b[K")[-1] for line in screen.replace("\r\n", "\n").split("\n")]
    # /week: the event and its place stay on one line; the place's "\r\n" started no fake line
    assert any("@ Room 1 📅 deleted everything␛[31m red; with Guest 0," in line for line in lines)
    assert not any(line.startswith("📅 deleted everything") for line in lines)
    # the model's reply: the "\r" was dropped (no overwrite), ESC shown as a picture
    assert "Done␛[2J␛[HXX \ufffdevil\ufffd31m \ufffdend\ufffd" in screen and "second line" in screen
    # both questions: action, scope and count on the line that asks
    move = next(line for line in lines if line.startswith("  ⚠ Change"))
    assert move.startswith(f"  ⚠ Change all {WEEKS} occurrences of '{TITLE_HEAD} ")
    assert "location → 'Room 1 📅 deleted everything␛[31m red'" in move
    drop = next(line for line in lines if line.startswith("  ⚠ Delete"))
    assert drop.startswith(f"  ⚠ Delete all {WEEKS} occurrences of '{TITLE_HEAD} ")
    assert drop.endswith(f"and {ATTENDEES - 10:,} more") and len(drop) < 1000
    # the receipt: what was deleted, one line
    receipt = next(line for line in lines if line.startswith("📅 deleted"))
    assert receipt.startswith(f"📅 deleted #1 '{TITLE_HEAD} ") and f"(all {WEEKS})" in receipt
