"""TELEGRAM_API_BASE_URL carries the bot token in every request path: plain http only to this
machine or a host named in AGENT_ALLOW_PLAIN_HTTP_HOSTS, and no credentials in it.

Config-level checks (``load_bot_config``), then the real ``python -m bot run``: refused before it
connects anywhere (a listener on this machine's outward address sees nothing), still working
against the local Bot API on 127.0.0.1, and connecting to a host once the user names it.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.config import BotConfig, ConfigProblem, load_bot_config
from tests.bot_harness import ROOT, SCRIPT, TOKEN, BotProcess
from tests.fake_telegram import FakeTelegram
from tests.test_bot_config import settings_from

BASE_ENV = {"TELEGRAM_BOT_TOKEN": TOKEN, "TELEGRAM_ALLOWED_USERS": "11"}


def config_for(url: str, tmp_path: Path, **env: str) -> BotConfig | ConfigProblem:
    return load_bot_config(settings_from({**BASE_ENV, "TELEGRAM_API_BASE_URL": url, **env}, tmp_path))


@pytest.mark.parametrize("url", [
    "http://192.168.1.20:8081", "http://api.telegram.org", "http://127.0.0.1.evil.example:8081",
    "http://localhost.evil.example", "HTTP://tg-proxy.example.com/", "http://10.0.0.1:8081/bot",
])
def test_plain_http_to_another_host_is_refused_in_one_line_naming_the_setting(tmp_path: Path, url: str) -> None:
    problem = config_for(url, tmp_path)
    assert isinstance(problem, ConfigProblem)
    assert problem.message.startswith("TELEGRAM_API_BASE_URL")
    assert "the bot token" in problem.message and "AGENT_ALLOW_PLAIN_HTTP_HOSTS" in problem.message
    assert "\n" not in problem.message and TOKEN not in problem.message


@pytest.mark.parametrize("url", ["http://127.0.0.1:8081", "http://localhost:8081/", "http://[::1]:8081",
                                 "http://127.0.0.2:9", "https://tg-proxy.example.com", "https://api.telegram.org"])
def test_this_machine_over_http_and_any_host_over_https_are_allowed(tmp_path: Path, url: str) -> None:
    config = config_for(url, tmp_path)
    assert isinstance(config, BotConfig) and config.api_base_url == url


def test_a_host_named_in_the_allow_list_may_take_plain_http(tmp_path: Path) -> None:
    allowed = config_for("http://nas.local:8081", tmp_path, AGENT_ALLOW_PLAIN_HTTP_HOSTS="nas.local,192.168.1.20")
    assert isinstance(allowed, BotConfig)
    other = config_for("http://nas2.local:8081", tmp_path, AGENT_ALLOW_PLAIN_HTTP_HOSTS="nas.local")
    assert isinstance(other, ConfigProblem) and "nas2.local" in other.message


@pytest.mark.parametrize("url", ["http://user:s3cr3t-pass@127.0.0.1:8081", "https://s3cr3t-pass@tg-proxy.example.com"])
def test_credentials_in_the_url_are_refused_without_echoing_them(tmp_path: Path, url: str) -> None:
    problem = config_for(url, tmp_path)
    assert isinstance(problem, ConfigProblem)
    assert "TELEGRAM_API_BASE_URL" in problem.message and "user name or password" in problem.message
    assert "s3cr3t-pass" not in problem.message and "\n" not in problem.message


def test_a_spelling_that_hides_another_host_behind_a_loopback_name_is_refused(tmp_path: Path) -> None:
    """``\\@`` is a backslash for one URL parser and the end of the userinfo for another."""
    problem = config_for("http://127.0.0.1:8081\\@evil.example/bot", tmp_path)
    assert isinstance(problem, ConfigProblem)


# -- the real process ---------------------------------------------------------------------------


def outward_address() -> str:
    """This machine's non-loopback address (no packet is sent: a UDP socket only picks a route)."""
    address = ""
    for target in ("198.51.100.1", "10.255.255.255"):  # documentation and private ranges: any route will do
        probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            probe.connect((target, 9))
            address = probe.getsockname()[0]
            break
        except OSError:
            continue
        finally:
            probe.close()
    if not address or address.startswith("127."):
        pytest.skip("this machine has no non-loopback address to stand for another host")
    return address


class Listener:
    """A TCP listener on the outward address that records the first line each connection sends."""

    def __init__(self, host: str) -> None:
        self.sock = socket.create_server((host, 0))
        self.sock.settimeout(0.2)
        self.url = f"http://{host}:{self.sock.getsockname()[1]}"
        self.lines: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(5)
                try:
                    self.lines.append(conn.recv(4096).split(b"\r\n", 1)[0].decode("latin-1"))
                except OSError:
                    self.lines.append("")

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.sock.close()


@pytest.fixture
def listener() -> Iterator[Listener]:
    server = Listener(outward_address())
    yield server
    server.close()


@pytest.fixture
def fake() -> Iterator[FakeTelegram]:
    server = FakeTelegram(TOKEN).start()
    yield server
    server.close()


def bot_command(process: BotProcess) -> list[str]:
    return [sys.executable, "-m", "bot", "run", *process.model_args]


def test_the_bot_refuses_plain_http_to_another_host_before_connecting(
        fake: FakeTelegram, listener: Listener, tmp_path: Path) -> None:
    process = BotProcess(fake, tmp_path, SCRIPT)
    done = subprocess.run(bot_command(process), cwd=ROOT, env=process.env(TELEGRAM_API_BASE_URL=listener.url),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "TELEGRAM_API_BASE_URL" in lines[0] and "AGENT_ALLOW_PLAIN_HTTP_HOSTS" in lines[0]
    assert TOKEN not in done.stderr + done.stdout
    time.sleep(0.5)  # a connection made just before the exit would be accepted by now
    assert listener.lines == [] and fake.requests() == []


def test_the_bot_still_polls_the_local_bot_api_on_loopback(fake: FakeTelegram, tmp_path: Path) -> None:
    process = BotProcess(fake, tmp_path, SCRIPT).start()  # TELEGRAM_API_BASE_URL=http://127.0.0.1:<port>
    try:
        assert fake.base_url.startswith("http://127.0.0.1:") and fake.requests("getUpdates")
    finally:
        assert process.stop() == 0


def test_the_bot_connects_to_a_plain_http_host_the_user_named(
        fake: FakeTelegram, listener: Listener, tmp_path: Path) -> None:
    process = BotProcess(fake, tmp_path, SCRIPT)
    host = listener.url.split("//", 1)[1].rsplit(":", 1)[0]
    proc = subprocess.Popen(bot_command(process), cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env=process.env(TELEGRAM_API_BASE_URL=listener.url, AGENT_ALLOW_PLAIN_HTTP_HOSTS=host))
    try:
        deadline = time.monotonic() + 90
        while not listener.lines and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert listener.lines, proc.stderr.read().decode() if proc.poll() is not None else "no connection"
        assert listener.lines[0].startswith("POST /bot") and "/getMe" in listener.lines[0]
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(30)
