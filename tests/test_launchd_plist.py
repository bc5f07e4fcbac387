"""The LaunchAgent plist: parseable, absolute existing paths, the right keys, never the token."""

from __future__ import annotations

import os
import plistlib
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from agent.config import Settings, load_settings
from bot.__main__ import main as bot_main
from bot.launchd_plist import service_plist
from launchd.plist import LABEL, ServiceFiles, plist_bytes, venv_python

TOKEN = "123456789:AAHf4k3-t0k3n_for_tests_only_xyzABC"


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    return load_settings(
        environ={
            "AGENT_DATA_DIR": str(data_dir),
            "AGENT_TZ": "Europe/Berlin",
            "TELEGRAM_BOT_TOKEN": TOKEN,  # present in settings: must still stay out of the plist
            "TELEGRAM_ALLOWED_USERS": "11,22",
            "TELEGRAM_API_BASE_URL": "http://127.0.0.1:8081/bot",
        }
    )


def make(settings: Settings, tmp_path: Path, lora: Path | None = None, **kw: Any) -> tuple[dict[str, Any], bytes]:
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF")
    data = plist_bytes(
        service_plist(
            settings, model_path=model, lora_path=lora, token_file=settings.data_dir / "telegram_token",
            home=tmp_path / "home", **kw,
        )
    )
    return plistlib.loads(data), data


def test_plist_parses_and_has_every_key_with_its_type(settings: Settings, tmp_path: Path) -> None:
    plist, _ = make(settings, tmp_path)
    assert plist["Label"] == LABEL == "com.iljeong.bot"
    assert plist["RunAtLoad"] is True
    assert plist["KeepAlive"] == {"SuccessfulExit": False}
    assert type(plist["ThrottleInterval"]) is int and plist["ThrottleInterval"] >= 10
    assert plist["ProcessType"] == "Interactive"
    assert type(plist["Umask"]) is int and plist["Umask"] == 0o077  # launchd's own log files: owner-only
    logs = tmp_path / "home" / "Library" / "Logs" / "iljeong"
    assert Path(plist["StandardOutPath"]).parent == logs
    assert Path(plist["StandardErrorPath"]).parent == logs
    assert plist["StandardOutPath"] != plist["StandardErrorPath"]
    env = plist["EnvironmentVariables"]
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())
    assert env["AGENT_MODEL_PATH"] == str(tmp_path / "model.gguf")
    assert env["AGENT_DATA_DIR"] == str(settings.data_dir)
    assert env["AGENT_TZ"] == "Europe/Berlin"
    assert env["TELEGRAM_ALLOWED_USERS"] == "11,22"
    assert env["TELEGRAM_API_BASE_URL"] == "http://127.0.0.1:8081/bot"
    assert env["TELEGRAM_BOT_TOKEN_FILE"] == str(settings.data_dir / "telegram_token")
    assert "AGENT_LORA_PATH" not in env and "AGENT_NO_ADAPTER" not in env


def test_program_and_working_directory_are_absolute_and_exist(settings: Settings, tmp_path: Path) -> None:
    plist, _ = make(settings, tmp_path)
    program = plist["ProgramArguments"]
    assert program[1:] == ["-m", "bot", "run"]
    assert Path(program[0]).is_absolute() and os.access(program[0], os.X_OK)
    assert Path(plist["WorkingDirectory"]).is_absolute() and Path(plist["WorkingDirectory"]).is_dir()
    # launchd's bare PATH: the venv's bin comes first, then the system directories only
    path = plist["EnvironmentVariables"]["PATH"].split(":")
    assert path[0] == str(Path(program[0]).parent)
    assert "/usr/bin" in path and "/bin" in path


def test_program_is_the_venv_python_not_its_symlink_target() -> None:
    python = venv_python()
    assert python == Path(os.path.abspath(sys.executable))
    if sys.prefix != sys.base_prefix:  # in a venv, bin/python must stay inside it
        assert python.parent.parent == Path(sys.prefix)


def test_symlinked_python_is_kept_as_given(settings: Settings, tmp_path: Path) -> None:
    link = tmp_path / "venv" / "bin" / "python"
    link.parent.mkdir(parents=True)
    link.symlink_to(sys.executable)
    plist, _ = make(settings, tmp_path, python=link)
    assert plist["ProgramArguments"][0] == str(link)


def test_no_token_anywhere_in_the_bytes(settings: Settings, tmp_path: Path) -> None:
    _, data = make(settings, tmp_path, lora=tmp_path / "lora.gguf")
    assert TOKEN.encode() not in data
    assert TOKEN.split(":")[1].encode() not in data
    assert b"TELEGRAM_BOT_TOKEN<" not in data  # only ..._TOKEN_FILE


def test_adapter_and_no_adapter_go_into_the_environment(settings: Settings, tmp_path: Path) -> None:
    plist, _ = make(settings, tmp_path, lora=tmp_path / "lora.gguf")
    assert plist["EnvironmentVariables"]["AGENT_LORA_PATH"] == str(tmp_path / "lora.gguf")
    plist, _ = make(replace(settings, no_adapter=True), tmp_path)
    assert plist["EnvironmentVariables"]["AGENT_NO_ADAPTER"] == "1"
    assert "AGENT_LORA_PATH" not in plist["EnvironmentVariables"]


def test_service_files_live_under_home(tmp_path: Path) -> None:
    files = ServiceFiles.for_home(tmp_path)
    assert files.plist == tmp_path / "Library" / "LaunchAgents" / "com.iljeong.bot.plist"


def test_python_m_bot_launchd_print_works_without_launchctl(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no launchctl to be found, as on Linux
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", TOKEN)
    monkeypatch.setenv("AGENT_DATA_DIR", str(tmp_path / "data"))
    assert bot_main(["launchd", "print", "--model", str(tmp_path / "m.gguf"), "--tz", "UTC"]) == 0
    out = capsys.readouterr().out
    assert TOKEN not in out
    plist = plistlib.loads(out.encode())
    assert plist["EnvironmentVariables"]["AGENT_MODEL_PATH"] == str(tmp_path / "m.gguf")
    assert plist["EnvironmentVariables"]["AGENT_TZ"] == "UTC"


def test_the_calendar_servers_settings_go_in_and_its_password_never(settings: Settings, tmp_path: Path) -> None:
    password = "app-specific-pass-wxyz"
    password_file = tmp_path / "caldav-password"
    password_file.write_text(password)
    password_file.chmod(0o600)
    environ = {"AGENT_CALDAV_URL": "https://caldav.icloud.com/", "AGENT_CALDAV_USERNAME": "me@icloud.com",
               "AGENT_CALDAV_PASSWORD_FILE": str(password_file), "AGENT_CALDAV_INTERVAL_S": "120"}
    plist, data = make(settings, tmp_path, environ=environ)
    env = plist["EnvironmentVariables"]
    assert env["AGENT_CALDAV_URL"] == "https://caldav.icloud.com/"
    assert env["AGENT_CALDAV_PASSWORD_FILE"] == str(password_file)
    assert env["AGENT_CALDAV_INTERVAL_S"] == "120"
    assert password.encode() not in data
