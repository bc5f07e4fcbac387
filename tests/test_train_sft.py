"""train sft: assistant-only masks, CLI refusals, and the whole path on SmolLM2.

The end-to-end test runs what the README documents, small: oracle episodes on the train split
-> export sft -> one LoRA step from the GGUF base -> convert -> the adapter passes the checks,
moves llama.cpp's logits, and an eval on the test split runs with it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from llama_cpp import Llama

from agent.__main__ import model_flags, settings_from
from agent.train import cli as train_cli
from agent.train.base import prepare_base
from agent.train.rows import read_rows
from agent.train.sft import assistant_spans, tokenize_rows
from agent.train.tokens import encode
from models.check import check_adapter
from tests import model_fixtures as mf

os.environ.setdefault("HF_HUB_OFFLINE", "1")
PY = sys.executable


def _cli(module: Any, argv: list[str]) -> int:
    """Run ``python -m agent <export|train> ...`` in-process through the module's own parser."""
    parser = argparse.ArgumentParser(prog="python -m agent")
    module.add_parser(parser.add_subparsers(dest="command"), [model_flags()])
    args = parser.parse_args(argv)
    return module.run(args, settings_from(args))


@pytest.fixture(scope="module")
def smol_base(smollm2: Path) -> Path:
    """SmolLM2 as a plain transformers folder, converted once per builder version."""
    return prepare_base(smollm2, mf.cache_root() / "train-bases")


