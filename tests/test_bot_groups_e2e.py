"""End to end: groups. A group has members who are not on the allowlist, and members who join later.

The real bot process runs the calendar domain (scripted model) against the local Bot API, in
an allowed group whose members are Alice (listed) and Mallory (not listed). What the calendar
holds is answered only in private chats; in the group only listed users act or approve. A second
bot lists the group but no users: nobody can act there, and the bot says so to a tap.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import Iterator
from zoneinfo import ZoneInfo

import pytest

from bot.access import NOBODY_IN_GROUP, NOT_LISTED
from bot.handlers import PRIVATE_ONLY
from tests.bot_harness import ALICE, GROUP_ALLOWED, MALLORY, TOKEN, BotProcess, answers, buttons, replies, wait_reply
from tests.fake_telegram import FakeTelegram
from tools.calendar.store import CalendarStore

SEOUL = ZoneInfo("Asia/Seoul")
SECRET = "Divorce lawyer"  # what must not be read out in the group
DROP = {"name": "delete_event", "arguments": {"event_id": 1}}
SCRIPT = {"rules": [
    {"match": "^drop", "steps": [f"<tool_call>{json.dumps(DROP)}</tool_call>", "Result: {result}"]},
]}


def seed(data_dir: Path) -> None:
    with CalendarStore(data_dir / "calendar.sqlite3", tz="Asia/Seoul") as store:
        start = datetime(2026, 12, 1, 15, 0, tzinfo=SEOUL)
        store.add_event(SECRET, start, start + timedelta(hours=1), remind_minutes_before=[30])


def start_bot(fake: FakeTelegram, data_dir: Path, **env: str) -> BotProcess:
    seed(data_dir)
    clock = data_dir / "clock.txt"
    clock.write_text(datetime(2026, 12, 1, 9, 0, tzinfo=SEOUL).isoformat())
    process = BotProcess(fake, data_dir, SCRIPT, domain="tools.calendar.domain", extra_config='tz = "Asia/Seoul"\n')
    process.use_clock_file(clock)
    process.extra_env.update(env)
    return process.start()


def events_left(data_dir: Path) -> list[str]:
    with CalendarStore(data_dir / "calendar.sqlite3", tz="Asia/Seoul") as store:
        return [e.title for e in store.all_events()]


def next_reply(fake: FakeTelegram, chat_id: int, seen: int, needle: str) -> str:
    """The first reply after the chat's ``seen`` earlier ones that holds ``needle``."""
    return fake.wait_for(lambda: next((t for t in replies(fake, chat_id)[seen:] if needle in t), None), 30,
                         f"{needle!r} in chat {chat_id}")


def group_texts(fake: FakeTelegram, chat_id: int = GROUP_ALLOWED) -> list[str]:
    return [c.params.get("text", "") for c in fake.requests(chat_id=chat_id) if c.method != "sendChatAction"]


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeTelegram]:
    server = FakeTelegram(TOKEN).start()
    yield server
    server.close()


@pytest.fixture(scope="module")
def bot(fake: FakeTelegram, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BotProcess]:
    process = start_bot(fake, tmp_path_factory.mktemp("bot"))
    yield process
    assert process.stop() == 0, process.log()[-3000:]


@pytest.mark.parametrize("command", ["/ics", "/today 2026-12-01", "/week 2026-12-01", "/reminders"])
def test_calendar_contents_are_answered_in_a_group_with_one_line_asking_for_a_private_chat(
    fake: FakeTelegram, bot: BotProcess, command: str
) -> None:
    name = command.split()[0][1:]
    fake.send_text(GROUP_ALLOWED, ALICE, command, chat_type="group")  # Alice is listed: still not in a group
    answer = wait_reply(fake, GROUP_ALLOWED, f"send /{name} to me directly")
    assert answer == PRIVATE_ONLY.format(name=name) and "\n" not in answer
    assert fake.documents(GROUP_ALLOWED) == []
    assert not any(SECRET in text for text in group_texts(fake))
    # the same command in Alice's private chat shows the calendar
    seen, files = len(replies(fake, ALICE)), len(fake.documents(ALICE))
    fake.send_text(ALICE, ALICE, command)
    if name == "ics":
        sent = fake.wait_for(lambda: fake.documents(ALICE)[files:], 30, "the .ics file")
        assert SECRET.encode() in sent[0].files["document"].data
    else:
        next_reply(fake, ALICE, seen, SECRET)


def test_a_strangers_message_in_an_allowed_group_gets_silence_and_reaches_no_model(fake: FakeTelegram, bot: BotProcess) -> None:
    before = len(group_texts(fake))
    fake.send_text(GROUP_ALLOWED, MALLORY, "drop it", chat_type="group")
    fake.send_text(GROUP_ALLOWED, MALLORY, "/week 2026-12-01", chat_type="group")
    fake.send_text(ALICE, ALICE, "/today 2026-12-02")  # handled after the stranger's two
    wait_reply(fake, ALICE, "No events on 2026-12-02.")
    assert len(group_texts(fake)) == before
    assert events_left(bot.data_dir) == [SECRET]
    assert "refused update from user 333 in group chat -500" in bot.log()


def test_a_stranger_in_an_allowed_group_pressing_approve_changes_nothing(fake: FakeTelegram, bot: BotProcess) -> None:
    fake.send_text(GROUP_ALLOWED, ALICE, "drop it", chat_type="group")
    ask = fake.wait_for(lambda: next((c for c in fake.requests("sendMessage", GROUP_ALLOWED)
                                      if (c.text or "").startswith("Approve this action?")), None), 30, "the question")
    taps = len(answers(fake))
    fake.tap(GROUP_ALLOWED, MALLORY, buttons(ask)["Approve"], chat_type="group")
    fake.wait_for(lambda: len(answers(fake)) > taps, 30, "the stranger's tap answered")
    assert answers(fake)[-1] == NOT_LISTED
    assert fake.requests("editMessageText", GROUP_ALLOWED) == []  # the question is still open
    assert events_left(bot.data_dir) == [SECRET]
    fake.tap(GROUP_ALLOWED, ALICE, buttons(ask)["Deny"], chat_type="group")  # the listed asker still can
    assert "denied" in wait_reply(fake, GROUP_ALLOWED, "Result:")
    assert events_left(bot.data_dir) == [SECRET]


def test_a_group_listed_without_users_admits_nobody_and_says_so_to_a_tap(tmp_path: Path) -> None:
    fake = FakeTelegram(TOKEN).start()
    process = start_bot(fake, tmp_path, TELEGRAM_ALLOWED_USERS="", TELEGRAM_ALLOWED_CHATS=f"{GROUP_ALLOWED},{ALICE}")
    try:
        fake.send_text(GROUP_ALLOWED, ALICE, "drop it", chat_type="group")
        fake.send_text(GROUP_ALLOWED, ALICE, "/today 2026-12-01", chat_type="group")
        fake.tap(GROUP_ALLOWED, ALICE, "ap:made-up-question-id:y", chat_type="group")
        fake.wait_for(lambda: answers(fake), 30, "the tap answered")
        assert answers(fake) == [NOBODY_IN_GROUP] and "TELEGRAM_ALLOWED_USERS" in NOBODY_IN_GROUP
        fake.send_text(ALICE, ALICE, "/today 2026-12-01")  # her private chat is listed by its id
        wait_reply(fake, ALICE, SECRET)
        assert group_texts(fake) == []
        assert events_left(tmp_path) == [SECRET]
        assert "TELEGRAM_ALLOWED_USERS is empty: nobody can act in a group" in process.log()
    finally:
        assert process.stop() == 0, process.log()[-3000:]
        fake.close()
