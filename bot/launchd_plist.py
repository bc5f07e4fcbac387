"""What the bot's LaunchAgent carries, read from the bot's and the runtime's settings: the
environment the bot starts with, and the plist built from it (``launchd.plist``).

Never a secret: files in ~/Library/LaunchAgents are readable by other local users, so the plist
names the owner-only token file instead of the token, and for a remote model the backend, server,
model name and the key file's path. A URL with a user name or password in it is refused rather
than written (``agent.url_policy``): the settings refuse one as they are read, and
``service_environment`` checks what it writes again.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping

from agent.config import ENV_NAMES, Settings
from agent.url_policy import has_credentials
from bot.config import ENV_NAMES as BOT_ENV_NAMES
from bot.config import bot_settings
from launchd.plist import SYSTEM_PATH, build_plist, venv_python

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


def service_plist(
    settings: Settings,
    *,
    model_path: Path | None,
    lora_path: Path | None,
    token_file: Path,
    home: Path,
    python: Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The bot's LaunchAgent as a dict (``launchd.plist.build_plist``), its environment from the settings."""
    python = python or venv_python()
    environment = service_environment(
        settings,
        model_path=model_path,
        lora_path=lora_path,
        token_file=token_file,
        python=python,
        environ=environ,
    )
    return build_plist(environment, working_directory=settings.data_dir.absolute(), home=home, python=python)
