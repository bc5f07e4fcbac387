"""convert-lora: a PEFT LoRA trained in transformers does the same thing in llama.cpp.

The base is loaded in transformers from the very GGUF llama.cpp runs (``gguf_file=``), a LoRA
with random, strong A and B is attached with peft, saved, converted, and the next-token logits
of every prompt position are compared: the change the adapter makes (adapted minus base) must
be the same in both engines, far above the quantization noise between them.
"""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pytest
import torch
from llama_cpp import Llama
from peft import LoraConfig, get_peft_model
from safetensors.torch import save_file

import models.convert_lora as cl
from agent.train.base import gguf_config
from models.__main__ import main as models_main
from models.check import check_adapter
from models.gguf_header import HeaderReader
from models.lora_to_peft import gguf_lora_to_peft
from tests import model_fixtures as mf

os.environ.setdefault("HF_HUB_OFFLINE", "1")

PROMPT = "<|im_start|>user\nMove my dentist appointment to Friday at 3pm.<|im_end|>\n<|im_start|>assistant\n"
GEMMA_PROMPT = "<start_of_turn>user\nMove my dentist appointment to Friday at 3pm.<end_of_turn>\n<start_of_turn>model\n"
ALL_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


class Engines:
    """One base model in both engines, plus the prompt tokens and the base logits of each."""

    def __init__(self, gguf_path: Path, prompt: str = PROMPT, add_bos: bool = False) -> None:
        from transformers import AutoModelForCausalLM

        self.gguf = gguf_path
        self.model = AutoModelForCausalLM.from_pretrained(
            str(gguf_path.parent), gguf_file=gguf_path.name, config=gguf_config(gguf_path), dtype=torch.float32
        )
        self.model.eval()
        llm = Llama(model_path=str(gguf_path), n_ctx=256, n_threads=2, verbose=False, vocab_only=True)
        self.tokens = llm.tokenize(prompt.encode(), add_bos=add_bos, special=True)
        llm.close()
        self.hf_base = self.hf_logits(self.model)
        self.cpp_base = self.cpp_logits(None)

    def hf_logits(self, model: Any) -> np.ndarray:
        with torch.no_grad():
            return model(torch.tensor([self.tokens])).logits[0].float().numpy()

    def cpp_logits(self, lora: Path | None) -> np.ndarray:
        llm = Llama(model_path=str(self.gguf), n_ctx=256, n_threads=2, logits_all=True, verbose=False,
                    lora_path=str(lora) if lora else None)
        try:
            llm.eval(self.tokens)
            return np.array(llm.scores[: len(self.tokens)], dtype=np.float32)
        finally:
            llm.close()

    def adapter(self, out: Path, targets: list[str], strength: float, seed: int = 0, **config: Any) -> np.ndarray:
        """Attach a random, strong LoRA, save it to ``out``; return the transformers+peft logits."""
        rank, alpha = config.pop("r", 8), config.pop("lora_alpha", 16)
        peft_model = get_peft_model(copy.deepcopy(self.model),
                                    LoraConfig(r=rank, lora_alpha=alpha, target_modules=targets, lora_dropout=0.0, **config))
        g = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for module in peft_model.modules():
                if hasattr(module, "lora_A") and "default" in module.lora_A:
                    a, b = module.lora_A["default"].weight, module.lora_B["default"].weight
                    a.copy_(torch.randn(a.shape, generator=g) / a.shape[1] ** 0.5)
                    b.copy_(torch.randn(b.shape, generator=g) * strength / rank**0.5 * rank / alpha)
        peft_model.save_pretrained(str(out))
        return self.hf_logits(peft_model)


def corr(x: np.ndarray, y: np.ndarray) -> float:
    return float(np.corrcoef(x.ravel(), y.ravel())[0, 1])


@pytest.fixture(scope="module")
def smol(smollm2: Path) -> Iterator[Engines]:
    yield Engines(smollm2)


@pytest.fixture(scope="module")
def qwen(tiny_qwen3: Path) -> Iterator[Engines]:
    yield Engines(tiny_qwen3)


@pytest.fixture(scope="module")
def gemma_base() -> Path:
    """Gemma 3 270M Q4_K_M from its packages (a missing package fails, it does not skip)."""
    return mf.gemma_base_test_path()


@pytest.fixture(scope="module")
def gemma(gemma_base: Path) -> Iterator[Engines]:
    """~1 GB in float32; transformers spends most of its ~70 s load parsing the 262,144-token vocabulary."""
    engines = Engines(gemma_base, GEMMA_PROMPT, add_bos=True)  # Gemma's prompts start with <bos>
    yield engines
    del engines.model


