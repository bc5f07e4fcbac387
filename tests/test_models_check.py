"""The model/adapter checker: broken files refused with exit 2 and one line, good ones described."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import gguf
import numpy as np
import pytest

from models.check import check_adapter, check_model, require_loadable
from models.gguf_header import HeaderReader
from tests import model_fixtures as mf

REPO = Path(__file__).resolve().parent.parent

# broken file key -> a piece of the reason the checker must give
ADAPTER_REASONS = {
    "wrong_architecture": "does not match the base model's 'qwen3'",
    "wrong_shapes": "do not multiply to the base shape",
    "transposed": "lora_b",
    "unknown_tensor": "blk.999.attn_q.weight is not in the base model",
    "unpaired": "has no lora_b",
    "not_an_adapter": "is not a LoRA adapter (general.type is model)",
    "truncated": "truncated",
    "empty": "is empty",
    "garbage": "is not a GGUF file",
    "directory": "is a directory",
    "missing": "no such file",
}


def run_models(*args: str | Path, env_extra: dict[str, str] | None = None, tmp: Path) -> subprocess.CompletedProcess[str]:
    """``python -m models ...`` in a clean environment (no AGENT_* from the developer's shell)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_")}
    env["AGENT_DATA_DIR"] = str(tmp / "data")
    env["HF_HUB_CACHE"] = str(tmp / "hub")
    env.update(env_extra or {})
    return subprocess.run(
        [sys.executable, "-m", "models", *map(str, args)], cwd=REPO, env=env, capture_output=True, text=True, timeout=120
    )


def assert_refused(proc: subprocess.CompletedProcess[str], path: Path, reason: str) -> None:
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, proc.stderr
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"error: {path}: "), lines[0]
    assert reason in lines[0]


@pytest.mark.parametrize("key", sorted(ADAPTER_REASONS))
def test_broken_adapter_refused_by_verify(key: str, tiny_qwen3: Path, broken_adapters: dict[str, Path], tmp_path: Path) -> None:
    path = broken_adapters[key]
    proc = run_models("verify", "--model", tiny_qwen3, "--adapter", path, tmp=tmp_path)
    assert_refused(proc, path, ADAPTER_REASONS[key])


def test_transposed_adapter_reason(tiny_qwen3: Path, broken_adapters: dict[str, Path]) -> None:
    result = check_adapter(broken_adapters["transposed"], tiny_qwen3)
    assert not result.ok
    assert "rank mismatch" in result.reason or "do not multiply" in result.reason


