"""LoRA SFT on exported trajectories: TRL ``SFTTrainer`` + peft, base weights from the GGUF.

Assistant-only loss without ``{% generation %}`` markers: TRL's ``assistant_only_loss`` needs
a chat template with generation markers, which neither SmolLM2's ChatML nor Qwen3's template
in the GGUF has, and a rewritten template could render different tokens from the ones the
runtime shows the model. So the rows are rendered here by the runtime's renderer with the
model's own template (``assistant_spans``), and
each assistant turn's span is found by rendering the conversation up to it: the text the
template adds for message i (after the generation prompt) is what the model wrote. Those
tokens get ``assistant_masks`` = 1; TRL turns the mask into labels (-100 elsewhere).

Which rows may be trained is ``agent.train.rows``'s job; the LoRA, the base, checkpoints and
saving are shared with GRPO in ``agent.train.trainer``.

Everything heavy (torch, transformers, peft, trl, datasets) is imported inside functions.
"""

from __future__ import annotations

import functools
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from agent.segments import Rendered
from agent.train.rows import check_date_grounding, check_prompt_style, check_row_format, check_tool_block, read_rows
from agent.train.tokens import encode
from agent.train.trainer import (DEFAULT_TARGETS, TrainError, load_base_model, lora_config, resume_point,
                                 shared_trainer_args, train_and_save)

SUMMARY = "train_summary.json"


@dataclass
class SftOptions:
    """Everything ``train sft`` can be told; the defaults suit a small CPU run."""

    base: Path
    data: Path
    out: Path
    rank: int = 16
    alpha: float = 32.0
    dropout: float = 0.05
    targets: tuple[str, ...] = DEFAULT_TARGETS
    epochs: float = 1.0
    max_steps: int = -1
    stop_after: int | None = None  # stop after this many steps, keeping the schedule of max_steps
    lr: float = 2e-4
    batch_size: int = 1
    grad_accum: int = 1
    max_length: int = 4096
    split: str | None = "train"
    limit: int | None = None
    save_steps: int = 50
    seed: int = 0
    resume: bool = False
    convert: bool = False
    progress: bool = True
    cache: Path | None = None
    tool_block: str = "full"  # the runtime's setting; rows made with another block are refused
    prompt_style: str = "full"  # the runtime's setting; rows played with another system prompt are refused
    date_grounding: bool = False  # the runtime's setting; rows played with(out) the list of days are refused
    enable_thinking: bool = False  # the runtime's setting: the hybrid Qwen3's generation prompt depends on it
    init_adapter: Path | None = None  # a PEFT adapter folder to keep training (expert iteration's continue)
    bf16: bool = False  # base weights in bfloat16 and bf16 autocast (LoRA weights and optimizer stay float32)


@dataclass
class SftResult:
    """What a run produced: the PEFT adapter folder, the GGUF (with --convert) and figures."""

    adapter_dir: Path
    gguf: Path | None
    examples: int
    steps: int
    approx_tokens_seen: int  # input tokens the steps processed (mean row length x rows seen)
    seconds: float
    final_loss: float | None
    dropped: dict[str, int] = field(default_factory=dict)


def _tools(row: dict[str, Any]) -> list[dict[str, Any]] | None:
    tools = row.get("tools")
    if isinstance(tools, str):
        tools = json.loads(tools)
    return tools or None


