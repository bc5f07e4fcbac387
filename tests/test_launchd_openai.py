"""``launchd install`` for a bot on a remote API: backend settings in the plist, the key never.

Same fakes as ``test_launchd_service`` (tests/launchd_harness.py: only launchctl is faked); the checks are the bot
token's: the secret is not in the plist bytes, it lands in an owner-only file, a file others can
read is refused.
"""

from __future__ import annotations

import plistlib
import stat
from pathlib import Path

from agent.config import Settings, load_settings
from bot.__main__ import main as bot_main
from bot import launchd_service
from tests.launchd_harness import TOKEN, FakeLaunchctl, make_host, plist_path

KEY = "sk-launchd-test-abcdef0123456789"
REMOTE = {
    "AGENT_BACKEND": "openai",
    "AGENT_BASE_URL": "https://api.deepseek.com",
    "AGENT_REMOTE_MODEL": "deepseek-chat",
}


def environ(tmp_path: Path, **extra: str) -> dict[str, str]:
    base = {"AGENT_DATA_DIR": str(tmp_path / "data"), "TELEGRAM_BOT_TOKEN": TOKEN, "TELEGRAM_ALLOWED_USERS": "11",
            **REMOTE, **extra}
    return {k: v for k, v in base.items() if v}


def settings_for(env: dict[str, str]) -> Settings:
    return load_settings(environ=env)


def test_install_moves_an_environment_key_to_an_owner_only_file_and_keeps_it_out_of_the_plist(tmp_path: Path) -> None:
    env = environ(tmp_path, AGENT_API_KEY=KEY)
    host = make_host(tmp_path, FakeLaunchctl())
    assert launchd_service.install(settings_for(env), host, env) == 0, host.err.getvalue()
    key_file = tmp_path / "data" / "api_key"
    assert key_file.read_text().strip() == KEY and stat.S_IMODE(key_file.stat().st_mode) == 0o600
    data = plist_path(tmp_path).read_bytes()
    assert KEY.encode() not in data and b"AGENT_API_KEY<" not in data  # only ..._KEY_FILE
    plist_env = plistlib.loads(data)["EnvironmentVariables"]
    assert plist_env["AGENT_BACKEND"] == "openai"
    assert plist_env["AGENT_BASE_URL"] == "https://api.deepseek.com"
    assert plist_env["AGENT_REMOTE_MODEL"] == "deepseek-chat"
    assert plist_env["AGENT_WIRE_FORMAT"] == "openai"
    assert plist_env["AGENT_API_KEY_FILE"] == str(key_file)
    assert "AGENT_MODEL_PATH" not in plist_env  # no model files for a remote backend
    assert KEY not in host.out.getvalue() + host.err.getvalue()


def test_install_needs_no_model_file_for_the_openai_backend(tmp_path: Path) -> None:
    """No GGUF anywhere (no AGENT_MODEL_PATH, nothing pulled): the llama checks do not apply."""
    key_file = tmp_path / "data" / "api_key"
    key_file.parent.mkdir(parents=True)
    key_file.write_text(KEY)
    key_file.chmod(0o600)
    env = environ(tmp_path, AGENT_MODEL_PATH=str(tmp_path / "no-such.gguf"))
    host = make_host(tmp_path, FakeLaunchctl())
    assert launchd_service.install(settings_for(env), host, env) == 0, host.err.getvalue()
    assert "wrote the API key" not in host.out.getvalue() and key_file.read_text() == KEY


def test_install_refuses_a_key_file_others_can_read(tmp_path: Path) -> None:
    key_file = tmp_path / "data" / "api_key"
    key_file.parent.mkdir(parents=True)
    key_file.write_text(KEY)
    key_file.chmod(0o640)
    env = environ(tmp_path)
    fake = FakeLaunchctl()
    host = make_host(tmp_path, fake)
    assert launchd_service.install(settings_for(env), host, env) == 2
    assert f"chmod 600 {key_file}" in host.err.getvalue() and fake.calls == []
    assert not plist_path(tmp_path).exists()


def test_install_refuses_without_any_key_or_server(tmp_path: Path) -> None:
    env = environ(tmp_path)
    host = make_host(tmp_path, FakeLaunchctl())
    assert launchd_service.install(settings_for(env), host, env) == 2
    assert "no API key for https://api.deepseek.com" in host.err.getvalue()
    env = environ(tmp_path, AGENT_BASE_URL="", AGENT_API_KEY=KEY)
    host = make_host(tmp_path, FakeLaunchctl())
    assert launchd_service.install(settings_for(env), host, env) == 2
    assert "--base-url or AGENT_BASE_URL" in host.err.getvalue()


def test_print_takes_the_backend_flags_and_model_name(tmp_path: Path, monkeypatch, capsys) -> None:
    for name, value in environ(tmp_path, AGENT_API_KEY=KEY, AGENT_BACKEND="", AGENT_BASE_URL="", AGENT_REMOTE_MODEL="").items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AGENT_MODEL_PATH", raising=False)
    argv = ["launchd", "print", "--backend", "openai", "--base-url", "http://127.0.0.1:8080/v1", "--model", "qwen3-4b"]
    assert bot_main(argv) == 0
    out = capsys.readouterr().out
    env = plistlib.loads(out.encode())["EnvironmentVariables"]
    assert (env["AGENT_BACKEND"], env["AGENT_BASE_URL"], env["AGENT_REMOTE_MODEL"]) == (
        "openai", "http://127.0.0.1:8080/v1", "qwen3-4b")
    assert "AGENT_MODEL_PATH" not in env and KEY not in out