def _agreement(engines: Engines, hf_adapted: np.ndarray, converted: Path) -> dict[str, float]:
    cpp_adapted = engines.cpp_logits(converted)
    hf_delta, cpp_delta = hf_adapted - engines.hf_base, cpp_adapted - engines.cpp_base
    return {
        "delta_corr": corr(hf_delta, cpp_delta),
        "top1": float((hf_adapted.argmax(-1) == cpp_adapted.argmax(-1)).mean()),
        "effect": float(np.abs(cpp_delta).mean()),
        "noise": float(np.abs(engines.hf_base - engines.cpp_base).mean()),
    }


@pytest.mark.slow
@pytest.mark.parametrize("outtype", ["f16", "f32"])
def test_smollm2_all_projections_match_transformers_peft(smol: Engines, tmp_path: Path, outtype: str) -> None:
    hf_adapted = smol.adapter(tmp_path / "peft", ALL_TARGETS, strength=0.5)
    out = tmp_path / "adapter.gguf"
    assert models_main(["convert-lora", str(tmp_path / "peft"), "--base", str(smol.gguf), "--out", str(out),
                        "--outtype", outtype]) == 0
    check = check_adapter(out, smol.gguf)
    assert check.ok, check.reason
    assert check.info["tensor_pairs"] == 30 * 7 and check.info["rank"] == 8 and check.info["alpha"] == 16.0
    assert check.info["quantization"] == outtype.upper()
    m = _agreement(smol, hf_adapted, out)
    assert m["effect"] > 10 * m["noise"], m  # the adapter moves the logits far beyond Q4_1 noise
    assert m["delta_corr"] > 0.95, m
    assert m["top1"] >= 0.8, m


