"""End to end: what Telegram and strangers can send the bot, and outages it must outlive.

The real ``python -m bot run`` process against the local Bot API (tests/fake_telegram.py),
with faults injected there: malformed and poisoned updates, handlers whose Bot API call is
refused, taps from the wrong person, outages, refused chats and a wrong token.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

from bot.approvals import EXPIRED, NOT_YOURS
from tests.bot_harness import (
    ALICE, BOB, BURST_USERS, GROUP_ALLOWED, MALLORY, ROOT, SCRIPT, TOKEN, BotProcess, answers, approval_message, buttons,
    dentist_script, replies, wait_reply,
)
from tests.fake_telegram import FakeTelegram
from tests.toy_domain import titles

# The tests below share one bot (it is slow to start), so each uses chats no other test in this
# file uses in a way that lasts: BLOCKED and GONE are refused for good by the fake server.
BLOCKED, GONE = 2001, 2002
GROUP_CANCEL = -501  # a second allowed group, for the /cancel test


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeTelegram]:
    server = FakeTelegram(TOKEN).start()
    yield server
    server.close()


@pytest.fixture(scope="module")
def bot(fake: FakeTelegram, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BotProcess]:
    process = BotProcess(fake, tmp_path_factory.mktemp("bot"), SCRIPT)
    process.extra_env["TELEGRAM_ALLOWED_USERS"] = ",".join(map(str, [ALICE, BOB, *BURST_USERS, BLOCKED, GONE]))
    process.extra_env["TELEGRAM_ALLOWED_CHATS"] = f"{GROUP_ALLOWED},{GROUP_CANCEL}"
    process.data_dir.chmod(0o755)  # as an older version (or a careless mkdir) left it
    (process.data_dir / "calendar.sqlite3").write_bytes(b"")  # a file left 0644
    process.start()
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


# ---- what the inbox keeps --------------------------------------------------------------------


def inbox_body(data_dir: Path, update_id: int) -> str | None:
    conn = sqlite3.connect(data_dir / "telegram_inbox.sqlite3")
    try:
        row = conn.execute("SELECT body FROM updates WHERE update_id = ?", (update_id,)).fetchone()
    finally:
        conn.close()
    return None if row is None else row[0]


def test_a_strangers_message_and_tap_keep_only_their_ids_and_times(fake: FakeTelegram, bot: BotProcess) -> None:
    text = fake.send_text(MALLORY, MALLORY, "my door code is 7731")
    tap = fake.tap(MALLORY, MALLORY, "ap:" + "q" * 22 + ":y")
    assert settled(fake, bot, text) == settled(fake, bot, tap) == ("refused", None)
    assert inbox_body(bot.data_dir, text) == inbox_body(bot.data_dir, tap) == "null"
    assert "refused update from user 333" in bot.log() and "7731" not in bot.log()


def test_old_handled_rows_go_at_start_up_and_an_unhandled_message_survives_a_crash(tmp_path: Path) -> None:
    server = FakeTelegram(TOKEN).start()
    process = BotProcess(server, tmp_path, SCRIPT)
    try:
        process.start()
        old = server.send_text(ALICE, ALICE, "an old message")
        wait_reply(server, ALICE, "You said: an old message")
        stranger = server.send_text(MALLORY, MALLORY, "an old secret")
        assert settled(server, process, stranger) == ("refused", None)
        unhandled = server.send_text(ALICE, ALICE, "slow question")
        server.wait_for(lambda: server.requests("sendChatAction", ALICE), 30, "the turn to start")
        server.wait_for(lambda: server.confirmed_below() > unhandled, 30, "the update to be acknowledged")
        process.kill9()
        conn = sqlite3.connect(tmp_path / "telegram_inbox.sqlite3")  # eight days pass
        with conn:
            conn.execute("UPDATE updates SET received_at = received_at - 8 * 86400")
        conn.close()

        process.start()
        wait_reply(server, ALICE, "I was restarted")  # the pending row was answered, not pruned
        server.wait_for(lambda: "deleted 2 handled inbox rows" in process.log(), 30, "the prune")
        assert inbox_row(tmp_path, old) is None and inbox_row(tmp_path, stranger) is None
        assert inbox_row(tmp_path, unhandled) == ("done", None)  # the newest row: polling resumes after it
        server.send_text(ALICE, ALICE, "still there?")
        wait_reply(server, ALICE, "You said: still there?")
        assert replies(server, ALICE).count("You said: an old message") == 1  # nothing fetched twice
    finally:
        process.stop()
        server.close()


# ---- approvals belong to the asker and to the call ------------------------------------------


def answered(fake: FakeTelegram, count: int) -> list[str]:
    return fake.wait_for(lambda: len(answers(fake)) >= count and answers(fake), 30, f"{count} callback answers")


def test_in_a_group_only_the_asker_can_approve(fake: FakeTelegram, bot: BotProcess) -> None:
    fake.send_text(GROUP_ALLOWED, ALICE, "add Alice's dentist", chat_type="group")
    wait_reply(fake, GROUP_ALLOWED, "Created: Alice's dentist")
    fake.send_text(GROUP_ALLOWED, ALICE, "delete Alice's dentist", chat_type="group")
    ask = approval_message(fake, GROUP_ALLOWED)
    start = len(answers(fake))
    fake.tap(GROUP_ALLOWED, BOB, buttons(ask)["Approve"], chat_type="group")  # allowed in the group, not the asker
    assert answered(fake, start + 1)[start:] == [NOT_YOURS]
    assert "Alice's dentist" in titles(bot.data_dir)
    assert not any(r.startswith("Result:") for r in replies(fake, GROUP_ALLOWED))

    fake.tap(GROUP_ALLOWED, ALICE, buttons(ask)["Approve"], chat_type="group")
    assert '"ok": true' in wait_reply(fake, GROUP_ALLOWED, "Result:")
    assert answered(fake, start + 2)[start + 1:] == ["Approved."]
    assert "Alice's dentist" not in titles(bot.data_dir)


def test_in_a_group_another_members_cancel_leaves_the_askers_question_open(fake: FakeTelegram, bot: BotProcess) -> None:
    group = GROUP_CANCEL
    fake.send_text(group, ALICE, "add Team lunch", chat_type="group")
    wait_reply(fake, group, "Created: Team lunch")
    fake.send_text(group, ALICE, "delete Team lunch", chat_type="group")
    ask = approval_message(fake, group)
    fake.send_text(group, BOB, "/cancel", chat_type="group")  # allowed in the group, not the asker
    wait_reply(fake, group, "Nothing is running.")
    assert fake.requests("editMessageText", group) == []  # the question is still open
    fake.tap(group, ALICE, buttons(ask)["Approve"], chat_type="group")
    assert '"ok": true' in wait_reply(fake, group, "Result:")
    edit = fake.wait_for(lambda: fake.requests("editMessageText", group), 30, "the question edited")[-1]
    assert edit.text.endswith("Approved.")
    assert "Team lunch" not in titles(bot.data_dir)


def test_a_forged_tap_in_someone_elses_private_chat_changes_nothing(fake: FakeTelegram, bot: BotProcess) -> None:
    fake.send_text(ALICE, ALICE, "add Private thing")
    wait_reply(fake, ALICE, "Created: Private thing")
    fake.send_text(ALICE, ALICE, "delete Private thing")
    approve = buttons(approval_message(fake, ALICE))["Approve"]
    start = len(answers(fake))
    fake.tap(ALICE, BOB, approve)  # Alice's private chat, but Bob's user id: Telegram never sends this
    assert answered(fake, start + 1)[start:] == [NOT_YOURS]
    assert "Private thing" in titles(bot.data_dir)
    fake.tap(ALICE, ALICE, approve)
    assert '"ok": true' in wait_reply(fake, ALICE, "Result:")


def test_an_approval_does_not_cover_an_event_that_changed_after_the_question(tmp_path: Path) -> None:
    """The real calendar domain: the question names the event as it was; the event is then
    changed (here straight in the calendar file, as another client would); the tap is refused,
    the question says so and the model is told why."""
    from datetime import datetime
    from zoneinfo import ZoneInfo

    today = datetime.now(ZoneInfo("Asia/Seoul")).date().isoformat()
    server = FakeTelegram(TOKEN).start()
    process = BotProcess(server, tmp_path, dentist_script("Dentist", today), domain="tools.calendar.domain",
                         extra_config='tz = "Asia/Seoul"\n').start()
    try:
        server.send_text(ALICE, ALICE, "book the dentist")
        assert '"ok": true' in wait_reply(server, ALICE, "Booked:")
        server.send_text(ALICE, ALICE, "cancel it please")
        ask = approval_message(server, ALICE)
        assert "Dentist" in ask.text
        with sqlite3.connect(tmp_path / "calendar.sqlite3") as conn:
            conn.execute("UPDATE events SET title = 'Board meeting' WHERE id = 1")
        server.tap(ALICE, ALICE, buttons(ask)["Approve"])
        result = wait_reply(server, ALICE, "Result:")
        assert '"error": "target_changed"' in result and "Nothing was changed" in result
        edit = server.wait_for(lambda: server.requests("editMessageText", ALICE), 30, "the question edited")[-1]
        assert "Not done: this changed after I asked" in edit.text
        with sqlite3.connect(tmp_path / "calendar.sqlite3") as conn:
            assert conn.execute("SELECT title FROM events WHERE id = 1").fetchone() == ("Board meeting",)
    finally:
        assert process.stop() == 0
        server.close()


# ---- replies outlive an outage --------------------------------------------------------------

SCALE = 0.05  # --time-scale: every retry wait is 20 times shorter


def outbox_rows(data_dir: Path, chat_id: int) -> list[tuple[str, str]]:
    with sqlite3.connect(data_dir / "telegram_inbox.sqlite3") as conn:
        return conn.execute("SELECT state, text FROM outbox WHERE chat_id = ? ORDER BY id", (chat_id,)).fetchall()


def test_replies_outlive_a_45_second_outage_in_order(tmp_path: Path) -> None:
    server = FakeTelegram(TOKEN).start()
    script = {"rules": [{"match": "^slow", "sleep": 0.5, "steps": ["slow answer"]}], "default": ["You said: {user}"]}
    process = BotProcess(server, tmp_path, script)
    process.model_args += ["--time-scale", str(SCALE)]
    try:
        process.start()
        server.fail_next("sendMessage", 10_000)  # Telegram is down for our sends from the start
        server.send_text(ALICE, ALICE, "slow one")
        server.send_text(ALICE, ALICE, "quick two")
        refused = lambda: [c for c in server.requests("sendMessage", ALICE) if c.status == 502]  # noqa: E731
        # The outage ends only once the first reply has been refused 7 times -- 1+2+...+32 = 63 s
        # of backoff on the bot's clock, more than 45 s -- and the second reply is queued behind it.
        server.wait_for(lambda: len(refused()) >= 7 and len(outbox_rows(tmp_path, ALICE)) == 2, 120,
                        "seven refused sends and both replies queued")
        server.fail_next("sendMessage", 0)
        server.wait_for(lambda: len(replies(server, ALICE)) == 2, 120, "both replies")
        assert replies(server, ALICE) == ["slow answer", "You said: quick two"]
        assert all(c.text == "slow answer" for c in refused())  # the second waited its turn
        assert "not sent (NetworkError" in process.log()
        server.wait_for(lambda: [state for state, _ in outbox_rows(tmp_path, ALICE)] == ["sent", "sent"],
                        30, "both marked sent")
    finally:
        assert process.stop() == 0
        server.close()


def test_old_sent_replies_go_at_start_up_and_an_unsent_one_outlives_a_crash(tmp_path: Path) -> None:
    server = FakeTelegram(TOKEN).start()
    process = BotProcess(server, tmp_path, {"default": ["You said: {user}"]})
    process.model_args += ["--time-scale", str(SCALE)]
    spool = tmp_path / "telegram_inbox.sqlite3"
    try:
        process.start()
        server.send_text(ALICE, ALICE, "dentist at 15:00")
        server.send_text(BOB, BOB, "piano at 18:00")
        wait_reply(server, ALICE, "You said: dentist")
        wait_reply(server, BOB, "You said: piano")  # and, maybe, the "queued" notice before it
        server.wait_for(lambda: {s for s, _ in outbox_rows(tmp_path, ALICE) + outbox_rows(tmp_path, BOB)}
                        == {"sent"}, 30, "every reply marked sent")
        server.fail_next("sendMessage", 10_000)  # Telegram takes none of our sends from now
        server.send_text(ALICE, ALICE, "unsent answer")
        server.wait_for(lambda: ("queued", "You said: unsent answer") in outbox_rows(tmp_path, ALICE), 30,
                        "the reply queued")
        process.kill9()
        with sqlite3.connect(spool) as conn:  # eight days pass for what was sent; the unsent reply is new
            aged = conn.execute("UPDATE outbox SET created_at = created_at - 8 * 86400 WHERE state = 'sent'").rowcount
        conn.close()
        assert aged >= 2

        server.fail_next("sendMessage", 0)
        process.start()
        wait_reply(server, ALICE, "You said: unsent answer")  # queued before the crash, sent after it
        server.wait_for(lambda: f"and {aged} finished outbox replies older than 7 days" in process.log(), 30,
                        "the prune")
        server.wait_for(lambda: outbox_rows(tmp_path, ALICE) == [("sent", "You said: unsent answer")], 30,
                        "the unsent reply marked sent, the old one gone")
        assert outbox_rows(tmp_path, BOB) == []
        assert replies(server, ALICE).count("You said: unsent answer") == 1
        assert process.stop() == 0
        data = spool.read_bytes()  # closed: checkpointed; secure_delete zeroed the deleted rows
        assert b"You said: dentist" not in data and b"You said: piano" not in data
    finally:
        process.stop()
        server.close()


def test_an_approval_question_waits_for_the_chats_earlier_reply_still_in_the_outbox(tmp_path: Path) -> None:
    server = FakeTelegram(TOKEN).start()
    process = BotProcess(server, tmp_path, SCRIPT)
    process.model_args += ["--time-scale", str(SCALE)]
    try:
        process.start()
        server.fail_next("sendMessage", 10_000)  # Telegram takes none of our sends
        server.send_text(ALICE, ALICE, "add Dentist")
        server.wait_for(lambda: [s for s, _ in outbox_rows(tmp_path, ALICE)] == ["queued"], 30, "the reply queued")
        server.send_text(ALICE, ALICE, "delete Dentist")  # its turn asks for approval
        server.wait_for(lambda: f"approval question in chat {ALICE} waits for 1 earlier replies" in process.log(), 30,
                        "the question waiting")
        server.fail_next("sendMessage", 0)
        ask = approval_message(server, ALICE)
        delivered = [c.text for c in server.requests("sendMessage", ALICE) if c.status == 200]
        assert delivered[0] == "Created: Dentist" and delivered[1] == ask.text
        assert not any("reply_markup" in c.params for c in server.requests("sendMessage", ALICE) if c.status != 200)
        server.tap(ALICE, ALICE, buttons(ask)["Approve"])
        assert '"ok": true' in wait_reply(server, ALICE, "Result:")
    finally:
        assert process.stop() == 0
        server.close()


def test_replies_older_than_a_day_become_one_apology(tmp_path: Path) -> None:
    from bot.outbox import LATE

    server = FakeTelegram(TOKEN).start()
    process = BotProcess(server, tmp_path, {"default": ["You said: {user}"]})
    process.model_args += ["--time-scale", str(SCALE)]
    try:
        process.start()
        server.fail_next("sendMessage", 10_000)  # Telegram keeps failing our sends
        server.send_text(ALICE, ALICE, "one")
        server.send_text(ALICE, ALICE, "two")
        server.wait_for(lambda: len(outbox_rows(tmp_path, ALICE)) == 2, 30, "two replies queued")
        assert process.stop() == 0
        with sqlite3.connect(tmp_path / "telegram_inbox.sqlite3") as conn:  # a day passes
            conn.execute("UPDATE outbox SET created_at = created_at - 25 * 3600, next_at = next_at - 25 * 3600")
        server.fail_next("sendMessage", 0)
        process.start()
        wait_reply(server, ALICE, "Sorry, this answer is late")
        server.send_text(ALICE, ALICE, "three")
        wait_reply(server, ALICE, "You said: three")
        assert replies(server, ALICE) == [LATE, "You said: three"]
        server.wait_for(lambda: [state for state, _ in outbox_rows(tmp_path, ALICE)] == ["sent", "late", "sent"],
                        30, "the apology in place of the first, the second dropped")
    finally:
        assert process.stop() == 0
        server.close()


def test_a_blocked_or_unknown_chat_drops_its_reply_with_a_log_line(fake: FakeTelegram, bot: BotProcess) -> None:
    blocked, gone = BLOCKED, GONE
    fake.refuse_chat(blocked, 403, "Forbidden: bot was blocked by the user")
    fake.refuse_chat(gone, 400, "Bad Request: chat not found")
    fake.send_text(blocked, blocked, "hello?")
    fake.send_text(gone, gone, "anyone?")
    for chat, said in ((blocked, "hello?"), (gone, "anyone?")):
        # The reply itself, not the last row: a "Queued" notice (the other chat's turn still
        # running) is dropped first when the turns overlap.
        fake.wait_for(lambda: ("dropped", f"You said: {said}") in outbox_rows(bot.data_dir, chat), 30, "dropped")
        tries = [c for c in fake.requests("sendMessage", chat) if c.text in ("You said: hello?", "You said: anyone?")]
        assert len(tries) == 1 and tries[0].status in (400, 403)  # not retried
    assert "dropped: Telegram refused it for good (Forbidden: bot was blocked by the user)" in bot.log()
    assert "dropped: Telegram refused it for good (Chat not found)" in bot.log()
    fake.send_text(BOB, BOB, "others still get answers")
    wait_reply(fake, BOB, "You said: others still get answers")


# ---- secrets --------------------------------------------------------------------------------


def test_the_data_dir_is_0700_and_every_file_in_it_0600(fake: FakeTelegram, bot: BotProcess) -> None:
    fake.send_text(BOB, BOB, "write something")
    wait_reply(fake, BOB, "You said: write something")
    assert stat.S_IMODE(bot.data_dir.stat().st_mode) == 0o700
    files = [p for p in bot.data_dir.rglob("*") if p.is_file()]
    assert {"calendar.sqlite3", "sessions.sqlite3", "telegram_inbox.sqlite3", "bot.log", "config.toml"} <= {
        p.name for p in files}
    assert {p.name: oct(stat.S_IMODE(p.stat().st_mode)) for p in files} == {p.name: "0o600" for p in files}


def test_a_token_in_a_world_readable_config_file_is_refused(tmp_path: Path) -> None:
    server = FakeTelegram(TOKEN).start()
    try:
        process = BotProcess(server, tmp_path, SCRIPT, extra_config=f'telegram_token = "{TOKEN}"\n')
        env = process.env()
        env.pop("TELEGRAM_BOT_TOKEN")
        config = tmp_path / "config.toml"
        config.chmod(0o644)
        run = lambda: subprocess.run([sys.executable, "-m", "bot", "run", *process.model_args], cwd=ROOT, env=env,
                                     capture_output=True, text=True, timeout=120)
        refused = run()
        assert refused.returncode == 2
        assert refused.stderr.strip() == (f"python -m bot: {config} holds telegram_token but is readable by others "
                                          f"(mode 644): run chmod 600 {config}, or move the token to a token file")
        assert server.requests() == []  # Telegram never contacted
        config.chmod(0o600)
        process.proc = subprocess.Popen([sys.executable, "-m", "bot", "run", *process.model_args], cwd=ROOT, env=env,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        server.wait_for(lambda: server.requests("getUpdates"), 60, "the bot polling with the 0600 file's token")
        assert process.stop() == 0
    finally:
        if process.proc and process.proc.poll() is None:
            process.proc.kill()
        server.close()


def test_a_refused_token_gives_one_line_exit_0_and_no_retries(tmp_path: Path) -> None:
    server = FakeTelegram(TOKEN).start()
    wrong = "987654321:" + "Z" * 35
    try:
        process = BotProcess(server, tmp_path, SCRIPT)
        done = subprocess.run([sys.executable, "-m", "bot", "run", *process.model_args], cwd=ROOT,
                              env=process.env(TELEGRAM_BOT_TOKEN=wrong), capture_output=True, text=True, timeout=120)
        assert done.returncode == 0  # launchd's KeepAlive {SuccessfulExit: false} leaves it stopped
        lines = [line for line in done.stderr.splitlines() if not line.startswith("python -m bot: logging to")]
        assert lines == ["python -m bot: Telegram refused the bot token from TELEGRAM_BOT_TOKEN (401 Unauthorized): "
                         "get the current token from @BotFather, store it there, then start the bot again. "
                         "Not restarting."]
        assert len(server.requests("?getMe")) == 1 and server.requests("getUpdates") == []
        everything = done.stdout + done.stderr + process.log()
        assert wrong not in everything and wrong.split(":")[1] not in everything
        assert "Telegram refused the bot token" in process.log()
    finally:
        server.close()


def test_a_token_revoked_while_running_gives_the_same_line_and_exit_0(tmp_path: Path) -> None:
    server = FakeTelegram(TOKEN).start()
    process = BotProcess(server, tmp_path, SCRIPT)
    try:
        process.start()
        server.send_text(ALICE, ALICE, "before the revoke")
        wait_reply(server, ALICE, "You said: before the revoke")
        server.revoke_token()
        assert process.proc.wait(60) == 0  # launchd's KeepAlive {SuccessfulExit: false} leaves it stopped
        output = process.proc.stdout.read().decode()
        lines = [line for line in output.splitlines() if line.startswith("python -m bot:")
                 and not line.startswith("python -m bot: logging to")]
        assert lines == ["python -m bot: Telegram refused the bot token from TELEGRAM_BOT_TOKEN (401 Unauthorized): "
                         "get the current token from @BotFather, store it there, then start the bot again. "
                         "Not restarting."]
        assert "Traceback" not in output and "bot stopped by an error" not in process.log()
        assert "Telegram refused the bot token" in process.log()
        assert TOKEN not in output + process.log()
    finally:
        process.stop()
        server.close()


def test_every_exception_path_masks_the_token(tmp_path: Path) -> None:
    """After ``masking.install``: a logged traceback, an uncaught exception in a thread and in
    the main thread, and a plain print all come out with the token masked."""
    code = f"""
