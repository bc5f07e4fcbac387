"""``python -m models``'s own reader of the few settings it needs: which files, which profile.

``models/`` is a leaf and cannot use ``agent.config``, yet ``python -m models verify`` must pick
the same pair the agent would. So this reads the same sources by the same rules, for just the
keys in ``ModelChoice``: flags, then the environment (the agent's variable names), then the
config file (``AGENT_CONFIG``, else ``<data dir>/config.toml``), then defaults.
``tests/test_models_resolve.py`` pins that both readers agree.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import platformdirs

from models.resolve import ModelChoice

# ModelChoice field -> environment variable (the same names agent.config reads)
ENV_NAMES: dict[str, str] = {
    "model_path": "AGENT_MODEL_PATH",
    "lora_path": "AGENT_LORA_PATH",
    "no_adapter": "AGENT_NO_ADAPTER",
    "profile": "AGENT_PROFILE",
    "demo": "AGENT_DEMO",
}
FILE_KEYS = ("model_path", "lora_path", "no_adapter", "profile", "adapter_repo", "adapter_file", "demo")


def default_data_dir() -> Path:
    return Path(platformdirs.user_data_dir("iljeong", appauthor=False))


def _flag(value: Any) -> bool:
    return value.strip().lower() in ("1", "true", "yes", "on") if isinstance(value, str) else bool(value)


def load_choice(flags: Mapping[str, Any] | None = None, environ: Mapping[str, str] | None = None) -> ModelChoice:
    """The merged choice; ValueError (one line) for an unreadable config file."""
    env = os.environ if environ is None else environ
    data_dir = Path(env["AGENT_DATA_DIR"]).expanduser() if env.get("AGENT_DATA_DIR") else None
    path = Path(env["AGENT_CONFIG"]) if env.get("AGENT_CONFIG") else (data_dir or default_data_dir()) / "config.toml"
    values: dict[str, Any] = {}
    if path.is_file():
        with path.open("rb") as fh:
            table = tomllib.load(fh)
        values.update({k: table[k] for k in FILE_KEYS if k in table})
        if data_dir is None and table.get("data_dir"):
            data_dir = Path(str(table["data_dir"])).expanduser()
    values.update({name: env[var] for name, var in ENV_NAMES.items() if env.get(var)})
    values.update({k: v for k, v in (flags or {}).items() if v is not None and k in FILE_KEYS})
    if "no_adapter" in values:
        values["no_adapter"] = _flag(values["no_adapter"])
    for key in ("model_path", "lora_path", "profile", "adapter_repo", "adapter_file", "demo"):
        if key in values:
            values[key] = str(values[key])
    return ModelChoice(data_dir=data_dir or default_data_dir(), **values)
