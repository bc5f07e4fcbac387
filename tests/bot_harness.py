"""The bot as a subprocess against the local Bot API (tests/fake_telegram.py), and how tests wait on it.

``BotProcess`` runs the real ``python -m bot run`` with its own data dir, config file and
scripted model; the waiting helpers read what the fake server was sent. The end-to-end test
modules share these, and ``dentist_script`` is the calendar-domain conversation ("book the
dentist", then "cancel it") that more than one of them replays.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from bot.worker import QUEUED_NOTICE
from tests.fake_telegram import Call, FakeTelegram
from tests.toy_domain import ECHO, TOY_RULES

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "123456789:" + "A" * 35
ALICE, BOB, MALLORY = 111, 222, 333  # Alice and Bob are allowed; Mallory is not
BURST_USERS = [1001, 1002, 1003, 1004, 1005]
GROUP_ALLOWED, GROUP_OTHER = -500, -600

LONG_PARAGRAPH = "word " * 300  # ~1500 characters
SCRIPT = {
    "rules": [
        *TOY_RULES,
        {"match": r"^long$", "steps": ["\n\n".join(f"P{i} " + LONG_PARAGRAPH.strip() for i in range(6))]},
        {"match": r"^slow", "sleep": 600, "steps": ["finally done"]},
    ],
    "default": ECHO,
}


def dentist_script(title: str, today: str) -> dict[str, Any]:
    """The calendar domain's scripted policy: "book ..." creates ``title`` today at 15:00 (event 1),
    "cancel it ..." deletes event 1 (a destructive call: it asks first)."""
    create = {"name": "create_event", "arguments": {
        "title": title, "date": today, "start_time": "15:00", "duration_minutes": 30}}
    delete = {"name": "delete_event", "arguments": {"event_id": 1}}
    return {"rules": [
        {"match": "^book", "steps": [f"<tool_call>{json.dumps(create)}</tool_call>", "Booked: {result}"]},
        {"match": "^cancel it", "steps": [f"<tool_call>{json.dumps(delete)}</tool_call>", "Result: {result}"]},
    ]}


RECEIPT_DAY = "2026-12-04"  # a Friday


def receipt_script() -> dict[str, Any]:
    """The calendar domain's scripted model for the receipt cases, shared by the REPL and the bot
    tests: "book" creates '치과 예약' on Friday 15:00–16:00 (event 1), "move" moves it to 17:00,
    "remove" asks to delete it and then claims it did whatever the user answered, "drop" deletes
    it, "what" only searches."""
    def call(name: str, arguments: dict[str, Any]) -> str:
        return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments}, ensure_ascii=False)}</tool_call>"

    book = call("create_event", {"title": "치과 예약", "date": RECEIPT_DAY, "start_time": "15:00", "end_time": "16:00"})
    return {"rules": [
        {"match": "^book", "steps": [book, "Booked it."]},
        {"match": "^move", "steps": [call("update_event", {"event_id": 1, "start_time": "17:00"}), "Moved it."]},
        {"match": "^remove", "steps": [call("delete_event", {"event_id": 1}),
                                       "완료했어요: 12월 4일 15:00 '치과 예약' 일정을 삭제했어요."]},
        {"match": "^drop", "steps": [call("delete_event", {"event_id": 1}), "Deleted it."]},
        {"match": "^what", "steps": [call("search_events", {"date": RECEIPT_DAY}), "You have the dentist."]},
    ]}


# What each of those turns' receipt says (the declined one in English: the user wrote English).
RECEIPTS = {
    "book": "📅 created #1 '치과 예약' Fri 12-04 15:00–16:00",
    "remove": "📅 nothing changed (you declined: delete '치과 예약')",
    "move": "📅 moved #1 '치과 예약' Fri 12-04 17:00–18:00",
    "drop": "📅 deleted #1 '치과 예약' Fri 12-04 17:00–18:00",
}


def quiet_agenda_time(config: str, now: datetime | None = None) -> str:
    """A daily-agenda time twelve hours after ``now`` (the wall clock by default) in the time zone
    ``config`` sets (else the default)."""
    from agent.config import DEFAULT_TZ

    found = re.search(r'^tz\s*=\s*"([^"]+)"', config, re.MULTILINE)
    zone = ZoneInfo(found.group(1) if found else DEFAULT_TZ)
    return ((now or datetime.now(zone)).astimezone(zone) + timedelta(hours=12)).strftime("%H:%M")


class BotProcess:
    """The bot as a subprocess with its own data dir, pointed at the fake server."""

    def __init__(
        self, fake: FakeTelegram, data_dir: Path, script: dict | None, approval_timeout_s: float = 300,
        extra_config: str = "", domain: str = "tests.toy_domain",
    ) -> None:
        self.fake, self.data_dir = fake, data_dir
        data_dir.mkdir(parents=True, exist_ok=True)
        (data_dir / "config.toml").write_text(
            f'domain = "{domain}"\napproval_timeout_s = {approval_timeout_s}\n{extra_config}'
        )
        self.extra_config = extra_config
        self.script_path = data_dir / "script.json"
        self.script_path.write_text(json.dumps(script))
        # No script: the real demo pair (Gemma 3 270M + its adapter).
        self.model_args = ["--scripted", str(self.script_path)] if script is not None else ["--demo"]
        self.proc: subprocess.Popen | None = None
        # e.g. a longer allowlist for one module's bot. The calendar's daily agenda (08:00 local by
        # default) would otherwise arrive in whichever test runs at 08:00 in the bot's time zone:
        # it goes to half a day from now, and a test of the agenda sets its own.
        self.extra_env: dict[str, str] = {"AGENT_AGENDA_TIME": quiet_agenda_time(extra_config)}

    def use_clock_file(self, clock: Path, *args: str) -> None:
        """Run the bot on the instant written in ``clock`` (``--clock-file``, plus ``args``).

        The agenda then moves half a day from *that* instant: half a day from the wall clock
        can land on the test clock's hour, and the agenda arrives among the test's replies."""
        self.model_args += ["--clock-file", str(clock), *args]
        now = datetime.fromisoformat(clock.read_text().strip())
        self.extra_env["AGENT_AGENDA_TIME"] = quiet_agenda_time(self.extra_config, now)

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("TELEGRAM_", "AGENT_"))}
        env.update(
            TELEGRAM_BOT_TOKEN=TOKEN,
            TELEGRAM_ALLOWED_USERS=",".join(map(str, [ALICE, BOB, *BURST_USERS])),
            TELEGRAM_ALLOWED_CHATS=str(GROUP_ALLOWED),
            TELEGRAM_API_BASE_URL=self.fake.base_url,
            AGENT_DATA_DIR=str(self.data_dir),
            PYTHONPATH=str(ROOT),
        )
        env.update(self.extra_env)
        env.update(extra)
        return env

    def start(self, timeout: float = 60) -> BotProcess:
        polls_before = len(self.fake.requests("getUpdates"))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bot", "run", *self.model_args],
            cwd=ROOT, env=self.env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        )
        self.fake.wait_for(
            lambda: len(self.fake.requests("getUpdates")) > polls_before or self.proc.poll() is not None,
            timeout, "the bot to start polling",
        )
        assert self.proc.poll() is None, self.proc.stdout.read().decode()
        return self

    def kill9(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)

    def stop(self) -> int:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                return self.proc.wait(30)
        return self.proc.returncode if self.proc else 0

    def log(self) -> str:
        path = self.data_dir / "logs" / "bot.log"
        return path.read_text() if path.exists() else ""


def replies(fake: FakeTelegram, chat_id: int) -> list[str]:
    """What the chat was sent, without the "queued" notices."""
    return [t for t in fake.texts(chat_id) if t != QUEUED_NOTICE]


def wait_reply(fake: FakeTelegram, chat_id: int, needle: str, timeout: float = 30) -> str:
    return fake.wait_for(
        lambda: next((t for t in replies(fake, chat_id) if needle in t), None), timeout, f"{needle!r} in chat {chat_id}"
    )


def approval_message(fake: FakeTelegram, chat_id: int, count: int = 1) -> Call:
    """The ``count``-th approval question in the chat: a sendMessage whose keyboard has "Approve".
    Why the button and not any keyboard: a reminder has one too ("Open", "Snooze"), and a test that
    books 15:00 today and runs ten minutes before it gets the event's reminder first."""
    asks = lambda: [c for c in fake.requests("sendMessage", chat_id)  # noqa: E731
                    if "reply_markup" in c.params and "Approve" in buttons(c)]
    return fake.wait_for(lambda: len(asks()) >= count and asks()[count - 1], 30, "an approval question")


def buttons(call: Call) -> dict[str, str]:
    """Button label -> callback data, checked against Telegram's 64-byte limit."""
    rows = call.json("reply_markup")["inline_keyboard"]
    found = {b["text"]: b["callback_data"] for row in rows for b in row}
    assert all(len(data.encode()) <= 64 for data in found.values())
    return found


def answers(fake: FakeTelegram) -> list[str]:
    return [c.params.get("text", "") for c in fake.requests("answerCallbackQuery")]