def assistant_spans(tokenizer: Any, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, *,
                    enable_thinking: bool = False) -> list[tuple[Rendered, list[tuple[int, int]]]]:
    """Training texts for a conversation, each with the character spans the model wrote.

    Each text is a ``Rendered`` (its data spans known), so that ``agent.train.tokens.encode``
    tokenizes it as the runtime does: no special token where data lies.

    The texts are rendered by the runtime's own renderer (``agent.prompt.PromptRenderer``) with
    the base's chat template and the runtime's ``enable_thinking``, so a row trains on the bytes
    the runtime serves. The template alone would not: the hybrid Qwen3's re-renders an earlier
    turn without the empty think block the runtime's prompt kept before it, and its generation
    prompt (``<think>\n\n</think>\n\n`` with thinking off) would be trained as if the model
    wrote it. At inference, assistant turn i is generated after ``render(messages[:i],
    generation prompt)``; what ``render(messages[:i + 1])`` adds after that is the turn. The
    renderer keeps every such text a prefix of the whole conversation, so one text carries all
    turns; a template for which it cannot gets one text per assistant turn.
    """
    from agent.export.sft import served_messages

    renderer = _renderer(tokenizer.chat_template or "", tokenizer.bos_token or "", tokenizer.eos_token or "",
                         enable_thinking)
    if renderer.native_tools:  # structured rows: the calls back as the text the model wrote
        messages, shown = served_messages(messages, renderer.chat_format), list(tools or [])
    else:  # exact rows already hold the tool block and results as the runtime writes them
        shown = []

    def render(msgs: list[dict[str, Any]], gen: bool) -> Rendered:
        return renderer.render_parts(msgs, shown, add_generation_prompt=gen)

    full = render(messages, False)
    turns: list[tuple[Rendered, tuple[int, int]]] = []
    for i, m in enumerate(messages):
        if m.get("role") != "assistant":
            continue
        prompt = render(messages[:i], True).text
        upto = render(messages[: i + 1], False)
        if not upto.text.startswith(prompt):
            raise TrainError(f"assistant turn {i}: the chat template's generation prompt is not a prefix of the rendered turn")
        turns.append((upto, (len(prompt), len(upto.text))))
    if all(full.text.startswith(upto.text) for upto, _ in turns):
        return [(full, [span for _, span in turns])] if turns else []
    return [(upto, [span]) for upto, span in turns]


@functools.lru_cache(maxsize=4)
def _renderer(template: str, bos_token: str, eos_token: str, enable_thinking: bool) -> Any:
    """One runtime renderer per template and setting: compiling and probing the template for
    every row of a data set would repeat the same work thousands of times."""
    from agent.prompt import PromptRenderer

    return PromptRenderer(template, bos_token=bos_token, eos_token=eos_token, enable_thinking=enable_thinking)


def _bump(counter: dict[str, int], key: str) -> None:
    counter[key] = counter.get(key, 0) + 1


def tokenize_rows(tokenizer: Any, rows: list[dict[str, Any]], max_length: int, *,
                  enable_thinking: bool = False) -> tuple[list[dict[str, list[int]]], dict[str, int]]:
    """``input_ids`` + ``assistant_masks`` per training text (truncated to ``max_length``), and what was dropped."""
    out: list[dict[str, list[int]]] = []
    dropped: dict[str, int] = {}
    for row in rows:
        try:
            texts = assistant_spans(tokenizer, row["messages"], _tools(row), enable_thinking=enable_thinking)
        except TrainError:
            _bump(dropped, "template renders no generation prompt prefix")
            continue
        if not texts:
            _bump(dropped, "no assistant turn")
        for text, spans in texts:
            ids, offsets = encode(tokenizer, text)
            mask = [int(end > start and any(s <= start and end <= e for s, e in spans)) for start, end in offsets]
            ids, mask = ids[:max_length], mask[:max_length]
            if not any(mask):
                _bump(dropped, "no assistant tokens within --max-length")
                continue
            out.append({"input_ids": ids, "assistant_masks": mask})
    return out, dropped


def stop_after_callback(steps: int) -> Any:
    """A Trainer callback that ends the run after ``steps`` optimizer steps.

    The learning-rate schedule still runs towards ``--max-steps``, so stopping at step k gives
    the same adapter as checkpoint k of the full run: a checkpoint chosen on the dev split can
    be reproduced without training past it.
    """
    from transformers import TrainerCallback

    class _StopAfter(TrainerCallback):  # type: ignore[misc]
        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
            if state.global_step >= steps:
                control.should_training_stop = True
            return control

    return _StopAfter()


