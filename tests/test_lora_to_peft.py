"""lora-to-peft: a llama.cpp LoRA GGUF back into a PEFT folder that training can continue from.

The base is loaded the way ``train sft`` loads it (``prepare_base`` + ``load_base_model``); a
random, strong PEFT LoRA goes through ``convert_lora`` and back, and must come back as the same
tensors, the same logits and, converted forward again, the same GGUF. Adapters that never were
PEFT (the shipped demo adapter, a hand-built GGUF) are checked against llama.cpp itself: the
recovered folder in transformers+peft must change the logits as the GGUF does in llama.cpp.
"""

from __future__ import annotations

import copy
import json
import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import gguf
import numpy as np
import pytest
import torch
from llama_cpp import Llama
from peft import LoraConfig, PeftModel, get_peft_model, get_peft_model_state_dict
from safetensors.numpy import load_file

import models.lora_to_peft as lp
from agent.train.base import prepare_base
from agent.train.trainer import load_base_model
from models.__main__ import main as models_main
from models.convert_lora import ConversionError, convert_lora, permute_rows
from models.demo import DEMO_DIR
from models.gguf_header import HeaderReader
from tests import model_fixtures as mf

os.environ.setdefault("HF_HUB_OFFLINE", "1")

PROMPT = "<|im_start|>user\nMove my dentist appointment to Friday at 3pm.<|im_end|>\n<|im_start|>assistant\n"
ALL_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
DEMO_ADAPTER = DEMO_DIR / "smollm2-135m-calendar-lora-f16.gguf"


# --------------------------------------------------------------------------- helpers


class Base:
    """One base GGUF: transformers as ``train sft`` loads it, llama.cpp, the prompt and base logits."""

    def __init__(self, gguf_path: Path) -> None:
        self.gguf = gguf_path
        self.folder = prepare_base(gguf_path, mf.cache_root() / "train-bases")
        llm = Llama(model_path=str(gguf_path), n_ctx=256, n_threads=2, verbose=False, vocab_only=True)
        self.tokens = llm.tokenize(PROMPT.encode(), add_bos=False, special=True)
        llm.close()
        self.model = load_base_model(self.folder, bf16=False).eval()
        self.hf_base = self.hf_logits(self.model)
        self.cpp_base = self.cpp_logits(None)

    def fresh(self) -> Any:
        return copy.deepcopy(self.model)

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

    def load_peft(self, folder: Path) -> tuple[Any, list[str]]:
        """``PeftModel.from_pretrained(..., is_trainable=True)`` as sft.py does, and the warnings it gave."""
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            model = PeftModel.from_pretrained(self.fresh(), str(folder), is_trainable=True)
        return model, [str(w.message) for w in caught]


def random_peft(base: Base, out: Path, *, strength: float, seed: int, rank: int = 8, alpha: float = 16) -> np.ndarray:
    """A random, strong PEFT LoRA on all 7 projections saved to ``out``; its transformers logits."""
    model = get_peft_model(base.fresh(), LoraConfig(r=rank, lora_alpha=alpha, target_modules=ALL_TARGETS,
                                                    lora_dropout=0.0, task_type="CAUSAL_LM", bias="none"))
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for module in model.modules():
            if hasattr(module, "lora_A") and "default" in module.lora_A:
                a, b = module.lora_A["default"].weight, module.lora_B["default"].weight
                a.copy_(torch.randn(a.shape, generator=g) / a.shape[1] ** 0.5)
                b.copy_(torch.randn(b.shape, generator=g) * strength / rank**0.5 * rank / alpha)
    model.save_pretrained(str(out))
    return base.hf_logits(model.eval())


def gguf_tensors(path: Path) -> tuple[dict[str, Any], dict[str, tuple[str, np.ndarray]]]:
    """(metadata that matters, {name: (type, data)}) of a GGUF."""
    reader = gguf.GGUFReader(path)
    meta = {k: reader.get_field(k).contents() for k in
            ("general.architecture", "general.type", "adapter.type", "adapter.lora.alpha")}
    return meta, {t.name: (t.tensor_type.name, np.array(t.data)) for t in reader.tensors}


def problems(warned: list[str]) -> list[str]:
    """The warnings PEFT gives when a checkpoint does not fit the model it is loaded on."""
    return [w for w in warned if any(s in w.lower() for s in ("missing", "unexpected", "mismatch", "size"))]


def corr(x: np.ndarray, y: np.ndarray) -> float:
    return float(np.corrcoef(x.ravel(), y.ravel())[0, 1])


