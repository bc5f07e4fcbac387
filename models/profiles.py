"""Named model pairs (a base GGUF and the LoRA made for it): what ``python -m models pull`` fetches.

A profile is data, one row of ``PROFILES``; docs/models.md lists the same table. ``reference`` is the
default: the pair the product is built around. An adapter is either a llama.cpp LoRA GGUF
in the hub repo (``adapter_kind="gguf"``), or a PEFT folder (``adapter_config.json`` +
``adapter_model.safetensors`` under ``adapter_subdir``) that the pull converts with
``models.convert_lora`` into ``converted_file`` under the models directory.

``--profile`` / ``AGENT_PROFILE`` (or ``profile = "..."`` in the config file) pick one, for
pulling and for every entry point that resolves the pulled files.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

QWEN3_4B_REPO = "unsloth/Qwen3-4B-Instruct-2507-GGUF"
QWEN3_4B_Q8 = "Qwen3-4B-Instruct-2507-Q8_0.gguf"


@dataclass(frozen=True)
class Profile:
    name: str
    summary: str
    model_repo: str
    model_file: str
    size_text: str  # what the download costs, for messages
    adapter_repo: str
    adapter_file: str = ""  # the GGUF in adapter_repo (adapter_kind "gguf")
    adapter_kind: str = "gguf"  # "gguf" | "peft"
    adapter_subdir: str = ""  # folder of the PEFT adapter in adapter_repo (adapter_kind "peft")
    # Checked against the hub by hand? False: the file names are what the model card says, not
    # seen here (no hub from this machine); a failed pull then names repo, file and the hub's answer.
    confirmed: bool = True

    @property
    def converted_file(self) -> str:
        """Where a converted PEFT adapter lands, relative to the models directory."""
        return f"{self.name}/{self.name}-lora-f16.gguf"

    def adapter_path_in(self, models_dir: Path) -> Path:
        return models_dir / self.converted_file


PROFILES: dict[str, Profile] = {
    p.name: p
    for p in (
        Profile(
            name="reference",
            summary="Qwen3-4B-Instruct-2507 Q8_0 + the 66 MB calendar LoRA (expert iteration, round 3)",
            model_repo=QWEN3_4B_REPO,
            model_file=QWEN3_4B_Q8,
            size_text="about 4.3 GB plus a 66 MB adapter",
            adapter_repo="Shakewin/tadpole-qwen3-4b-ei-3",
            adapter_file="ei-3-lora-f16.gguf",
        ),
        Profile(
            name="calendar-rlvr",
            summary="Qwen3-4B calendar agent trained with RLVR (PEFT adapter, converted to GGUF on pull)",
            model_repo=QWEN3_4B_REPO,
            model_file=QWEN3_4B_Q8,
            size_text="about 4.3 GB plus the adapter; converting needs the train extra",
            adapter_repo="NotoriousH2/Qwen3-4B-Calendar-Agent-RLVR",
            adapter_kind="peft",
            adapter_subdir="adapter",
            confirmed=False,
        ),
    )
}
DEFAULT_PROFILE = "reference"


class UnknownProfile(ValueError):
    pass


def get_profile(name: str | None) -> Profile:
    """The named profile; ``UnknownProfile`` (one line listing the known names) otherwise."""
    key = name or DEFAULT_PROFILE
    if key not in PROFILES:
        raise UnknownProfile(f"unknown profile {key!r}: known profiles are {', '.join(PROFILES)}")
    return PROFILES[key]
