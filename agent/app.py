"""Composition root: Settings → checked model → backend → domain → Runtime.

Every entry point that loads a model (REPL, bot, eval, bench) comes through here, so the
model/adapter checks run before llama.cpp ever sees a path.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Callable

from agent.backends.base import Backend
from agent.config import Settings
from agent.domain import Domain, load_domain
from agent.loop import Agent, Budgets
from agent.runtime import Runtime
from agent.sessions import SessionStore
from agent.trajectory import TrajectoryLog


def build_llama_backend(settings: Settings, demo: bool = False) -> Backend:
    """Resolve and check the model files (exit 2 with one line on failure), then load them."""
    from agent.backends.llama import LlamaBackend
    from models.check import require_loadable
    from models.resolve import resolve_or_exit

    model_path, lora_path = resolve_or_exit(settings, demo=demo)
    require_loadable(model_path, lora_path)
    return LlamaBackend(
        model_path=model_path,
        lora_path=lora_path,
        lora_scale=settings.lora_scale,
        n_ctx=settings.n_ctx,
        n_threads=settings.n_threads,
        enable_thinking=settings.enable_thinking,
        max_saved_state_mb=settings.state_cache_mb,
        tool_block=settings.tool_block,
        checked=True,  # require_loadable just ran; don't read the headers twice
    )


Clock = Callable[[], datetime]


def wall_clock() -> datetime:
    return datetime.now(timezone.utc)


def system_prompt_factory(settings: Settings, domain: Domain, clock: Clock = wall_clock) -> Callable[[], str]:
    """The system message for the day of ``clock()`` in the user's zone."""
    from agent.prompt import system_prompt

    return lambda: system_prompt(clock(), settings.tz, domain.prompt)


def user_stamp_factory(settings: Settings, clock: Clock = wall_clock) -> Callable[[str], str]:
    """Stamps a user's message with the local time of ``clock()`` as it enters the conversation."""
    from agent.prompt import stamp_user_text

    return lambda text: stamp_user_text(clock(), settings.tz, text)


def build_runtime(settings: Settings, backend: Backend, domain: Domain | None = None,
                  clock: Clock = wall_clock) -> Runtime:
    domain = domain or load_domain(settings)
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    agent = Agent(
        backend,
        domain.registry,
        Budgets(max_steps=settings.max_steps, max_tool_calls=settings.max_tool_calls),
    )
    return Runtime(
        agent=agent,
        domain=domain,
        sessions=SessionStore(settings.sessions_path),
        log=TrajectoryLog(settings.data_dir / "trajectories.sqlite3"),
        system_prompt=system_prompt_factory(settings, domain, clock),
        stamp_user=user_stamp_factory(settings, clock),
        history_turns=settings.history_turns,
    )
