"""End to end: what Telegram and strangers can send the bot, and outages it must outlive.

The real ``python -m bot run`` process against the local Bot API (tests/fake_telegram.py),
with faults injected there: malformed and poisoned updates, handlers whose Bot API call is
refused, taps from the wrong person, outages, refused chats and a wrong token.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Iterator

import pytest

from bot.approvals import EXPIRED
from tests.fake_telegram import FakeTelegram
from tests.test_bot_e2e import (
    ALICE, BOB, BURST_USERS, GROUP_ALLOWED, SCRIPT, TOKEN, BotProcess, answers, replies, wait_reply,
)


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeTelegram]:
    server = FakeTelegram(TOKEN).start()
    yield server
    server.close()


@pytest.fixture(scope="module")
def bot(fake: FakeTelegram, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BotProcess]:
    process = BotProcess(fake, tmp_path_factory.mktemp("bot"), SCRIPT).start()
    yield process
    assert process.stop() == 0, process.log()[-3000:]


def inbox_row(data_dir: Path, update_id: int) -> tuple[str, str | None] | None:
    """(state, error) of an update in the bot's inbox file."""
    with sqlite3.connect(data_dir / "telegram_inbox.sqlite3") as conn:
        return conn.execute("SELECT state, error FROM updates WHERE update_id = ?", (update_id,)).fetchone()


def settled(fake: FakeTelegram, bot: BotProcess, update_id: int) -> tuple[str, str | None]:
    """Wait until the update is acknowledged and no longer pending; its (state, error)."""
    fake.wait_for(lambda: fake.confirmed_below() > update_id, 30, f"update {update_id} acknowledged")
    return fake.wait_for(
        lambda: (row := inbox_row(bot.data_dir, update_id)) and row[0] != "pending" and row, 30,
        f"update {update_id} settled",
    )


def poll_message(chat_id: int, user_id: int) -> dict:
    """A message carrying a poll whose options lack ``persistent_id`` (PTB cannot build it)."""
    return {"message": {
        "message_id": 77, "date": 1, "chat": {"id": chat_id, "type": "private", "first_name": "U"},
        "from": {"id": user_id, "is_bot": False, "first_name": "U"},
        "poll": {"id": "p1", "question": "lunch?", "options": [{"text": "yes", "voter_count": 0}],
                 "total_voter_count": 0, "is_closed": False, "is_anonymous": True, "type": "regular",
                 "allows_multiple_answers": False},
    }}


# ---- poison-proof polling -------------------------------------------------------------------


def test_a_lone_surrogate_in_a_message_is_stored_replaced_and_answered(fake: FakeTelegram, bot: BotProcess) -> None:
    update_id = fake.send_text(BOB, BOB, "hi \ud800 there")  # sent on the wire as the JSON escape \ud800
    assert wait_reply(fake, BOB, "You said: hi") == "You said: hi \ufffd there"
    assert settled(fake, bot, update_id) == ("done", None)
    fake.send_text(BOB, BOB, "still alive")
    wait_reply(fake, BOB, "You said: still alive")
    assert bot.proc.poll() is None


def test_an_update_ptb_cannot_build_is_marked_failed_and_skipped(fake: FakeTelegram, bot: BotProcess) -> None:
    chat = BURST_USERS[0]
    bad = fake.push(poll_message(chat, chat))
    after = fake.send_text(chat, chat, "after the poll")
    wait_reply(fake, chat, "You said: after the poll")
    state, error = settled(fake, bot, bad)
    assert state == "failed" and "persistent_id" in error
    assert settled(fake, bot, after) == ("done", None)
    assert f"update {bad} could not be read" in bot.log()
    assert bot.proc.poll() is None


def test_a_handler_that_raises_marks_its_update_failed_and_the_bot_goes_on(fake: FakeTelegram, bot: BotProcess) -> None:
    chat = BURST_USERS[1]
    fake.fail_next("answerCallbackQuery", 1, 400, "Bad Request: query is too old and response timeout expired")
    tap = fake.tap(chat, chat, "ap:" + "x" * 22 + ":y")
    state, error = settled(fake, bot, tap)
    assert state == "failed" and "Query is too old" in error
    fake.send_text(chat, chat, "next message")
    wait_reply(fake, chat, "You said: next message")
    assert "handler failed for update" in bot.log()


def test_int_or_list_callback_data_is_answered_as_expired(fake: FakeTelegram, bot: BotProcess) -> None:
    chat = BURST_USERS[2]
    start = len(answers(fake))
    taps = [fake.tap(chat, chat, 5), fake.tap(chat, chat, ["ap", "x"]), fake.tap(chat, chat, None)]
    fake.wait_for(lambda: len(answers(fake)) >= start + 3, 30, "three answers")
    assert answers(fake)[start:] == [EXPIRED] * 3
    assert [settled(fake, bot, t) for t in taps] == [("done", None)] * 3


def test_an_edited_message_is_finished_without_a_reply(fake: FakeTelegram, bot: BotProcess) -> None:
    chat = BURST_USERS[3]
    message = {"message_id": 5, "date": 1, "edit_date": 2, "chat": {"id": chat, "type": "private", "first_name": "U"},
               "from": {"id": chat, "is_bot": False, "first_name": "U"}, "text": "add edited"}
    edit = fake.push({"edited_message": message})
    assert settled(fake, bot, edit) == ("done", None)
    fake.send_text(chat, chat, "plain")
    wait_reply(fake, chat, "You said: plain")
    assert replies(fake, chat) == ["You said: plain"]
