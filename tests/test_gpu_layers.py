"""``gpu_layers`` (``AGENT_GPU_LAYERS``, ``--gpu-layers``): validated, passed to llama.cpp's model
params, all layers by default only on Apple silicon with a build that can offload (Metal).

No GPU here: what is tested is the value reaching llama.cpp, the default rule (the platform faked
at the decision function only), and that on a build without GPU offload any value runs the same
CPU kernels."""

from __future__ import annotations

from pathlib import Path

import llama_cpp
import numpy as np
import pytest

from agent.__main__ import build_parser, main
from agent.app import build_llama_backend
from agent.backends.llama.engine import default_gpu_layers
from agent.config import load_settings

INT32_MAX = 0x7FFFFFFF  # llama-cpp-python's spelling of -1 ("all layers") in model_params
CAN_OFFLOAD = bool(llama_cpp.llama_supports_gpu_offload())


@pytest.mark.parametrize("system, machine, offload, expected", [
    ("Darwin", "arm64", True, -1),   # Apple silicon, Metal build: everything on the GPU
    ("Darwin", "arm64", False, 0),   # a Mac build without Metal (GGML_METAL=OFF)
    ("Darwin", "x86_64", True, 0),   # an Intel Mac
    ("Linux", "x86_64", True, 0),    # a CUDA/Vulkan card may hold less than the model: opt in
    ("Linux", "x86_64", False, 0),   # this machine
])
def test_the_default_offloads_all_layers_only_on_apple_silicon_with_a_gpu_build(
        system: str, machine: str, offload: bool, expected: int) -> None:
    assert default_gpu_layers(system, machine, offload) == expected


def backend_with(tmp_path: Path, model: Path, **environ: str):
    settings = load_settings({"data_dir": str(tmp_path), "n_ctx": 256, "n_threads": 1},
                             environ={"AGENT_MODEL_PATH": str(model), "AGENT_NO_ADAPTER": "1", **environ})
    return build_llama_backend(settings)


def last_logits(backend) -> np.ndarray:
    engine = backend.engine
    engine.reset()
    engine.eval(backend.tokenize("<|im_start|>user\nHello<|im_end|>\n"))
    return engine.logits().copy()


def test_the_setting_reaches_llama_cpps_model_params_and_the_identity(tmp_path: Path, tiny_qwen3: Path) -> None:
    offloaded = {}
    for value, in_params in (("-1", INT32_MAX), ("0", 0), ("3", 3)):
        backend = backend_with(tmp_path, tiny_qwen3, AGENT_GPU_LAYERS=value)
        assert backend.engine.llm.model_params.n_gpu_layers == in_params
        assert backend.identity()["gpu_layers"] == (int(value) if CAN_OFFLOAD else 0)
        if value in ("-1", "0"):
            offloaded[value] = last_logits(backend)
    unset = backend_with(tmp_path, tiny_qwen3)
    assert unset.engine.gpu_layers == default_gpu_layers()
    if not CAN_OFFLOAD:  # no GPU backend compiled in: "all layers" runs the CPU's kernels, unchanged
        assert np.array_equal(offloaded["-1"], offloaded["0"])


@pytest.mark.parametrize("value", ["-2", "many"])
def test_a_bad_gpu_layers_value_is_one_line_and_exit_2(
        value: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("AGENT_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("AGENT_GPU_LAYERS", value)
    assert main(["doctor", "--no-generate"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: gpu_layers: ") and err.count("\n") == 1


def test_help_names_the_flag_and_its_environment_variable() -> None:
    text = " ".join(build_parser().format_help().split())
    assert "--gpu-layers N" in text and "AGENT_GPU_LAYERS" in text