@pytest.fixture(scope="module")
def export_dir(tmp_path_factory: pytest.TempPathFactory, smollm2: Path) -> Path:
    """Verified oracle episodes of the train split, exported for SmolLM2's tool-less template."""
    from agent.export import cli as export_cli

    root = tmp_path_factory.mktemp("export")
    run = subprocess.run([PY, "-m", "agent", "eval", "--policy", "oracle", "--split", "train", "--limit", "7",
                          "--out", str(root / "oracle"), "--no-progress"], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert _cli(export_cli, ["export", "sft", "--from", str(root / "oracle"), "--out", str(root / "sft"),
                             "--success-only", "--model", str(smollm2)]) == 0
    return root / "sft"


@pytest.fixture(scope="module")
def greeting_export(tmp_path_factory: pytest.TempPathFactory, smollm2: Path) -> Path:
    """One short verified row: an oracle greeting (``no_tool``) exported with the compact tool block.

    What the end-to-end test trains on: about 1,100 tokens, where a tool-using row with the full
    block is ~3,000 and one training step on it took 17 minutes on a busy machine.
    """
    from agent.export import cli as export_cli

    root = tmp_path_factory.mktemp("greeting")
    env = {**os.environ, "AGENT_TOOL_BLOCK": "compact"}
    run = subprocess.run([PY, "-m", "agent", "eval", "--policy", "oracle", "--split", "train", "--templates", "no_tool",
                          "--limit", "1", "--out", str(root / "oracle"), "--no-progress"],
                         capture_output=True, text=True, timeout=300, env=env)
    assert run.returncode == 0, run.stderr
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AGENT_TOOL_BLOCK", "compact")
        assert _cli(export_cli, ["export", "sft", "--from", str(root / "oracle"), "--out", str(root / "sft"),
                                 "--success-only", "--model", str(smollm2)]) == 0
    return root / "sft"


@pytest.fixture(scope="module")
def tokenizer(smol_base: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(smol_base))


def _assistant_text(tokenizer: Any, example: dict[str, list[int]]) -> str:
    return tokenizer.decode([t for t, m in zip(example["input_ids"], example["assistant_masks"]) if m])


def test_masks_cover_exactly_what_the_model_wrote(tokenizer: Any, export_dir: Path) -> None:
    rows = read_rows(export_dir)
    assert len(rows) == 7
    examples, dropped = tokenize_rows(tokenizer, rows, 100_000)
    assert not dropped and len(examples) == len(rows)  # ChatML: one text per conversation
    for row, example in zip(rows, examples):
        wrote = "".join(m["content"] + "<|im_end|>\n" for m in row["messages"] if m["role"] == "assistant")
        assert _assistant_text(tokenizer, example) == wrote
        first = example["assistant_masks"].index(1)
        assert tokenizer.decode(example["input_ids"][:first]).endswith("<|im_start|>assistant\n")
        assert len(example["input_ids"]) == len(example["assistant_masks"])


def test_truncation_keeps_the_start_and_drops_rows_without_assistant_tokens(tokenizer: Any, export_dir: Path) -> None:
    rows = read_rows(export_dir)
    full, _ = tokenize_rows(tokenizer, rows, 100_000)
    first = min(e["assistant_masks"].index(1) for e in full)
    cut, dropped = tokenize_rows(tokenizer, rows, first + 5)
    assert all(len(e["input_ids"]) == first + 5 for e in cut)
    assert dropped.get("no assistant tokens within --max-length", 0) == len(rows) - len(cut)
    _, none_left = tokenize_rows(tokenizer, rows, first)
    assert none_left == {"no assistant tokens within --max-length": len(rows)}


@pytest.fixture(scope="module")
def qwen3_tokenizer(tiny_qwen3_each: Path) -> Any:
    """transformers' tokenizer of the tiny qwen3 of each variant, as ``train sft`` loads it (its
    chat template comes from the GGUF through transformers, not from the runtime)."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(prepare_base(tiny_qwen3_each, mf.cache_root() / "train-bases")))


def test_qwen3_templates_train_each_turn_after_the_prompt_it_was_served(qwen3_tokenizer: Any, qwen3_variant: str) -> None:
    """One text per conversation, and each trained span is exactly what the model wrote. With the
    hybrid template the empty think block is the generation prompt (served, so not trained) and
    stays before the earlier turn, as the runtime's prompt kept it; the 2507 template has none."""
    call = {"id": "c0", "type": "function", "function": {"name": "search_events", "arguments": {"date": "2027-01-08"}}}
    messages = [
        {"role": "system", "content": "You manage a calendar."},
        {"role": "user", "content": "What is on tomorrow?"},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "content": "[]", "tool_call_id": "c0", "name": "search_events"},
        {"role": "assistant", "content": "Nothing is planned."},
    ]
    texts = assistant_spans(qwen3_tokenizer, messages, [{"type": "function", "function": {"name": "search_events"}}])
    assert len(texts) == 1
    [(rendered, [(s1, e1), (s2, e2)])] = texts
    text = rendered.text
    generation = mf.QWEN3_GENERATION_PROMPT[qwen3_variant]
    wrote = '<tool_call>\n{"name": "search_events", "arguments": {"date": "2027-01-08"}}\n</tool_call>'
    assert text[:s1].endswith("<|im_start|>user\nWhat is on tomorrow?<|im_end|>\n" + generation)
    assert text[s1:e1] == wrote + "<|im_end|>\n"
    assert text[e1:s2] == "<|im_start|>user\n<tool_response>\n[]\n</tool_response><|im_end|>\n" + generation
    assert text[s2:e2] == "Nothing is planned.<|im_end|>\n" and e2 == len(text)


