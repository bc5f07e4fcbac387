"""Turn a llama.cpp LoRA GGUF back into a PEFT adapter folder: the inverse of ``convert_lora``.

What for: training can only continue (``PeftModel.from_pretrained(..., is_trainable=True)``)
from a PEFT folder, and some adapters exist only as GGUF (the shipped demo adapter, whose PEFT
folder is lost; adapters pulled from a hub as GGUF).

The mapping undone (see ``models.convert_lora``): ``blk.N.<tensor>.weight.lora_a`` (ggml
[n_in, r], numpy (r, n_in)) is PEFT's ``lora_A.weight`` (r, n_in) of
``model.layers.N.{self_attn,mlp}.<proj>``, ``.lora_b`` (ggml [r, n_out], numpy (n_out, r)) is
``lora_B.weight``; ``adapter.lora.alpha`` is ``lora_alpha``, and llama.cpp's scale alpha / r is
PEFT's. For the ``llama`` architecture the rows of lora_b of q/k are put back from llama.cpp's
rope layout into Hugging Face's (the inverse of ``permute_rows``); qwen2/qwen3 and gemma3 need
nothing. Embedding or output-head tensors (``token_embd``, ``output``) are refused: PEFT's LoRA
on the projections cannot hold them, and llama.cpp's own converter never writes them.
Tensors of any type ``gguf`` can dequantize (f16, bf16, q8_0, ...) are written as float32.

What cannot come back: whatever the forward converter folded into lora_b (rsLoRA, per-module
alphas) returns as a plain LoRA with the same effect, not the same numbers.

Needs ``safetensors`` (the ``train`` extra); imported inside the function.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from models.convert_lora import (
    MODULE_TO_TENSOR,
    PERMUTED_ARCHITECTURES,
    ConversionError,
    _base_header,
)

TENSOR_TO_MODULE: dict[str, str] = {tensor: module for module, tensor in MODULE_TO_TENSOR.items()}
ATTENTION = frozenset({"q_proj", "k_proj", "v_proj", "o_proj"})
CONFIG_FILE = "adapter_config.json"
WEIGHTS_FILE = "adapter_model.safetensors"

_NAME = re.compile(r"^blk\.(?P<layer>\d+)\.(?P<tensor>\w+)\.weight\.lora_(?P<half>[ab])$")


@dataclass(frozen=True)
class PeftConversionResult:
    """What was written: the folder, the LoRA pairs, rank(s), alpha and targets (HF module names)."""

    path: Path
    architecture: str
    alpha: float
    rank: int
    ranks: tuple[int, ...]
    tensor_pairs: int
    targets: tuple[str, ...]
    unpermuted: bool
    source_types: tuple[str, ...]


def unpermute_rows(weights: np.ndarray, n_head: int) -> np.ndarray:
    """The inverse of ``permute_rows``: llama.cpp's rope row layout back to Hugging Face's."""
    n_out = weights.shape[0]
    if n_out % (2 * n_head):
        raise ConversionError(f"cannot unpermute {n_out} rows from {n_head} rope heads")
    return (weights.reshape(n_head, n_out // n_head // 2, 2, *weights.shape[1:])
            .swapaxes(1, 2)
            .reshape(weights.shape))


def _module_name(layer: int, proj: str) -> str:
    return f"model.layers.{layer}.{'self_attn' if proj in ATTENTION else 'mlp'}.{proj}"


def _check_fit(adapter: Path, base: Path) -> None:
    """The adapter check ``models verify`` and the runtime make: missing, not GGUF, not a LoRA
    adapter, another architecture, shapes of another model (both halves present and fitting)."""
    from models.check import check_adapter

    check = check_adapter(adapter, base)
    if not check.ok:
        raise ConversionError(check.reason if check.path == adapter else f"base {check.path}: {check.reason}")


def _read_adapter(adapter: Path) -> tuple[float | None, dict[tuple[int, str], dict[str, np.ndarray]], set[str]]:
    """alpha (None when absent), {(layer, proj): {"a", "b"}} as float32 numpy, and the tensor types."""
    import gguf
    from gguf.quants import dequantize

    reader = gguf.GGUFReader(adapter, "r")

    def value(key: str) -> Any:
        field = reader.get_field(key)
        return None if field is None else field.contents()

    if value(gguf.Keys.Adapter.ALORA_INVOCATION_TOKENS) is not None:
        raise ConversionError("is an activated LoRA (adapter.alora.invocation_tokens); only a plain LoRA converts")
    alpha = value(gguf.Keys.Adapter.LORA_ALPHA)
    pairs: dict[tuple[int, str], dict[str, np.ndarray]] = {}
    types: set[str] = set()
    for t in reader.tensors:
        match = _NAME.match(t.name)
        if match is None or match["tensor"] not in TENSOR_TO_MODULE:
            raise ConversionError(
                f"tensor {t.name} is not a LoRA half of an attention or MLP projection "
                f"(known: {', '.join(TENSOR_TO_MODULE)}); embeddings, the output head and fused tensors do not convert"
            )
        shape = tuple(int(d) for d in reversed(t.shape))  # ggml [ne0, ne1] -> numpy (ne1, ne0)
        data = np.asarray(dequantize(t.data, t.tensor_type), dtype=np.float32).reshape(shape)
        pairs.setdefault((int(match["layer"]), TENSOR_TO_MODULE[match["tensor"]]), {})[match["half"]] = data.copy()
        types.add(t.tensor_type.name)
    del reader  # GGUFReader has no close(); the copies above no longer point into its memory map
    return (float(alpha) if alpha else None), pairs, types


def gguf_lora_to_peft(
    adapter_gguf: str | os.PathLike[str],
    base_gguf: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
) -> PeftConversionResult:
    """Write the llama.cpp LoRA ``adapter_gguf`` (made for ``base_gguf``) as a PEFT folder ``out_dir``.

    Raises ConversionError (one line) for anything that is not a LoRA adapter GGUF fitting the
    base (the same refusals as ``models verify``), for tensors PEFT's LoRA on the projections
    cannot hold, and for an ``out_dir`` that already holds an adapter (never overwritten).
    """
    from safetensors.numpy import save_file

    adapter, base, out = Path(adapter_gguf), Path(base_gguf), Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ConversionError(f"--out {out} is a file, not a folder")
    # The config is renamed into place last, so a folder with weights but no config is a conversion
    # that died between the two renames: it is finished now, not refused for ever.
    if (out / CONFIG_FILE).exists():
        raise ConversionError(f"--out {out} already holds a PEFT adapter ({CONFIG_FILE}); pick another folder")
    _check_fit(adapter, base)
    arch, n_head, n_head_kv, shapes = _base_header(base)
    gguf_alpha, pairs, types = _read_adapter(adapter)
    permuted = arch in PERMUTED_ARCHITECTURES

    order = list(MODULE_TO_TENSOR)
    slots = sorted(pairs, key=lambda slot: (slot[0], order.index(slot[1])))  # by layer, then q k v o gate up down
    tensors: dict[str, np.ndarray] = {}
    ranks: dict[str, int] = {}
    for layer, proj in slots:
        pair = pairs[(layer, proj)]
        a, b = pair["a"], pair["b"]  # check_adapter made sure both halves exist and fit the base
        if permuted and proj in ("q_proj", "k_proj"):
            b = unpermute_rows(b, n_head if proj == "q_proj" else n_head_kv)
        module = _module_name(layer, proj)
        ranks[module] = a.shape[0]
        tensors[f"base_model.model.{module}.lora_A.weight"] = np.ascontiguousarray(a)
        tensors[f"base_model.model.{module}.lora_B.weight"] = np.ascontiguousarray(b)

    # One rank (the most common) plus exceptions; llama.cpp scales each pair by alpha / its rank,
    # as PEFT does, or by 1 when the file has no alpha (PEFT: lora_alpha = that module's rank).
    rank = Counter(ranks.values()).most_common(1)[0][0]
    rank_pattern = {m: r for m, r in ranks.items() if r != rank}
    alpha = gguf_alpha if gguf_alpha is not None else float(rank)
    alpha_pattern = {m: float(r) for m, r in rank_pattern.items()} if gguf_alpha is None else {}
    # Short names (what train sft writes) when every layer of the base has the projection adapted;
    # otherwise the exact modules, so that PEFT creates no LoRA the file has no weights for.
    projs = sorted({proj for _, proj in pairs}, key=order.index)
    layers_of = {proj: {int(n.split(".")[1]) for n in shapes if n.endswith(f".{MODULE_TO_TENSOR[proj]}.weight")}
                 for proj in projs}
    everywhere = all({layer for layer, p in pairs if p == proj} == layers_of[proj] for proj in projs)
    targets = projs if everywhere else [_module_name(layer, proj) for layer, proj in slots]
    config = {
        "peft_type": "LORA",
        "task_type": "CAUSAL_LM",
        # null, not the GGUF's path: PEFT looks for a config.json (or a hub repo) there when it saves,
        # and warns; left null, PEFT records the base the folder is next trained on (as train sft's do).
        # Which GGUF pair this came from is in the safetensors metadata.
        "base_model_name_or_path": None,
        "r": rank,
        "lora_alpha": alpha,
        "lora_dropout": 0.0,
        "bias": "none",
        "target_modules": targets,
        "rank_pattern": rank_pattern,
        "alpha_pattern": alpha_pattern,
        "use_rslora": False,
        "use_dora": False,
        "fan_in_fan_out": False,
        "init_lora_weights": True,
        "modules_to_save": None,
        "inference_mode": True,
    }

    out.mkdir(parents=True, exist_ok=True)
    written: list[tuple[Path, Path]] = []
    try:
        for name in (WEIGHTS_FILE, CONFIG_FILE):
            fd, tmp_name = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=out)
            os.close(fd)
            written.append((Path(tmp_name), out / name))
        save_file(tensors, str(written[0][0]), metadata={
            "format": "pt", "converted_from": str(adapter.resolve()), "base_gguf": str(base.resolve())})
        written[1][0].write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
        for tmp, final in written:
            os.replace(tmp, final)
    finally:
        for tmp, _ in written:
            tmp.unlink(missing_ok=True)
    return PeftConversionResult(
        path=out, architecture=arch, alpha=alpha, rank=rank, ranks=tuple(sorted(set(ranks.values()))),
        tensor_pairs=len(pairs), targets=tuple(projs), unpermuted=permuted, source_types=tuple(sorted(types)),
    )


__all__ = ["PeftConversionResult", "TENSOR_TO_MODULE", "gguf_lora_to_peft", "unpermute_rows"]
