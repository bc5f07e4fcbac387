"""Composition root: Settings → checked model → backend → domain → Runtime.

Every entry point that loads a model (REPL, bot, eval, bench) comes through here, so the
model/adapter checks run before llama.cpp ever sees a path. ``build_backend`` picks the backend
from ``settings.backend``: the file checks belong to the llama backend only; the openai backend
needs a base URL, a model name and (for remote APIs) a key.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from datetime import datetime, timezone
from typing import Callable, Mapping

from agent.backends.base import Backend
from agent.config import Settings
from agent.domain import Domain, load_domain
from agent.loop import Agent, Budgets
from agent.runtime import Runtime
from agent.sessions import SessionStore
from agent.trajectory import TrajectoryLog


def demo_settings(settings: Settings) -> Settings:
    """``settings`` as the demo serves its small model: with the tool block and system prompt style its
    recipe trains with (``models.demo``), whatever the configuration says for other models."""
    from models.demo import DEMO_DATE_GROUNDING, DEMO_DATE_NOTES, DEMO_PROMPT_STYLE, DEMO_TIME_NOTES, DEMO_TOOL_BLOCK

    return replace(settings, tool_block=DEMO_TOOL_BLOCK, prompt_style=DEMO_PROMPT_STYLE,
                   date_grounding=DEMO_DATE_GROUNDING, time_notes=DEMO_TIME_NOTES, date_notes=DEMO_DATE_NOTES)


def falls_back_to_demo(settings: Settings) -> bool:
    """Will a llama chat with ``settings`` fall back to the demo (nothing configured or pulled)?"""
    from models.resolve import resolve

    return settings.backend == "llama" and resolve(settings.model_choice()).nothing_configured


def build_llama_backend(settings: Settings, demo: bool = False, fallback_demo: bool = False,
                        keep_states: bool = False) -> Backend:
    """Resolve and check the model files (exit 2 with one line on failure), then load them.

    The one place an entry point's files are checked: the backend loads the ``ModelFiles`` it is
    given without reading their headers again. ``fallback_demo``: with nothing configured and
    nothing pulled, load the demo model (the REPL). ``keep_states``: KV states outlive the
    process under ``settings.states_path`` (the REPL and the bot; eval's episodes are throwaway)."""
    from agent.backends.llama import LlamaBackend, ModelFiles, ModelRefused
    from models.resolve import resolve_or_exit

    model_path, lora_path = resolve_or_exit(settings.model_choice(), demo=demo, fallback_demo=fallback_demo)
    try:
        files = ModelFiles.check(model_path, lora_path)
    except ModelRefused as exc:
        print(exc, file=sys.stderr)
        raise SystemExit(2) from None
    return LlamaBackend(
        files,
        lora_scale=settings.lora_scale,
        n_ctx=settings.n_ctx,
        n_threads=settings.n_threads,
        enable_thinking=settings.enable_thinking,
        max_saved_state_mb=settings.state_cache_mb,
        tool_block=settings.tool_block,
        state_dir=settings.states_path if keep_states else None,
        state_disk_mb=settings.state_disk_mb,
        gpu_layers=settings.gpu_layers,
    )


def openai_problem(settings: Settings, environ: Mapping[str, str] | None = None) -> str | None:
    """Why the openai backend cannot start as configured (one line), or None."""
    import httpx

    from agent.apikey import KeyProblem, read_api_key

    if not settings.base_url:
        return "the openai backend needs a server: --base-url or AGENT_BASE_URL (e.g. https://api.deepseek.com)"
    if not settings.base_url.startswith(("http://", "https://")):
        return f"the base URL must start with http:// or https://, got {settings.base_url!r}"
    try:
        if not httpx.URL(settings.base_url).host:
            raise httpx.InvalidURL("no host")
    except httpx.InvalidURL as exc:
        return f"the base URL {settings.base_url!r} is not a valid URL ({exc})"
    if not settings.remote_model:
        return "the openai backend needs the served model's name: --model or AGENT_REMOTE_MODEL (e.g. deepseek-chat)"
    try:
        key = read_api_key(settings, environ)
    except KeyProblem as exc:
        return str(exc)
    from agent.backends.openai import key_transport_problem

    return key_transport_problem(settings.base_url, key, settings.allow_plain_http_hosts)


def build_openai_backend(settings: Settings) -> Backend:
    """The HTTP backend, or one ``error:`` line and exit status 2 if it is not configured."""
    from agent.apikey import read_api_key
    from agent.backends.openai import OpenAIBackend

    problem = openai_problem(settings)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        raise SystemExit(2)
    assert settings.base_url and settings.remote_model  # openai_problem checked them
    return OpenAIBackend(
        settings.base_url, settings.remote_model, read_api_key(settings),
        wire_format=settings.wire_format, tool_choice=settings.tool_choice,
        timeout=settings.remote_timeout_s, max_retries=settings.remote_retries,
        allow_plain_http_hosts=settings.allow_plain_http_hosts,
    )


def build_backend(settings: Settings, demo: bool = False, fallback_demo: bool = False,
                  keep_states: bool = False) -> Backend:
    """The backend ``settings.backend`` names (``--demo`` is a local small model, so it means llama).

    ``fallback_demo`` (the REPL): a llama backend with nothing configured runs the demo model.
    ``keep_states``: see ``build_llama_backend``."""
    if settings.backend == "openai" and not demo:
        return build_openai_backend(settings)
    return build_llama_backend(settings, demo=demo, fallback_demo=fallback_demo, keep_states=keep_states)


Clock = Callable[[], datetime]


def wall_clock() -> datetime:
    return datetime.now(timezone.utc)


def system_prompt_factory(settings: Settings, domain: Domain, clock: Clock = wall_clock) -> Callable[[], str]:
    """The system message for the day of ``clock()`` in the user's zone, in the domain's language."""
    prompt_settings = settings.prompt_settings
    return lambda: prompt_settings.system_prompt(clock(), settings.tz, domain.prompt, domain.short_prompt,
                                                 domain.language)


def user_stamp_factory(settings: Settings, domain: Domain, clock: Clock = wall_clock) -> Callable[[str], str]:
    """Stamps a user's message with the local time of ``clock()`` as it enters the conversation,
    with the notes the settings ask for, as the domain's language writes them."""
    prompt_settings = settings.prompt_settings
    return lambda text: prompt_settings.stamp(clock(), settings.tz, text, domain.language)


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
        stamp_user=user_stamp_factory(settings, domain, clock),
        history_turns=settings.history_turns,
        history_block=settings.history_block,
        receipt=settings.receipt,
    )
