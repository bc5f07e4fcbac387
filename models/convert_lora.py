"""Convert a PEFT LoRA adapter (adapter_config.json + adapter_model.safetensors) to a llama.cpp LoRA GGUF.

Why here and not llama.cpp's ``convert_lora_to_gguf.py``: that script needs the base model as
a Hugging Face folder (config + safetensors); we only have the GGUF. Everything the mapping
needs (architecture, head counts, tensor shapes) is in the base GGUF's header.

What is written (the layout llama.cpp's own converter produces and ``models.check`` checks):
``general.type=adapter``, ``general.architecture`` = the base's, ``adapter.type=lora``,
``adapter.lora.alpha``, and per target ``blk.N.<tensor>.weight.lora_a`` (numpy (r, n_in), ggml
[n_in, r]) and ``.lora_b`` (numpy (n_out, r), ggml [r, n_out]). llama.cpp scales the product
by alpha / r, exactly as PEFT does; PEFT scalings it cannot express that way (rsLoRA,
per-module alpha) are folded into lora_b.

For the ``llama`` architecture llama.cpp stores the rows of Q and K permuted relative to
Hugging Face (rope layout); lora_b of q/k gets the same permutation or the adapter silently
does the wrong thing. qwen2/qwen3 and gemma3 use the other rope layout and need none
(llama.cpp's Gemma3Model converter only adds 1 to the norms and trims the embedding rows;
neither is a LoRA target). gemma3's q_norm/k_norm and pre/post feed-forward norms are not
targets either: only the seven linear projections convert.

The embeddings and the output head never convert (llama.cpp's own converter stops on them,
and Gemma ties the head to the embedding): an adapter that targets or holds ``embed_tokens``
or ``lm_head`` weights, or trains token rows (``trainable_token_indices``), is refused.

Needs ``safetensors`` and ``torch`` (the ``train`` extra); imported inside the functions.
"""

from __future__ import annotations

import json
import math
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

SUPPORTED_ARCHITECTURES = ("llama", "qwen2", "qwen3", "gemma3")
PERMUTED_ARCHITECTURES = frozenset({"llama"})

# Hugging Face module name -> llama.cpp tensor name inside blk.N.
MODULE_TO_TENSOR: dict[str, str] = {
    "q_proj": "attn_q",
    "k_proj": "attn_k",
    "v_proj": "attn_v",
    "o_proj": "attn_output",
    "gate_proj": "ffn_gate",
    "up_proj": "ffn_up",
    "down_proj": "ffn_down",
}
EMBEDDING_OR_HEAD = ("embed_tokens", "lm_head", "wte", "output")
HEAD_MODULES = ("embed_tokens", "lm_head")
HEAD_REFUSAL = "only attention and MLP projections convert (llama.cpp takes no LoRA on the embeddings or the output head)"

_KEY = re.compile(r"^(?:base_model\.model\.)?(?P<module>.*\.layers\.(?P<layer>\d+)\.(?:self_attn|mlp)\.(?P<proj>\w+))"
                  r"\.lora_(?P<half>[AB])\.weight$")
OUTTYPES = ("f16", "f32")


class ConversionError(ValueError):
    """The adapter cannot be converted; the message is one line that says why."""


@dataclass(frozen=True)
class ConversionResult:
    """What was written: the file, the number of tensor pairs, the rank(s) and the targets."""

    path: Path
    architecture: str
    alpha: float
    tensor_pairs: int
    ranks: tuple[int, ...]
    targets: tuple[str, ...]
    permuted: bool


