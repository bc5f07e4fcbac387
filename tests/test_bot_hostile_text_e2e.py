"""End to end: a hostile shared calendar and a hostile model, through the real bot to the Bot API.

The bot's store holds a weekly series (``tests.hostile_text.add_hostile_series``): ESC
sequences, a C1 CSI, U+202E and U+2066 in a 10,000-character title, "\\r\\n📅 deleted everything"
in its place, 5,000 attendees. The scripted model writes the same characters into its reply and
its arguments. Every text the bot hands the Bot API (messages, edits, captions, button answers)
must hold none of them, and the approval question must keep the action, the scope and the count
in the message that carries the buttons, within Telegram's 4096 characters (the local Bot API
refuses longer texts, as Telegram does).
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Iterator
from zoneinfo import ZoneInfo

import pytest

from tests.bot_harness import ALICE, TOKEN, BotProcess, approval_message, buttons, replies, wait_reply
from tests.fake_telegram import FakeTelegram
from tests.hostile_text import (
    ATTENDEES, C1_CSI, ESC_SEQUENCE, HOSTILE_PLACE, LRI, PDI, RLO, TITLE_HEAD, WEEKS, add_hostile_series, bad_characters,
)
from tools.calendar.store import CalendarStore

SEOUL = ZoneInfo("Asia/Seoul")


def call(name: str, arguments: dict) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments}, ensure_ascii=False)}</tool_call>"


SCRIPT = {"rules": [
    {"match": "^drop", "steps": [call("delete_event", {"event_id": 1, "scope": "all"}), "Deleted: {result}"]},
    {"match": "^move", "steps": [call("update_event", {"event_id": 1, "scope": "all", "location": HOSTILE_PLACE}),
                                 "Moved: {result}"]},
    {"match": "^say", "steps": [f"Done{ESC_SEQUENCE}\rXX {RLO}evil{C1_CSI} {LRI}end{PDI}\nsecond line"]},
]}


def set_clock(path: Path, text: str) -> None:
    path.write_text(datetime.fromisoformat(text).replace(tzinfo=SEOUL).isoformat())


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeTelegram]:
    server = FakeTelegram(TOKEN).start()
    yield server
    server.close()


@pytest.fixture(scope="module")
def clock(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("clock") / "clock.txt"


@pytest.fixture(scope="module")
def bot(fake: FakeTelegram, clock: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BotProcess]:
    data_dir = tmp_path_factory.mktemp("bot")
    with CalendarStore(data_dir / "calendar.sqlite3", tz="Asia/Seoul") as store:
        assert add_hostile_series(store) == 1
    set_clock(clock, "2026-12-01T09:00")
    process = BotProcess(fake, data_dir, SCRIPT, domain="tools.calendar.domain", extra_config='tz = "Asia/Seoul"\n')
    process.use_clock_file(clock)
    process.start()
    yield process
    assert process.stop() == 0, process.log()[-3000:]


def shown_texts(fake: FakeTelegram) -> list[str]:
    """Every text the bot handed the Bot API for a person to read."""
    keys = ("text", "caption")
    return [c.params[k] for c in fake.requests() if c.method != "getUpdates" for k in keys if k in c.params]


def assert_all_clean(fake: FakeTelegram) -> None:
    texts = shown_texts(fake)
    assert texts
    for text in texts:
        assert bad_characters(text) == [], (text[:200], bad_characters(text)[:5])
    assert all(c.status != 400 for c in fake.requests()), [c.params.get("text", "")[:80] for c in fake.requests() if c.status == 400]


def test_week_and_today_show_the_hostile_event_as_text(fake: FakeTelegram, bot: BotProcess) -> None:
    fake.send_text(ALICE, ALICE, "/week 2026-12-01")
    listing = wait_reply(fake, ALICE, "Week of 2026-12-01")
    assert len(listing.splitlines()) == 1 + 7 + 1  # the place's "\r\n" started no line of its own
    assert "@ Room 1 📅 deleted everything␛[31m red; with Guest 0," in listing
    fake.send_text(ALICE, ALICE, "/today 2026-12-01")
    day = wait_reply(fake, ALICE, "2026-12-01:")
    assert day.splitlines()[1].startswith(f"  #1 '{TITLE_HEAD} \ufffdgnp.exe\ufffd\ufffd ␛[2J␛[HPAID\ufffd31m")
    assert_all_clean(fake)


def test_the_models_reply_reaches_the_chat_only_as_text(fake: FakeTelegram, bot: BotProcess) -> None:
    fake.send_text(ALICE, ALICE, "say it")
    reply = wait_reply(fake, ALICE, "second line")
    assert reply.startswith("Done␛[2J␛[HXX \ufffdevil\ufffd31m \ufffdend\ufffd\nsecond line")
    assert_all_clean(fake)


def test_a_reminder_and_its_open_button_show_the_event_as_text(fake: FakeTelegram, bot: BotProcess, clock: Path) -> None:
    set_clock(clock, "2026-12-01T09:50")
    reminder = fake.wait_for(lambda: next((c for c in fake.requests("sendMessage", ALICE)
                                           if (c.text or "").startswith("⏰")), None), 30, "the reminder")
    assert reminder.text.splitlines() == [reminder.text.splitlines()[0], "📍 Room 1 📅 deleted everything␛[31m red"]
    assert reminder.text.startswith(f"⏰ In 10 min: '{TITLE_HEAD} ") and "…' at 10:00" in reminder.text
    fake.tap(ALICE, ALICE, buttons(reminder)["Open"])
    opened = wait_reply(fake, ALICE, "Where: Room 1")
    assert len(opened.splitlines()) == 5 and f"and {ATTENDEES - 10:,} more" in opened
    fake.send_text(ALICE, ALICE, "/reminders")
    wait_reply(fake, ALICE, "Upcoming reminders:")
    assert_all_clean(fake)


def test_approval_questions_keep_action_scope_and_count_with_their_buttons(fake: FakeTelegram, bot: BotProcess) -> None:
    fake.send_text(ALICE, ALICE, "move it")  # the model's arguments carry the hostile place
    move = approval_message(fake, ALICE, 1)
    assert move.text.startswith(f"Approve this action?\n\nChange all {WEEKS} occurrences of '{TITLE_HEAD} ")
    assert "location → 'Room 1 📅 deleted everything␛[31m red'" in move.text
    fake.tap(ALICE, ALICE, buttons(move)["Deny"])
    wait_reply(fake, ALICE, "📅 nothing changed")

    fake.send_text(ALICE, ALICE, "drop it")
    ask = approval_message(fake, ALICE, 2)
    assert list(buttons(ask)) == ["Approve", "Deny"]  # the buttons are on the message that names it all
    assert len(ask.text) <= 4096 and ask.text.count("\n") == 2
    assert ask.text.startswith(f"Approve this action?\n\nDelete all {WEEKS} occurrences of '{TITLE_HEAD} ")
    assert "(#1, weekly, Tue 10:00) with Guest 0, Guest 1," in ask.text
    assert ask.text.endswith(f"and {ATTENDEES - 10:,} more")
    fake.tap(ALICE, ALICE, buttons(ask)["Approve"])
    receipt = wait_reply(fake, ALICE, "📅 deleted #1")
    edited = fake.requests("editMessageText", ALICE)[-1].text
    assert edited.startswith(f"Delete all {WEEKS} occurrences of") and edited.endswith("Approved.")
    # the tool's result (the whole title, 10,000 characters) goes out split, every piece clean
    assert receipt.splitlines()[-1].startswith(f"📅 deleted #1 '{TITLE_HEAD} ") and f"(all {WEEKS})" in receipt
    assert sum(1 for t in replies(fake, ALICE) if t.startswith("Deleted:")) == 1
    assert_all_clean(fake)
