"""End to end: the real ``python -m bot run`` process against a fake Bot API over HTTP.

The model is the scripted backend (``--scripted``), so what is tested is the bot: access,
approvals, ordering, splitting, durability. Chat ids differ per test so tests sharing the
module's bot process cannot see each other's messages.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

from bot.polling import INTERRUPTED
from bot.approvals import EXPIRED, NOT_YOURS
from bot.worker import QUEUED_NOTICE, TURN_FAILED
from tests.bot_harness import (
    ALICE, BOB, BURST_USERS, GROUP_ALLOWED, GROUP_OTHER, LONG_PARAGRAPH, MALLORY, ROOT, SCRIPT, TOKEN, BotProcess,
    answers, approval_message, buttons, dentist_script, replies, wait_reply,
)
from tests.fake_telegram import FakeTelegram
from tests.toy_domain import titles


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


# ---- tests ----------------------------------------------------------------------------------


def test_allowed_user_creates_an_event_in_plain_text(fake: FakeTelegram, bot: BotProcess) -> None:
    title = "Lunch with _Mina_ *[bistro]*"
    fake.send_text(ALICE, ALICE, f"add {title}")
    assert wait_reply(fake, ALICE, "Created") == f"Created: {title}"
    assert title in titles(bot.data_dir)
    sends = fake.requests("sendMessage", ALICE)
    assert all("parse_mode" not in c.params for c in sends)  # plain text: `_*[]` can't break it
    typing = fake.requests("sendChatAction", ALICE)
    assert typing and typing[0].params["action"] == "typing"

    fake.send_text(ALICE, ALICE, "/today")
    assert wait_reply(fake, ALICE, "Today:") == f"Today:\n12:00 {title}"


def test_start_help_and_commands_menu(fake: FakeTelegram, bot: BotProcess) -> None:
    fake.send_text(BOB, BOB, "/start")
    assert "/today" in wait_reply(fake, BOB, "/cancel")
    menu = fake.requests("setMyCommands")[0].json("commands")
    assert [c["command"] for c in menu] == ["today", "new", "cancel", "help"]
    acked = fake.requests("getUpdates")[-1].json("allowed_updates")
    assert acked == ["message", "callback_query"]


def test_stranger_and_unlisted_group_get_silence(fake: FakeTelegram, bot: BotProcess) -> None:
    before = len(titles(bot.data_dir))
    fake.send_text(MALLORY, MALLORY, "add stolen")
    fake.send_text(MALLORY, MALLORY, "/today")
    fake.send_text(MALLORY, MALLORY, "/start")
    fake.send_text(GROUP_OTHER, ALICE, "add group secret", chat_type="group")
    fake.send_text(GROUP_ALLOWED, ALICE, "hello group", chat_type="group")  # a listed group works
    wait_reply(fake, GROUP_ALLOWED, "You said: hello group")  # handled after all of the above
    assert fake.requests(chat_id=MALLORY) == []
    assert fake.requests(chat_id=GROUP_OTHER) == []
    assert len(titles(bot.data_dir)) == before
    assert "333" in bot.log() and "stolen" not in bot.log()
    assert TOKEN not in bot.log() and TOKEN.split(":")[1] not in bot.log()


def test_approve_button_runs_the_destructive_call(fake: FakeTelegram, bot: BotProcess) -> None:
    fake.send_text(BOB, BOB, "add Dentist")
    wait_reply(fake, BOB, "Created: Dentist")
    fake.send_text(BOB, BOB, "delete Dentist")
    ask = approval_message(fake, BOB)
    assert ask.text == "Approve this action?\n\nDelete the event 'Dentist'"
    choice = buttons(ask)
    assert list(choice) == ["Approve", "Deny"]
    assert "Dentist" in titles(bot.data_dir)  # nothing happens before the answer

    fake.tap(BOB, BOB, choice["Approve"])
    result = wait_reply(fake, BOB, "Result:")
    assert '"ok": true' in result and "Dentist" not in titles(bot.data_dir)
    assert "Approved." in answers(fake)
    edit = fake.wait_for(lambda: fake.requests("editMessageText", BOB), 30, "the question edited")[-1]
    assert edit.text == "Delete the event 'Dentist'\n\nApproved." and "reply_markup" not in edit.params


def test_deny_button_changes_nothing(fake: FakeTelegram, bot: BotProcess) -> None:
    chat = BURST_USERS[0]
    fake.send_text(chat, chat, "add Gym")
    wait_reply(fake, chat, "Created: Gym")
    fake.send_text(chat, chat, "delete Gym")
    fake.tap(chat, chat, buttons(approval_message(fake, chat))["Deny"])
    result = wait_reply(fake, chat, "Result:")
    assert '"error": "denied"' in result and "Gym" in titles(bot.data_dir)
    edit = fake.wait_for(lambda: fake.requests("editMessageText", chat), 30, "the question edited")[-1]
    assert edit.text.endswith("\n\nDenied.")


def test_forged_foreign_and_replayed_callbacks_change_nothing(fake: FakeTelegram, bot: BotProcess) -> None:
    chat = BURST_USERS[1]
    fake.send_text(chat, chat, "add Standup")
    wait_reply(fake, chat, "Created: Standup")
    fake.send_text(chat, chat, "delete Standup")
    approve = buttons(approval_message(fake, chat))["Approve"]
    forged = approve[:-4] + ("AAAA" if not approve.endswith("AAAA") else "BBBB")  # wrong id, right shape

    def answered(update_count: int) -> list[str]:
        return fake.wait_for(lambda: len(answers(fake)) >= update_count and answers(fake), 30, "callback answers")

    start = len(answers(fake))
    fake.tap(chat, chat, "ap:" + "x" * 22 + ":y")  # made-up id
    fake.tap(chat, chat, "not even our format")
    fake.tap(chat, MALLORY, approve)  # a stranger in the same chat
    fake.tap(BOB, BOB, approve)  # an allowed user, but another chat
    got = answered(start + 4)[start:]
    assert got == [EXPIRED, EXPIRED, NOT_YOURS, NOT_YOURS]
    assert "Standup" in titles(bot.data_dir) and not replies(fake, chat)[-1].startswith("Result:")

    fake.tap(chat, chat, approve)  # the real answer
    assert '"ok": true' in wait_reply(fake, chat, "Result:")
    fake.tap(chat, chat, approve)  # second tap
    fake.tap(chat, chat, buttons(approval_message(fake, chat))["Deny"])  # the other button, now stale
    assert answered(start + 7)[start + 4:] == ["Approved.", EXPIRED, EXPIRED]
    assert sum(r.startswith("Result:") for r in replies(fake, chat)) == 1


def test_cancel_denies_an_open_approval(fake: FakeTelegram, bot: BotProcess) -> None:
    chat = BURST_USERS[2]
    fake.send_text(chat, chat, "add Call mum")
    wait_reply(fake, chat, "Created")
    fake.send_text(chat, chat, "delete Call mum")
    approval_message(fake, chat)
    fake.send_text(chat, chat, "/cancel")
    wait_reply(fake, chat, "Stopping")
    assert "Call mum" in titles(bot.data_dir)
    edit = fake.wait_for(lambda: fake.requests("editMessageText", chat), 30, "the question edited")[-1]
    assert edit.text.endswith("Cancelled: denied.")
    wait_reply(fake, chat, "Stopped.")  # the turn ends: no further model step after a cancel
    assert not any(r.startswith("Result:") for r in replies(fake, chat))
    fake.send_text(chat, chat, "/cancel")
    fake.wait_for(lambda: replies(fake, chat).count("Nothing is running.") == 1, 30, "nothing to cancel")


def test_new_starts_a_fresh_session(fake: FakeTelegram, bot: BotProcess) -> None:
    import sqlite3

    def current() -> str:
        with sqlite3.connect(bot.data_dir / "sessions.sqlite3") as conn:
            return conn.execute(
                "SELECT session_id FROM current_session WHERE conversation = ?", (f"telegram:{BOB}",)
            ).fetchone()[0]

    fake.send_text(BOB, BOB, "remember me")
    wait_reply(fake, BOB, "You said: remember me")
    before = current()
    fake.send_text(BOB, BOB, "/new")
    wait_reply(fake, BOB, "Started a new conversation")
    assert current() != before and current().startswith(f"telegram:{BOB}:")


def test_a_failing_job_gets_a_short_apology_and_the_bot_goes_on(fake: FakeTelegram, bot: BotProcess) -> None:
    fake.send_text(ALICE, ALICE, "/boom")
    fake.send_text(ALICE, ALICE, "after the boom")
    wait_reply(fake, ALICE, "You said: after the boom")
    assert TURN_FAILED in replies(fake, ALICE)
    assert "toy command exploded" in bot.log()  # details go to the log, not to the chat
    assert not any("exploded" in t for t in replies(fake, ALICE))


def test_long_reply_is_split_on_paragraphs(fake: FakeTelegram, bot: BotProcess) -> None:
    chat = BURST_USERS[3]
    fake.send_text(chat, chat, "long")
    expected = [f"P{i} " + LONG_PARAGRAPH.strip() for i in range(6)]
    pieces = fake.wait_for(lambda: (r := replies(fake, chat)) and "P5" in r[-1] and r, 30, "all pieces")
    assert len(pieces) == 3
    assert all(len(p) <= 4096 for p in pieces)
    assert [para for p in pieces for para in p.split("\n\n")] == expected


def test_send_failures_are_retried(fake: FakeTelegram, bot: BotProcess) -> None:
    chat = BURST_USERS[4]
    fake.fail_next("sendMessage", 2)
    fake.send_text(chat, chat, "are you there")
    wait_reply(fake, chat, "You said: are you there")
    attempts = fake.requests("sendMessage", chat)
    assert [(c.text, c.status) for c in attempts] == [("You said: are you there", 502)] * 2 + [
        ("You said: are you there", 200)
    ]


def test_burst_of_200_updates_from_5_chats_in_order(fake: FakeTelegram, bot: BotProcess) -> None:
    sent: dict[int, list[str]] = {c: [] for c in BURST_USERS}
    for i in range(200):
        chat = BURST_USERS[i % 5]
        text = f"burst {chat} #{i}"
        sent[chat].append(text)
        fake.send_text(chat, chat, text)

    def burst_replies(chat: int) -> list[str]:
        return [t for t in replies(fake, chat) if t.startswith("You said: burst")]

    fake.wait_for(lambda: all(len(burst_replies(c)) == 40 for c in BURST_USERS), 120, "200 replies")
    for chat in BURST_USERS:
        assert burst_replies(chat) == [f"You said: {t}" for t in sent[chat]]
    assert any(t == QUEUED_NOTICE for c in BURST_USERS for t in fake.texts(c))


def test_refuses_to_start_without_allowlist(tmp_path: Path) -> None:
    server = FakeTelegram(TOKEN).start()  # its own server: the module's bot keeps polling the other
    try:
        process = BotProcess(server, tmp_path, SCRIPT)
        env = process.env()
        env.pop("TELEGRAM_ALLOWED_USERS")
        env.pop("TELEGRAM_ALLOWED_CHATS")
        done = subprocess.run(
            [sys.executable, "-m", "bot", "run", *process.model_args],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=60,
        )
        assert done.returncode == 2
        assert "TELEGRAM_ALLOWED_USERS" in done.stderr and "@userinfobot" in done.stderr
        assert server.requests() == []  # never contacted Telegram
    finally:
        server.close()


def test_kill_9_mid_turn_then_restart_tells_the_user(tmp_path: Path) -> None:
    server = FakeTelegram(TOKEN).start()
    try:
        process = BotProcess(server, tmp_path, SCRIPT).start()
        update_id = server.send_text(ALICE, ALICE, "slow question")
        server.wait_for(lambda: server.requests("sendChatAction", ALICE), 30, "the turn to start")
        server.wait_for(lambda: server.confirmed_below() > update_id, 30, "the update to be acknowledged")
        process.kill9()
        server.send_text(ALICE, ALICE, "while you were down")  # Telegram keeps it for us

        process.start()
        notice = INTERRUPTED.format(text="slow question")
        wait_reply(server, ALICE, "I was restarted")
        wait_reply(server, ALICE, "You said: while you were down")
        assert replies(server, ALICE) == [notice, "You said: while you were down"]
        assert process.stop() == 0

        process.start()  # a clean restart has nothing pending: no second notice
        server.send_text(ALICE, ALICE, "still there?")
        wait_reply(server, ALICE, "You said: still there?")
        assert replies(server, ALICE).count(notice) == 1
        assert process.stop() == 0
    finally:
        if process.proc and process.proc.poll() is None:
            process.proc.kill()
        server.close()


def test_stop_during_approval_then_old_button_changes_nothing(tmp_path: Path) -> None:
    server = FakeTelegram(TOKEN).start()
    process = BotProcess(server, tmp_path, SCRIPT)
    try:
        process.start()
        server.send_text(ALICE, ALICE, "add Piano")
        wait_reply(server, ALICE, "Created")
        server.send_text(ALICE, ALICE, "delete Piano")
        old = buttons(approval_message(server, ALICE))
        assert process.stop() == 0  # SIGTERM while the turn waits for the answer

        process.start()
        wait_reply(server, ALICE, "I was restarted")  # the unfinished "delete Piano"
        server.tap(ALICE, ALICE, old["Approve"])
        server.wait_for(lambda: answers(server) == [EXPIRED], 30, "the old button answered")
        server.send_text(ALICE, ALICE, "/today")
        assert wait_reply(server, ALICE, "Today:") == "Today:\n12:00 Piano"  # still there
        assert replies(server, ALICE)[-2:] == [INTERRUPTED.format(text="delete Piano"), "Today:\n12:00 Piano"]
    finally:
        process.stop()
        server.close()


def test_unanswered_approval_times_out_as_deny(tmp_path: Path) -> None:
    server = FakeTelegram(TOKEN).start()
    process = BotProcess(server, tmp_path, SCRIPT, approval_timeout_s=1).start()
    try:
        server.send_text(ALICE, ALICE, "add Old")
        wait_reply(server, ALICE, "Created")
        server.send_text(ALICE, ALICE, "delete Old")
        approval = buttons(approval_message(server, ALICE))
        assert '"error": "denied"' in wait_reply(server, ALICE, "Result:")
        edit = server.wait_for(lambda: server.requests("editMessageText", ALICE), 30, "the edit")[-1]
        assert edit.text.endswith("No answer within 1 s: denied.")
        server.tap(ALICE, ALICE, approval["Approve"])  # too late
        server.wait_for(lambda: answers(server) == [EXPIRED], 30, "the late tap answered")
        assert "Old" in titles(tmp_path)
    finally:
        assert process.stop() == 0
        server.close()


def test_the_real_demo_model_answers_through_the_bot(tmp_path: Path, gemma3: Path) -> None:
    """The whole path with a real model (the Gemma 3 270M pair via --demo): loaded before polling,
    typing shown, some reply delivered, the turn persisted in the chat's session."""
    import sqlite3

    server = FakeTelegram(TOKEN).start()
    process = BotProcess(server, tmp_path, None, extra_config="max_steps = 2\n").start(timeout=300)
    try:
        server.send_text(ALICE, ALICE, "Hello! Who are you?")
        texts = server.wait_for(lambda: replies(server, ALICE), 300, "a reply from the model")
        assert texts[0].strip() and "something went wrong" not in texts[0]
        assert server.requests("sendChatAction", ALICE)
        with sqlite3.connect(tmp_path / "sessions.sqlite3") as conn:
            stored = [json.loads(m)["content"] for (m,) in conn.execute(
                "SELECT message FROM messages WHERE session_id LIKE 'telegram:111:%' ORDER BY idx")]
        assert re.fullmatch(r"\[\d\d:\d\d\] Hello! Who are you\?", stored[0]) and len(stored) >= 2  # send time
    finally:
        assert process.stop() == 0
        server.close()


