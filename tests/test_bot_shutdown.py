"""A stop always ends the bot: SIGTERM right after a reply, 50 times in a row, and during
start-up while the Bot API is unreachable.

The 50 stops run ``bot.app.serve`` in this process, each in a fresh event loop as
``python -m bot run`` does, with the real calendar domain (so the reminder task that used to
swallow the cancellation runs), the scripted model, and the local Bot API over HTTP; the
signal is a real SIGTERM to this process, handled by serve's own signal handler. Fifty
subprocess starts would cost minutes of interpreter and import start-up on two shared cores
and exercise nothing more of the shutdown path. The start-up case is a real subprocess.
"""

from __future__ import annotations

import _thread
import asyncio
import json
import logging
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from bot.app import ShutdownGuard, serve
from bot.config import BotConfig, load_bot_config, settings_or_problem
from bot.inbox import Inbox
from tests.bot_harness import ALICE, ROOT, TOKEN, BotProcess
from tests.fake_telegram import FakeTelegram

pytestmark = pytest.mark.filterwarnings("ignore:Please use .Bot.get_updates.")

STOPS = 50
BOUND_S = 10.0


def _bot_config(fake: FakeTelegram, data_dir: Path):
    (data_dir / "config.toml").write_text('domain = "tools.calendar.domain"\ntz = "Asia/Seoul"\n')
    environ = {"TELEGRAM_BOT_TOKEN": TOKEN, "TELEGRAM_ALLOWED_USERS": str(ALICE),
               "TELEGRAM_API_BASE_URL": fake.base_url, "AGENT_DATA_DIR": str(data_dir)}
    settings = settings_or_problem({"data_dir": str(data_dir)}, environ)
    config = load_bot_config(settings)
    assert isinstance(config, BotConfig), config
    return settings, config


def test_sigterm_right_after_a_reply_stops_every_task_50_times_in_a_row(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from agent.app import build_runtime
    from bot.scripted import load_scripted_backend

    fake = FakeTelegram(TOKEN).start()
    settings, config = _bot_config(fake, tmp_path)
    create = {"name": "create_event", "arguments": {
        "title": "Stop {n}", "date": "2030-01-01", "start_time": "09:00", "duration_minutes": 30}}
    script = {"rules": [{"match": r"^book (?P<n>\d+)$",
                         "steps": [f"<tool_call>{json.dumps(create)}</tool_call>", "Booked {n}"]}]}
    (tmp_path / "script.json").write_text(json.dumps(script))
    runtime = build_runtime(settings, load_scripted_backend(tmp_path / "script.json"))
    inbox = Inbox(tmp_path / "telegram_inbox.sqlite3")
    misses: list[int] = []

    def booked() -> list[str]:  # each reply without the 📅 receipt paragraph the calendar adds
        return [t.split("\n\n")[0] for t in fake.texts(ALICE) if t.startswith("Booked")]

    async def one(n: int, guard: ShutdownGuard) -> int:
        bot = asyncio.create_task(serve(config, runtime, 300, inbox, guard=guard))
        fake.send_text(ALICE, ALICE, f"book {n}")
        await asyncio.to_thread(fake.wait_for, lambda: f"Booked {n}" in booked(), 30, f"reply {n}")
        await asyncio.sleep((n % 4) * 0.002)  # land on slightly different moments after the reply
        os.kill(os.getpid(), signal.SIGTERM)
        return await bot

    caplog.set_level(logging.INFO)
    try:
        for n in range(STOPS):
            def missed(n: int = n) -> None:
                misses.append(n)
                _thread.interrupt_main()  # unstick this test instead of ending pytest

            guard = ShutdownGuard(BOUND_S, missed)
            try:
                assert asyncio.run(one(n, guard)) == 0
            finally:
                guard.disarm()
            assert misses == []
        assert not [r.getMessage() for r in caplog.records if "did not stop" in r.getMessage()]
        assert sum("stop requested" in r.getMessage() for r in caplog.records) == STOPS
        assert booked() == [f"Booked {n}" for n in range(STOPS)]
    finally:
        inbox.close()
        runtime.close()
        fake.close()


def test_sigterm_during_start_up_retries_exits_0_with_a_console_line(tmp_path: Path) -> None:
    fake = FakeTelegram(TOKEN).start()
    try:
        fake.outage(3600)  # the Bot API answers 502 to everything
        process = BotProcess(fake, tmp_path, {"default": ["hi"]})
        proc = subprocess.Popen([sys.executable, "-m", "bot", "run", *process.model_args], cwd=ROOT,
                                env=process.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        fake.wait_for(lambda: len(fake.requests("getMe")) >= 2, 60, "two getMe attempts")
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        assert "cannot reach the Bot API" in err and "Traceback" not in err
        assert TOKEN not in err and TOKEN.split(":")[1] not in err
    finally:
        if proc.poll() is None:
            proc.kill()
        fake.close()
