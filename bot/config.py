"""The bot's own configuration: token, allowlist and Bot API address, checked before start.

A bot that starts with a bad token or without an allowlist either dies at once (and launchd
restarts it forever) or answers strangers. Both are refused here, as a value that says what
to do, so that `python -m bot run` and `python -m bot launchd install` give the same advice.
"""

from __future__ import annotations

import re
import stat
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Iterable, Mapping

import httpx
from pydantic import BeforeValidator, Field
from pydantic.dataclasses import dataclass as settings_dataclass

from agent.apikey import SecretFileProblem, read_secret_file
from agent.config import PathText, Settings, config_file_path, load_section, load_settings, split_list
from agent.url_policy import credentials_problem, plain_http_problem, without_credentials
from bot.inbox import KEEP_HANDLED_S, STALE_AFTER_S

TOKEN_FILE_NAME = "telegram_token"

# "<bot id>:<secret>"; real secrets are 35 characters of URL-safe base64.
_TOKEN_RE = re.compile(r"^[0-9]{1,20}:[A-Za-z0-9_-]{20,}$")
_TOKEN_IN_TEXT = re.compile(r"[0-9]{3,20}:[A-Za-z0-9_-]{20,}")

_FIND_YOUR_ID = (
    "to learn your numeric id, message @userinfobot on Telegram "
    "(the bot also logs the id of anyone it refuses)"
)


# bot setting name -> environment variable
ENV_NAMES: dict[str, str] = {
    "telegram_token": "TELEGRAM_BOT_TOKEN",
    "telegram_token_file": "TELEGRAM_BOT_TOKEN_FILE",
    "telegram_allowed_users": "TELEGRAM_ALLOWED_USERS",
    "telegram_allowed_chats": "TELEGRAM_ALLOWED_CHATS",
    "telegram_api_base_url": "TELEGRAM_API_BASE_URL",
}


def _ids(value: Any) -> Any:
    """``"111, 222"`` (the environment) or a TOML array, as integers; else a one-line error."""
    try:
        return tuple(int(p) for p in split_list(value))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"expected numeric Telegram ids, got {value!r}") from exc


TelegramIds = Annotated[tuple[int, ...], BeforeValidator(_ids)]


@settings_dataclass(frozen=True)
class BotSettings:
    """The bot's keys in flags, environment and config file (agent.config's precedence and file)."""

    telegram_token: str | None = field(default=None, repr=False)  # a secret: never in a printed value
    telegram_token_file: PathText | None = None
    telegram_allowed_users: TelegramIds = ()
    telegram_allowed_chats: TelegramIds = ()
    telegram_api_base_url: str | None = None
    approval_timeout_s: float = 300.0  # an unanswered Approve/Deny counts as a no after this
    # After a crash, a stored message older than this is not run: it gets a notice asking for it again.
    stale_message_minutes: Annotated[float, Field(gt=0)] = STALE_AFTER_S / 60
    # Handled updates (what people wrote) and sent replies are deleted after this (bot.inbox.prune).
    inbox_retention_days: Annotated[float, Field(gt=0)] = KEEP_HANDLED_S / (24 * 3600)


def bot_settings(settings: Settings) -> BotSettings:
    """The bot's settings, from the sources ``settings`` was loaded from (ValueError if bad)."""
    return load_section(BotSettings, ENV_NAMES, settings.sources)


@dataclass(frozen=True)
class BotConfig:
    """Everything the bot needs to connect and to decide whom to answer."""

    token: str
    allowed_users: frozenset[int]
    allowed_chats: frozenset[int]
    api_base_url: str | None
    token_file: Path | None  # where the token was read from; None: from the environment
    stale_after_s: float = STALE_AFTER_S  # stale_message_minutes
    keep_handled_s: float = KEEP_HANDLED_S  # inbox_retention_days

    def __repr__(self) -> str:  # keep the secret out of logs and tracebacks
        return (
            f"BotConfig(token='<hidden>', allowed_users={set(self.allowed_users)}, "
            f"allowed_chats={set(self.allowed_chats)}, api_base_url={self.api_base_url!r}, "
            f"token_file={self.token_file!r}, stale_after_s={self.stale_after_s!r}, "
            f"keep_handled_s={self.keep_handled_s!r})"
        )


@dataclass(frozen=True)
class ConfigProblem:
    """Why the bot cannot start, as one line that says what to do."""

    message: str


def mask(text: str, token: str | None = None) -> str:
    """``text`` with the bot token (and anything shaped like one) replaced by ``<token>``.

    The secret half alone is masked too: PTB and httpx may print the URL-quoted token or
    just part of an error around it.
    """
    if token:
        text = text.replace(token, "<token>")
        secret = token.partition(":")[2]
        if len(secret) >= 8:
            text = text.replace(secret, "<token>")
    return _TOKEN_IN_TEXT.sub("<token>", text)


def default_token_file(settings: Settings) -> Path:
    """The token file's path: the configured one, else ``<data_dir>/telegram_token``."""
    configured = bot_settings(settings).telegram_token_file
    if configured:
        return Path(configured).expanduser().absolute()
    return (settings.data_dir / TOKEN_FILE_NAME).expanduser().absolute()


def settings_or_problem(
    overrides: Mapping[str, Any] | None = None, environ: Mapping[str, str] | None = None
) -> Settings | ConfigProblem:
    """``load_settings`` with a malformed value (e.g. a non-numeric id) as a ConfigProblem.

    The bot's and the domain's own settings are checked here too, so that a bad value stops the
    bot before a model loads."""
    from agent.domain import check_domain_settings

    try:
        settings = load_settings(overrides, environ)
        bot_settings(settings)
        check_domain_settings(settings)
    except (ValueError, OSError) as exc:  # tomllib.TOMLDecodeError is a ValueError
        return ConfigProblem(f"bad configuration: {exc}")
    return _config_file_problem(config_file_path(overrides, environ)) or settings


