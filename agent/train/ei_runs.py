"""An expert-iteration run's options, and what makes a re-run the same run.

A run lives in one folder and resumes there round by round, so a re-run with other options
would mix two recipes in it (round 0's dev episodes, the start's PEFT folder, the chosen train
scenarios, the rows). The options that make a run what it is are saved once
(``ei_options.json``) and compared on every re-run; the rounds a folder has finished
(``round-n/round.json``) are where a re-run starts after.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from agent.eval.runner import write_json_atomic
from agent.prompt import PromptSettings
from agent.train.trainer import DEFAULT_TARGETS, TrainError

ROUND = "round.json"
OPTIONS = "ei_options.json"
# What a run is: a re-run with any of these changed would mix two recipes in one folder (round 0's
# dev episodes, the start's PEFT folder, the chosen train scenarios, the rows), so it is refused.
# Not here: rounds (a re-run may add some), test_limit, stop_when_flat, threads, progress.
IDENTITY = ("base", "adapter", "start_peft", "policy", "seed", "per_template", "train_limit", "dev_limit", "samples",
            "temperature", "top_p", "best_only", "continue_adapter", "weigh_templates", "weight_floor",
            "fallback_policy", "policy_mix", "policy_templates", "policy_template_rows", "max_user_turns",
            "max_steps_per_turn", "max_tool_calls", "max_tokens", "tool_block", *PromptSettings().to_dict(),
            "rank", "alpha", "dropout", "targets", "epochs", "sft_max_steps", "lr", "grad_accum", "max_length", "bf16")
# What a run saved before an option existed ran with (as eval's run.json): resuming it with the
# option on is refused.
IDENTITY_DEFAULTS = PromptSettings().to_dict()


@dataclass
class EiOptions:
    base: Path
    out: Path
    rounds: int = 3
    samples: int = 4
    temperature: float = 0.7
    top_p: float = 1.0
    seed: int = 0
    per_template: int | None = None
    train_limit: int | None = None
    dev_limit: int | None = None
    test_limit: int | None = None  # 0/None: no test-split evaluation at the end
    best_only: bool = False
    continue_adapter: bool = False
    weigh_templates: bool = False  # sample each template in proportion to the start adapter's dev failure rate
    weight_floor: float = 0.2
    fallback_policy: str | None = None  # scenarios failed in every sample get this policy's episode as row
    policy_mix: float = 0.0  # and its rows for this many other train scenarios per solved one
    policy_templates: tuple[str, ...] = ()  # and its rows of train scenarios the domain serves only by name
    policy_template_rows: int = 0  # (a drill, say): this many per round, new ones each round
    stop_when_flat: bool = False  # stop once a round's dev success does not beat the best so far
    adapter: Path | None = None  # GGUF adapter to sample round 1 with (default: the bare base)
    start_peft: Path | None = None  # that adapter as a PEFT folder: round 1 continues training it (continue_adapter)
    policy: str | None = None  # sample round 1 with this scripted policy instead (bootstrapping, tests)
    max_user_turns: int = 4
    max_steps_per_turn: int = 8
    max_tool_calls: int = 16
    max_tokens: int = 512
    n_ctx: int = 8192
    n_threads: int | None = None
    tool_block: str = "full"
    prompt_settings: PromptSettings = PromptSettings()  # the runtime's: sampled, evaluated and trained with them
    # SFT per round
    rank: int = 16
    alpha: float = 32.0
    dropout: float = 0.05
    grad_accum: int = 1
    save_steps: int = 50
    targets: tuple[str, ...] = DEFAULT_TARGETS
    epochs: float = 1.0
    sft_max_steps: int = -1
    lr: float = 2e-4
    max_length: int = 4096
    bf16: bool = False  # each round's SFT as train sft --bf16
    progress: bool = True
    cache: Path | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def flat_options(opts: EiOptions) -> dict[str, Any]:
    """The options one key each, the prompt settings' beside the others: the flat keys that
    ``ei_options.json`` and ``ei_summary.json`` have always had, so older runs still compare."""
    flat: dict[str, Any] = {}
    for f in fields(opts):
        value = getattr(opts, f.name)
        flat.update(value.to_dict() if isinstance(value, PromptSettings) else {f.name: value})
    return flat


def run_identity(opts: EiOptions) -> dict[str, Any]:
    """The options that make a run what it is, with each file given by its sha256 (a path may move)."""
    from models.pull import sha256_file

    options = flat_options(opts)
    ident: dict[str, Any] = {}
    for key in IDENTITY:
        value = options[key]
        if isinstance(value, Path):
            value = sha256_file(value) if value.is_file() else str(value)
        ident[key] = list(value) if isinstance(value, tuple) else value
    return ident


def check_same_run(opts: EiOptions) -> None:
    """Write ``OUT/ei_options.json`` on a run's first start; on a re-run, refuse changed options."""
    path = opts.out / OPTIONS
    ident = run_identity(opts)
    if not path.is_file():
        write_json_atomic(path, ident)
        return
    before = json.loads(path.read_text(encoding="utf-8"))
    # An option newer than the saved run counts as its default there (the run was made without it),
    # as eval's run.json does; one with no default is not compared.
    changed = [k for k in IDENTITY if before.get(k, IDENTITY_DEFAULTS.get(k, ident[k])) != ident[k]]
    if changed:
        raise TrainError(f"{opts.out} holds a run with other options ({', '.join(changed)}); "
                         "use the same options to resume it, or another --out")


def finished_rounds(out: Path) -> list[dict[str, Any]]:
    """``round.json`` of every finished round, in order (stops at the first unfinished one)."""
    done = []
    n = 1
    while (out / f"round-{n}" / ROUND).is_file():
        done.append(json.loads((out / f"round-{n}" / ROUND).read_text(encoding="utf-8")))
        n += 1
    return done
