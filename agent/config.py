"""Configuration: one frozen object built from flags, then environment, then a config file.

Precedence (highest first): command-line flags, environment variables, the TOML file at
``$AGENT_DATA_DIR/config.toml`` (or ``AGENT_CONFIG``), then defaults. Nothing else in the
code base reads the environment for these settings.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Mapping

import platformdirs

DEFAULT_TZ = "Asia/Seoul"

# setting name -> environment variable
ENV_NAMES: dict[str, str] = {
    "model_path": "AGENT_MODEL_PATH",
    "lora_path": "AGENT_LORA_PATH",
    "no_adapter": "AGENT_NO_ADAPTER",
    "data_dir": "AGENT_DATA_DIR",
    "tz": "AGENT_TZ",
    "telegram_token": "TELEGRAM_BOT_TOKEN",
    "telegram_token_file": "TELEGRAM_BOT_TOKEN_FILE",
    "telegram_allowed_users": "TELEGRAM_ALLOWED_USERS",
    "telegram_allowed_chats": "TELEGRAM_ALLOWED_CHATS",
    "telegram_api_base_url": "TELEGRAM_API_BASE_URL",
    "remind_minutes": "AGENT_REMIND_MINUTES",
    "agenda_time": "AGENT_AGENDA_TIME",
    "reminder_grace_minutes": "AGENT_REMINDER_GRACE_MINUTES",
    "state_cache_mb": "AGENT_STATE_CACHE_MB",
    # the model backend (agent.app.build_backend); the API key itself is read by agent.apikey
    "backend": "AGENT_BACKEND",
    "base_url": "AGENT_BASE_URL",
    "remote_model": "AGENT_REMOTE_MODEL",
    "api_key_file": "AGENT_API_KEY_FILE",
    "wire_format": "AGENT_WIRE_FORMAT",
    "profile": "AGENT_PROFILE",
    "tool_block": "AGENT_TOOL_BLOCK",
}

BACKENDS = ("llama", "openai")


def default_data_dir() -> Path:
    return Path(platformdirs.user_data_dir("iljeong", appauthor=False))


@dataclass(frozen=True)
class Settings:
    model_path: str | None = None
    lora_path: str | None = None
    lora_scale: float = 1.0
    no_adapter: bool = False
    profile: str = "reference"  # which pulled model pair to use (models.profiles; AGENT_PROFILE)
    adapter_repo: str | None = None  # hub repo of a LoRA that replaces the profile's (python -m models pull)
    adapter_file: str | None = None
    data_dir: Path = field(default_factory=default_data_dir)
    tz: str = DEFAULT_TZ
    n_ctx: int = 8192
    n_threads: int | None = None
    max_steps: int = 8
    max_tool_calls: int = 16
    enable_thinking: bool = False
    telegram_token: str | None = field(default=None, repr=False)  # a secret: never in a printed Settings
    telegram_token_file: str | None = None
    telegram_allowed_users: tuple[int, ...] = ()
    telegram_allowed_chats: tuple[int, ...] = ()
    telegram_api_base_url: str | None = None
    approval_timeout_s: float = 300.0
    domain: str = "tools.calendar.domain"  # module with load_domain(settings)
    history_turns: int = 12  # earlier user turns kept in the prompt
    remind_minutes: tuple[int, ...] = (10,)  # reminders a new event gets when none are asked for
    agenda_time: str = "08:00"  # daily agenda, local time in ``tz`` (each chat can change it)
    reminder_grace_minutes: float = 30.0  # a reminder missed (process down) by more is skipped
    # RAM for the KV caches of chats that are not live (switching back then costs no re-evaluation);
    # Qwen3-4B needs ~144 KB per token, so 1024 MB keeps about two 3k-token chats. 0 turns it off.
    state_cache_mb: float = 1024.0
    # Which model runs the agent: "llama" (a GGUF in-process) or "openai" (any OpenAI-compatible
    # HTTP API: DeepSeek, OpenAI, vLLM, llama-server). For "openai": the server, the model name it
    # serves, the owner-only file holding the key (default <data_dir>/api_key; AGENT_API_KEY wins),
    # and the wire format ("openai", the API's structured tool_calls, or "text" for servers whose
    # chat template ignores tools; see agent.backends.openai).
    backend: str = "llama"
    base_url: str | None = None
    remote_model: str | None = None
    api_key_file: str | None = None
    wire_format: str = "openai"
    tool_choice: str | None = None  # sent as is when set ("auto", "required"); else the server's default
    remote_timeout_s: float = 120.0  # per request
    remote_retries: int = 3  # retries after a 429, a 5xx, a timeout or a dropped connection
    # How the prompt shows the tools: "full" JSON schemas, or "compact" one-line signatures for
    # small models (~400 tokens instead of ~2,600). Export and training write the same block,
    # so an adapter trained on one must be served with it (train sft refuses a mismatch).
    tool_block: str = "full"

    @property
    def store_path(self) -> Path:
        return self.data_dir / "calendar.sqlite3"

    @property
    def sessions_path(self) -> Path:
        return self.data_dir / "sessions.sqlite3"


def _coerce(name: str, value: Any) -> Any:
    """Turn a string (environment) or TOML value into the field's type."""
    if name == "data_dir":
        return Path(value).expanduser()
    if name in ("telegram_allowed_users", "telegram_allowed_chats"):
        if isinstance(value, str):
            parts = [p for p in value.replace(";", ",").replace(" ", ",").split(",") if p]
        else:
            parts = list(value)
        try:
            return tuple(int(p) for p in parts)
        except ValueError as exc:
            raise ValueError(f"{name}: expected numeric Telegram ids, got {value!r}") from exc
    if name == "remind_minutes":
        parts = value.replace(";", ",").replace(" ", ",").split(",") if isinstance(value, str) else list(value)
        try:
            return tuple(sorted({int(p) for p in parts if str(p).strip()}))
        except ValueError as exc:
            raise ValueError(f"{name}: expected minutes as integers, e.g. 10 or 10,60; got {value!r}") from exc
    if name == "agenda_time":
        from datetime import time

        try:
            return time.fromisoformat(str(value).strip()).strftime("%H:%M")
        except ValueError as exc:
            raise ValueError(f"{name}: expected a 24-hour HH:MM time, e.g. 08:00; got {value!r}") from exc
    if name == "tz":
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        try:
            ZoneInfo(str(value))
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ValueError(f"tz: unknown time zone {value!r}: use an IANA name such as Asia/Seoul or Europe/Berlin") from exc
        return str(value)
    if name in ("backend", "wire_format"):
        allowed = BACKENDS if name == "backend" else ("openai", "text")
        text = str(value).strip().lower()
        if text not in allowed:
            raise ValueError(f"{name}: expected {' or '.join(allowed)}, got {value!r}")
        return text
    if name == "tool_block":
        from agent.formats.tool_view import TOOL_BLOCKS

        if str(value).strip() not in TOOL_BLOCKS:
            raise ValueError(f"{name}: expected one of {', '.join(TOOL_BLOCKS)}, got {value!r}")
        return str(value).strip()
    if name in ("lora_scale", "approval_timeout_s", "reminder_grace_minutes", "state_cache_mb", "remote_timeout_s"):
        return float(value)
    if name in ("n_ctx", "n_threads", "max_steps", "max_tool_calls", "history_turns", "remote_retries"):
        return int(value)
    if name in ("no_adapter", "enable_thinking"):
        if isinstance(value, str):
            return value.strip().lower() in ("1", "true", "yes", "on")
        return bool(value)
    return value


