"""The LaunchAgent property list for the bot, built as a dict and serialised with plistlib.

launchd starts programs with a bare PATH, no shell profile and no virtual environment, so
everything the bot needs is spelled out here as absolute paths and environment variables.
The token itself never goes in: files in ~/Library/LaunchAgents are readable by other local
users, so the plist names the owner-only token file instead. The same holds for a remote
model's API key: the plist carries the backend, server and model name, and the key file's path.
A URL with a user name or password in it is refused rather than written (``agent.url_policy``):
the settings refuse one as they are read, and ``service_environment`` checks what it writes again.
"""

from __future__ import annotations

import os
import plistlib
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from agent.config import ENV_NAMES, Settings
from agent.url_policy import has_credentials
from bot.config import ENV_NAMES as BOT_ENV_NAMES
from bot.config import bot_settings
from launchd.logs import macos_log_dir

LABEL = "com.iljeong.bot"
THROTTLE_INTERVAL_S = 30
# Owner-only files: launchd creates StandardOutPath/StandardErrorPath (which may carry a
# traceback's worth of calendar data) with the job's umask, and the bot's own files follow it.
UMASK = 0o077  # the plist says 63: plistlib writes integers in decimal
SYSTEM_PATH = "/usr/bin:/bin:/usr/sbin:/sbin"


@dataclass(frozen=True)
class ServiceFiles:
    """Where the plist and launchd's captured output live for one home directory."""

    plist: Path
    log_dir: Path
    stdout: Path
    stderr: Path

    @classmethod
    def for_home(cls, home: Path) -> "ServiceFiles":
        log_dir = macos_log_dir(home)
        return cls(
            plist=home / "Library" / "LaunchAgents" / f"{LABEL}.plist",
            log_dir=log_dir,
            stdout=log_dir / "launchd.out.log",
            stderr=log_dir / "launchd.err.log",
        )


def venv_python() -> Path:
    """The running interpreter as an absolute path, symlinks kept.

    Resolving ``.venv/bin/python`` would lead to the base interpreter outside the virtual
    environment, which does not see the project's packages.
    """
    return Path(os.path.abspath(sys.executable))


# The calendar server's settings (tools.calendar.sync.settings), passed on as the install saw them.
# None is a secret: the password is named by AGENT_CALDAV_PASSWORD_FILE, never given.
SYNC_ENV_NAMES = ("AGENT_CALDAV_URL", "AGENT_CALDAV_USERNAME", "AGENT_CALDAV_PASSWORD_FILE",
                  "AGENT_CALDAV_CALENDARS", "AGENT_CALDAV_INTERVAL_S")


def service_environment(
    settings: Settings,
    *,
    model_path: Path | None,
    lora_path: Path | None,
    token_file: Path,
    python: Path,
    environ: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The variables the bot reads at start-up; never the token.

    ``model_path`` None leaves the choice to the bot (the pulled default).
    """
    env: dict[str, str] = {
        ENV_NAMES["data_dir"]: str(settings.data_dir.absolute()),
        ENV_NAMES["tz"]: settings.tz,
        BOT_ENV_NAMES["telegram_token_file"]: str(token_file),
        "PATH": f"{python.parent}:{SYSTEM_PATH}",
        "PYTHONUNBUFFERED": "1",
    }
    if model_path is not None:
        env[ENV_NAMES["model_path"]] = str(model_path)
    if lora_path is not None:
        env[ENV_NAMES["lora_path"]] = str(lora_path)
    if settings.no_adapter:
        env[ENV_NAMES["no_adapter"]] = "1"
    bot = bot_settings(settings)
    if bot.telegram_allowed_users:
        env[BOT_ENV_NAMES["telegram_allowed_users"]] = ",".join(map(str, bot.telegram_allowed_users))
    if bot.telegram_allowed_chats:
        env[BOT_ENV_NAMES["telegram_allowed_chats"]] = ",".join(map(str, bot.telegram_allowed_chats))
    if bot.telegram_api_base_url:
        env[BOT_ENV_NAMES["telegram_api_base_url"]] = bot.telegram_api_base_url
    if settings.backend == "openai":
        from agent.apikey import key_file

        env[ENV_NAMES["backend"]] = "openai"
        env[ENV_NAMES["wire_format"]] = settings.wire_format
        env[ENV_NAMES["api_key_file"]] = str(key_file(settings))
        for name in ("base_url", "remote_model"):
            if getattr(settings, name):
                env[ENV_NAMES[name]] = str(getattr(settings, name))
    if settings.allow_plain_http_hosts:  # a LAN server the bot must keep reaching (no secret: host names)
        env[ENV_NAMES["allow_plain_http_hosts"]] = ",".join(settings.allow_plain_http_hosts)
    source = os.environ if environ is None else environ
    for name in SYNC_ENV_NAMES:  # where the calendar server is; its password stays in a 0600 file or the Keychain
        if source.get(name):
            value = source[name]
            env[name] = str(Path(value).expanduser().absolute()) if name.endswith("_FILE") else value
    config_file = source.get("AGENT_CONFIG")
    if config_file:
        env["AGENT_CONFIG"] = str(Path(config_file).expanduser().absolute())
    for name, value in env.items():  # the plist is readable by other local users: no secret in a URL
        if "://" in value and has_credentials(value):
            raise ValueError(f"not writing {name} into the plist: it has a user name or password in it; "
                             "put the password in its mode-600 file instead")
    return env


def build_plist(
    settings: Settings,
    *,
    model_path: Path | None,
    lora_path: Path | None,
    token_file: Path,
    home: Path,
    python: Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The LaunchAgent as a dict: restart on crash only, at most every THROTTLE_INTERVAL_S."""
    python = python or venv_python()
    files = ServiceFiles.for_home(home)
    return {
        "Label": LABEL,
        "ProgramArguments": [str(python), "-m", "bot", "run"],
        "WorkingDirectory": str(settings.data_dir.absolute()),
        "RunAtLoad": True,
        "KeepAlive": {"SuccessfulExit": False},
        "ThrottleInterval": THROTTLE_INTERVAL_S,
        "ProcessType": "Interactive",
        "Umask": UMASK,
        "StandardOutPath": str(files.stdout),
        "StandardErrorPath": str(files.stderr),
        "EnvironmentVariables": service_environment(
            settings,
            model_path=model_path,
            lora_path=lora_path,
            token_file=token_file,
            python=python,
            environ=environ,
        ),
    }


def plist_bytes(plist: Mapping[str, Any]) -> bytes:
    """XML plist bytes, keys sorted so that the output is stable."""
    return plistlib.dumps(dict(plist), fmt=plistlib.FMT_XML, sort_keys=True)