def _config_file_problem(path: Path) -> ConfigProblem | None:
    """A token in the config file makes that file a password file: owner-only, as the token file."""
    try:
        info = path.stat()
        holds_token = "telegram_token" in tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):  # absent, or already reported by load_settings
        return None
    if holds_token and info.st_mode & 0o077:
        return ConfigProblem(
            f"{path} holds telegram_token but is readable by others (mode {stat.S_IMODE(info.st_mode):o}): "
            f"run chmod 600 {path}, or move the token to a token file"
        )
    return None


def read_token_file(path: Path) -> str | ConfigProblem:
    """Read a token file that only its owner may read (it is a password for the bot)."""
    try:
        token = read_secret_file(path, "token file")
    except SecretFileProblem as exc:
        return ConfigProblem(str(exc))
    if token is None:
        return ConfigProblem(
            f"no Telegram bot token: set TELEGRAM_BOT_TOKEN or write the token from @BotFather "
            f"to {path} (then chmod 600 {path})"
        )
    return token


def check_token_shape(token: str, source: str) -> ConfigProblem | None:
    """Catch pasting mistakes (quotes, spaces, a missing part) before Telegram does."""
    if _TOKEN_RE.match(token):
        return None
    return ConfigProblem(
        f"the Telegram bot token in {source} does not look like '<digits>:<secret>' "
        "as @BotFather gives it: paste it again without quotes or spaces"
    )


def _check_ids(users: frozenset[int], chats: frozenset[int]) -> ConfigProblem | None:
    """User ids are positive; chat ids are non-zero (groups are negative)."""
    bad_users = sorted(u for u in users if u <= 0)
    if bad_users:
        return ConfigProblem(
            f"TELEGRAM_ALLOWED_USERS has ids that no Telegram user has: {bad_users}; {_FIND_YOUR_ID}"
        )
    if 0 in chats:
        return ConfigProblem(f"TELEGRAM_ALLOWED_CHATS contains 0, which is no chat; {_FIND_YOUR_ID}")
    return None


def _check_base_url(url: str | None, allowed_hosts: Iterable[str] = ()) -> ConfigProblem | None:
    """The Bot API address carries the bot token in every request's path, so it obeys the rules
    for any URL that carries a secret (``agent.url_policy``): no user name or password in it, and
    plain http only to this machine or a host named in AGENT_ALLOW_PLAIN_HTTP_HOSTS. Judged on the
    URL as written and as httpx (PTB's client) will send it, before any connection is made."""
    if url is None:
        return None
    if not url.lower().startswith(("http://", "https://")):
        shown = without_credentials(url)
        return ConfigProblem(f"TELEGRAM_API_BASE_URL must start with http:// or https://, got {shown!r}")
    problem = credentials_problem(url, "TELEGRAM_API_BASE_URL", "give the Bot API server's address alone")
    if problem:
        return ConfigProblem(problem)
    try:
        sent_to = str(httpx.URL(url))
    except httpx.InvalidURL:
        return ConfigProblem(f"TELEGRAM_API_BASE_URL is not a valid URL: {url!r}")
    problem = plain_http_problem(sent_to, allowed_hosts, "the bot token") or plain_http_problem(
        url, allowed_hosts, "the bot token")
    return ConfigProblem(f"TELEGRAM_API_BASE_URL: {problem}") if problem else None


def load_bot_config(settings: Settings) -> BotConfig | ConfigProblem:
    """Build the bot's configuration from Settings, or say what is missing or unsafe."""
    try:
        bot = bot_settings(settings)
    except ValueError as exc:
        return ConfigProblem(f"bad configuration: {exc}")
    users = frozenset(bot.telegram_allowed_users)
    chats = frozenset(bot.telegram_allowed_chats)
    if not users and not chats:
        return ConfigProblem(
            "nobody is allowed to use the bot: set TELEGRAM_ALLOWED_USERS to your numeric "
            f"Telegram id (comma-separated for several); {_FIND_YOUR_ID}"
        )
    if not users and not any(chat > 0 for chat in chats):
        # Only groups: in a group only listed users act, so with no users nobody could.
        return ConfigProblem(
            "nobody could use the bot: TELEGRAM_ALLOWED_CHATS lists only groups, and in a group only "
            "the users in TELEGRAM_ALLOWED_USERS can act; set TELEGRAM_ALLOWED_USERS to your numeric "
            f"Telegram id (and the ids of the group members who may use it); {_FIND_YOUR_ID}"
        )
    problem = _check_ids(users, chats) or _check_base_url(bot.telegram_api_base_url, settings.allow_plain_http_hosts)
    if problem:
        return problem

    token_file: Path | None
    if bot.telegram_token:
        token, token_file, source = bot.telegram_token.strip(), None, "TELEGRAM_BOT_TOKEN"
    else:
        token_file = default_token_file(settings)
        read = read_token_file(token_file)
        if isinstance(read, ConfigProblem):
            return read
        token, source = read, str(token_file)
    problem = check_token_shape(token, source)
    if problem:
        return problem
    return BotConfig(
        token=token,
        allowed_users=users,
        allowed_chats=chats,
        api_base_url=bot.telegram_api_base_url,
        token_file=token_file,
        stale_after_s=bot.stale_message_minutes * 60,
        keep_handled_s=bot.inbox_retention_days * 86400,
    )
