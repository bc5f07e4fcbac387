"""Load a GGUF base model into transformers once, and keep it as a trainable folder.

transformers can read a GGUF (``gguf_file=``) and dequantizes it, but such a model carries a
GGUF quantization config and the Trainer refuses it ("quantized with GGUF ... does not support
training"). Saving it once with ``save_pretrained`` (quantization config cleared) gives a plain
float folder that trains, and later runs skip the slow dequantization.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from platformdirs import user_cache_dir

CACHE_ENV = "ILJEONG_TRAIN_CACHE"
MARKER = "iljeong-base.txt"


def cache_dir() -> Path:
    """Where converted bases live: ``$ILJEONG_TRAIN_CACHE`` or the user cache folder."""
    return Path(os.environ.get(CACHE_ENV) or Path(user_cache_dir("iljeong")) / "train-bases")


def _key(gguf_path: Path) -> str:
    """Identify a GGUF by name, size and mtime: hashing gigabytes on every run costs minutes."""
    st = gguf_path.stat()
    text = f"{gguf_path.resolve()}|{st.st_size}|{st.st_mtime_ns}"
    return f"{gguf_path.stem}-{hashlib.sha256(text.encode()).hexdigest()[:12]}"


def gguf_config(gguf_path: Path) -> Any:
    """The transformers config of a GGUF, with fields transformers' GGUF mapping leaves out.

    transformers 5.x ignores ``<arch>.attention.key_length``: a model whose head width is not
    hidden/heads (Qwen3 uses 128 everywhere; our tiny test qwen3 uses 16) would load with the
    wrong shapes.
    """
    from transformers import AutoConfig

    from models.gguf_header import HeaderReader

    config = AutoConfig.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name)
    reader = HeaderReader(gguf_path)
    try:
        arch = reader.value("general.architecture")
        key_length = reader.value(f"{arch}.attention.key_length")
    finally:
        reader.close()
    if key_length and hasattr(config, "head_dim"):
        config.head_dim = int(key_length)
    return config


def served_template(gguf_path: Path) -> str | None:
    """The template the runtime serves a GGUF with in place of the file's (a GGUF without one, as
    Google's Gemma 3 270M; a family whose format brings its own, as Gemma's): what the runtime's
    renderer chooses from the same metadata. None: the file's own template is served (or, without
    one, the base is refused, as the runtime refuses it)."""
    from agent.prompt import PromptError, PromptRenderer
    from models.check import chat_template_of
    from models.gguf_header import HeaderReader

    reader = HeaderReader(gguf_path)
    try:
        metadata = {"tokenizer.chat_template": chat_template_of(reader),
                    "general.architecture": str(reader.value("general.architecture") or "")}
    finally:
        reader.close()
    try:
        served = PromptRenderer.from_metadata(metadata, str).template_source
    except PromptError:
        return None
    return None if served == metadata["tokenizer.chat_template"] else served


def load_gguf_model(gguf_path: Path) -> tuple[Any, Any]:
    """(model, tokenizer) straight from the GGUF, dequantized to float32, for comparisons."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name)
    served = served_template(gguf_path)
    if served:  # train on the turns the runtime will serve
        tokenizer.chat_template = served
    model = AutoModelForCausalLM.from_pretrained(
        str(gguf_path.parent), gguf_file=gguf_path.name, config=gguf_config(gguf_path), dtype=torch.float32
    )
    return model, tokenizer


def prepare_base(gguf_path: str | os.PathLike[str], cache: Path | None = None) -> Path:
    """A plain transformers folder (config, safetensors, tokenizer) for ``gguf_path``, built once."""
    gguf_path = Path(gguf_path)
    if not gguf_path.is_file():
        raise FileNotFoundError(f"{gguf_path}: no such file")
    target = (cache or cache_dir()) / _key(gguf_path)
    if (target / MARKER).is_file():
        return target
    model, tokenizer = load_gguf_model(gguf_path)
    # The weights are already float32: drop every trace of the GGUF "quantization".
    if "quantization_config" in model.config.__dict__:
        del model.config.quantization_config
    model.hf_quantizer = None
    model.is_quantized = False
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        model.save_pretrained(str(tmp))
        tokenizer.save_pretrained(str(tmp))
        (tmp / MARKER).write_text(f"{gguf_path.resolve()}\n", encoding="utf-8")
        if target.exists():
            shutil.rmtree(target)
        os.replace(tmp, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target