def trained_positions_trainer(base: type) -> type:
    """``base`` (TRL's ``SFTTrainer``) with a loss that sends only the trained positions through the LM head.

    TRL's loss scores every position of the row through the 49k-word head of SmolLM2 (on a
    CPU its chunked kernel does not skip the masked ones) and then zeroes the prompt's: with
    the assistant turns ~15 % of a row, most of that head's work in the forward and backward
    pass is thrown away. Here the model is asked for the logits of the positions whose next
    token is trained (``logits_to_keep``, transformers' own slice before the head), and the
    loss is the same token-mean cross entropy over those tokens. TRL's entropy and token
    accuracy metrics are not logged (they needed the full head).
    """
    import torch
    import torch.nn.functional as F

    class _TrainedPositionsOnly(base):  # type: ignore[misc, valid-type]
        def compute_loss(self, model: Any, inputs: dict[str, Any], return_outputs: bool = False,
                         num_items_in_batch: Any = None) -> Any:
            labels = inputs["labels"]
            targets = labels[:, 1:]
            keep = (targets != -100).any(dim=0).nonzero().squeeze(-1)  # position t predicts token t + 1
            forward = {k: v for k, v in inputs.items() if k != "labels"}
            outputs = model(**forward, use_cache=False, logits_to_keep=keep)
            picked = targets[:, keep]
            total = F.cross_entropy(outputs.logits.float().flatten(0, 1), picked.flatten(), ignore_index=-100,
                                    reduction="sum")
            count = num_items_in_batch if num_items_in_batch is not None else (picked != -100).sum()
            loss = total / torch.as_tensor(count, device=total.device).clamp(min=1)
            return (loss, outputs) if return_outputs else loss

    return _TrainedPositionsOnly


def train_sft(opts: SftOptions) -> SftResult:
    """Train a LoRA on the export at ``opts.data``; write the PEFT adapter to ``opts.out``."""
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    from agent.train.base import prepare_base

    rows = read_rows(opts.data, opts.split, opts.limit)
    check_tool_block(rows, opts.tool_block)
    check_prompt_style(rows, opts.prompt_style)
    check_date_grounding(rows, opts.date_grounding)
    check_row_format(rows, opts.base)
    base_dir = prepare_base(opts.base, opts.cache)
    tokenizer = AutoTokenizer.from_pretrained(str(base_dir))
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    examples, dropped = tokenize_rows(tokenizer, rows, opts.max_length, enable_thinking=opts.enable_thinking)
    if not examples:
        raise TrainError(f"{opts.data}: no usable rows ({dropped})")
    dataset = Dataset.from_list(examples)
    model = load_base_model(base_dir, opts.bf16)
    checkpoints = opts.out / "checkpoints"
    resume_from = resume_point(checkpoints, opts.resume)
    config = SFTConfig(
        output_dir=str(checkpoints),
        num_train_epochs=opts.epochs,
        max_steps=opts.max_steps,
        learning_rate=opts.lr,
        per_device_train_batch_size=opts.batch_size,
        gradient_accumulation_steps=opts.grad_accum,
        max_length=None,  # rows are already truncated to --max-length above
        bf16=opts.bf16,
        # TRL turns activation checkpointing on by default: it saves memory a 135M model does not
        # need here and costs a second forward pass per step
        activation_checkpointing=False,
        **shared_trainer_args(opts.save_steps, opts.seed, opts.progress),
    )
    peft_config = lora_config(opts.rank, opts.alpha, opts.dropout, opts.targets)
    if opts.init_adapter is not None:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, str(opts.init_adapter), is_trainable=True)
        peft_config = None  # the adapter's own config (rank, targets) continues
    callbacks = [stop_after_callback(opts.stop_after)] if opts.stop_after else None
    trainer = trained_positions_trainer(SFTTrainer)(model=model, args=config, train_dataset=dataset, processing_class=tokenizer,
                         peft_config=peft_config, callbacks=callbacks)
    output, seconds = train_and_save(trainer, tokenizer, opts.out, resume_from)
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    steps = int(output.global_step)
    seen = steps * opts.batch_size * opts.grad_accum
    tokens_seen = int(sum(len(e["input_ids"]) for e in examples) * seen / len(examples))
    gguf_path = None
    if opts.convert:
        from models.convert_lora import convert_lora

        gguf_path = convert_lora(opts.out, opts.base, opts.out / "adapter.gguf", progress=opts.progress).path
    result = SftResult(
        adapter_dir=opts.out, gguf=gguf_path, examples=len(examples), steps=steps, approx_tokens_seen=tokens_seen,
        seconds=round(seconds, 1), final_loss=losses[-1] if losses else None, dropped=dropped,
    )
    summary = {**asdict(result), "options": {k: str(v) if isinstance(v, Path) else v for k, v in asdict(opts).items()},
               "examples_seen": seen, "losses": losses, "base_dtype": str(model.dtype)}
    (opts.out / SUMMARY).write_text(json.dumps(summary, indent=2, default=str) + "\n", encoding="utf-8")
    return result
