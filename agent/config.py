"""Configuration: the runtime's settings, and the one way every owner reads its own.

Precedence (highest first): command-line flags, environment variables, the TOML file at
``$AGENT_DATA_DIR/config.toml`` (or ``AGENT_CONFIG``), then defaults. Nothing else in the
code base reads the environment for these settings.

Each owner declares its settings as a frozen pydantic dataclass (types and validators say what
a value may be) and the environment variables it reads, and loads them with ``load_section``
from one ``ConfigSources``: the runtime here, the bot in ``bot/config.py``, the calendar in
``tools/calendar/settings.py``. ``Settings.sources`` keeps the sources the runtime's settings
came from, so a domain or the bot reads its own keys from the same flags, environment and file.
A new setting is one field (and, if it has one, one environment variable) in its owner's class.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Iterable
from dataclasses import field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Mapping, TypeVar

import platformdirs
from pydantic import AfterValidator, BeforeValidator, Field, ValidationError
from pydantic.dataclasses import dataclass

from agent.history import DEFAULT_HISTORY_TURNS
from agent.receipt import DEFAULT_RECEIPT, RECEIPT_MODES
from models.demo import DEFAULT_DEMO, DEMOS

if TYPE_CHECKING:
    from agent.prompt import PromptSettings
    from models.resolve import ModelChoice

DEFAULT_TZ = "Asia/Seoul"

# runtime setting name -> environment variable (the bot and the calendar keep their own)
ENV_NAMES: dict[str, str] = {
    "model_path": "AGENT_MODEL_PATH",
    "lora_path": "AGENT_LORA_PATH",
    "no_adapter": "AGENT_NO_ADAPTER",
    "data_dir": "AGENT_DATA_DIR",
    "tz": "AGENT_TZ",
    "state_cache_mb": "AGENT_STATE_CACHE_MB",
    "state_disk_mb": "AGENT_STATE_DISK_MB",
    # the model backend (agent.app.build_backend); the API key itself is read by agent.apikey
    "backend": "AGENT_BACKEND",
    "base_url": "AGENT_BASE_URL",
    "remote_model": "AGENT_REMOTE_MODEL",
    "api_key_file": "AGENT_API_KEY_FILE",
    "allow_plain_http_hosts": "AGENT_ALLOW_PLAIN_HTTP_HOSTS",  # the backend's and the domain's (agent.url_policy)
    "wire_format": "AGENT_WIRE_FORMAT",
    "profile": "AGENT_PROFILE",
    "demo": "AGENT_DEMO",
    "tool_block": "AGENT_TOOL_BLOCK",
    "gpu_layers": "AGENT_GPU_LAYERS",
    "prompt_style": "AGENT_PROMPT_STYLE",
    "date_grounding": "AGENT_DATE_GROUNDING",
    "time_notes": "AGENT_TIME_NOTES",
    "date_notes": "AGENT_DATE_NOTES",
    "receipt": "AGENT_RECEIPT",
}

BACKENDS = ("llama", "openai")


def default_data_dir() -> Path:
    return Path(platformdirs.user_data_dir("iljeong", appauthor=False))


# --- value types shared by every owner's settings ---------------------------------------------

def _truthy(value: Any) -> bool:
    """``AGENT_NO_ADAPTER=1``/``yes``/``on``/``true`` is on, any other string off; TOML booleans as they are."""
    return value.strip().lower() in ("1", "true", "yes", "on") if isinstance(value, str) else bool(value)


def split_list(value: Any) -> Any:
    """``"1, 2;3 4"`` (an environment variable) as a list; TOML arrays and other values as given."""
    return [p for p in value.replace(";", ",").replace(" ", ",").split(",") if p] if isinstance(value, str) else value


def one_of(*allowed: str) -> AfterValidator:
    """A lower-cased choice among ``allowed``; else ``expected a or b, got 'x'``."""

    def check(value: str) -> str:
        text = value.strip().lower()
        if text not in allowed:
            raise ValueError(f"expected {' or '.join(allowed)}, got {value!r}")
        return text

    return AfterValidator(check)


def _zone(value: str) -> str:
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ValueError(f"unknown time zone {value!r}: use an IANA name such as Asia/Seoul or Europe/Berlin") from exc
    return value


def _tool_block(value: str) -> str:
    from agent.formats.tool_view import TOOL_BLOCKS

    if value.strip() not in TOOL_BLOCKS:
        raise ValueError(f"expected one of {', '.join(TOOL_BLOCKS)}, got {value!r}")
    return value.strip()


def _gpu_layers(value: int) -> int:
    if value < -1:
        raise ValueError(f"expected -1 (all layers), 0 (CPU only) or a number of layers, got {value}")
    return value


def _base_url(value: str) -> str:
    """A base URL with a user name or password in it is refused here, as it is read, so that no
    line (``doctor``, the bot's log) and no plist ever shows it (``agent.url_policy``)."""
    from agent.url_policy import credentials_problem

    problem = credentials_problem(value, "base URL", "put the key in the key file (AGENT_API_KEY_FILE, mode 600)")
    if problem:
        raise ValueError(problem)
    return value


def _hosts(value: Any) -> tuple[str, ...]:
    from agent.url_policy import allowed_hosts

    return allowed_hosts(value)


Flag = Annotated[bool, BeforeValidator(_truthy)]
# a file name kept as the user wrote it (``~`` included); a Path from a caller is accepted too
PathText = Annotated[str, BeforeValidator(lambda v: os.fspath(v) if isinstance(v, os.PathLike) else v)]
UserPath = Annotated[Path, AfterValidator(lambda p: p.expanduser())]
TimeZone = Annotated[str, AfterValidator(_zone)]


# --- where values come from -------------------------------------------------------------------

class ConfigSources:
    """The flags, the environment and the config file, read once; every owner's loader reads its
    keys from here (``values``), so all of them follow the same precedence and the same file."""

    def __init__(self, flags: Mapping[str, Any] | None = None, environ: Mapping[str, str] | None = None,
                 file: Mapping[str, Any] | None = None, path: Path | None = None) -> None:
        self.flags = {k: v for k, v in (flags or {}).items() if v is not None}  # None: flag not given
        self.environ: Mapping[str, str] = {} if environ is None else environ
        self.file: Mapping[str, Any] = file or {}
        self.path = path

    @classmethod
    def read(cls, overrides: Mapping[str, Any] | None = None, environ: Mapping[str, str] | None = None) -> ConfigSources:
        """Read the config file named by ``config_file_path``; a broken TOML file is a ValueError."""
        env = os.environ if environ is None else environ
        path = config_file_path(overrides, env)
        table: dict[str, Any] = {}
        if path.is_file():
            with path.open("rb") as fh:
                table = tomllib.load(fh)
        return cls(overrides, env, table, path)

    def values(self, names: Iterable[str], env_names: Mapping[str, str]) -> dict[str, Any]:
        """The raw values for these setting names: config file, overridden by environment, then flags."""
        wanted = set(names)
        values = {k: v for k, v in self.file.items() if k in wanted}
        values.update({n: self.environ[var] for n, var in env_names.items() if n in wanted and self.environ.get(var)})
        values.update({k: v for k, v in self.flags.items() if k in wanted})
        return values

    def __repr__(self) -> str:  # the environment holds secrets (tokens, keys): never print it
        return f"ConfigSources(path={self.path!r})"


T = TypeVar("T")


def one_line(exc: ValidationError) -> str:
    """pydantic's errors as ``field: what is wrong`` (a validator's own words where it has them)."""
    parts = []
    for err in exc.errors(include_url=False):
        where = ".".join(str(p) for p in err.get("loc", ())) or "settings"
        cause = (err.get("ctx") or {}).get("error")
        parts.append(f"{where}: {cause if isinstance(cause, Exception) else err.get('msg', 'invalid')}")
    return "; ".join(parts)


def load_section(cls: type[T], env_names: Mapping[str, str], sources: ConfigSources,
                 extra: Mapping[str, Any] | None = None) -> T:
    """One owner's settings from ``sources`` (plus ``extra`` fields as given); a bad value is a
    ValueError of one line."""
    extra = extra or {}
    names = [f.name for f in fields(cls) if f.name not in extra]  # type: ignore[arg-type]
    try:
        return cls(**sources.values(names, env_names), **extra)
    except ValidationError as exc:
        raise ValueError(one_line(exc)) from None


@dataclass(frozen=True)
class Settings:
    """The runtime's settings: model, backend, budgets, prompt, where the data lives."""

    model_path: PathText | None = None
    lora_path: PathText | None = None
    lora_scale: float = 1.0
    no_adapter: Flag = False
    profile: str = "reference"  # which pulled model pair to use (models.profiles; AGENT_PROFILE)
    adapter_repo: str | None = None  # hub repo of a LoRA that replaces the profile's (python -m models pull)
    adapter_file: str | None = None
    demo: Annotated[str, one_of(*DEMOS)] = DEFAULT_DEMO  # which demo pair --demo starts (models.demo; AGENT_DEMO)
    data_dir: UserPath = field(default_factory=default_data_dir)
    tz: TimeZone = DEFAULT_TZ
    n_ctx: int = 8192
    n_threads: int | None = None
    # Layers llama.cpp offloads to the GPU: -1 all, 0 none; None: all on Apple silicon with a Metal
    # build, none elsewhere (agent.backends.llama.engine.default_gpu_layers).
    gpu_layers: Annotated[int, AfterValidator(_gpu_layers)] | None = None
    max_steps: int = 8
    max_tool_calls: int = 16
    enable_thinking: Flag = False
    domain: str = "tools.calendar.domain"  # module with load_domain(settings)
    history_turns: int = DEFAULT_HISTORY_TURNS  # earlier user turns kept in the prompt (agent.history)
    history_block: int | None = None  # turns dropped at once past history_turns; None: two thirds of it
    # RAM for the KV caches of chats that are not live (switching back then costs no re-evaluation);
    # Qwen3-4B needs ~144 KB per token, so 1024 MB keeps about two 3k-token chats. 0 turns it off.
    state_cache_mb: float = 1024.0
    # Disk for KV states that outlive the process (<data_dir>/states): the static prefix (system
    # prompt + tool block), so a restart does not evaluate it again, and each chat's state at a
    # clean shutdown. Least recently used first out; 0 turns it off. The REPL and the bot use it.
    state_disk_mb: Annotated[float, Field(ge=0)] = 2048.0
    # Which model runs the agent: "llama" (a GGUF in-process) or "openai" (any OpenAI-compatible
    # HTTP API: DeepSeek, OpenAI, vLLM, llama-server). For "openai": the server, the model name it
    # serves, the owner-only file holding the key (default <data_dir>/api_key; AGENT_API_KEY wins),
    # and the wire format ("openai", the API's structured tool_calls, or "text" for servers whose
    # chat template ignores tools; see agent.backends.openai).
    backend: Annotated[str, one_of(*BACKENDS)] = "llama"
    base_url: Annotated[str, AfterValidator(_base_url)] | None = None
    remote_model: str | None = None
    api_key_file: PathText | None = None
    # Hosts besides this machine that may get a key or password over plain http (a llama-server
    # or the domain's server on a LAN you trust); every other plain-http URL that would carry one is
    # refused before a byte is sent (agent.url_policy).
    allow_plain_http_hosts: Annotated[tuple[str, ...], BeforeValidator(_hosts)] = ()
    wire_format: Annotated[str, one_of("openai", "text")] = "openai"
    tool_choice: str | None = None  # sent as is when set ("auto", "required"); else the server's default
    remote_timeout_s: float = 120.0  # per request
    remote_retries: int = 3  # retries after a 429, a 5xx, a timeout or a dropped connection
    # How the prompt shows the tools: "full" JSON schemas, or "compact" one-line signatures for
    # small models (~400 tokens instead of ~2,600). Export and training write the same block,
    # so an adapter trained on one must be served with it (train sft refuses a mismatch).
    tool_block: Annotated[str, AfterValidator(_tool_block)] = "full"
    # The four settings from here to date_notes decide what the model is shown; every layer gets
    # them as one value, ``prompt_settings`` (agent.prompt.PromptSettings, whose fields they are).
    # The system prompt's style (agent.prompt.PROMPT_STYLES): "full" (rules in English, each again
    # in the users' language when the domain's language gives one) or "short" for SmolLM2-class
    # models (~100 tokens instead of ~640). Like the tool block it is part of what an adapter was
    # trained on: export records it and train sft refuses a mismatch.
    prompt_style: Annotated[str, one_of("full", "short")] = "full"
    # List the next 14 days with their weekdays in the system prompt (agent.prompt.date_list, in the
    # domain language's words), so that a small model looks "next Tuesday" up instead of counting.
    # Eval, export and train render the same prompt; the list changes once a day, like the date
    # line it sits under.
    date_grounding: bool = False
    # Show the model each clock time the user says in words the 24-hour way, if the domain's language
    # can (its Language.annotate; the calendar's: "3pm" as "3pm (15:00)"). Stored with the message,
    # so eval, export and train see what serving showed.
    time_notes: bool = False
    # Show the model each day the user names relative to today as its date, if the domain's language
    # can (its Language.annotate; the calendar's: "tomorrow" as "tomorrow (2026-12-04)"). Stored with
    # the message, so eval, export and train see what serving showed.
    date_notes: bool = False
    # The 📅 receipt after a turn (agent.receipt): "changes" after a turn that changed, or tried to
    # change, the calendar; "on" after every turn; "off" never. The trajectory records it either way
    # it is shown.
    receipt: Annotated[str, one_of(*RECEIPT_MODES)] = DEFAULT_RECEIPT
    # Where these settings came from, for the other owners' loaders (bot, domain); a Settings
    # built directly has none, so those sections take their defaults.
    sources: Any = field(default_factory=ConfigSources, repr=False, compare=False)

    @property
    def store_path(self) -> Path:
        return self.data_dir / "calendar.sqlite3"

    @property
    def sessions_path(self) -> Path:
        return self.data_dir / "sessions.sqlite3"

    @property
    def states_path(self) -> Path:
        """Where KV state files live (``agent.backends.llama.disk_states``)."""
        return self.data_dir / "states"

    @property
    def prompt_settings(self) -> PromptSettings:
        """The settings that decide what the model is shown, as the one value every layer carries
        (``agent.prompt.PromptSettings``: its fields are the ones of the same name here)."""
        from agent.prompt import PromptSettings

        return PromptSettings(**{f.name: getattr(self, f.name) for f in fields(PromptSettings)})

    def model_choice(self) -> ModelChoice:
        """The part of these settings that ``models.resolve`` needs (models/ never sees Settings)."""
        from models.resolve import ModelChoice

        return ModelChoice(
            data_dir=self.data_dir, model_path=self.model_path, lora_path=self.lora_path,
            no_adapter=self.no_adapter, profile=self.profile, adapter_repo=self.adapter_repo,
            adapter_file=self.adapter_file, demo=self.demo,
        )


def load_settings(
    overrides: Mapping[str, Any] | None = None, environ: Mapping[str, str] | None = None
) -> Settings:
    """Build Settings; ``overrides`` are flags (None values mean "not given")."""
    sources = ConfigSources.read(overrides, environ)
    return load_section(Settings, ENV_NAMES, sources, {"sources": sources})


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