def test_calendar_domain_create_today_and_approved_delete(tmp_path: Path) -> None:
    """The real calendar domain behind the bot: a created event shows in /today, and the
    approval question carries the calendar's own words for the exact event."""
    from datetime import datetime
    from zoneinfo import ZoneInfo

    today = datetime.now(ZoneInfo("Asia/Seoul")).date().isoformat()
    title = "Dentist _x_ *[room 2]*"
    server = FakeTelegram(TOKEN).start()
    process = BotProcess(server, tmp_path, dentist_script(title, today), domain="tools.calendar.domain",
                         extra_config='tz = "Asia/Seoul"\n').start()
    try:
        server.send_text(ALICE, ALICE, "book the dentist")
        assert '"ok": true' in wait_reply(server, ALICE, "Booked:")
        server.send_text(ALICE, ALICE, "/today")
        agenda = wait_reply(server, ALICE, today)
        assert title in agenda and "15:00" in agenda

        server.send_text(ALICE, ALICE, "cancel it please")
        ask = approval_message(server, ALICE)
        assert ask.text.startswith("Approve this action?\n\nDelete ") and title in ask.text
        server.tap(ALICE, ALICE, buttons(ask)["Approve"])
        assert '"ok": true' in wait_reply(server, ALICE, "Result:")
        server.send_text(ALICE, ALICE, "/today")
        wait_reply(server, ALICE, f"No events on {today}.")
    finally:
        assert process.stop() == 0
        server.close()