def test_the_runtime_and_the_export_render_the_same_conversation_byte_for_byte(
        tiny_qwen3_each: Path, qwen3_tokenizer: Any, tmp_path: Path) -> None:
    """Real episodes (the oracle through the loop), exported as structured rows and read back as
    ``train sft`` reads them: the training text up to each assistant turn is the prompt the llama
    backend renders for that step from the stored history, the trained span is what the model
    wrote there, and transformers' tokens of the text are llama.cpp's."""
    from agent.backends.llama import LlamaBackend
    from agent.export.episodes import read_episodes
    from agent.export.sft import Selection, build_rows, write_sft
    from tests.export_helpers import run, suite

    s = suite()
    scenarios = [sc for sc in s.scenarios(per_template=1) if sc.template in ("multi_attendee", "delete_request")]
    run(s, tmp_path / "results", scenarios)
    tools = cli_tools()
    report = build_rows(read_episodes(tmp_path / "results"), Selection(success_only=True), "structured", default_tools=tools)
    write_sft(report, tmp_path / "sft")
    rows = read_rows(tmp_path / "sft", split=None)
    episodes = {e.scenario_id: e for e in read_episodes(tmp_path / "results")}
    backend = LlamaBackend(tiny_qwen3_each, n_ctx=4096, n_threads=1)
    checked = 0
    for row in rows:
        stored = episodes[row["scenario_id"]].messages
        [(rendered, spans)] = assistant_spans(qwen3_tokenizer, row["messages"], row["tools"])
        text = rendered.text
        steps = [i for i, m in enumerate(stored) if m["role"] == "assistant"]
        assert len(spans) == len(steps) > 1
        for i, (start, end) in zip(steps, spans):
            assert text[:start] == backend.render(stored[:i], tools)
            assert text[start:end] == stored[i]["content"] + "<|im_end|>\n"
            checked += 1
        ids = qwen3_tokenizer(text, add_special_tokens=False).input_ids
        assert ids == backend.tokenize(text, add_bos=False) == encode(qwen3_tokenizer, rendered)[0]
    assert checked >= 4


def cli_tools() -> list[dict[str, Any]]:
    from agent.config import Settings
    from agent.export import cli as export_cli

    return export_cli._default_tools(Settings())


