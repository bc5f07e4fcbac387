"""What every train command (``train sft``, ``train grpo``, expert iteration's rounds) shares
around the trainer: its error, the LoRA it puts on the base, the base's loading, the trainer
settings, resuming from a checkpoint and saving the adapter. One copy, so the commands cannot
drift apart.

Everything heavy (torch, transformers, peft) is imported inside functions.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

DEFAULT_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


class TrainError(ValueError):
    """Bad input for training; the message is one line."""


def _last_checkpoint(folder: Path) -> str | None:
    from transformers.trainer_utils import get_last_checkpoint

    return get_last_checkpoint(str(folder)) if folder.is_dir() else None


def resume_point(checkpoints: Path, resume: bool) -> str | None:
    """The checkpoint ``--resume`` continues from (None: start afresh, saying so when asked to resume)."""
    resume_from = _last_checkpoint(checkpoints) if resume else None
    if resume and resume_from is None:
        print(f"note: no checkpoint in {checkpoints}: starting from the beginning")
    return resume_from


def shared_trainer_args(save_steps: int, seed: int, progress: bool) -> dict[str, Any]:
    """The trainer settings every train command shares (SFT and GRPO): a checkpoint every
    ``save_steps`` with the last two kept (what ``--resume`` needs), a log line per step, no
    reporting service, the CPU when there is no GPU, data loaded in the main process."""
    import torch

    return {
        "save_strategy": "steps", "save_steps": save_steps, "save_total_limit": 2, "logging_steps": 1,
        "report_to": "none", "seed": seed, "disable_tqdm": not progress,
        "use_cpu": not torch.cuda.is_available(), "dataloader_num_workers": 0,
    }


def train_and_save(trainer: Any, tokenizer: Any, out: Path, resume_from: str | None) -> tuple[Any, float]:
    """Runs ``trainer`` (from the checkpoint ``resume_from`` when given) and writes the PEFT adapter
    and the tokenizer to ``out``; ``train sft`` and ``train grpo`` end the same way. Returns TRL's
    train output and the seconds the training took."""
    started = time.monotonic()
    output = trainer.train(resume_from_checkpoint=resume_from)
    seconds = time.monotonic() - started
    out.mkdir(parents=True, exist_ok=True)
    trainer.model.save_pretrained(str(out))
    tokenizer.save_pretrained(str(out))
    return output, seconds


def lora_config(rank: int, alpha: float, dropout: float, targets: Any) -> Any:
    """The LoRA every train command puts on the base (``--rank --alpha --dropout --targets``)."""
    from peft import LoraConfig

    return LoraConfig(r=rank, lora_alpha=alpha, lora_dropout=dropout, target_modules=list(targets),
                      task_type="CAUSAL_LM", bias="none")


def load_base_model(base_dir: Path, bf16: bool) -> Any:
    """The base every train command puts its LoRA on, from ``prepare_base``'s float folder.

    ``--bf16`` loads the frozen weights in bfloat16: half the memory of float32 (8 GB instead of
    16 GB for a 4B) and, under the trainer's bf16 autocast, matrix products a CPU with AMX runs
    natively. peft still adds the LoRA weights in float32 (``autocast_adapter_dtype``), so the
    optimizer and the saved adapter stay float32. One loader, so SFT and GRPO cannot drift apart.
    """
    import torch
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(str(base_dir), dtype=torch.bfloat16 if bf16 else torch.float32)