def load_settings(
    overrides: Mapping[str, Any] | None = None, environ: Mapping[str, str] | None = None
) -> Settings:
    """Build Settings; ``overrides`` are flags (None values mean "not given")."""
    env = os.environ if environ is None else environ
    known = {f.name for f in fields(Settings)}
    values: dict[str, Any] = {}

    path = config_file_path(overrides, env)
    if path.is_file():
        with path.open("rb") as fh:
            for key, value in tomllib.load(fh).items():
                if key in known:
                    values[key] = _coerce(key, value)

    for name, var in ENV_NAMES.items():
        if env.get(var):
            values[name] = _coerce(name, env[var])

    for key, value in (overrides or {}).items():
        if value is not None and key in known:
            values[key] = _coerce(key, value)

    return replace(Settings(), **values)


def with_model_flag(settings: Settings, model: str | None) -> Settings:
    """``--model`` names a GGUF for the llama backend and the served model for the openai one.

    Frontends pass their ``--model`` through ``model_path`` (it overrides AGENT_MODEL_PATH);
    once the backend is known, an openai backend takes it as ``remote_model`` instead.
    """
    if settings.backend != "openai" or not model:
        return settings
    return replace(settings, remote_model=model, model_path=None)


def config_file_path(overrides: Mapping[str, Any] | None = None, environ: Mapping[str, str] | None = None) -> Path:
    """The config file ``load_settings`` reads (same rule: AGENT_CONFIG, else
    ``<data dir>/config.toml``); the bot checks its permissions when it holds a token."""
    env = os.environ if environ is None else environ
    data_dir_hint = (overrides or {}).get("data_dir") or env.get("AGENT_DATA_DIR")
    if env.get("AGENT_CONFIG"):
        return Path(env["AGENT_CONFIG"])
    return Path(data_dir_hint).expanduser() / "config.toml" if data_dir_hint else default_data_dir() / "config.toml"