@pytest.mark.parametrize(
    ("argv", "reason"),
    [
        (["--data", "{tmp}/missing"], "no sft.jsonl"),
        (["--data", "{export}", "--split", "dev"], "no rows in split 'dev'"),
        (["--data", "{export}", "--targets", "q_proj,lm_head"], "embeddings/output head"),
        (["--data", "{export}", "--base", "{tmp}/nope.gguf"], "no such file"),
    ],
)
def test_cli_refuses_with_one_line(argv: list[str], reason: str, export_dir: Path, smollm2: Path, tmp_path: Path,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    argv = [a.format(tmp=tmp_path, export=export_dir) for a in argv]
    base = [] if "--base" in argv else ["--base", str(smollm2)]
    assert _cli(train_cli, ["train", "sft", *base, "--out", str(tmp_path / "out"), *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and reason in err[0], err
    assert not (tmp_path / "out").exists()


def _logits(model: Path, lora: Path | None, tokens: list[int]) -> np.ndarray:
    llm = Llama(model_path=str(model), n_ctx=4096, n_threads=2, logits_all=True, verbose=False,
                lora_path=str(lora) if lora else None)
    try:
        llm.eval(tokens)
        return np.array(llm.scores[len(tokens) - 1], dtype=np.float32)
    finally:
        llm.close()


def _refused_for(setting: str, served: str, rows_had: str, export_dir: Path, smollm2: Path, tmp_path: Path,
                 monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """``train sft`` for a runtime whose ``setting`` is ``served`` refuses rows made with ``rows_had``:
    one line naming both values, exit 2, nothing written."""
    monkeypatch.setenv(f"AGENT_{setting.upper()}", served)
    argv = ["train", "sft", "--base", str(smollm2), "--data", str(export_dir), "--out", str(tmp_path / "out")]
    assert _cli(train_cli, argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{setting}={rows_had}" in err[0] and f"{setting}={served}" in err[0], err
    assert not (tmp_path / "out").exists()


def _rows(export_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (export_dir / "sft.jsonl").read_text(encoding="utf-8").splitlines()]


def test_rows_of_the_other_tool_block_are_refused(export_dir: Path, smollm2: Path, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Rows exported with the full block, training for a runtime that serves the compact one: no."""
    _refused_for("tool_block", "compact", "full", export_dir, smollm2, tmp_path, monkeypatch, capsys)


def test_rows_of_the_other_prompt_style_are_refused(export_dir: Path, smollm2: Path, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Rows played with the full system prompt, training for a runtime that serves the short one: no."""
    rows = _rows(export_dir)
    assert rows and {row["prompt_style"] for row in rows} == {"full"}  # export recorded what the episodes were played with
    _refused_for("prompt_style", "short", "full", export_dir, smollm2, tmp_path, monkeypatch, capsys)


def test_rows_played_without_the_date_list_are_refused_where_it_is_served(
        export_dir: Path, smollm2: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Rows whose system prompt had no list of days, training for a runtime that serves it: no."""
    rows = _rows(export_dir)
    assert rows and {row["date_grounding"] for row in rows} == {False}  # export recorded it
    _refused_for("date_grounding", "true", "false", export_dir, smollm2, tmp_path, monkeypatch, capsys)


def test_the_date_list_of_rows_from_before_it_was_recorded_is_read_from_their_system_message() -> None:
    from agent.prompt import system_prompt
    from agent.train.rows import check_date_grounding
    from agent.train.trainer import TrainError

    now = datetime(2026, 12, 5, 8, 0)
    grounded = [{"messages": [{"role": "system", "content": system_prompt(now, "Asia/Seoul", "", "short", "", True)}]}]
    plain = [{"messages": [{"role": "system", "content": system_prompt(now, "Asia/Seoul", "", "short")}]}]
    other = [{"messages": [{"role": "system", "content": "You are a pirate."}]}]
    check_date_grounding(grounded + other, True)
    check_date_grounding(plain + other, False)
    with pytest.raises(TrainError, match="date_grounding=true but this setup serves date_grounding=false"):
        check_date_grounding(grounded, False)
    with pytest.raises(TrainError, match="date_grounding=false but this setup serves date_grounding=true"):
        check_date_grounding(plain, True)


def test_structured_rows_are_refused_for_a_template_that_ignores_tools(export_dir: Path, smollm2: Path, tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """`export sft` without --model writes structured rows; SmolLM2's ChatML would drop their calls."""
    from agent.export import cli as export_cli

    oracle = export_dir.parent / "oracle"
    assert _cli(export_cli, ["export", "sft", "--from", str(oracle), "--out", str(tmp_path / "structured"),
                             "--success-only", "--assistant-format", "structured"]) == 0
    capsys.readouterr()
    argv = ["train", "sft", "--base", str(smollm2), "--data", str(tmp_path / "structured"), "--out", str(tmp_path / "out")]
    assert _cli(train_cli, argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "structured assistant format" in err[0] and "needs exact" in err[0], err
    assert not (tmp_path / "out").exists()


def test_row_format_is_read_from_the_row_or_its_messages() -> None:
    from agent.train.rows import row_format

    call = {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "f", "arguments": {}}}]}
    assert row_format({"assistant_format": "exact", "messages": []}) == "exact"
    assert row_format({"messages": [{"role": "user", "content": "hi"}, call]}) == "structured"
    assert row_format({"messages": [{"role": "system", "content": "# Tools\n<tools>\nf()\n</tools>"}]}) == "exact"
    assert row_format({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}) is None


def test_the_compact_row_is_short_and_shows_the_compact_block(greeting_export: Path, tokenizer: Any) -> None:
    [row] = read_rows(greeting_export)
    assert row["tool_block"] == "compact" and row["template"] == "no_tool"
    system = row["messages"][0]["content"]
    assert "search_events(date?: string" in system and '"pattern"' not in system
    examples, _ = tokenize_rows(tokenizer, [row], 100_000)
    # ~1,200 since the block names repeat, all_day and scope (1,080 before); ~3,900 with the full block
    assert len(examples[0]["input_ids"]) < 1350


@pytest.mark.slow
def test_end_to_end_train_convert_load_and_eval(smollm2: Path, smol_base: Path, greeting_export: Path, tokenizer: Any,
                                                tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Train, resume, convert, load and eval, all with the compact tool block (the setting is
    read from the environment by export, train and the eval subprocess alike)."""
    monkeypatch.setenv("ILJEONG_TRAIN_CACHE", str(smol_base.parent))
    monkeypatch.setenv("AGENT_TOOL_BLOCK", "compact")
    export_dir = greeting_export
    out = tmp_path / "lora"
    argv = ["train", "sft", "--base", str(smollm2), "--data", str(export_dir), "--out", str(out), "--limit", "1",
            "--max-steps", "1", "--lr", "5e-3", "--rank", "4", "--alpha", "8", "--save-steps", "1", "--convert", "--no-progress"]
    assert _cli(train_cli, argv) == 0
    summary = json.loads((out / "train_summary.json").read_text())
    assert summary["steps"] == 1 and np.isfinite(summary["final_loss"])
    assert (out / "checkpoints" / "checkpoint-1").is_dir()
    config = json.loads((out / "adapter_config.json").read_text())
    assert config["r"] == 4 and set(config["target_modules"]) == set(train_cli.DEFAULT_TARGETS.split(","))

    gguf = out / "adapter.gguf"
    check = check_adapter(gguf, smollm2)
    assert check.ok, check.reason
    assert check.info["tensor_pairs"] == 30 * 7 and check.info["rank"] == 4

    # The trained adapter moves llama.cpp's next-token logits on a training prompt.
    row = read_rows(export_dir, limit=1)[0]
    prompt = tokenizer.apply_chat_template(row["messages"][:2], tokenize=False, add_generation_prompt=True)
    tokens = tokenizer(prompt, add_special_tokens=False).input_ids
    base, adapted = _logits(smollm2, None, tokens), _logits(smollm2, gguf, tokens)
    assert np.abs(adapted - base).max() > 0.05

    # Resuming at the last checkpoint picks it up and trains no further step.
    assert _cli(train_cli, [*argv, "--resume"]) == 0
    assert json.loads((out / "train_summary.json").read_text())["steps"] == 1

    # The converted adapter runs through the same checks and eval path as any other (one short scenario).
    run = subprocess.run([PY, "-m", "agent", "eval", "--model", str(smollm2), "--adapter", str(gguf), "--split", "test",
                          "--templates", "no_tool", "--limit", "1", "--out", str(tmp_path / "eval"), "--no-progress"],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    assert len(list((tmp_path / "eval" / "episodes").glob("*.json"))) == 1
    assert json.loads((tmp_path / "eval" / "run.json").read_text())["adapter_sha256"]


@pytest.mark.slow
def test_end_to_end_on_the_hybrid_qwen3_template(tiny_qwen3: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The production format end to end, with the hybrid Qwen3 template (the calendar-rlvr base's):
    oracle episodes with a tool call, ``export sft --model`` (structured rows, as the template
    renders tools), one LoRA step on one text per conversation, convert; the adapter passes the
    checks and moves llama.cpp's logits on the prompt the runtime serves for the row's first step."""
    from agent.export import cli as export_cli
    from tests.renderers import renderer_for

    monkeypatch.setenv("ILJEONG_TRAIN_CACHE", str(mf.cache_root() / "train-bases"))
    monkeypatch.setenv("AGENT_TOOL_BLOCK", "compact")  # a short row: one step is quick on a CPU
    run = subprocess.run([PY, "-m", "agent", "eval", "--policy", "oracle", "--split", "train", "--templates",
                          "delete_request", "--limit", "1", "--out", str(tmp_path / "oracle"), "--no-progress"],
                         capture_output=True, text=True, timeout=300, env={**os.environ, "AGENT_TOOL_BLOCK": "compact"})
    assert run.returncode == 0, run.stderr
    assert _cli(export_cli, ["export", "sft", "--from", str(tmp_path / "oracle"), "--out", str(tmp_path / "sft"),
                             "--success-only", "--model", str(tiny_qwen3)]) == 0
    [row] = read_rows(tmp_path / "sft")
    assert row["assistant_format"] == "structured" and any(m.get("tool_calls") for m in row["messages"])
    out = tmp_path / "lora"
    argv = ["train", "sft", "--base", str(tiny_qwen3), "--data", str(tmp_path / "sft"), "--out", str(out),
            "--max-steps", "1", "--lr", "5e-2", "--rank", "4", "--alpha", "8", "--convert", "--no-progress"]
    assert _cli(train_cli, argv) == 0
    summary = json.loads((out / "train_summary.json").read_text())
    assert summary["steps"] == 1 and summary["examples"] == 1 and np.isfinite(summary["final_loss"])
    gguf = out / "adapter.gguf"
    check = check_adapter(gguf, tiny_qwen3)
    assert check.ok, check.reason

    stored = json.loads(next((tmp_path / "oracle" / "episodes").glob("*.json")).read_text())["messages"]
    first = next(i for i, m in enumerate(stored) if m["role"] == "assistant")
    prompt = renderer_for(tiny_qwen3, tool_block="compact").render(stored[:first], row["tools"])
    assert prompt.endswith(mf.QWEN3_GENERATION_PROMPT["hybrid"])
    llm = Llama(model_path=str(tiny_qwen3), vocab_only=True, verbose=False)
    tokens = llm.tokenize(prompt.encode(), add_bos=False, special=True)
    base, adapted = _logits(tiny_qwen3, None, tokens), _logits(tiny_qwen3, gguf, tokens)
    assert np.abs(adapted - base).max() > 1e-3


def test_the_loss_on_trained_positions_only_equals_the_models_own_loss(smol_base: Path, greeting_export: Path,
                                                                     tokenizer: Any) -> None:
    """The head runs on the positions whose next token is trained, and the loss is the same number
    as transformers' full-sequence loss with the prompt's labels masked."""
    import torch
    from transformers import AutoModelForCausalLM

    from agent.train.sft import trained_positions_trainer

    [example], _ = tokenize_rows(tokenizer, read_rows(greeting_export), 100_000)
    ids = torch.tensor([example["input_ids"]])
    labels = torch.where(torch.tensor([example["assistant_masks"]]) == 1, ids, torch.full_like(ids, -100))
    assert 0 < int((labels != -100).sum()) < ids.shape[1] // 2  # a real mix of prompt and answer
    model = AutoModelForCausalLM.from_pretrained(str(smol_base), dtype=torch.float32)
    with torch.no_grad():
        reference = model(input_ids=ids, labels=labels).loss
        ours = trained_positions_trainer(object).compute_loss(None, model, {"input_ids": ids, "labels": labels})
    assert torch.isfinite(ours) and torch.allclose(ours, reference, rtol=1e-4), (float(ours), float(reference))


@pytest.mark.slow
def test_a_bf16_run_writes_a_float32_adapter_that_converts_and_loads(smollm2: Path, smol_base: Path,
                                                                     greeting_export: Path, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """--bf16 runs the frozen base in bfloat16; the LoRA weights it trains stay float32 and the
    converted adapter passes the same checks as any other."""
    from safetensors import safe_open

    monkeypatch.setenv("ILJEONG_TRAIN_CACHE", str(smol_base.parent))
    monkeypatch.setenv("AGENT_TOOL_BLOCK", "compact")
    out = tmp_path / "lora"
    argv = ["train", "sft", "--base", str(smollm2), "--data", str(greeting_export), "--out", str(out), "--limit", "1",
            "--max-steps", "1", "--lr", "5e-3", "--rank", "4", "--alpha", "8", "--save-steps", "1", "--bf16",
            "--convert", "--no-progress"]
    assert _cli(train_cli, argv) == 0
    summary = json.loads((out / "train_summary.json").read_text())
    assert summary["options"]["bf16"] is True and np.isfinite(summary["final_loss"])
    assert summary["base_dtype"] == "torch.bfloat16"  # the frozen weights the run trained on
    with safe_open(str(out / "adapter_model.safetensors"), "pt") as f:
        assert {str(f.get_tensor(k).dtype) for k in f.keys()} == {"torch.float32"}
    check = check_adapter(out / "adapter.gguf", smollm2)
    assert check.ok, check.reason
    assert check.info["rank"] == 4
