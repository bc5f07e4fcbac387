"""GRPO with LoRA: a thin wrapper over TRL's ``GRPOTrainer`` and the domain's environment.

The domain's ``grpo_env`` module (in the ``lab`` package beside its ``domain`` module, e.g.
``tools.calendar.lab.grpo_env``, or beside the ``domain`` module itself)
supplies ``ENVIRONMENT`` (passed as ``environment_factory=``), ``reward_func`` (the verifier's
reward, the one that trains) and ``REWARD_COMPONENTS`` with ``component_reward(name)`` (logged
with weight 0, so reward hacking shows in the logs as a total that rises while a component falls).
Every tool call of a rollout goes through the environment, which runs it through the runtime's
call gate (``agent.gate.run_call``): same validation, approvals, budgets and repeat rules.

What TRL 1.16.0 (installed here; read in ``trl/trainer/grpo_trainer.py`` and
``trl/chat_template_utils.py``) does with an environment, and what follows:
- ``reset(**row)`` gets every column of the prompt row; a string it returns is appended to the
  last prompt message, ``None`` leaves the prompt alone. The calendar rows already end with the
  user's opening message, so ``CalendarGRPOEnv.reset`` returns None.
- Environments are pooled and reused across batches (``reset`` again, not a new instance).
- Every public method except ``reset``/``get_reward`` is a tool; a call's return value is
  ``str()``-ed into a ``{"role": "tool", "name", "content"}`` message; an exception becomes
  ``{"error": str(e)}`` (the gate never raises, so calendar tools always return their own result).
  Tool-result tokens are masked out of the loss (``tool_mask``).
- An environment with ``get_reward`` is *also* added as a reward column named after its class,
  with weight 1. With ``reward_funcs=[reward_func]`` that would count the verifier's reward twice,
  so this wrapper sets that column's weight to 0 (it is still logged: it must equal the total).
- Tool calls are parsed from the generated text with a response template that TRL knows only for
  chat templates byte-identical to its own copies (Qwen2.5/Qwen3, Llama 3.1, ...); any other
  template raises. A GGUF's template that is not byte-identical (a re-published copy) but renders
  as one of the two Qwen3 families (``models.templates.template_family``) gets TRL's copy of *that
  family*: ``qwen3.jinja`` for the hybrid Qwen3, ``qwen3_instruct_2507.jinja`` for 2507. Mapping
  every Hermes template to 2507's (as this did before) trained a hybrid base on prompts without
  the empty think block the runtime serves it. Any other template is refused. SmolLM2's ChatML
  ignores tools altogether: TRL refuses it ("does not support tool calling"), so GRPO needs a
  Qwen3-family model.
- A template that is not prefix-preserving (the hybrid Qwen3's drops earlier think blocks) is
  replaced for training by TRL's prefix-preserving variant (``get_training_chat_template``), which
  writes the think block, empty with thinking off, before every assistant turn: the text the
  runtime's prompt keeps (``agent.prompt``). Rollouts render with the runtime's ``enable_thinking``.

How TRL 1.16.0 turns the rewards into a step (``_generate_and_score_completions``, ``_compute_loss``),
with the defaults this wrapper keeps (``multi_objective_aggregation="sum_then_normalize"``,
``scale_rewards="group"``, ``loss_type="dapo"``, ``num_iterations=1``, ``beta=0``):
- A rollout's reward is the weighted sum of the columns (here the verifier's alone: every other
  column has weight 0); a column's ``None`` (a component the scenario's kind lacks) is NaN and left
  out; its advantage is (reward − its group's mean) / (the group's std + 1e-4). A group whose
  rollouts all earn one reward has every advantage 0 and contributes no gradient:
  ``frac_reward_zero_std`` in the log is the share of such groups, and a step where it is 1.0
  has a zero gradient (only Adam's momentum from earlier steps still moves the weights).
  Identical rollouts cancel too, whatever their rewards, as a group's advantages sum to 0.
  ``--num-generations`` is the lever (more rollouts per prompt, fewer ties).
- The logged ``loss`` is −(advantage-weighted token count) / tokens, which is 0 whenever a group's
  rollouts have equal lengths, even while the gradient is not: read ``grad_norm`` to see a step.
  With ``num_iterations=1`` the importance ratio is exactly 1, so ``epsilon`` clipping never acts
  (with ``--use-vllm`` TRL also reweights by vLLM's own log-probabilities, its default
  ``vllm_importance_sampling_correction``).
- ``beta=0`` loads no reference model and adds no KL term. With ``--beta > 0`` and a new LoRA the
  reference is the base itself (TRL disables the adapter to compute it): no second copy of the weights.
- ``GRPOConfig.generation_kwargs`` (``--config-json``) go to transformers' ``GenerationConfig`` (or
  vLLM's ``SamplingParams`` with ``--use-vllm``), e.g. a ``sequence_bias`` that forces a rollout's
  first tool call in the test.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from agent.domain import present_modules
from agent.train.trainer import DEFAULT_TARGETS, TrainError, load_base_model, lora_config, resume_point, train_and_save, shared_trainer_args

SUMMARY = "grpo_summary.json"


@dataclass
class GrpoOptions:
    base: Path
    out: Path
    rows: list[dict[str, Any]]
    domain: str = "tools.calendar.domain"
    num_generations: int = 4
    max_steps: int = 100
    max_completion_length: int = 256
    max_tool_calls: int = 8  # TRL's max_tool_calling_iterations (the gate's budget still applies)
    rank: int = 16
    alpha: float = 32.0
    dropout: float = 0.05
    targets: tuple[str, ...] = DEFAULT_TARGETS
    lr: float = 1e-5
    batch_size: int | None = None  # rollouts per device step; default num_generations
    grad_accum: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    beta: float = 0.0
    save_steps: int = 50
    seed: int = 0
    resume: bool = False
    convert: bool = False
    use_vllm: bool = False
    vllm_mode: str = "server"
    progress: bool = True
    cache: Path | None = None
    bf16: bool = False  # base weights in bfloat16 and bf16 autocast (LoRA weights and optimizer stay float32), as train sft
    enable_thinking: bool = False  # the runtime's setting: the hybrid Qwen3's generation prompt depends on it
    extra: dict[str, Any] = field(default_factory=dict)  # further GRPOConfig fields (--config-json)


@dataclass
class GrpoResult:
    adapter_dir: Path
    gguf: Path | None
    steps: int
    seconds: float
    seconds_per_step: float
    reward_mean: float | None
    reward_std: float | None
    components: dict[str, float | None]


def domain_hooks(domain: str) -> Any:
    """The ``grpo_env`` module of the lab package beside the domain module (``tools.calendar.domain`` →
    ``tools.calendar.lab.grpo_env``), or else the one beside the domain module itself."""
    package = domain.rpartition(".")[0] if "." in domain else domain
    names = (package + ".lab.grpo_env", package + ".grpo_env")
    try:
        module = next(present_modules(names), None)
    except ModuleNotFoundError as exc:  # it exists, but an import inside it is missing
        raise TrainError(f"domain {domain!r}: its GRPO environment fails to import ({exc})") from exc
    if module is None:
        raise TrainError(f"domain {domain!r} has no GRPO environment (looked in {', '.join(names)})")
    for attr in ("ENVIRONMENT", "reward_func", "REWARD_COMPONENTS", "component_reward"):
        if not hasattr(module, attr):
            raise TrainError(f"{module.__name__} lacks {attr} (see tools/calendar/lab/grpo_env.py)")
    return module


def trl_template_of_family(template: str) -> str | None:
    """TRL's copy of the Qwen3 template ``template`` renders as (``models.templates``), or None."""
    from trl.chat_template_utils import qwen3_chat_template, qwen3_instruct_2507_chat_template

    from models.templates import template_family

    return {"hybrid": qwen3_chat_template, "2507": qwen3_instruct_2507_chat_template}.get(template_family(template).name)