import logging, threading
from bot import masking
from bot.log_file import configure_log_file
masking.install({TOKEN!r})
configure_log_file(__import__('pathlib').Path({str(tmp_path)!r}))
masking.mask_handlers({TOKEN!r})
logging.getLogger().addHandler(logging.StreamHandler())
masking.mask_handlers({TOKEN!r})
log = logging.getLogger('t')
try:
    raise ValueError('The token `{TOKEN}` was rejected by the server.')
except ValueError:
    log.exception('getMe failed')
print('url https://api.telegram.org/bot{TOKEN}/getMe')
t = threading.Thread(target=lambda: (_ for _ in ()).throw(RuntimeError('{TOKEN.split(':')[1]}')))
t.start(); t.join()
raise SystemError('bot{TOKEN}/getUpdates')
"""
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    log_text = (tmp_path / "bot.log").read_text()
    everything = done.stdout + done.stderr + log_text
    assert "getMe failed" in log_text and "Traceback" in log_text and "SystemError" in done.stderr
    assert "Exception in thread" in done.stderr and "url https://api.telegram.org/bot<token>/getMe" in done.stdout
    assert TOKEN not in everything and TOKEN.split(":")[1] not in everything


# ---- own attacks ----------------------------------------------------------------------------


def test_a_failing_gate_does_not_let_a_strangers_update_through_to_the_handlers(
    fake: FakeTelegram, bot: BotProcess
) -> None:
    stranger = 4444
    before = len(fake.requests("answerCallbackQuery"))
    fake.fail_next("answerCallbackQuery", 1, 400, "Bad Request: query is too old and response timeout expired")
    tap = fake.tap(stranger, stranger, "ap:" + "x" * 22 + ":y")
    assert settled(fake, bot, tap) == ("refused", None)  # refused as it came in; the failing gate adds nothing
    fake.send_text(BOB, BOB, "after the stranger")  # updates are handled in order: the tap is behind us
    wait_reply(fake, BOB, "You said: after the stranger")
    # Only the gate's (failed) answer: the button handler never saw the stranger's tap.
    assert [c.status for c in fake.requests("answerCallbackQuery")[before:]] == [400]
    assert fake.requests(chat_id=stranger) == []


def test_a_reminder_due_during_an_outage_arrives_after_it_once_with_its_buttons(tmp_path: Path) -> None:
    from datetime import datetime, timedelta
    from zoneinfo import ZoneInfo

    from tools.calendar.store import CalendarStore

    seoul = ZoneInfo("Asia/Seoul")
    clock = tmp_path / "clock.txt"
    clock.write_text(datetime(2026, 12, 1, 14, 0, tzinfo=seoul).isoformat())
    with CalendarStore(tmp_path / "calendar.sqlite3", tz="Asia/Seoul") as store:
        start = datetime(2026, 12, 1, 15, 0, tzinfo=seoul)
        store.add_event("치과", start, start + timedelta(minutes=30), remind_minutes_before=[10])
    server = FakeTelegram(TOKEN).start()
    process = BotProcess(server, tmp_path, {"default": ["hi"]}, domain="tools.calendar.domain",
                         extra_config='tz = "Asia/Seoul"\n')
    process.use_clock_file(clock, "--time-scale", str(SCALE))
    try:
        process.start()
        server.outage()  # until the reminder has been refused at least once
        clock.write_text(datetime(2026, 12, 1, 14, 50, tzinfo=seoul).isoformat())  # the reminder is due
        server.wait_for(lambda: [c for c in server.requests("sendMessage", ALICE) if c.status == 502], 60,
                        "a refused attempt")
        server.end_outage()
        delivered = lambda: [c for c in server.requests("sendMessage", ALICE)  # noqa: E731
                             if c.status == 200 and (c.text or "").startswith("⏰")]
        server.wait_for(delivered, 60, "the reminder after the outage")
        clock.write_text(datetime(2026, 12, 1, 14, 55, tzinfo=seoul).isoformat())
        server.send_text(ALICE, ALICE, "ping")
        wait_reply(server, ALICE, "hi")
        [reminder] = delivered()
        assert reminder.text == "⏰ In 10 min: '치과' at 15:00"
        assert list(buttons(reminder)) == ["Snooze 10 min", "Open"]
    finally:
        assert process.stop() == 0
        server.close()
