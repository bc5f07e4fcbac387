"""The real ``python -m bot run --backend openai`` against the fake Bot API and the strict OpenAI server.

Same harness as ``test_bot_e2e`` (tests/bot_harness.py) (the bot as a subprocess, the toy domain), with the model on
the far side of an OpenAI-compatible API that answers with native tool calls.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Iterator

import pytest

from agent.prompt import unstamp_user_text
from tests.bot_harness import TOKEN, BotProcess, approval_message, buttons, wait_reply
from tests.fake_telegram import FakeTelegram
from tests.openai_server import StrictOpenAIServer
from tests.toy_domain import titles
from tests.toy_openai import KEY, MODEL, toy_script

ALICE = 111


class RemoteBot(BotProcess):
    """The bot with ``--backend openai``; the key only in its environment."""

    def __init__(self, fake: FakeTelegram, data_dir: Path, server: StrictOpenAIServer) -> None:
        super().__init__(fake, data_dir, script={}, extra_config="remote_retries = 1\n")
        self.script_path.unlink()
        self.model_args = ["--backend", "openai", "--base-url", server.url, "--model", MODEL]

    def env(self, **extra: str) -> dict[str, str]:
        return super().env(AGENT_API_KEY=KEY, **extra)


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeTelegram]:
    server = FakeTelegram(TOKEN).start()
    yield server
    server.close()


@pytest.fixture(scope="module")
def api() -> Iterator[StrictOpenAIServer]:
    with StrictOpenAIServer(toy_script, api_key=KEY) as server:
        yield server


@pytest.fixture(scope="module")
def bot(fake: FakeTelegram, api: StrictOpenAIServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RemoteBot]:
    process = RemoteBot(fake, tmp_path_factory.mktemp("remote-bot"), api).start()
    yield process
    assert process.stop() == 0, process.log()[-3000:]


def test_a_chat_over_the_api_creates_asks_before_deleting_and_deletes(fake, api, bot) -> None:
    fake.send_text(ALICE, ALICE, "add Dentist")
    assert wait_reply(fake, ALICE, "Created") == "Created: Dentist"
    assert titles(bot.data_dir) == ["Dentist"]
    fake.send_text(ALICE, ALICE, "delete Dentist")
    ask = approval_message(fake, ALICE)
    assert ask.text == "Approve this action?\n\nDelete the event 'Dentist'"
    assert titles(bot.data_dir) == ["Dentist"]  # nothing happens before the human's yes
    fake.tap(ALICE, ALICE, buttons(ask)["Approve"])
    assert '"ok": true' in wait_reply(fake, ALICE, "Result:") and titles(bot.data_dir) == []
    assert api.rejected == [] and len(api.answered()) == 4
    sent = api.requests[-1].messages
    assert [m["role"] for m in sent[-3:]] == ["user", "assistant", "tool"] and sent[-2]["tool_calls"]
    assert sent[-2]["tool_calls"][0]["function"]["arguments"] == '{"title":"Dentist"}'  # the server's own bytes


def test_a_server_fault_is_a_message_in_the_chat_and_the_next_message_works(fake, api, bot) -> None:
    chat = 222
    fake.send_text(chat, chat, "flaky hello")
    assert "model failed" in wait_reply(fake, chat, "Sorry")
    fake.send_text(chat, chat, "add Tea")
    wait_reply(fake, chat, "Created: Tea")
    users = [unstamp_user_text(m["content"]) for m in api.requests[-1].messages if m["role"] == "user"]
    assert users == ["flaky hello", "add Tea"]  # the failed message is still in the conversation
    assert api.rejected == []


def test_a_server_that_echoes_the_key_gets_it_into_no_log_line_or_database(fake, api, bot) -> None:
    chat = 1001  # an allowed user with a chat of its own
    for count, text in enumerate(("echo-key hi", "echo-key-5xx hi"), 1):
        fake.send_text(chat, chat, text)
        fake.wait_for(lambda: len([t for t in fake.texts(chat) if "model failed" in t]) == count, 30, "the sorry")
    echoed = [r for r in api.requests if r.status in (400, 502)]
    assert len(echoed) == 3  # the 400 once, the 502 tried twice (remote_retries = 1)
    log = bot.log()
    assert "upstream refused the header 'Authorization: Bearer <api key>'" in log  # the turn's error, logged
    assert KEY not in log
    for name in ("sessions.sqlite3", "trajectories.sqlite3"):
        path = bot.data_dir / name
        assert KEY.encode() not in path.read_bytes() + _wal(path)
    with sqlite3.connect(bot.data_dir / "trajectories.sqlite3") as conn:
        errors = [row[0] for row in conn.execute("SELECT turn FROM turns") if "upstream refused" in row[0]]
    assert len(errors) == 2 and all("<api key>" in e and KEY not in e for e in errors)


def _wal(path: Path) -> bytes:
    wal = path.with_name(path.name + "-wal")
    return wal.read_bytes() if wal.exists() else b""


def test_the_key_stays_out_of_argv_logs_and_the_databases(fake, api, bot) -> None:
    cmdline = Path(f"/proc/{bot.proc.pid}/cmdline").read_bytes()
    assert b"--backend\x00openai" in cmdline and KEY.encode() not in cmdline
    assert all(r.authorization == f"Bearer {KEY}" for r in api.requests)
    assert KEY not in bot.log() and "model ready (openai deepseek-chat at" in bot.log()
    for name in ("sessions.sqlite3", "trajectories.sqlite3"):
        path = bot.data_dir / name
        assert path.exists()
        with sqlite3.connect(path) as conn:
            dump = "\n".join(conn.iterdump())
        assert KEY not in dump and KEY.encode() not in path.read_bytes()


def test_a_refused_key_tells_the_chat_what_to_fix() -> None:
    from agent.records import StopReason, Turn
    from bot.worker import KEY_REFUSED_REPLY, reply_for

    refused = Turn(session_id="s", user_text="hi", stop_reason=StopReason.MODEL_ERROR,
                   error="the API key was refused (HTTP 401 from https://api.deepseek.com/v1)")
    other = Turn(session_id="s", user_text="hi", stop_reason=StopReason.MODEL_ERROR, error="gave up after 4 attempts: HTTP 503")
    assert reply_for(refused) == KEY_REFUSED_REPLY and "AGENT_API_KEY" in KEY_REFUSED_REPLY
    assert reply_for(other) == "Sorry, the model failed on that message. Please try again."
