"""``python -m agent doctor``: what is configured, whether the model passes its checks, one generation.

For the openai backend there are no files to check: it shows the server, the model name and
where the key comes from (never the key), then makes one round trip.
"""

from __future__ import annotations

import sys
from dataclasses import fields

from agent.backends.base import Backend
from agent.config import ENV_NAMES, Settings

SECRET: tuple[str, ...] = ()  # runtime settings never hold a secret today; the bot token is bot/config.py's


def run_doctor(settings: Settings, *, demo: bool = False, generate: bool = True) -> int:
    print("configuration (flags > environment > config file > defaults):")
    env_for = {v: k for k, v in ENV_NAMES.items()}
    for f in fields(settings):
        if f.name == "sources":  # where the values came from (the environment): not a setting
            continue
        value = getattr(settings, f.name)
        if f.name in SECRET and value:
            value = "(set, hidden)"
        print(f"  {f.name:24} {value}")
    print(f"  environment variables read: {', '.join(sorted(env_for))}")
    print_remote(settings)
    print(f"backend: {settings.backend}")
    if settings.backend == "openai" and not demo:
        return _doctor_openai(settings, generate)

    from models.check import check_adapter, check_model, template_line
    from models.resolve import resolve_or_exit

    model_path, lora_path = resolve_or_exit(settings.model_choice(), demo=demo)
    model = check_model(model_path)
    print(f"model: {model_path}\n  {'ok' if model.ok else 'REFUSED: ' + model.reason}  {model.info}")
    if model.ok:
        print(f"  chat template: {template_line(model.info)}")
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

    return _smoke(build_llama_backend(settings, demo=demo))


def print_remote(settings: Settings) -> None:
    """Where the domain's data is kept in step (the calendar's server, its sign-in, the last sync):
    the same lines as the domain's own status command. Whatever is broken (a setting, a sign-in
    file, a store that is not a database) is shown as one line and the model checks go on: doctor
    is what a user runs when something is broken."""
    from agent.domain import load_domain
    from agent.visible import visible_line, visible_text

    try:
        domain = load_domain(settings)
    except Exception as exc:  # noqa: BLE001 - see above; sqlite3.DatabaseError is neither ValueError nor OSError
        print(visible_line(f"{settings.domain}: error: {exc} ({type(exc).__name__})", None))
        return
    try:
        if domain.remote is not None:
            print(f"{domain.name} sync:")
            for line in visible_text(domain.remote.describe()).splitlines():
                print(f"  {line}")
    except Exception as exc:  # noqa: BLE001
        print(visible_line(f"{domain.name} sync: error: {exc} ({type(exc).__name__})", None))
    finally:
        domain.close()


def _smoke(backend: Backend) -> int:
    completion = backend.complete([{"role": "user", "content": "Say hello in one short sentence."}], [], max_tokens=24)
    if completion.error:
        print(f"smoke generation FAILED: {completion.error}", file=sys.stderr)
        return 1
    print(f"smoke generation ({completion.generated_tokens} tokens, {completion.prompt_tokens} prompt tokens, "
          f"{completion.reused_tokens} cached, {completion.seconds:.2f}s): {completion.text.strip()!r}")
    return 0


def _doctor_openai(settings: Settings, generate: bool) -> int:
    """The remote backend: where it points, where the key comes from (never the key), one round trip."""
    from agent.apikey import API_KEY_ENV, KeyProblem, key_file, key_from_environment, read_key_file
    from agent.app import build_openai_backend, openai_problem

    print(f"  server: {settings.base_url}  model: {settings.remote_model}  wire format: {settings.wire_format}")
    if key_from_environment():
        print(f"  API key: from {API_KEY_ENV} (hidden)")
    else:
        path = key_file(settings)
        try:
            found = read_key_file(path)
        except KeyProblem as exc:
            found = None
            print(f"  API key: REFUSED: {exc}")
        else:
            print(f"  API key: {'from ' + str(path) + ' (hidden)' if found else 'none (' + str(path) + ' does not exist)'}")
    problem = openai_problem(settings)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    if not generate:
        return 0
    return _smoke(build_openai_backend(settings))