def permute_rows(weights: np.ndarray, n_head: int) -> np.ndarray:
    """llama.cpp's ``LlamaModel.permute`` on the output rows (HF rope layout -> GGUF layout).

    Each head's rows are stored as two halves in HF and interleaved in GGUF; ``n_head`` is the
    head count of the projection (n_head for Q, n_head_kv for K).
    """
    n_out = weights.shape[0]
    if n_out % (2 * n_head):
        raise ConversionError(f"cannot permute {n_out} rows into {n_head} rope heads")
    return (weights.reshape(n_head, 2, n_out // n_head // 2, *weights.shape[1:])
            .swapaxes(1, 2)
            .reshape(weights.shape))


def _head_targets(targets: Any) -> list[str]:
    """The ``target_modules`` entries that reach the embeddings or the head: a name whose last
    part is one (``lm_head``, ``model.embed_tokens``), or a regex string naming one."""
    if isinstance(targets, str):
        return [targets] if any(word in targets for word in HEAD_MODULES) else []
    return [str(t) for t in targets or [] if str(t).rsplit(".", 1)[-1] in HEAD_MODULES]


def _read_config(peft_dir: Path) -> dict[str, Any]:
    config_path = peft_dir / "adapter_config.json"
    if not peft_dir.is_dir():
        raise ConversionError("is not a directory (expected a PEFT adapter folder)")
    if not config_path.is_file():
        raise ConversionError("has no adapter_config.json (not a PEFT adapter folder)")
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise ConversionError(f"adapter_config.json is not valid JSON ({exc})") from exc
    if str(config.get("peft_type", "")).upper() != "LORA":
        raise ConversionError(f"is a {config.get('peft_type')!r} adapter; only LoRA converts")
    if config.get("use_dora"):
        raise ConversionError("is a DoRA adapter (use_dora); llama.cpp LoRA cannot express the magnitude vector")
    if config.get("modules_to_save"):
        raise ConversionError(f"trains full copies of {config['modules_to_save']} (modules_to_save); only LoRA pairs convert")
    if config.get("trainable_token_indices"):
        raise ConversionError(f"trains embedding rows (trainable_token_indices); {HEAD_REFUSAL}")
    touched = _head_targets(config.get("target_modules"))
    if touched:
        raise ConversionError(f"targets the embeddings/output head ({', '.join(touched)}); {HEAD_REFUSAL}")
    if config.get("bias", "none") != "none" or config.get("lora_bias"):
        raise ConversionError("trains biases; only the LoRA A/B matrices convert")
    return config


def _base_header(base: Path) -> tuple[str, int, int, dict[str, tuple[int, ...]]]:
    """Architecture, head count, KV head count and tensor shapes (ggml order) of the base GGUF."""
    from models.check import check_model
    from models.gguf_header import HeaderReader

    result = check_model(base)
    if not result.ok:
        raise ConversionError(f"base {base}: {result.reason}")
    reader = HeaderReader(base)
    try:
        arch = str(reader.value("general.architecture"))
        n_head = reader.value(f"{arch}.attention.head_count")
        n_head_kv = reader.value(f"{arch}.attention.head_count_kv") or n_head
        shapes = {t.name: tuple(int(d) for d in t.dims) for t in reader.tensor_infos}
    finally:
        reader.close()
    if arch not in SUPPORTED_ARCHITECTURES:
        raise ConversionError(f"base architecture {arch!r} is not supported (known: {', '.join(SUPPORTED_ARCHITECTURES)})")
    if n_head is None:
        raise ConversionError(f"base {base} has no {arch}.attention.head_count")
    return arch, int(n_head), int(n_head_kv), shapes


def _pattern_value(patterns: dict[str, Any], module: str, default: Any) -> Any:
    """PEFT's rank/alpha pattern lookup: a key matches a module name ending in ``.key``."""
    for key, value in (patterns or {}).items():
        if re.match(rf"(.*\.)?{key}$", module):
            return value
    return default


def _load_tensors(peft_dir: Path) -> dict[str, np.ndarray]:
    """adapter_model.safetensors as float32 numpy arrays (bf16 goes through torch)."""
    path = peft_dir / "adapter_model.safetensors"
    if not path.is_file():
        bin_path = peft_dir / "adapter_model.bin"
        hint = " (only adapter_model.bin found: save with safe_serialization=True)" if bin_path.exists() else ""
        raise ConversionError(f"has no adapter_model.safetensors{hint}")
    from safetensors import safe_open

    out: dict[str, np.ndarray] = {}
    with safe_open(str(path), framework="pt") as f:
        for key in f.keys():
            out[key] = f.get_tensor(key).float().numpy()
    return out


def convert_lora(
    peft_dir: str | os.PathLike[str],
    base: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    outtype: str = "f16",
    progress: bool = False,
) -> ConversionResult:
    """Convert the PEFT LoRA in ``peft_dir`` for the base GGUF ``base``; write ``out``.

    Raises ConversionError (one line) for anything that cannot become a llama.cpp LoRA; the
    written file must pass ``models.check.check_adapter`` against ``base`` or it is removed.
    """
    import gguf

    from models.check import check_adapter

    peft_dir, base, out = Path(peft_dir), Path(base), Path(out)
    if outtype not in OUTTYPES:
        raise ConversionError(f"--outtype must be one of {OUTTYPES}, got {outtype!r}")
    config = _read_config(peft_dir)
    arch, n_head, n_head_kv, shapes = _base_header(base)
    tensors = _load_tensors(peft_dir)

    alpha = float(config.get("lora_alpha") or config.get("r") or 8)
    default_rank = int(config.get("r") or 8)
    rslora = bool(config.get("use_rslora"))
    permute = arch in PERMUTED_ARCHITECTURES
    halves: dict[tuple[int, str], dict[str, np.ndarray]] = {}
    modules: dict[tuple[int, str], str] = {}
    for key, value in tensors.items():
        lowered = key.lower()
        if any(f".{word}." in f".{lowered}." or f"{word}." in lowered for word in HEAD_MODULES):
            raise ConversionError(f"tensor {key} touches the embeddings/output head; {HEAD_REFUSAL}")
        match = _KEY.match(key)
        if match is None:
            raise ConversionError(f"tensor {key} is not a LoRA A/B weight of a decoder layer projection")
        proj = match["proj"]
        if proj not in MODULE_TO_TENSOR:
            raise ConversionError(f"tensor {key}: module {proj!r} is not supported (known: {', '.join(MODULE_TO_TENSOR)})")
        slot = (int(match["layer"]), proj)
        halves.setdefault(slot, {})[match["half"]] = value
        modules[slot] = match["module"]
    if not halves:
        raise ConversionError("adapter_model.safetensors holds no LoRA tensors")

    dtype = np.float16 if outtype == "f16" else np.float32
    written: list[tuple[str, np.ndarray]] = []
    ranks: set[int] = set()
    for (layer, proj), pair in sorted(halves.items()):
        name = f"blk.{layer}.{MODULE_TO_TENSOR[proj]}.weight"
        if set(pair) != {"A", "B"}:
            raise ConversionError(f"{modules[(layer, proj)]} has lora_{'B' if 'A' in pair else 'A'} missing")
        a, b = pair["A"], pair["B"]
        base_shape = shapes.get(name)
        if base_shape is None:
            raise ConversionError(f"{modules[(layer, proj)]} maps to {name}, which the base model does not have")
        n_in, n_out = base_shape
        rank = a.shape[0]
        if a.ndim != 2 or b.ndim != 2 or a.shape != (rank, n_in) or b.shape != (n_out, rank):
            raise ConversionError(
                f"{modules[(layer, proj)]}: lora_A {list(a.shape)} x lora_B {list(b.shape)} do not fit "
                f"{name} (out {n_out}, in {n_in}): adapter made for another model?"
            )
        module_alpha = float(_pattern_value(config.get("alpha_pattern", {}), modules[(layer, proj)], alpha))
        peft_scale = module_alpha / (math.sqrt(rank) if rslora else rank)
        gguf_scale = alpha / rank
        if not math.isclose(peft_scale, gguf_scale, rel_tol=1e-9):
            b = b * (peft_scale / gguf_scale)
        if permute and proj in ("q_proj", "k_proj"):
            b = permute_rows(b, n_head if proj == "q_proj" else n_head_kv)
        ranks.add(rank)
        written.append((f"{name}.lora_a", np.ascontiguousarray(a, dtype=dtype)))
        written.append((f"{name}.lora_b", np.ascontiguousarray(b, dtype=dtype)))

    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        writer = gguf.GGUFWriter(str(tmp), arch)
        writer.add_type(gguf.GGUFType.ADAPTER)
        writer.add_name(f"LoRA from {peft_dir.name}")
        writer.add_string(gguf.Keys.Adapter.TYPE, "lora")
        writer.add_float32(gguf.Keys.Adapter.LORA_ALPHA, alpha)
        for tensor_name, data in written:
            writer.add_tensor(tensor_name, data)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file(progress=progress)
        writer.close()
        check = check_adapter(tmp, base)
        if not check.ok:
            raise ConversionError(f"the converted file fails the adapter check: {check.reason}")
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    return ConversionResult(
        path=out, architecture=arch, alpha=alpha, tensor_pairs=len(written) // 2, ranks=tuple(sorted(ranks)),
        targets=tuple(sorted({proj for _, proj in halves})), permuted=permute,
    )


__all__ = ["ConversionError", "ConversionResult", "MODULE_TO_TENSOR", "convert_lora", "permute_rows"]
