"""``python -m agent train grpo`` for real: TRL GRPOTrainer, the calendar environment, the tiny Qwen3.

One optimizer step with 2 generations of one prompt on the tiny random-weight Qwen3 (the real
Qwen3 tokenizer and a Qwen3 chat template). What is forced, and how:

- The rollouts' first turn is a tool call, written by a logit bias (``generation_kwargs``'s
  ``sequence_bias``, keyed on the end of the opening prompt, so it applies to that turn only).
  TRL parses it, runs it on the environment, whose tools go through the runtime's gate, and
  lets the model write its reply after the tool result unforced.
- The trained reward is the test domain's (``tests/grpo_probe``): the verifier's plus 2.0 for
  the second rollout of the group. Rollouts of one prompt cannot be forced to earn different
  verifier rewards (forced rollouts are identical; unforced ones tie or not by chance), and with
  a tie every advantage is 0 and GRPO's step moves nothing; the probe's term makes every
  advantage non-zero by construction. The verifier's own reward and each of its components are
  still logged in their own columns, and the test replays each rollout on a fresh environment to
  check that those columns are the verifier's on exactly these rollouts.
- The weights move only if the two rollouts differ (GRPO's gradient is the sum over the group of
  advantage × log-probability gradient, and a group's advantages sum to zero, so two identical
  rollouts cancel; LoRA dropout is off so nothing else can break the tie). The replies after the
  tool result are sampled at temperature 16: the model's final hidden state is RMS-normed to
  length 8 and its output matrix is its N(0, 1) embedding, so each of the ~150,000 tokens absent
  from the context has a logit ~N(0, 64), and no token's logit exceeds |h|·|e| ≈ 8 × 11; divided
  by 16, no token gets more than ~2e-3 of the probability. Two replies of a dozen free tokens that
  coincide would take odds no float rounding produces.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from statistics import mean
from typing import Any

import pytest

from tests import model_fixtures as mf

FORCED_CALL = {"name": "search_events", "arguments": {"query": "치과"}}
BIAS = 10_000.0  # far above any logit of the tiny model (< ~64), also after dividing by the temperature


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_", "HF_"))}
    env.update(AGENT_DATA_DIR=str(tmp_path / "data"), HF_HUB_OFFLINE="1", AGENT_NO_ADAPTER="1",
               ILJEONG_TRAIN_CACHE=str(mf.cache_root() / "train-bases"), TRL_EXPERIMENTAL_SILENCE="1",
               OMP_NUM_THREADS="1")
    return env


def test_a_domain_without_a_grpo_environment_and_one_that_fails_to_import_are_told_apart(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The environment is looked for in the domain's ``lab`` package, then beside the domain: a
    module that is not there is passed over, one that is there but breaks on import is named as
    broken, not as absent."""
    from agent.train.grpo import domain_hooks
    from agent.train.trainer import TrainError

    (tmp_path / "broken_domain").mkdir()
    (tmp_path / "broken_domain" / "__init__.py").write_text("", encoding="utf-8")
    (tmp_path / "broken_domain" / "grpo_env.py").write_text("import no_such_package_here\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(TrainError, match=r"looked in nowhere_domain\.lab\.grpo_env, nowhere_domain\.grpo_env"):
        domain_hooks("nowhere_domain.domain")
    with pytest.raises(TrainError, match="fails to import .*no_such_package_here"):
        domain_hooks("broken_domain.domain")
    assert domain_hooks("tests.grpo_probe.domain").__name__ == "tests.grpo_probe.grpo_env"  # beside the domain
    assert domain_hooks("tools.calendar.domain").__name__ == "tools.calendar.lab.grpo_env"  # in its lab


def test_a_base_whose_template_ignores_tools_is_refused_in_one_line(smollm2: Path, tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "agent", "train", "grpo", "--base", str(smollm2), "--out", str(tmp_path / "o"),
         "--limit", "1", "--num-generations", "2", "--max-steps", "1", "--no-progress"],
        capture_output=True, text=True, env=_env(tmp_path), timeout=900,
    )
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1].startswith("error: the base model's chat template does not render tool calls")