@pytest.mark.slow
def test_smollm2_q_k_rows_need_the_rope_permutation(smol: Engines, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    hf_adapted = smol.adapter(tmp_path / "peft", ["q_proj", "k_proj"], strength=1.0, seed=1)
    right = cl.convert_lora(tmp_path / "peft", smol.gguf, tmp_path / "right.gguf")
    assert right.permuted
    m = _agreement(smol, hf_adapted, right.path)
    assert m["delta_corr"] > 0.95, m
    monkeypatch.setattr(cl, "PERMUTED_ARCHITECTURES", frozenset())
    wrong = cl.convert_lora(tmp_path / "peft", smol.gguf, tmp_path / "wrong.gguf")
    assert not wrong.permuted
    assert _agreement(smol, hf_adapted, wrong.path)["delta_corr"] < 0.8  # it loads, and silently does the wrong thing


@pytest.mark.slow
@pytest.mark.parametrize("extra", [{}, {"use_rslora": True, "alpha_pattern": {"v_proj": 4}, "r": 4}],
                         ids=["plain", "rslora+alpha_pattern"])
def test_tiny_qwen3_matches_transformers_peft(qwen: Engines, tmp_path: Path, extra: dict[str, Any]) -> None:
    hf_adapted = qwen.adapter(tmp_path / "peft", ALL_TARGETS, strength=0.5, **dict(extra))
    result = cl.convert_lora(tmp_path / "peft", qwen.gguf, tmp_path / "adapter.gguf", outtype="f32")
    assert not result.permuted and result.architecture == "qwen3"
    m = _agreement(qwen, hf_adapted, result.path)
    assert m["effect"] > 0.5 and m["effect"] > 100 * m["noise"], m
    assert m["delta_corr"] > 0.999, m
    assert m["top1"] == 1.0, m


@pytest.mark.slow
def test_gemma3_matches_transformers_peft_and_converts_back(gemma: Engines, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    turn = gemma.tokens[1]
    assert gemma.tokens[0] == 2 and gemma.tokens.count(turn) == 2  # <bos>, and <start_of_turn> as one token
    hf_adapted = gemma.adapter(tmp_path / "peft", ALL_TARGETS, strength=0.5)
    result = cl.convert_lora(tmp_path / "peft", gemma.gguf, tmp_path / "adapter.gguf", outtype="f32")
    assert result.architecture == "gemma3" and not result.permuted
    assert result.tensor_pairs == 18 * 7 and result.ranks == (8,)
    m = _agreement(gemma, hf_adapted, result.path)
    print(f"gemma3 {m}")
    assert m["effect"] > 10 * m["noise"], m  # far beyond the Q4_K_M noise between the engines
    # Measured 0.982, top1 0.60: the Q4_K_M noise, which a strong random adapter over 262,144 tokens
    # turns into flipped near ties (llama.cpp's choice is in transformers' top 5 at 15 of 20
    # positions), so no top1 bound here. With every weight dequantized to F32 in llama.cpp too, the
    # same adapter gives 0.99999 and top1 0.95: the mapping itself is exact.
    assert m["delta_corr"] > 0.97, m
    # The llama rope permutation applied to gemma3's q/k loads just as well, and is wrong.
    monkeypatch.setattr(cl, "PERMUTED_ARCHITECTURES", frozenset({"gemma3"}))
    wrong = cl.convert_lora(tmp_path / "peft", gemma.gguf, tmp_path / "wrong.gguf", outtype="f32")
    assert wrong.permuted
    wrong_corr = _agreement(gemma, hf_adapted, wrong.path)["delta_corr"]
    print(f"gemma3 with the llama permutation: delta_corr {wrong_corr:.3f}")
    assert wrong_corr < m["delta_corr"] - 0.05
    monkeypatch.undo()

    back = gguf_lora_to_peft(result.path, gemma.gguf, tmp_path / "back")
    assert back.architecture == "gemma3" and not back.unpermuted and back.tensor_pairs == 18 * 7
    from safetensors.numpy import load_file

    original = load_file(str(tmp_path / "peft" / "adapter_model.safetensors"))
    returned = load_file(str(tmp_path / "back" / "adapter_model.safetensors"))
    assert original.keys() == returned.keys()
    assert all(np.array_equal(original[k], returned[k]) for k in original)


def test_permute_rows_is_llama_cpp_layout() -> None:
    # Two heads of 4 rows: HF keeps each head's rope halves apart, GGUF interleaves them.
    rows = np.arange(8)[:, None].astype(np.float32)
    assert cl.permute_rows(rows, 2)[:, 0].tolist() == [0, 2, 1, 3, 4, 6, 5, 7]


# --------------------------------------------------------------------------- refusals


def _handmade(folder: Path, tensors: dict[str, torch.Tensor], **config: Any) -> Path:
    """A PEFT-format folder written directly: cheap for the refusal cases."""
    folder.mkdir(parents=True, exist_ok=True)
    cfg = {"peft_type": "LORA", "r": 4, "lora_alpha": 8, "target_modules": ["q_proj"], "bias": "none", **config}
    (folder / "adapter_config.json").write_text(json.dumps(cfg))
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(folder / "adapter_model.safetensors"))
    return folder


def _q_pair(layer: int = 0, n_in: int = 64, n_out: int = 64, proj: str = "self_attn.q_proj") -> dict[str, torch.Tensor]:
    stem = f"base_model.model.model.layers.{layer}.{proj}"
    return {f"{stem}.lora_A.weight": torch.randn(4, n_in), f"{stem}.lora_B.weight": torch.randn(n_out, 4)}


def _refusal(capsys: pytest.CaptureFixture[str], folder: Path, base: Path, out: Path) -> str:
    assert models_main(["convert-lora", str(folder), "--base", str(base), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith(f"error: {folder}: "), err
    assert not out.exists()
    return err


def test_a_good_handmade_adapter_converts(tiny_qwen3: Path, tmp_path: Path) -> None:
    folder = _handmade(tmp_path / "ok", {**_q_pair(0), **_q_pair(1)})
    result = cl.convert_lora(folder, tiny_qwen3, tmp_path / "ok.gguf")
    assert result.tensor_pairs == 2 and result.ranks == (4,) and check_adapter(result.path, tiny_qwen3).ok
    names = {t.name: t.dims for t in HeaderReader(result.path).tensor_infos}
    assert names["blk.1.attn_q.weight.lora_a"] == (64, 4) and names["blk.1.attn_q.weight.lora_b"] == (4, 64)


@pytest.mark.parametrize(
    ("case", "reason"),
    [
        ("embed_target", "embeddings/output head (embed_tokens)"),
        ("lm_head_target", "embeddings/output head (lm_head)"),
        ("embed_tensor", "touches the embeddings/output head"),
        ("embed_full_name", "embeddings/output head (model.embed_tokens)"),
        ("head_regex", r"embeddings/output head (.*\.(q_proj|lm_head))"),
        ("trainable_tokens", "trains embedding rows (trainable_token_indices)"),
        ("lm_head_tensor", "base_model.model.lm_head.lora_A.weight touches the embeddings/output head"),
        ("modules_to_save", "modules_to_save"),
        ("dora", "DoRA"),
        ("unknown_module", "module 'qkv_proj' is not supported"),
        ("not_lora", "only LoRA converts"),
        ("wrong_shape", "do not fit blk.0.attn_q.weight"),
        ("missing_half", "lora_B missing"),
        ("no_layer", "blk.7.attn_q.weight, which the base model does not have"),
        ("no_config", "no adapter_config.json"),
        ("no_weights", "no adapter_model.safetensors"),
    ],
)
def test_refuses_with_one_line(case: str, reason: str, tiny_qwen3: Path, tmp_path: Path,
                               capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / case
    pair = _q_pair()
    if case == "embed_target":
        _handmade(folder, pair, target_modules=["q_proj", "embed_tokens"])
    elif case == "lm_head_target":
        _handmade(folder, pair, target_modules=["lm_head"])
    elif case == "embed_tensor":
        _handmade(folder, {**pair, "base_model.model.model.embed_tokens.lora_embedding_A": torch.randn(4, 10)},
                  target_modules="all-linear")
    elif case == "embed_full_name":
        _handmade(folder, pair, target_modules=["q_proj", "model.embed_tokens"])
    elif case == "head_regex":
        _handmade(folder, pair, target_modules=r".*\.(q_proj|lm_head)")
    elif case == "trainable_tokens":
        _handmade(folder, pair, trainable_token_indices=[151_643])
    elif case == "lm_head_tensor":  # the config does not say so; the weights do
        _handmade(folder, {**pair, "base_model.model.lm_head.lora_A.weight": torch.randn(4, 64),
                           "base_model.model.lm_head.lora_B.weight": torch.randn(151_936, 4)})
    elif case == "modules_to_save":
        _handmade(folder, pair, modules_to_save=["lm_head"])
    elif case == "dora":
        _handmade(folder, pair, use_dora=True)
    elif case == "unknown_module":
        _handmade(folder, _q_pair(proj="self_attn.qkv_proj"))
    elif case == "not_lora":
        _handmade(folder, pair, peft_type="IA3")
    elif case == "wrong_shape":
        _handmade(folder, _q_pair(n_in=576, n_out=576))  # a SmolLM2 adapter against the qwen3 base
    elif case == "missing_half":
        _handmade(folder, {k: v for k, v in pair.items() if "lora_A" in k})
    elif case == "no_layer":
        _handmade(folder, _q_pair(layer=7))
    elif case == "no_config":
        folder.mkdir()
    elif case == "no_weights":
        _handmade(folder, pair)
        (folder / "adapter_model.safetensors").unlink()
    assert reason in _refusal(capsys, folder, tiny_qwen3, tmp_path / "out.gguf")


def test_refuses_a_bad_base(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = _handmade(tmp_path / "ok", _q_pair())
    (tmp_path / "base.gguf").write_text("not a model")
    assert "base " in _refusal(capsys, folder, tmp_path / "base.gguf", tmp_path / "out.gguf")


@pytest.mark.parametrize("module", ["lm_head", "model.embed_tokens"])
def test_gemma3_refuses_head_and_embedding_weights(module: str, gemma_base: Path, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """Gemma ties lm_head to embed_tokens (640 x 262,144): a LoRA on either is refused, as llama.cpp's
    converter refuses it, even when the config lists only q_proj."""
    stem = f"base_model.model.{module}"
    folder = _handmade(tmp_path / "peft", {**_q_pair(n_in=640, n_out=1024),
                                           f"{stem}.lora_A.weight": torch.randn(4, 640),
                                           f"{stem}.lora_B.weight": torch.randn(262_144, 4)})
    err = _refusal(capsys, folder, gemma_base, tmp_path / "out.gguf")
    assert f"{stem}.lora_A.weight touches the embeddings/output head" in err
    assert "llama.cpp takes no LoRA on the embeddings or the output head" in err
    # the same q_proj pair without the head converts: the refusal is about the head alone
    ok = _handmade(tmp_path / "ok", _q_pair(n_in=640, n_out=1024))
    assert cl.convert_lora(ok, gemma_base, tmp_path / "ok.gguf").architecture == "gemma3"


def test_lora_to_peft_refuses_a_gemma3_embedding_lora(gemma_base: Path, tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    adapter = mf._write_lora(tmp_path / "embd.gguf", "gemma3", 8.0, [
        ("token_embd.weight.lora_a", rng.standard_normal((4, 640)).astype(np.float32)),
        ("token_embd.weight.lora_b", rng.standard_normal((262_144, 4)).astype(np.float32)),
    ])
    with pytest.raises(cl.ConversionError, match="token_embd.weight.lora_a is not a LoRA half .* embeddings, the output head"):
        gguf_lora_to_peft(adapter, gemma_base, tmp_path / "peft")
    assert not (tmp_path / "peft").exists()
