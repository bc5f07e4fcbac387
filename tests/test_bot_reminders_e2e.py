"""End to end: reminders and the daily agenda from the real bot process, on a test clock.

The bot runs with ``--clock-file``: "now" is the instant the test writes to that file, so
the test moves time forward (and across restarts) without waiting for it. Only the
Telegram cloud is faked; the calendar is the real store in the bot's data dir.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

from bot.buttons import EXPIRED, NOT_YOURS
from tests.bot_harness import ALICE, BOB, BURST_USERS, TOKEN, BotProcess, buttons, replies, wait_reply
from tests.fake_telegram import Call, FakeTelegram
from tools.calendar.store import CalendarStore

SEOUL = ZoneInfo("Asia/Seoul")
LUNCH = {"name": "create_event", "arguments": {
    "title": "점심", "date": "2026-12-02", "start_time": "12:00", "duration_minutes": 60,
    "remind_minutes_before": [30]}}
SCRIPT = {"rules": [
    {"match": "^점심", "steps": [f"<tool_call>{json.dumps(LUNCH, ensure_ascii=False)}</tool_call>", "Booked: {result}"]},
]}


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=SEOUL)


def set_clock(path: Path, text: str) -> None:
    path.write_text(at(text).isoformat())


def reminders_in(fake: FakeTelegram, chat: int) -> list[Call]:
    return [c for c in fake.requests("sendMessage", chat) if (c.text or "").startswith("⏰") and c.status == 200]


def wait_texts(fake: FakeTelegram, chat: int, count: int, prefix: str) -> list[str]:
    pick = lambda: [t for t in replies(fake, chat) if t.startswith(prefix)]  # noqa: E731
    return fake.wait_for(lambda: len(pick()) >= count and pick(), 30, f"{count} x {prefix!r} in chat {chat}")


def test_reminders_snooze_restarts_and_agenda(tmp_path: Path) -> None:
    clock = tmp_path / "clock.txt"
    set_clock(clock, "2026-12-01T14:00")
    with CalendarStore(tmp_path / "calendar.sqlite3", tz="Asia/Seoul") as store:
        for title, start, minutes in [("치과", "2026-12-01T15:00", [10]), ("회의", "2026-12-01T16:00", [10]),
                                      ("저녁", "2026-12-01T18:00", [10]), ("아침 회의", "2026-12-02T09:30", [])]:
            begin = at(start)
            store.add_event(title, begin, begin + timedelta(minutes=30), remind_minutes_before=minutes)
    server = FakeTelegram(TOKEN).start()
    process = BotProcess(server, tmp_path, SCRIPT, domain="tools.calendar.domain",
                         extra_config='tz = "Asia/Seoul"\nreminder_grace_minutes = 30\n')
    process.use_clock_file(clock)
    process.extra_env["AGENT_AGENDA_TIME"] = "08:00"  # the default, which the harness moves out of the way
    users = [ALICE, BOB, *BURST_USERS]
    try:
        process.start()
        server.send_text(ALICE, ALICE, "/reminders")
        listing = wait_reply(server, ALICE, "Upcoming reminders:")
        assert listing == ("Upcoming reminders:\n14:50 – '치과' (10 min before)\n"
                           "15:50 – '회의' (10 min before)\n17:50 – '저녁' (10 min before)")
        assert reminders_in(server, ALICE) == []  # 14:00: nothing due yet
        server.send_text(ALICE, ALICE, "/help")
        assert "/agenda on|off|HH:MM" in wait_reply(server, ALICE, "/cancel")

        # On time, to every allowed user's private chat, with single-use buttons.
        set_clock(clock, "2026-12-01T14:50")
        for user in users:
            assert wait_texts(server, user, 1, "⏰") == ["⏰ In 10 min: '치과' at 15:00"]
        sent = reminders_in(server, ALICE)[0]
        assert list(buttons(sent)) == ["Snooze 10 min", "Open"]
        server.tap(ALICE, ALICE, buttons(sent)["Open"])
        assert wait_reply(server, ALICE, "#1 '치과'") == "#1 '치과' Tue 2026-12-01 15:00-15:30\nReminders: 10 min before"
        server.tap(ALICE, ALICE, buttons(sent)["Open"])  # used up
        server.tap(BOB, BOB, buttons(sent)["Snooze 10 min"])  # Alice's button, Bob's chat
        server.tap(ALICE, ALICE, buttons(sent)["Snooze 10 min"])
        answered = lambda: [c.params.get("text") for c in server.requests("answerCallbackQuery")]  # noqa: E731
        server.wait_for(lambda: len(answered()) == 4, 30, "four button answers")
        assert answered()[:3] == ["Opened.", EXPIRED, NOT_YOURS]
        assert answered()[3] == "Snoozed: I'll remind you again at 15:00."
        set_clock(clock, "2026-12-01T15:00")
        assert wait_texts(server, ALICE, 2, "⏰")[1] == "⏰ Snoozed reminder: '치과' at 15:00"
        assert buttons(reminders_in(server, ALICE)[1])  # a snoozed reminder has buttons again

        # Down at 15:30, back at 16:05: the 15:50 reminder is late but within grace.
        set_clock(clock, "2026-12-01T15:30")
        assert process.stop() == 0
        set_clock(clock, "2026-12-01T16:05")
        process.start()
        late = wait_texts(server, ALICE, 3, "⏰")[2]
        assert late == "⏰ Late reminder (was due at 15:50): '회의' at 16:00"
        assert process.stop() == 0
        process.start()  # a second restart does not resend it
        server.send_text(ALICE, ALICE, "/reminders")
        wait_reply(server, ALICE, "17:50 – '저녁'")
        assert process.stop() == 0

        # Back only at 18:21: the 17:50 reminder is past grace, so it is skipped and logged.
        set_clock(clock, "2026-12-01T18:21")
        process.start()
        server.send_text(BOB, BOB, "/agenda off")
        assert wait_reply(server, BOB, "Daily agenda") == "Daily agenda: off. /agenda on turns it back on."
        assert "skipped reminder" in process.log()
        assert [c.text for c in reminders_in(server, ALICE)][3:] == []

        # A reminder set through the model: "30분 전에 알려줘".
        server.send_text(ALICE, ALICE, "점심 내일 12시, 30분 전에 알려줘")
        assert '"remind_minutes_before": [30]' in wait_reply(server, ALICE, "Booked:")

        # 08:00 next day: the agenda, except for Bob who opted out.
        set_clock(clock, "2026-12-02T08:00")
        agenda = "📅 Agenda for Wed 2026-12-02:\n09:30-10:00 아침 회의\n12:00-13:00 점심"
        assert wait_texts(server, BURST_USERS[-1], 1, "📅") == [agenda]  # the last user of the tick
        assert wait_texts(server, ALICE, 1, "📅") == [agenda]
        assert not any(t.startswith("📅") for t in replies(server, BOB))

        set_clock(clock, "2026-12-02T11:30")
        assert wait_texts(server, ALICE, 4, "⏰")[3] == "⏰ In 30 min: '점심' at 12:00"
        texts = [t for t in replies(server, ALICE) if t.startswith(("⏰", "📅"))]
        assert len(texts) == len(set(texts)) == 5  # every reminder and agenda exactly once
        assert process.stop() == 0
    finally:
        if process.proc and process.proc.poll() is None:
            process.proc.kill()
        server.close()
