"""The bench run's shared state: its configuration and what every figure builds on (backends,
runtimes on temp data, the report being filled).

Apart from ``agent.bench.runner`` (the order the families run in), so every figure module can
name ``Bench`` without importing the module that imports them all.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from agent.bench.report import Report


def domain_tools(settings: Any, data_dir: Path) -> list[dict[str, Any]]:
    """The configured domain's tool schemas, from the domain loaded on a throwaway ``data_dir``."""
    from agent.domain import load_domain

    domain = load_domain(replace(settings, data_dir=data_dir))
    try:
        return domain.registry.schemas()
    finally:
        domain.close()


@dataclass
class BenchConfig:
    model_path: str
    n_ctx: int
    n_threads: int | None
    quick: bool
    settings: Any  # agent.config.Settings (data_dir replaced by temp dirs)
    grammar_model: str | None = None  # a 151k-vocabulary GGUF for the grammar figure; None: test fixture
    only: str | None = None  # one family ("peers", "grammar", "jump"); None: all
    peer_scenarios: int | None = None  # None: the plan's (6, quick 1)
    peers: tuple[str, ...] | None = None  # which peers of figure 4 play (keys of ``peers.PEERS``); None: all
    # A LoRA adapter that passed ``models.check.check_pair`` with ``model_path``: every peer of
    # figure 4 runs it (the other figures measure the base model against a bare llama.cpp).
    lora_path: str | None = None
    lora_scale: float = 1.0

    @property
    def repeats(self) -> int:
        return 1 if self.quick else 3

    @property
    def max_tokens(self) -> int:
        return 24 if self.quick else 48


class Bench:
    """One run's shared state: the config, the report being filled, and the temp data dirs."""

    def __init__(self, config: BenchConfig) -> None:
        self.config = config
        self.report = Report()
        self.tmp = Path(tempfile.mkdtemp(prefix="iljeong-bench-"))
        self.runs = 0  # runtimes built so far; numbers their data dirs and session ids
        self.now = datetime.now(timezone.utc)  # the runtimes' clock, frozen at the start of the run

    def build_backend(self, model_path: str, n_ctx: int | None = None) -> Any:
        """A bare model (no adapter) with the settings' tool block: the figures measure the prompt
        the runtime would serve, not always the full block."""
        from agent.backends.llama import LlamaBackend

        return LlamaBackend(model_path, n_ctx=n_ctx or self.config.n_ctx, n_threads=self.config.n_threads,
                            tool_block=self.tool_block)

    def build_peer_backend(self) -> Any:
        """The runtime's backend in figure 4: the model with the run's adapter and the settings'
        tool block (an adapter is served with the block it was trained on)."""
        from agent.backends.llama import LlamaBackend

        cfg = self.config
        return LlamaBackend(cfg.model_path, cfg.lora_path, lora_scale=cfg.lora_scale, n_ctx=cfg.n_ctx,
                            n_threads=cfg.n_threads, tool_block=self.tool_block)

    @property
    def tool_block(self) -> str:
        return getattr(self.config.settings, "tool_block", "full")

    def build_runtime(self, backend: Any, max_steps: int) -> Any:
        """A fresh runtime on a fresh temp calendar, sessions and trajectory log; frozen clock."""
        from agent.app import build_runtime
        from agent.loop import Budgets

        self.runs += 1
        settings = replace(self.config.settings, data_dir=self.tmp / f"run{self.runs}")
        # one instant for the whole run: every episode's messages are the same text, whatever the hour
        runtime = build_runtime(settings, backend, clock=lambda: self.now)
        runtime.agent.budgets = Budgets(max_steps=max_steps, max_tool_calls=16, max_tokens=self.config.max_tokens)
        return runtime