@pytest.mark.parametrize("config, reason", [('{"no_such_field": 1}', "unexpected keyword argument 'no_such_field'"),
                                            ("[1]", "must be a JSON object"), ("{bf16", "is not JSON")])
def test_a_bad_config_json_is_refused_in_one_line_before_any_weights_load(config: str, reason: str, tiny_qwen3: Path,
                                                                          tmp_path: Path) -> None:
    out = tmp_path / "o"
    result = subprocess.run(
        [sys.executable, "-m", "agent", "train", "grpo", "--base", str(tiny_qwen3), "--out", str(out), "--limit", "1",
         "--num-generations", "2", "--max-steps", "1", "--config-json", config, "--no-progress"],
        capture_output=True, text=True, env={**_env(tmp_path), "ILJEONG_TRAIN_CACHE": str(tmp_path / "cache")},
        timeout=900,
    )
    assert result.returncode == 2
    (line,) = [x for x in result.stderr.splitlines() if x.startswith("error:")]
    assert line.startswith("error: --config-json") and reason in line
    assert not (tmp_path / "cache").exists() and not out.exists()  # no base converted, nothing written


def _ids(encoded: Any) -> list[int]:
    return list(encoded if isinstance(encoded, list) else encoded["input_ids"])


def _forcing_bias(base: Path, row: dict[str, Any]) -> list[list[Any]]:
    """``sequence_bias`` entries that make the first assistant turn exactly FORCED_CALL then <|im_end|>.

    Each entry biases one token of the call when the tokens before it are the end of the opening
    prompt plus the call so far; the key starts before the assistant header, at the user's last
    token, so the turn after a tool result (whose header follows ``</tool_response>``) is free."""
    from transformers import AutoTokenizer

    from agent.train.base import prepare_base
    from agent.train.grpo import prepare_tokenizer

    tokenizer = prepare_tokenizer(AutoTokenizer.from_pretrained(str(prepare_base(base, mf.cache_root() / "train-bases"))))
    render = lambda messages: _ids(tokenizer.apply_chat_template(  # noqa: E731 - TRL's rendering of a prompt
        messages, add_generation_prompt=True, tokenize=True, enable_thinking=False))
    opening = render(row["prompt"])
    turn_end = len(opening) - 1 - opening[::-1].index(tokenizer.convert_tokens_to_ids("<|im_end|>"))
    # user's last token, <|im_end|>, \n, <|im_start|>, assistant, \n (and the hybrid template's empty think block)
    key = opening[turn_end - 1:]
    after_tool = render([*row["prompt"], {"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": FORCED_CALL}]}, {"role": "tool", "name": "search_events", "content": "{}"}])
    assert after_tool[-6:] != key  # the bias cannot fire again after the tool result
    text = f"<tool_call>\n{json.dumps(FORCED_CALL, ensure_ascii=False)}\n</tool_call>"
    forced = tokenizer.encode(text, add_special_tokens=False) + [tokenizer.convert_tokens_to_ids("<|im_end|>")]
    return [[key + forced[: i + 1], BIAS] for i in range(len(forced))]


def _grpo_tokenizer(base: Path, template: str | None = None) -> Any:
    """The tokenizer ``train grpo`` prepares for ``base`` (optionally given another chat template first)."""
    from transformers import AutoTokenizer

    from agent.train.base import prepare_base
    from agent.train.grpo import prepare_tokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(prepare_base(base, mf.cache_root() / "train-bases")))
    if template is not None:
        tokenizer.chat_template = template
    return prepare_tokenizer(tokenizer)