def prepare_tokenizer(tokenizer: Any) -> Any:
    """Give the tokenizer a response template TRL can parse tool calls with (see the module docstring)."""
    from trl.chat_template_utils import add_response_schema, supports_tool_calling

    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    if not supports_tool_calling(tokenizer):
        raise TrainError("the base model's chat template does not render tool calls and tool results "
                         "(SmolLM2's ChatML ignores them): TRL's GRPO needs a Qwen3-family model")
    if getattr(tokenizer, "response_template", None) is not None or getattr(tokenizer, "response_schema", None) is not None:
        return tokenizer
    try:
        return add_response_schema(tokenizer)
    except ValueError:
        known = trl_template_of_family(tokenizer.chat_template or "")
        if known is None:
            raise TrainError("TRL cannot parse tool calls for this chat template (it knows Qwen2.5/Qwen3, Llama 3.1, "
                             "GLM-4, gpt-oss, ...), and it renders as neither Qwen3 template") from None
        tokenizer.chat_template = known  # the same text as the GGUF's: TRL's copy of its family
        return add_response_schema(tokenizer)


def grpo_config(opts: GrpoOptions, components: int) -> Any:
    """The ``GRPOConfig`` of a run: the flags and the shared trainer settings, overridden by
    ``--config-json`` (so any further GRPOConfig field reaches TRL unchanged)."""
    from trl import GRPOConfig

    fields: dict[str, Any] = {
        "output_dir": str(opts.out / "checkpoints"),
        "max_steps": opts.max_steps,
        "learning_rate": opts.lr,
        "per_device_train_batch_size": opts.batch_size or opts.num_generations,
        "gradient_accumulation_steps": opts.grad_accum,
        "num_generations": opts.num_generations,
        "max_completion_length": opts.max_completion_length,
        "max_tool_calling_iterations": opts.max_tool_calls,
        "temperature": opts.temperature,
        "top_p": opts.top_p,
        "beta": opts.beta,
        "reward_weights": [1.0] + [0.0] * components,  # components are logged, the total trains
        "chat_template_kwargs": {"enable_thinking": opts.enable_thinking},
        **shared_trainer_args(opts.save_steps, opts.seed, opts.progress),
        "bf16": opts.bf16,
        "use_vllm": opts.use_vllm,
        **({"vllm_mode": opts.vllm_mode} if opts.use_vllm else {}),
    }
    try:
        return GRPOConfig(**{**fields, **opts.extra})
    except TypeError as exc:  # a field GRPOConfig does not have
        raise TrainError(f"--config-json: {exc}") from None