@pytest.fixture(scope="module")
def smol(smollm2: Path) -> Iterator[Base]:
    yield Base(smollm2)


@pytest.fixture(scope="module")
def qwen(tiny_qwen3: Path) -> Iterator[Base]:
    yield Base(tiny_qwen3)


@dataclass
class RoundTrip:
    base: Base
    original: Path  # the PEFT folder
    original_logits: np.ndarray
    gguf: Path  # convert_lora --outtype f32
    recovered: Path  # gguf_lora_to_peft of that
    result: lp.PeftConversionResult


@pytest.fixture(scope="module", params=["smol", "qwen"], ids=["smollm2-llama", "tiny-qwen3"])
def trip(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> RoundTrip:
    base: Base = request.getfixturevalue(request.param)
    root = tmp_path_factory.mktemp(f"trip-{request.param}")
    logits = random_peft(base, root / "original", strength=0.5, seed=0)
    converted = convert_lora(root / "original", base.gguf, root / "adapter-f32.gguf", outtype="f32")
    result = lp.gguf_lora_to_peft(converted.path, base.gguf, root / "recovered")
    return RoundTrip(base, root / "original", logits, converted.path, root / "recovered", result)


# --------------------------------------------------------------------------- the permutation


def test_unpermute_rows_undoes_llama_cpp_rope_layout() -> None:
    assert lp.unpermute_rows(np.array([0, 2, 1, 3, 4, 6, 5, 7])[:, None], 2)[:, 0].tolist() == list(range(8))
    rng = np.random.default_rng(0)
    for n_head, head_dim in ((9, 64), (3, 64), (4, 2)):  # SmolLM2: 9 query heads, 3 KV heads of 64
        rows = rng.standard_normal((n_head * head_dim, 5)).astype(np.float32)
        assert np.array_equal(lp.unpermute_rows(permute_rows(rows, n_head), n_head), rows)
        assert np.array_equal(permute_rows(lp.unpermute_rows(rows, n_head), n_head), rows)
    with pytest.raises(ConversionError, match="cannot unpermute 6 rows from 2 rope heads"):
        lp.unpermute_rows(np.zeros((6, 1)), 2)


# --------------------------------------------------------------------------- round trips


@pytest.mark.slow
def test_round_trip_gives_back_the_peft_tensors_exactly(trip: RoundTrip) -> None:
    original = load_file(str(trip.original / "adapter_model.safetensors"))
    recovered = load_file(str(trip.recovered / "adapter_model.safetensors"))
    assert sorted(recovered) == sorted(original) and len(recovered) == 2 * trip.result.tensor_pairs
    for key, value in original.items():
        assert recovered[key].dtype == np.float32 and np.array_equal(recovered[key], value), key
    # On llama the GGUF holds q/k lora_B in llama.cpp's row order: equality above means it was undone.
    _, in_gguf = gguf_tensors(trip.gguf)
    q_b = in_gguf["blk.0.attn_q.weight.lora_b"][1]
    q_peft = original["base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight"]
    assert np.array_equal(q_b, q_peft) is (not trip.result.unpermuted)
    assert trip.result.unpermuted is (trip.result.architecture == "llama")


@pytest.mark.slow
def test_round_trip_keeps_the_lora_settings_train_sft_wrote(trip: RoundTrip) -> None:
    original = json.loads((trip.original / "adapter_config.json").read_text())
    recovered = json.loads((trip.recovered / "adapter_config.json").read_text())
    for key in ("peft_type", "task_type", "r", "lora_alpha", "lora_dropout", "bias", "use_rslora", "use_dora",
                "rank_pattern", "alpha_pattern", "modules_to_save", "fan_in_fan_out"):
        assert recovered[key] == original[key], key
    assert sorted(recovered["target_modules"]) == sorted(original["target_modules"]) == sorted(ALL_TARGETS)
    assert recovered["base_model_name_or_path"] is None  # PEFT fills in the base it is next trained on
    assert (trip.result.rank, trip.result.alpha, set(trip.result.targets)) == (8, 16.0, set(ALL_TARGETS))


@pytest.mark.slow
def test_recovered_folder_loads_trainable_with_the_original_logits_and_gradients(trip: RoundTrip) -> None:
    model, warned = trip.base.load_peft(trip.recovered)
    assert problems(warned) == [], warned
    saved = load_file(str(trip.recovered / "adapter_model.safetensors"))
    state = get_peft_model_state_dict(model)
    assert sorted(state) == sorted(saved)  # nothing missing, nothing unexpected
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert len(trainable) == len(saved) and all(".lora_" in n for n in trainable)
    logits = trip.base.hf_logits(model.eval())
    effect = float(np.abs(trip.original_logits - trip.base.hf_base).mean())
    assert effect > 0.5, effect  # a strong adapter: equality below is not base == base
    np.testing.assert_allclose(logits, trip.original_logits, atol=1e-4, rtol=0)
    # and training can go on from it: a loss reaches every LoRA weight
    model.train()
    ids = torch.tensor([trip.base.tokens])
    model(ids, labels=ids).loss.backward()
    assert all(p.grad is not None and float(p.grad.abs().sum()) > 0
               for n, p in model.named_parameters() if n in trainable)


@pytest.mark.slow
def test_recovered_folder_converts_forward_to_the_same_gguf(trip: RoundTrip, tmp_path: Path) -> None:
    again = convert_lora(trip.recovered, trip.base.gguf, tmp_path / "again.gguf", outtype="f32")
    meta_in, tensors_in = gguf_tensors(trip.gguf)
    meta_out, tensors_out = gguf_tensors(again.path)
    assert meta_out == meta_in
    assert sorted(tensors_out) == sorted(tensors_in)
    for name, (kind, data) in tensors_in.items():
        assert tensors_out[name][0] == kind == "F32" and np.array_equal(tensors_out[name][1], data), name


@pytest.mark.slow
def test_f16_gguf_comes_back_as_float32_equal_to_the_f16_rounded_original(smol: Base, tmp_path: Path) -> None:
    random_peft(smol, tmp_path / "original", strength=0.5, seed=3)
    converted = convert_lora(tmp_path / "original", smol.gguf, tmp_path / "adapter.gguf")  # f16, the default
    result = lp.gguf_lora_to_peft(converted.path, smol.gguf, tmp_path / "recovered")
    assert result.source_types == ("F16",)
    original = load_file(str(tmp_path / "original" / "adapter_model.safetensors"))
    recovered = load_file(str(tmp_path / "recovered" / "adapter_model.safetensors"))
    for key, value in original.items():
        assert recovered[key].dtype == np.float32
        assert np.array_equal(recovered[key], value.astype(np.float16).astype(np.float32)), key


# --------------------------------------------------------------------------- adapters that never were PEFT


@pytest.mark.slow
def test_shipped_demo_adapter_becomes_a_trainable_peft_adapter(smol: Base, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "demo-peft"
    assert models_main(["lora-to-peft", str(DEMO_ADAPTER), "--base", str(smol.gguf), "--out", str(out)]) == 0
    printed = capsys.readouterr().out.strip()
    assert printed.startswith(f"{out}: PEFT LoRA, 210 pairs") and "rank 16, alpha 32, llama" in printed, printed
    config = json.loads((out / "adapter_config.json").read_text())
    assert (config["r"], config["lora_alpha"], config["peft_type"], config["task_type"]) == (16, 32.0, "LORA", "CAUSAL_LM")
    assert config["target_modules"] == ALL_TARGETS and config["rank_pattern"] == {}
    tensors = load_file(str(out / "adapter_model.safetensors"))
    assert len(tensors) == 420 and {v.dtype for v in tensors.values()} == {np.dtype(np.float32)}
    assert {k.split(".")[4] for k in tensors} == set(map(str, range(30)))

    model, warned = smol.load_peft(out)
    assert problems(warned) == [], warned
    assert sorted(get_peft_model_state_dict(model)) == sorted(tensors)
    assert sum(p.numel() for p in model.parameters() if p.requires_grad) == sum(v.size for v in tensors.values())

    # transformers+peft with the recovered folder changes the logits as llama.cpp with the GGUF does
    hf_delta = smol.hf_logits(model.eval()) - smol.hf_base
    cpp_delta = smol.cpp_logits(DEMO_ADAPTER) - smol.cpp_base
    noise = float(np.abs(smol.hf_base - smol.cpp_base).mean())
    assert float(np.abs(cpp_delta).mean()) > 5 * noise
    assert corr(hf_delta, cpp_delta) > 0.95

    # and back to f16 GGUF: the shipped file's tensors, bit for bit
    again = convert_lora(out, smol.gguf, tmp_path / "again.gguf")
    meta_in, tensors_in = gguf_tensors(DEMO_ADAPTER)
    meta_out, tensors_out = gguf_tensors(again.path)
    assert meta_out == meta_in and sorted(tensors_out) == sorted(tensors_in)
    for name, (kind, data) in tensors_in.items():
        assert tensors_out[name][0] == kind == "F16" and np.array_equal(tensors_out[name][1], data), name


def _write_gguf(out: Path, arch: str, tensors: list[tuple[str, np.ndarray]], alpha: float | None = 8.0,
                extra: dict[str, list[int]] | None = None) -> Path:
    """A LoRA GGUF written the way llama.cpp's converter does; ``alpha=None`` leaves the key out."""
    writer = gguf.GGUFWriter(str(out), arch)
    writer.add_type(gguf.GGUFType.ADAPTER)
    writer.add_string(gguf.Keys.Adapter.TYPE, "lora")
    if alpha is not None:
        writer.add_float32(gguf.Keys.Adapter.LORA_ALPHA, alpha)
    for key, value in (extra or {}).items():
        writer.add_array(key, value)
    for name, data in tensors:
        writer.add_tensor(name, np.ascontiguousarray(data, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return out


def _shapes(base: Path) -> dict[str, tuple[int, ...]]:
    """The base's tensor shapes in ggml order, from the header alone (GGUFReader parses Qwen's vocabulary for seconds)."""
    reader = HeaderReader(base)
    try:
        return {t.name: t.dims for t in reader.tensor_infos}
    finally:
        reader.close()


def _pair(rng: np.random.Generator, name: str, n_in: int, n_out: int, rank: int,
          scale: float) -> list[tuple[str, np.ndarray]]:
    return [(f"{name}.weight.lora_a", rng.standard_normal((rank, n_in)) / n_in**0.5),
            (f"{name}.weight.lora_b", rng.standard_normal((n_out, rank)) * scale / rank**0.5)]


@pytest.mark.slow
def test_partial_mixed_rank_adapter_without_alpha_does_in_peft_what_it_does_in_llama_cpp(
        qwen: Base, tmp_path: Path) -> None:
    # q_proj on both layers (ranks 4 and 2), down_proj on layer 1 only, no adapter.lora.alpha:
    # llama.cpp then scales every pair by 1, whatever its rank.
    shapes = _shapes(qwen.gguf)
    rng = np.random.default_rng(5)
    tensors = []
    for name, rank in (("blk.0.attn_q", 4), ("blk.1.attn_q", 2), ("blk.1.ffn_down", 4)):
        n_in, n_out = shapes[f"{name}.weight"]
        tensors += _pair(rng, name, n_in, n_out, rank, scale=1.5)
    adapter = _write_gguf(tmp_path / "partial.gguf", "qwen3", tensors, alpha=None)
    result = lp.gguf_lora_to_peft(adapter, qwen.gguf, tmp_path / "peft")
    assert (result.rank, result.ranks, result.alpha, result.tensor_pairs) == (4, (2, 4), 4.0, 3)
    config = json.loads((tmp_path / "peft" / "adapter_config.json").read_text())
    assert config["target_modules"] == ["model.layers.0.self_attn.q_proj", "model.layers.1.self_attn.q_proj",
                                        "model.layers.1.mlp.down_proj"]
    assert config["rank_pattern"] == {"model.layers.1.self_attn.q_proj": 2}
    assert config["alpha_pattern"] == {"model.layers.1.self_attn.q_proj": 2.0}

    model, warned = qwen.load_peft(tmp_path / "peft")
    assert problems(warned) == [], warned
    lora_layers = {n: m for n, m in model.named_modules() if isinstance(getattr(m, "scaling", None), dict)}
    assert sorted(n.removeprefix("base_model.model.") for n in lora_layers) == sorted(config["target_modules"])
    assert all(m.scaling["default"] == 1.0 for m in lora_layers.values())
    hf_delta = qwen.hf_logits(model.eval()) - qwen.hf_base
    cpp_delta = qwen.cpp_logits(adapter) - qwen.cpp_base
    assert float(np.abs(cpp_delta).mean()) > 0.1, "the adapter must move the logits"
    assert corr(hf_delta, cpp_delta) > 0.999


@pytest.mark.slow
def test_fixture_gguf_lora_does_in_peft_what_it_does_in_llama_cpp(qwen: Base, tiny_qwen3_lora: Path,
                                                                   tmp_path: Path) -> None:
    result = lp.gguf_lora_to_peft(tiny_qwen3_lora, qwen.gguf, tmp_path / "peft")
    assert set(result.targets) == {"q_proj", "k_proj", "v_proj", "o_proj"} and not result.unpermuted
    model, warned = qwen.load_peft(tmp_path / "peft")
    assert problems(warned) == [], warned
    hf_delta = qwen.hf_logits(model.eval()) - qwen.hf_base
    cpp_delta = qwen.cpp_logits(tiny_qwen3_lora) - qwen.cpp_base
    assert float(np.abs(cpp_delta).mean()) > 0.1
    assert corr(hf_delta, cpp_delta) > 0.999


# --------------------------------------------------------------------------- refusals


def _refusal(capsys: pytest.CaptureFixture[str], adapter: Path, base: Path, out: Path) -> str:
    assert models_main(["lora-to-peft", str(adapter), "--base", str(base), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith(f"error: {adapter}: "), err
    assert not (out / "adapter_model.safetensors").exists()
    return err


@pytest.mark.parametrize(
    ("case", "reason"),
    [
        ("base_as_adapter", "is not a LoRA adapter (general.type is"),
        ("other_architecture", "architecture 'llama' does not match the base model's 'qwen3'"),
        ("other_model_adapter", "architecture 'qwen3' does not match the base model's 'llama'"),
        ("wrong_shapes", "do not multiply to the base shape"),
        ("transposed", "do not multiply to the base shape"),
        ("unpaired", "has no lora_b"),
        ("missing", "no such file"),
        ("garbage", "is not a GGUF file"),
        ("embeddings", "tensor token_embd.weight.lora_a is not a LoRA half of an attention or MLP projection"),
        ("activated_lora", "is an activated LoRA"),
    ],
)
def test_refuses_with_one_line(case: str, reason: str, tiny_qwen3: Path, smollm2: Path, tiny_qwen3_lora: Path,
                               broken_adapters: dict[str, Path], tmp_path: Path,
                               capsys: pytest.CaptureFixture[str]) -> None:
    base = tiny_qwen3
    if case == "base_as_adapter":
        adapter, base = smollm2, smollm2
    elif case == "other_architecture":
        adapter = broken_adapters["wrong_architecture"]
    elif case == "other_model_adapter":  # a real adapter of the tiny qwen3 offered for SmolLM2
        adapter, base = tiny_qwen3_lora, smollm2
    elif case in ("wrong_shapes", "transposed", "unpaired", "missing", "garbage"):
        adapter = broken_adapters[case]
    elif case == "embeddings":
        n_in, n_out = _shapes(tiny_qwen3)["token_embd.weight"]
        adapter = _write_gguf(tmp_path / "embd.gguf", "qwen3",
                              _pair(np.random.default_rng(0), "token_embd", n_in, n_out, 2, 1.0))
    else:
        n_in, n_out = _shapes(tiny_qwen3)["blk.0.attn_q.weight"]
        adapter = _write_gguf(tmp_path / "alora.gguf", "qwen3",
                              _pair(np.random.default_rng(0), "blk.0.attn_q", n_in, n_out, 2, 1.0),
                              extra={gguf.Keys.Adapter.ALORA_INVOCATION_TOKENS: [151644, 872]})
    assert reason in _refusal(capsys, adapter, base, tmp_path / "out")


def test_refuses_a_bad_base_naming_it(tiny_qwen3_lora: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "base.gguf").write_text("not a model")
    err = _refusal(capsys, tiny_qwen3_lora, tmp_path / "base.gguf", tmp_path / "out")
    assert f"base {tmp_path / 'base.gguf'}: is not a GGUF file" in err


def test_never_overwrites_an_adapter_folder(tiny_qwen3: Path, tiny_qwen3_lora: Path, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "trained"
    lp.gguf_lora_to_peft(tiny_qwen3_lora, tiny_qwen3, out)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    assert sorted(before) == ["adapter_config.json", "adapter_model.safetensors"]
    assert models_main(["lora-to-peft", str(tiny_qwen3_lora), "--base", str(tiny_qwen3), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"error: {tiny_qwen3_lora}: --out {out} already holds a PEFT adapter (adapter_config.json); "
                   "pick another folder")
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_weights_left_without_a_config_by_a_crash_are_finished_not_refused(tiny_qwen3: Path, tiny_qwen3_lora: Path,
                                                                            tmp_path: Path) -> None:
    """The config is renamed into place last; a conversion killed between the two renames leaves the
    weights alone. The next run (expert iteration converts its start once) finishes it."""
    out = tmp_path / "start-peft"
    out.mkdir()
    (out / "adapter_model.safetensors").write_bytes(b"half a conversion")
    result = lp.gguf_lora_to_peft(tiny_qwen3_lora, tiny_qwen3, out)
    assert (out / "adapter_config.json").is_file() and result.tensor_pairs > 0
    assert (out / "adapter_model.safetensors").read_bytes() != b"half a conversion"
