"""End to end: /ics sends the calendar as an .ics document, from the real bot process.

The bot runs the calendar domain on its real store (scripted model, test clock) against the
local Bot API, whose sendDocument takes only a multipart upload, as Telegram does. What the
chat receives is parsed with ``icalendar``, as a calendar app would read it.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Iterator
from zoneinfo import ZoneInfo

import httpx
import icalendar
import pytest

from tests.bot_harness import ALICE, BOB, MALLORY, TOKEN, BotProcess, wait_reply
from tests.fake_telegram import Call, FakeTelegram

SEOUL = ZoneInfo("Asia/Seoul")
LUNCH = {"name": "create_event", "arguments": {
    "title": "점심 with Mina", "date": "2026-12-02", "start_time": "12:00", "duration_minutes": 60,
    "location": "Bistro"}}
SCRIPT = {"rules": [
    {"match": "^lunch", "steps": [f"<tool_call>{json.dumps(LUNCH, ensure_ascii=False)}</tool_call>", "Booked: {result}"]},
]}


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeTelegram]:
    server = FakeTelegram(TOKEN).start()
    yield server
    server.close()


@pytest.fixture(scope="module")
def bot(fake: FakeTelegram, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BotProcess]:
    data_dir = tmp_path_factory.mktemp("bot")
    clock = data_dir / "clock.txt"
    clock.write_text(datetime(2026, 12, 1, 7, 0, tzinfo=SEOUL).isoformat())
    process = BotProcess(fake, data_dir, SCRIPT, domain="tools.calendar.domain", extra_config='tz = "Asia/Seoul"\n')
    process.use_clock_file(clock)
    process.start()
    yield process
    assert process.stop() == 0, process.log()[-3000:]


def wait_documents(fake: FakeTelegram, chat_id: int, count: int = 1) -> list[Call]:
    return fake.wait_for(lambda: len(fake.documents(chat_id)) >= count and fake.documents(chat_id), 30,
                         f"{count} document(s) in chat {chat_id}")


def events_in(call: Call) -> list[icalendar.Event]:
    calendar = icalendar.Calendar.from_ical(call.files["document"].data)
    return list(calendar.walk("VEVENT"))


def test_ics_sends_the_calendar_with_the_new_event_after_the_reply_that_made_it(fake: FakeTelegram, bot: BotProcess) -> None:
    # The turn's reply fails once (502) and waits for a retry: the file asked for after it must wait too.
    fake.fail_next("sendMessage", 1)
    fake.send_text(ALICE, ALICE, "lunch with Mina tomorrow")
    fake.send_text(ALICE, ALICE, "/ics")
    sent = wait_documents(fake, ALICE)[0]

    to_alice = [c for c in fake.requests(chat_id=ALICE) if c.method in ("sendMessage", "sendDocument")]
    assert [(c.method, c.status) for c in to_alice] == [("sendMessage", 502), ("sendMessage", 200), ("sendDocument", 200)]
    assert to_alice[1].text.startswith("Booked:")
    assert sent.files["document"].filename == "iljeong-calendar.ics"
    assert sent.params["caption"].startswith("Your calendar: 1 event (Asia/Seoul).")
    [event] = events_in(sent)
    assert str(event["summary"]) == "점심 with Mina"
    assert str(event["location"]) == "Bistro"
    assert event.decoded("dtstart") == datetime(2026, 12, 2, 12, 0, tzinfo=SEOUL)
    assert event.decoded("dtend") == datetime(2026, 12, 2, 13, 0, tzinfo=SEOUL)


def test_ics_is_in_the_command_menu_and_help(fake: FakeTelegram, bot: BotProcess) -> None:
    menu = {c["command"]: c["description"] for c in fake.requests("setMyCommands")[0].json("commands")}
    assert menu["ics"] == "your calendar as an .ics file"
    assert list(menu) == ["today", "week", "ics", "new", "cancel", "help"]
    fake.send_text(BOB, BOB, "/help")
    assert "/ics – your calendar as an .ics file" in wait_reply(fake, BOB, "/cancel")


def test_a_strangers_ics_gets_nothing(fake: FakeTelegram, bot: BotProcess) -> None:
    fake.send_text(MALLORY, MALLORY, "/ics")
    # handled after the stranger's update; the day is named because /today reads the wall clock
    # (the test clock file only drives reminders), and Seoul's date is not always the test's
    fake.send_text(BOB, BOB, "/today 2026-12-01")
    wait_reply(fake, BOB, "No events on 2026-12-01.")
    assert fake.requests(chat_id=MALLORY) == []
    assert "refused update from user 333" in bot.log()


def test_a_document_telegram_fails_to_take_is_sent_again(fake: FakeTelegram, bot: BotProcess) -> None:
    fake.fail_next("sendDocument", 1)
    fake.send_text(BOB, BOB, "/ics")
    sent = wait_documents(fake, BOB)[0]
    assert [c.status for c in fake.requests("sendDocument", BOB)] == [502, 200]
    assert [str(e["summary"]) for e in events_in(sent)] == ["점심 with Mina"]  # one calendar, every chat's events


@pytest.mark.parametrize("request_kwargs, description", [
    ({"json": {"chat_id": 5, "document": "not-a-file-id"}}, "Bad Request: wrong remote file identifier specified: Wrong string length"),
    ({"json": {"chat_id": 5}}, "Bad Request: there is no document in the request"),
    ({"data": {"chat_id": "5"}, "files": {"file": ("a.ics", b"BEGIN")}}, "Bad Request: there is no document in the request"),
    ({"data": {"chat_id": "5"}, "files": {"document": ("a.ics", b"")}}, "Bad Request: file must be non-empty"),
    ({"files": {"document": ("a.ics", b"BEGIN")}}, "Bad Request: chat_id is empty"),
])
def test_fake_send_document_refuses_what_telegram_refuses(fake: FakeTelegram, request_kwargs: dict, description: str) -> None:
    """The fake is only worth testing against if it is as strict as the real API."""
    answer = httpx.post(f"{fake.base_url}/bot{TOKEN}/sendDocument", timeout=10, **request_kwargs)
    assert answer.status_code == 400
    assert answer.json() == {"ok": False, "error_code": 400, "description": description}
    assert fake.documents(5) == []
