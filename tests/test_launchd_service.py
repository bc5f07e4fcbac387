"""install/uninstall/status/logs: real checks and files; only launchctl itself is faked.

The fake (tests/launchd_harness.py) records the exact argument lists that would run and
answers like launchctl does (``print`` of an unknown service exits 113).
"""

from __future__ import annotations

import os
import plistlib
import stat
from pathlib import Path

import pytest

from agent.config import Settings, load_settings
from bot import launchd_service
from launchd import service
from launchd.service import Host
from tests.launchd_harness import LAUNCHCTL, TARGET, TOKEN, UID, FakeLaunchctl, make_host, plist_path
from tests.model_fixtures import smollm2_path


def make_settings(tmp_path: Path, **env: str) -> Settings:
    base = {
        "AGENT_DATA_DIR": str(tmp_path / "data"),
        "AGENT_MODEL_PATH": str(smollm2_path()),
        "AGENT_NO_ADAPTER": "1",
        "TELEGRAM_BOT_TOKEN": TOKEN,
        "TELEGRAM_ALLOWED_USERS": "11",
    }
    return load_settings(environ={k: v for k, v in {**base, **env}.items() if v})


# ------------------------------------------------------------------ install


def test_install_writes_token_file_and_plist_then_bootstraps(tmp_path: Path) -> None:
    fake = FakeLaunchctl()
    host = make_host(tmp_path, fake)
    assert launchd_service.install(make_settings(tmp_path), host) == 0, host.err.getvalue()

    plist = plist_path(tmp_path)
    assert fake.calls == [
        [LAUNCHCTL, "print", TARGET],
        [LAUNCHCTL, "enable", TARGET],
        [LAUNCHCTL, "bootstrap", f"gui/{UID}", str(plist)],
    ]
    token_file = tmp_path / "data" / "telegram_token"
    assert token_file.read_text().strip() == TOKEN
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(plist.stat().st_mode) == 0o644
    data = plist.read_bytes()
    assert TOKEN.encode() not in data
    env = plistlib.loads(data)["EnvironmentVariables"]
    assert env["TELEGRAM_BOT_TOKEN_FILE"] == str(token_file)
    assert env["AGENT_MODEL_PATH"] == str(smollm2_path())
    assert env["AGENT_NO_ADAPTER"] == "1"
    assert (tmp_path / "home" / "Library" / "Logs" / "iljeong").is_dir()


def test_install_makes_the_log_and_data_dirs_private(tmp_path: Path) -> None:
    logs = tmp_path / "home" / "Library" / "Logs" / "iljeong"
    logs.mkdir(parents=True)
    logs.chmod(0o755)  # as an older install left it
    host = make_host(tmp_path, FakeLaunchctl())
    assert launchd_service.install(make_settings(tmp_path), host) == 0, host.err.getvalue()
    assert stat.S_IMODE(logs.stat().st_mode) == 0o700
    assert stat.S_IMODE((tmp_path / "data").stat().st_mode) == 0o700


def test_install_tightens_an_existing_token_file_it_rewrites(tmp_path: Path) -> None:
    token_file = tmp_path / "data" / "telegram_token"
    token_file.parent.mkdir(parents=True)
    token_file.write_text("old")
    token_file.chmod(0o644)
    assert launchd_service.install(make_settings(tmp_path), make_host(tmp_path, FakeLaunchctl())) == 0
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    assert token_file.read_text().strip() == TOKEN


def test_install_over_a_loaded_agent_boots_it_out_first(tmp_path: Path) -> None:
    fake = FakeLaunchctl(loaded=True)
    assert launchd_service.install(make_settings(tmp_path), make_host(tmp_path, fake)) == 0
    assert fake.calls == [
        [LAUNCHCTL, "print", TARGET],
        [LAUNCHCTL, "bootout", TARGET],
        [LAUNCHCTL, "enable", TARGET],
        [LAUNCHCTL, "bootstrap", f"gui/{UID}", str(plist_path(tmp_path))],
    ]
    assert fake.captured[0] is True  # the "is it loaded?" probe stays quiet


def test_install_retries_bootstrap_then_reports_failure(tmp_path: Path) -> None:
    fake = FakeLaunchctl(bootstrap_failures=10)
    host = make_host(tmp_path, fake)
    assert launchd_service.install(make_settings(tmp_path), host) == 1
    assert [c[1] for c in fake.calls].count("bootstrap") == service.BOOTSTRAP_ATTEMPTS
    assert "bootstrap" in host.err.getvalue()

    fake = FakeLaunchctl(bootstrap_failures=1)
    assert launchd_service.install(make_settings(tmp_path), make_host(tmp_path, fake)) == 0


def test_install_with_a_token_file_does_not_touch_it(tmp_path: Path) -> None:
    token_file = tmp_path / "data" / "telegram_token"
    token_file.parent.mkdir(parents=True)
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(0o400)
    host = make_host(tmp_path, FakeLaunchctl())
    assert launchd_service.install(make_settings(tmp_path, TELEGRAM_BOT_TOKEN=""), host) == 0
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o400
    assert "wrote the bot token" not in host.out.getvalue()


