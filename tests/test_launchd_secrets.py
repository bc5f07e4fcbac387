"""The plist, which other local users can read, never holds a password written into a URL, and it
carries the plain-http allow list so the bot under launchd reaches the same LAN server.

Same fakes as ``test_launchd_openai`` (only launchctl is faked).
"""

from __future__ import annotations

import plistlib
from pathlib import Path

import pytest

from agent.config import load_settings
from agent.url_policy import ALLOW_ENV
from bot.__main__ import main as bot_main
from bot import launchd_service
from bot.launchd_plist import service_environment
from tests.launchd_harness import TOKEN, FakeLaunchctl, make_host, plist_path

KEY = "sk-launchd-lan-0123456789abcdef"
PASSWORD = "lan-Server-pass-777"


def environ(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {"AGENT_DATA_DIR": str(tmp_path / "data"), "TELEGRAM_BOT_TOKEN": TOKEN, "TELEGRAM_ALLOWED_USERS": "11",
            "AGENT_BACKEND": "openai", "AGENT_BASE_URL": "http://192.168.1.20:8080", "AGENT_REMOTE_MODEL": "qwen3",
            "AGENT_API_KEY": KEY, **extra}


def test_install_refuses_a_key_for_a_plain_http_lan_server_until_it_is_named(tmp_path: Path) -> None:
    env = environ(tmp_path)
    host = make_host(tmp_path, FakeLaunchctl())
    assert launchd_service.install(load_settings(environ=env), host, env) == 2
    assert ALLOW_ENV in host.err.getvalue() and not plist_path(tmp_path).exists()
    assert not (tmp_path / "data" / "api_key").exists()  # refused before any file was written

    env = environ(tmp_path, **{ALLOW_ENV: "192.168.1.20"})
    host = make_host(tmp_path, FakeLaunchctl())
    assert launchd_service.install(load_settings(environ=env), host, env) == 0, host.err.getvalue()
    plist_env = plistlib.loads(plist_path(tmp_path).read_bytes())["EnvironmentVariables"]
    assert plist_env[ALLOW_ENV] == "192.168.1.20"
    assert load_settings(environ=plist_env).allow_plain_http_hosts == ("192.168.1.20",)  # as the bot reads it


def test_a_password_in_a_url_never_reaches_the_plist(tmp_path: Path) -> None:
    env = environ(tmp_path, AGENT_BASE_URL="https://api.example.com")
    settings = load_settings(environ=env)
    with pytest.raises(ValueError) as refused:
        service_environment(settings, model_path=None, lora_path=None, token_file=tmp_path / "t", python=Path("/p"),
                            environ={"AGENT_CALDAV_URL": f"https://me:{PASSWORD}@cal.example.com/"})
    assert "AGENT_CALDAV_URL" in str(refused.value) and PASSWORD not in str(refused.value)


def test_launchd_print_with_a_password_in_the_caldav_url_exits_2_and_shows_it_nowhere(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    for name, value in environ(tmp_path, AGENT_BASE_URL="https://api.example.com").items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AGENT_CALDAV_URL", f"https://me:{PASSWORD}@cal.example.com/")
    monkeypatch.setenv("AGENT_CALDAV_USERNAME", "me")
    assert bot_main(["launchd", "print"]) == 2
    shown = capsys.readouterr()
    assert PASSWORD not in shown.out + shown.err and "user name or password" in shown.err