def test_missing_lora_from_environment_is_an_error(tiny_qwen3: Path, tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "adapter.gguf"
    proc = run_models("verify", env_extra={"AGENT_MODEL_PATH": str(tiny_qwen3), "AGENT_LORA_PATH": str(missing)}, tmp=tmp_path)
    assert_refused(proc, missing, "no such file")


@pytest.mark.parametrize(
    "case, reason",
    [
        ("not_gguf_model", "is not a GGUF file"),
        ("unknown_architecture_model", "architecture 'iljeong-unknown-arch' is not supported"),
        ("missing", "no such file"),
        ("directory", "is a directory"),
        ("empty", "is empty"),
    ],
)
def test_bad_base_model_refused(case: str, reason: str, broken_adapters: dict[str, Path], tmp_path: Path) -> None:
    path = broken_adapters[case]
    assert_refused(run_models("verify", "--model", path, "--no-adapter", tmp=tmp_path), path, reason)
    result = check_model(path)
    assert not result.ok and reason in result.reason and "python -m models pull" in result.hint


def test_adapter_passed_as_model_refused(smollm2_lora: Path, tmp_path: Path) -> None:
    proc = run_models("verify", "--model", smollm2_lora, "--no-adapter", tmp=tmp_path)
    assert_refused(proc, smollm2_lora, "is a LoRA adapter, not a base model")


def test_adapter_for_other_model_refused(smollm2: Path, tiny_qwen3_lora: Path) -> None:
    result = check_adapter(tiny_qwen3_lora, smollm2)
    assert not result.ok
    assert "does not match the base model's 'llama'" in result.reason


def test_require_loadable_exits_2_with_one_line(tiny_qwen3: Path, broken_adapters: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        require_loadable(tiny_qwen3, broken_adapters["garbage"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"error: {broken_adapters['garbage']}: ")
    require_loadable(tiny_qwen3, None)  # a good model alone passes


def test_good_models_described(smollm2: Path, tiny_qwen3: Path) -> None:
    small = check_model(smollm2)
    assert small.ok, small.reason
    assert small.info["architecture"] == "llama"
    assert small.info["quantization"] == "Q4_1"
    assert small.info["context_length"] == 8192
    assert small.info["chat_template"] is True
    assert small.info["size_bytes"] == smollm2.stat().st_size
    assert small.info["tensor_count"] == 272
    qwen = check_model(tiny_qwen3)
    assert qwen.ok, qwen.reason
    assert qwen.info["architecture"] == "qwen3"
    assert qwen.info["vocab_size"] == mf.QWEN_VOCAB_SIZE


@pytest.mark.parametrize("rank, alpha", [(4, 8.0), (8, 32.0)])
def test_good_adapter_accepted_with_rank_and_alpha(smollm2: Path, tmp_path: Path, rank: int, alpha: float) -> None:
    lora = mf.build_lora(smollm2, tmp_path / "lora.gguf", rank=rank, alpha=alpha, targets=("attn_q", "attn_v"))
    result = check_adapter(lora, smollm2)
    assert result.ok, result.reason
    assert result.info["rank"] == rank
    assert result.info["alpha"] == alpha
    assert result.info["tensor_pairs"] == 2 * 30  # 30 layers of SmolLM2-135M
    assert result.info["targets"] == ["attn_q", "attn_v"]


def test_verify_prints_what_it_found(tiny_qwen3: Path, tiny_qwen3_lora: Path, tmp_path: Path) -> None:
    proc = run_models("verify", "--model", tiny_qwen3, "--adapter", tiny_qwen3_lora, tmp=tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert f"model: {tiny_qwen3}" in out and "architecture: qwen3" in out
    assert "chat template: hybrid: " in out and "context length:" in out and "quantization:" in out
    assert f"adapter: {tiny_qwen3_lora}" in out and "rank: 4  alpha: 8.0" in out


TEMPLATE_FAMILIES = {  # fixture -> (family, renders the tools itself)
    "smollm2": ("chatml", False),
    "2507": ("2507", True),
    "hybrid": ("hybrid", True),
}


@pytest.mark.parametrize("model", sorted(TEMPLATE_FAMILIES))
def test_the_template_family_is_named_with_who_renders_the_tools(model: str, tmp_path: Path) -> None:
    """The check names what the GGUF's template renders, and the runtime's renderer agrees on the
    tools: SmolLM2's ChatML gets the runtime's own tool block, both Qwen3 templates render theirs."""
    from agent.prompt import PromptRenderer
    from models.check import chat_template_of

    path = mf.smollm2_path() if model == "smollm2" else mf.tiny_qwen3_path(model)
    family, renders_tools = TEMPLATE_FAMILIES[model]
    result = check_model(path)
    assert (result.info["template_family"], result.info["template_renders_tools"]) == (family, renders_tools)
    reader = HeaderReader(path)
    try:
        assert PromptRenderer(chat_template_of(reader)).native_tools is renders_tools
    finally:
        reader.close()
    proc = run_models("verify", "--model", path, "--no-adapter", tmp=tmp_path)
    assert proc.returncode == 0, proc.stderr
    [line] = [line for line in proc.stdout.splitlines() if "chat template:" in line]
    assert line.startswith(f"  chat template: {family}: ")
    assert line.endswith("tools rendered by the template" if renders_tools else "the runtime writes its own tool block")


@pytest.mark.parametrize(("template", "family"), [
    ("", "unknown"),
    ("{% for m in messages %}", "unknown"),  # does not compile
    ("{{ raise_exception('no') }}", "unknown"),
    ("{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}", "unknown"),  # not ChatML
    ("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
     "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}", "chatml"),
])
def test_templates_of_no_known_family_are_unknown_and_never_raise(template: str, family: str) -> None:
    from models.templates import template_family

    found = template_family(template)
    assert found.name == family and found.renders_tools is False


def test_help_lists_subcommands(tmp_path: Path) -> None:
    proc = run_models("--help", tmp=tmp_path)
    assert proc.returncode == 0
    for word in ("pull", "verify", "list", "convert-lora", "lora-to-peft"):
        assert word in " ".join(proc.stdout.split())
    assert run_models("convert-lora", tmp=tmp_path).returncode == 2  # its arguments are required
    assert run_models("lora-to-peft", tmp=tmp_path).returncode == 2


# --------------------------------------------------------------------------- big files, headers only

F32_BIG = (65_536, 16_384)  # 4 GiB of f32


def write_header_only(path: Path, arch: str = "qwen3") -> int:
    """A GGUF whose header announces a 4 GiB tensor, without writing the data; returns the full size."""
    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_type("model")
    writer.add_context_length(4096)
    writer.add_chat_template("{{ messages }}")
    writer.add_tensor_info("token_embd.weight", F32_BIG[::-1], np.dtype(np.float32), F32_BIG[0] * F32_BIG[1] * 4)
    writer.add_tensor_info("output_norm.weight", (F32_BIG[0],), np.dtype(np.float32), F32_BIG[0] * 4)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    writer.close()
    reader = HeaderReader(path)
    end = max(t.offset + t.n_bytes for t in reader.tensor_infos)
    reader.close()
    return end


def test_truncated_big_file_refused(tmp_path: Path) -> None:
    path = tmp_path / "big.gguf"
    full = write_header_only(path)
    os.truncate(path, full - 1)  # one byte short: a download that stopped at the very end
    result = check_model(path)
    assert not result.ok
    assert result.reason == f"is truncated: the header describes {full} bytes but the file has {full - 1}"


def test_checker_reads_headers_only(tmp_path: Path) -> None:
    """A 4 GiB file whose data region is a hole: reading that data would fault in ~1M pages."""
    path = tmp_path / "sparse.gguf"
    full = write_header_only(path)
    os.truncate(path, full)
    assert path.stat().st_blocks * 512 < 1 << 20  # really sparse on this filesystem
    check_model(path)  # warm up imports
    before = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    result = check_model(path)
    elapsed = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_SELF)
    assert result.ok, result.reason
    assert result.info["size_bytes"] == full > 4 << 30
    faults = (after.ru_minflt - before.ru_minflt) + (after.ru_majflt - before.ru_majflt)
    data_pages = (full - 4096) // resource.getpagesize()
    print(f"check of a {full / 2**30:.1f} GiB file: {elapsed * 1000:.1f} ms, {faults} page faults")
    assert faults < data_pages // 100


def test_header_parse_of_full_qwen_vocabulary(tiny_qwen3: Path) -> None:
    """The tiny qwen3 carries the real 151,936-entry vocabulary and merges: all skipped, counted."""
    reader = HeaderReader(tiny_qwen3)
    try:
        assert reader.array_length("tokenizer.ggml.tokens") == mf.QWEN_VOCAB_SIZE
        assert reader.value("general.architecture") == "qwen3"
        ends = sorted((t.offset, t.offset + t.n_bytes) for t in reader.tensor_infos)
        assert ends[0][0] == reader.data_offset
        assert all(a_end <= b_start for (_, a_end), (b_start, _) in zip(ends, ends[1:]))
    finally:
        reader.close()
    t0 = time.perf_counter()
    check_model(tiny_qwen3)
    print(f"check of tiny qwen3 (full vocabulary): {(time.perf_counter() - t0) * 1000:.1f} ms")


@pytest.mark.parametrize("variant", mf.QWEN3_VARIANTS)
def test_doctor_prints_the_template_family(variant: str, tmp_path: Path) -> None:
    path = mf.tiny_qwen3_path(variant)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_")} | {"AGENT_DATA_DIR": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-m", "agent", "doctor", "--no-generate", "--model", str(path), "--no-adapter"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert f"  chat template: {variant}: " in proc.stdout
    assert "tools rendered by the template" in proc.stdout