def test_grpo_keeps_each_real_template_and_renders_rollouts_as_the_runtime_serves_them(
        tiny_qwen3_each: Path, qwen3_variant: str) -> None:
    """TRL knows both production templates as they are: nothing is swapped, tool calls parse, and the
    template GRPOTrainer renders multi-step rollouts with (its prefix-preserving training variant
    for the hybrid one) writes a call and its result byte for byte as the runtime's prompt does,
    the hybrid's empty think block before the earlier turn included."""
    from trl.chat_template_utils import get_training_chat_template, is_chat_template_prefix_preserving, parse_response

    from agent.formats import format_tool_call
    from tests.renderers import renderer_for

    tokenizer = _grpo_tokenizer(tiny_qwen3_each)
    assert tokenizer.chat_template == mf.qwen3_chat_template(qwen3_variant)
    # what GRPOTrainer.__init__ picks for rollouts with tools
    template = None if is_chat_template_prefix_preserving(tokenizer) else get_training_chat_template(tokenizer)
    assert (template is None) == (qwen3_variant == "2507")
    tools = [{"type": "function", "function": {"name": "search_events", "description": "Find events.", "parameters": {
        "type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}}}]
    opening = [{"role": "system", "content": "You manage a calendar."}, {"role": "user", "content": "치과 언제야?"}]
    prompt_ids = _ids(tokenizer.apply_chat_template(opening, tools=tools, chat_template=template, tokenize=True,
                                                    add_generation_prompt=True, enable_thinking=False))
    written = format_tool_call(FORCED_CALL["name"], FORCED_CALL["arguments"])
    ids = tokenizer.encode(written + "<|im_end|>", add_special_tokens=False)
    [parsed] = parse_response(tokenizer, ids, prefix=prompt_ids, tools=tools)["tool_calls"]  # as GRPOTrainer parses
    assert parsed["function"]["name"] == FORCED_CALL["name"] and parsed["function"]["arguments"] == FORCED_CALL["arguments"]
    result = {"role": "tool", "name": "search_events", "content": "{}"}
    rollout = opening + [{"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": FORCED_CALL}]}, result]
    trl_text = tokenizer.apply_chat_template(rollout, tools=tools, chat_template=template, tokenize=False,
                                             add_generation_prompt=True, enable_thinking=False)
    served = renderer_for(tiny_qwen3_each).render(opening + [{"role": "assistant", "content": written}, result], tools)
    assert trl_text == served
    assert served.count("<think>") == (2 if qwen3_variant == "hybrid" else 0)


def test_a_republished_qwen3_template_gets_trls_copy_of_its_own_family(tiny_qwen3_each: Path, qwen3_variant: str) -> None:
    """A GGUF's template that renders like a Qwen3 one but is not byte-identical to TRL's (here: one
    more comment) is swapped for TRL's copy of the same family, never of the other: a hybrid base
    given 2507's template would train on prompts without the think block the runtime serves."""
    copy = mf.qwen3_chat_template(qwen3_variant) + "{#- re-published -#}"
    assert _grpo_tokenizer(tiny_qwen3_each, copy).chat_template == mf.qwen3_chat_template(qwen3_variant)


def test_a_hermes_template_of_no_known_family_is_refused(tiny_qwen3: Path) -> None:
    """Qwen3-Thinking-style: the generation prompt opens a think block. Neither TRL copy renders it."""
    from agent.train.trainer import TrainError

    thinking = mf.qwen3_chat_template("2507").replace("{{- '<|im_start|>assistant\\n' }}\n{%- endif %}",
                                                     "{{- '<|im_start|>assistant\\n<think>\\n' }}\n{%- endif %}")
    assert thinking != mf.qwen3_chat_template("2507")
    with pytest.raises(TrainError, match="renders as neither Qwen3 template"):
        _grpo_tokenizer(tiny_qwen3, thinking)


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_one_grpo_step_on_real_rollouts_moves_the_adapter_which_loads_in_llama_cpp(tiny_qwen3: Path,
                                                                                    tmp_path: Path) -> None:
    import gguf
    from safetensors.numpy import load_file

    from agent.export.grpo import prompt_rows
    from tests.export_helpers import suite
    from tests.grpo_probe.grpo_env import SPREAD
    from tools.calendar.lab.grpo_env import REWARD_COMPONENTS, CalendarGRPOEnv, reward_func

    row = prompt_rows(suite(), split="train")[0]
    rows = tmp_path / "grpo.jsonl"
    rows.write_text(json.dumps(row, ensure_ascii=False) + "\n", encoding="utf-8")
    data = tmp_path / "data"
    data.mkdir()
    (data / "config.toml").write_text('domain = "tests.grpo_probe.domain"\n', encoding="utf-8")
    probe = tmp_path / "rollouts.jsonl"
    config = {"generation_kwargs": {"sequence_bias": _forcing_bias(tiny_qwen3, row)}}
    out = tmp_path / "grpo"
    result = subprocess.run(
        [sys.executable, "-m", "agent", "train", "grpo", "--base", str(tiny_qwen3), "--out", str(out),
         "--data", str(rows), "--num-generations", "2", "--max-steps", "1", "--max-completion-length", "64",
         "--max-tool-calls", "1", "--temperature", "16", "--rank", "4", "--alpha", "8", "--dropout", "0",
         "--lr", "1e-3", "--config-json", json.dumps(config), "--convert", "--no-progress"],
        capture_output=True, text=True, env={**_env(tmp_path), "GRPO_PROBE_LOG": str(probe)}, timeout=1400,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads((out / "grpo_summary.json").read_text(encoding="utf-8"))
    assert summary["steps"] == 1 and summary["rows"] == 1
    step = next(h for h in summary["log_history"] if "reward" in h)

    # (a) The rollouts are real: TRL generated them, parsed the forced call, and ran it on the
    # environment, whose gate recorded it; the tool message is the gate's result.
    rollouts = [json.loads(line) for line in probe.read_text(encoding="utf-8").splitlines()]
    assert [r["position"] for r in rollouts] == [0, 1]
    for r in rollouts:
        first, tool = r["completion"][0], r["completion"][1]
        assert [c["function"] for c in first["tool_calls"]] == [FORCED_CALL]
        assert [(c["name"], c["arguments"], c["status"]) for c in r["calls"]] == [
            (FORCED_CALL["name"], FORCED_CALL["arguments"], "ok")]
        assert tool["role"] == "tool" and tool["content"] == r["calls"][0]["result"]
    assert step["tools/call_frequency"] == 1.0
    # ... and the logged verifier columns are the verifier's on exactly these rollouts: replayed
    # on a fresh environment (the same calls, the same final reply), each scores the same.
    for r in rollouts:
        environment = CalendarGRPOEnv()
        environment.reset(**row)
        for message in r["completion"]:
            for call in message.get("tool_calls") or []:
                getattr(environment, call["function"]["name"])(**call["function"]["arguments"])
        assert reward_func([r["completion"]], [environment]) == [r["reward"]]
        assert environment._verdict().components == r["components"]
    verifier = [r["reward"] for r in rollouts]
    assert step["rewards/CalendarGRPOEnv/mean"] == pytest.approx(mean(verifier))
    for name in REWARD_COMPONENTS:
        assert step[f"rewards/{name}/mean"] == pytest.approx(mean(r["components"][name] for r in rollouts))
    assert summary["components"]["safety"] == step["rewards/safety/mean"]
    # the trained reward is reward_func alone (components and the environment column have weight 0)
    assert step["rewards/reward_func/mean"] == pytest.approx(mean(verifier) + SPREAD / 2)
    assert step["reward"] == pytest.approx(step["rewards/reward_func/mean"])

    # (b) Every advantage was non-zero, the two rollouts differ, and the step moved the adapter:
    # peft starts every lora_B at zero (lora_A random), so a non-zero lora_B is the step's doing.
    assert step["frac_reward_zero_std"] == 0.0
    assert rollouts[0]["completion"][2:] != rollouts[1]["completion"][2:]  # the unforced replies
    weights = load_file(str(out / "adapter_model.safetensors"))
    lora_b = {k: v for k, v in weights.items() if "lora_B" in k}
    assert len(lora_b) == 2 * 7  # 2 layers × the 7 default target modules
    assert all(abs(v).max() > 0 for v in lora_b.values())

    # (c) It converts (the trained tensors, not zeros) and loads next to the GGUF base in llama.cpp.
    from agent.backends.llama import LlamaBackend
    from models.check import check_pair

    adapter = out / "adapter.gguf"
    assert check_pair(str(tiny_qwen3), str(adapter)).ok
    converted = {t.name: t.data for t in gguf.GGUFReader(str(adapter)).tensors if t.name.endswith(".lora_b")}
    assert len(converted) == len(lora_b) and all(abs(v).max() > 0 for v in converted.values())
    backend = LlamaBackend(tiny_qwen3, lora_path=adapter, n_ctx=2048, n_threads=1)
    completion = backend.complete([{"role": "user", "content": "hi"}], [], max_tokens=4)
    assert completion.error is None and completion.generated_tokens > 0
    assert backend.identity()["adapter_sha256"]


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_a_bf16_grpo_step_keeps_the_lora_float32_and_the_adapter_converts_and_verifies(tiny_qwen3: Path,
                                                                                       tmp_path: Path) -> None:
    """--bf16 loads the frozen base in bfloat16 (the loader train sft uses) under bf16 autocast;
    peft adds the LoRA weights in float32, the GRPO step keeps them so, and the saved adapter
    converts and passes ``models verify`` like a float32 one. One unforced step of two short
    rollouts: what is checked is the dtypes and the files, not what the step learned."""
    from peft import get_peft_model
    from safetensors import safe_open

    from agent.export.grpo import prompt_rows
    from agent.train.base import prepare_base
    from agent.train.trainer import load_base_model, lora_config
    from tests.export_helpers import suite

    model = get_peft_model(load_base_model(prepare_base(tiny_qwen3, mf.cache_root() / "train-bases"), bf16=True),
                           lora_config(4, 8.0, 0.0, ("q_proj", "down_proj")))
    dtypes = {("lora_" in name, str(p.dtype)) for name, p in model.named_parameters()}
    assert dtypes == {(False, "torch.bfloat16"), (True, "torch.float32")}

    rows = tmp_path / "grpo.jsonl"
    rows.write_text(json.dumps(prompt_rows(suite(), split="train")[0], ensure_ascii=False) + "\n", encoding="utf-8")
    out = tmp_path / "grpo"
    result = subprocess.run(
        [sys.executable, "-m", "agent", "train", "grpo", "--base", str(tiny_qwen3), "--out", str(out),
         "--data", str(rows), "--num-generations", "2", "--max-steps", "1", "--max-completion-length", "16",
         "--max-tool-calls", "1", "--rank", "4", "--alpha", "8", "--bf16", "--convert", "--no-progress"],
        capture_output=True, text=True, env=_env(tmp_path), timeout=1400,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads((out / "grpo_summary.json").read_text(encoding="utf-8"))
    assert summary["steps"] == 1 and summary["options"]["bf16"] is True
    assert summary["base_dtype"] == "torch.bfloat16"  # the frozen weights the run trained on
    with safe_open(str(out / "adapter_model.safetensors"), "pt") as f:
        assert len(list(f.keys())) == 2 * 2 * 7  # lora_A and lora_B, 2 layers × the 7 default targets
        assert {str(f.get_tensor(k).dtype) for k in f.keys()} == {"torch.float32"}
    verify = subprocess.run(
        [sys.executable, "-m", "models", "verify", "--model", str(tiny_qwen3), "--adapter", str(out / "adapter.gguf")],
        capture_output=True, text=True, env=_env(tmp_path), timeout=300,
    )
    assert verify.returncode == 0, verify.stdout[-2000:] + verify.stderr[-2000:]
