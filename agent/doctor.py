"""``python -m agent doctor``: what is configured, whether the model passes its checks, one generation."""

from __future__ import annotations

import sys
from dataclasses import fields

from agent.config import ENV_NAMES, Settings

SECRET = ("telegram_token",)


def run_doctor(settings: Settings, *, demo: bool = False, generate: bool = True) -> int:
    print("configuration (flags > environment > config file > defaults):")
    env_for = {v: k for k, v in ENV_NAMES.items()}
    for f in fields(settings):
        value = getattr(settings, f.name)
        if f.name in SECRET and value:
            value = "(set, hidden)"
        print(f"  {f.name:24} {value}")
    print(f"  environment variables read: {', '.join(sorted(env_for))}")

    from models.check import check_adapter, check_model
    from models.resolve import resolve_or_exit

    model_path, lora_path = resolve_or_exit(settings, demo=demo)
    model = check_model(model_path)
    print(f"model: {model_path}\n  {'ok' if model.ok else 'REFUSED: ' + model.reason}  {model.info}")
    if lora_path is not None:
        adapter = check_adapter(lora_path, model_path)
        print(f"adapter: {lora_path}\n  {'ok' if adapter.ok else 'REFUSED: ' + adapter.reason}  {adapter.info}")
        if not adapter.ok:
            return 2
    else:
        print("adapter: none (base model only)")
    if not model.ok:
        return 2
    if not generate:
        return 0

    from agent.app import build_llama_backend

    backend = build_llama_backend(settings, demo=demo)
    completion = backend.complete([{"role": "user", "content": "Say hello in one short sentence."}], [], max_tokens=24)
    if completion.error:
        print(f"smoke generation FAILED: {completion.error}", file=sys.stderr)
        return 1
    print(f"smoke generation ({completion.generated_tokens} tokens, {completion.seconds:.2f}s): {completion.text.strip()!r}")
    return 0