def train_grpo(opts: GrpoOptions) -> GrpoResult:
    """Run GRPO on ``opts.rows`` (rows of ``export grpo``); write the PEFT adapter to ``opts.out``."""
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import GRPOTrainer

    from agent.train.base import prepare_base

    if not opts.rows:
        raise TrainError("no prompt rows")
    if opts.num_generations < 2:
        raise TrainError("--num-generations must be at least 2 (GRPO compares a prompt's rollouts)")
    hooks = domain_hooks(opts.domain)
    components = [hooks.component_reward(name) for name in hooks.REWARD_COMPONENTS]
    config = grpo_config(opts, len(components))  # a bad --config-json fails here, before any weights load
    resume_from = resume_point(opts.out / "checkpoints", opts.resume)
    base_dir = prepare_base(opts.base, opts.cache)
    tokenizer = prepare_tokenizer(AutoTokenizer.from_pretrained(str(base_dir)))
    model = load_base_model(base_dir, opts.bf16)
    peft_config = lora_config(opts.rank, opts.alpha, opts.dropout, opts.targets)
    trainer = GRPOTrainer(
        model=model, args=config, train_dataset=Dataset.from_list(opts.rows), processing_class=tokenizer,
        reward_funcs=[hooks.reward_func, *components], environment_factory=hooks.ENVIRONMENT, peft_config=peft_config,
    )
    # The environment's own get_reward column (added by TRL, weight 1) repeats reward_func: log only.
    for i, name in enumerate(trainer.reward_func_names):
        if name == hooks.ENVIRONMENT.__name__:
            trainer.reward_weights[i] = 0.0
    output, seconds = train_and_save(trainer, tokenizer, opts.out, resume_from)
    logs = [h for h in trainer.state.log_history if "reward" in h]
    last = logs[-1] if logs else {}
    steps = int(output.global_step)
    gguf_path = None
    if opts.convert:
        from models.convert_lora import convert_lora

        gguf_path = convert_lora(opts.out, opts.base, opts.out / "adapter.gguf", progress=opts.progress).path
    result = GrpoResult(
        adapter_dir=opts.out, gguf=gguf_path, steps=steps, seconds=round(seconds, 1),
        seconds_per_step=round(seconds / steps, 1) if steps else 0.0,
        reward_mean=last.get("reward"), reward_std=last.get("reward_std"),
        components={name: last.get(f"rewards/{name}/mean") for name in hooks.REWARD_COMPONENTS},
    )
    options = {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(opts).items() if k != "rows"}
    summary = {**asdict(result), "rows": len(opts.rows), "options": options, "base_dtype": str(model.dtype),
               "log_history": trainer.state.log_history}
    (opts.out / SUMMARY).write_text(json.dumps(summary, indent=2, default=str) + "\n", encoding="utf-8")
    return result
