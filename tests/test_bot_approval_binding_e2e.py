"""End to end through the Bot API: a tap approves what the question showed, and a crowd asks first.

The real ``python -m bot run`` with the calendar domain and a scripted model, against the local
Bot API (tests/fake_telegram.py). Between the question and the tap, a second connection to the
bot's calendar file changes the event -- as the CalDAV sync or another chat would -- in a field
the question does not even show. The tap must not delete the changed event.
"""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from datetime import datetime
from pathlib import Path
from typing import Any, Iterator
from zoneinfo import ZoneInfo

import pytest

from agent.tools import TARGET_CHANGED
from tests.bot_harness import ALICE, BOB, TOKEN, BotProcess, approval_message, buttons, wait_reply
from tests.fake_telegram import FakeTelegram


def script(today: str) -> dict[str, Any]:
    def call(name: str, arguments: dict[str, Any]) -> str:
        return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"

    crowd = [f"Guest {i}" for i in range(1, 13)]
    return {"rules": [
        {"match": "^book", "steps": [call("create_event", {
            "title": "Dentist", "date": today, "start_time": "15:00", "duration_minutes": 30,
            "notes": "bring the x-rays"}), "Booked: {result}"]},
        {"match": "^cancel it", "steps": [call("delete_event", {"event_id": 1}), "Result: {result}"]},
        {"match": "^invite", "steps": [call("create_event", {
            "title": "All hands", "date": today, "start_time": "10:00", "duration_minutes": 60,
            "attendees": crowd}), "Result: {result}"]},
    ]}


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeTelegram]:
    server = FakeTelegram(TOKEN).start()
    yield server
    server.close()


@pytest.fixture(scope="module")
def bot(fake: FakeTelegram, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BotProcess]:
    today = datetime.now(ZoneInfo("Asia/Seoul")).date().isoformat()
    process = BotProcess(fake, tmp_path_factory.mktemp("bot"), script(today), domain="tools.calendar.domain",
                         extra_config='tz = "Asia/Seoul"\n').start()
    yield process
    assert process.stop() == 0, process.log()[-3000:]


def calendar_rows(data_dir: Path) -> list[tuple[int, str, str | None]]:
    with closing(sqlite3.connect(data_dir / "calendar.sqlite3")) as conn:
        return conn.execute("SELECT id, title, notes FROM events ORDER BY id").fetchall()


def test_a_tap_after_a_sync_changed_the_event_deletes_nothing_and_says_so(fake: FakeTelegram, bot: BotProcess) -> None:
    fake.send_text(ALICE, ALICE, "book the dentist")
    assert '"ok": true' in wait_reply(fake, ALICE, "Booked:")
    fake.send_text(ALICE, ALICE, "cancel it please")
    ask = approval_message(fake, ALICE)
    assert "Dentist" in ask.text
    # another client rewrites the notes only: the question's words would still match
    with closing(sqlite3.connect(bot.data_dir / "calendar.sqlite3")) as other:
        other.execute("UPDATE events SET notes = 'wire 5,000,000 won to the clinic' WHERE id = 1")
        other.commit()
    fake.tap(ALICE, ALICE, buttons(ask)["Approve"])
    result = wait_reply(fake, ALICE, "Result:")
    assert f'"error": "{TARGET_CHANGED}"' in result and "Nothing was changed" in result
    assert "📅 nothing changed (delete 'Dentist' not done: it changed after you were asked)" in result
    edit = fake.wait_for(lambda: fake.requests("editMessageText", ALICE), 30, "the question edited")[-1]
    assert "Not done: this changed after I asked" in edit.text
    assert calendar_rows(bot.data_dir) == [(1, "Dentist", "wire 5,000,000 won to the clinic")]


def test_inviting_twelve_people_asks_first_and_a_deny_creates_nothing(fake: FakeTelegram, bot: BotProcess) -> None:
    before = calendar_rows(bot.data_dir)
    fake.send_text(BOB, BOB, "invite the whole team")
    ask = approval_message(fake, BOB)
    assert "Create 'All hands'" in ask.text and "with 12 attendees (invitations will be sent)" in ask.text
    fake.tap(BOB, BOB, buttons(ask)["Deny"])
    assert '"error": "denied"' in wait_reply(fake, BOB, "Result:")
    assert calendar_rows(bot.data_dir) == before