def test_install_refuses_a_missing_adapter(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-adapter.gguf"
    fake = FakeLaunchctl()
    host = make_host(tmp_path, fake)
    settings = make_settings(tmp_path, AGENT_NO_ADAPTER="", AGENT_LORA_PATH=str(missing))
    assert launchd_service.install(settings, host) == 2
    lines = host.err.getvalue().splitlines()
    assert len(lines) == 1 and str(missing) in lines[0] and lines[0].startswith("not installing:")
    assert fake.calls == []
    assert not plist_path(tmp_path).exists()
    assert not (tmp_path / "data" / "telegram_token").exists()


def test_install_refuses_a_world_readable_token_file(tmp_path: Path) -> None:
    token_file = tmp_path / "data" / "telegram_token"
    token_file.parent.mkdir(parents=True)
    token_file.write_text(TOKEN)
    token_file.chmod(0o644)
    fake = FakeLaunchctl()
    host = make_host(tmp_path, fake)
    assert launchd_service.install(make_settings(tmp_path, TELEGRAM_BOT_TOKEN=""), host) == 2
    assert f"chmod 600 {token_file}" in host.err.getvalue()
    assert fake.calls == [] and not plist_path(tmp_path).exists()


def test_install_refuses_without_allowlist(tmp_path: Path) -> None:
    fake = FakeLaunchctl()
    host = make_host(tmp_path, fake)
    assert launchd_service.install(make_settings(tmp_path, TELEGRAM_ALLOWED_USERS=""), host) == 2
    assert "@userinfobot" in host.err.getvalue()
    assert fake.calls == [] and not plist_path(tmp_path).exists()


# ------------------------------------------------------------------ without launchctl


@pytest.mark.parametrize("command", ["install", "uninstall", "status"])
def test_commands_that_need_launchctl_say_so(tmp_path: Path, command: str) -> None:
    fake = FakeLaunchctl()
    host = make_host(tmp_path, fake, launchctl=None, platform="linux")
    if command == "install":
        code = launchd_service.install(make_settings(tmp_path), host)
    else:
        code = getattr(service, command)(host)
    assert code == 2
    assert "launchctl not found" in host.err.getvalue()
    assert fake.calls == [] and not plist_path(tmp_path).exists()


def test_print_works_without_launchctl(tmp_path: Path) -> None:
    host = make_host(tmp_path, FakeLaunchctl(), launchctl=None, platform="linux")
    assert launchd_service.print_plist(make_settings(tmp_path), host) == 0
    plist = plistlib.loads(host.out.getvalue().encode())
    assert plist["Label"] == "com.iljeong.bot"
    assert TOKEN not in host.out.getvalue()


def test_current_host_uses_this_users_uid() -> None:
    host = Host.current()
    assert host.uid == os.getuid()
    assert host.target == f"gui/{os.getuid()}/com.iljeong.bot"


# ------------------------------------------------------------------ uninstall, status, logs


def test_uninstall_boots_out_and_removes_the_plist(tmp_path: Path) -> None:
    plist = plist_path(tmp_path)
    plist.parent.mkdir(parents=True)
    plist.write_bytes(plistlib.dumps({"Label": "com.iljeong.bot"}))
    fake = FakeLaunchctl(loaded=True)
    assert service.uninstall(make_host(tmp_path, fake)) == 0
    assert fake.calls == [[LAUNCHCTL, "print", TARGET], [LAUNCHCTL, "bootout", TARGET]]
    assert not plist.exists()


def test_uninstall_when_not_installed_runs_no_bootout(tmp_path: Path) -> None:
    fake = FakeLaunchctl()
    host = make_host(tmp_path, fake)
    assert service.uninstall(host) == 0
    assert fake.calls == [[LAUNCHCTL, "print", TARGET]]
    assert "not installed" in host.out.getvalue()


def test_status_prints_through_launchctl(tmp_path: Path) -> None:
    fake = FakeLaunchctl(loaded=True)
    assert service.status(make_host(tmp_path, fake)) == 0
    assert fake.calls == [[LAUNCHCTL, "print", TARGET]] and fake.captured == [False]

    host = make_host(tmp_path, FakeLaunchctl())
    assert service.status(host) == 1
    assert "not loaded" in host.err.getvalue()


def test_logs_tails_the_bot_log_and_launchd_stderr(tmp_path: Path) -> None:
    settings = make_settings(tmp_path)
    fake = FakeLaunchctl()
    host = make_host(tmp_path, fake)
    assert service.logs(host, settings.data_dir) == 1
    assert "no logs yet" in host.err.getvalue() and fake.calls == []

    log_dir = tmp_path / "home" / "Library" / "Logs" / "iljeong"
    log_dir.mkdir(parents=True)
    (log_dir / "bot.log").write_text("started\n")
    (log_dir / "launchd.err.log").write_text("")
    assert service.logs(host, settings.data_dir, lines=20, follow=True) == 0
    assert fake.calls == [["tail", "-n", "20", "-F", str(log_dir / "bot.log"), str(log_dir / "launchd.err.log")]]


def test_logs_on_linux_reads_the_data_dir_log(tmp_path: Path) -> None:
    settings = make_settings(tmp_path)
    fake = FakeLaunchctl()
    host = make_host(tmp_path, fake, launchctl=None, platform="linux")
    (tmp_path / "data" / "logs").mkdir(parents=True)
    (tmp_path / "data" / "logs" / "bot.log").write_text("x\n")
    assert service.logs(host, settings.data_dir) == 0
    assert fake.calls == [["tail", "-n", "50", str(tmp_path / "data" / "logs" / "bot.log")]]
