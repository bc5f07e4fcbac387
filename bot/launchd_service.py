"""The launchd commands that need the bot's settings: ``print`` shows the plist they make,
``install`` checks them first and writes the bot's secrets to owner-only files before handing the
plist to ``launchd.service``.

The checks come first because launchd would restart a misconfigured bot every ``ThrottleInterval``
seconds, forever: the model and adapter as the bot will resolve them, or the remote server and
its key, and the bot's own configuration (token, allowlist).
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

from agent.config import Settings
from bot.config import ConfigProblem, default_token_file, load_bot_config
from bot.launchd_plist import service_plist
from launchd.plist import plist_bytes
from launchd.service import NO_LAUNCHCTL, Host, install_plist


def check_model(settings: Settings) -> tuple[Path, Path | None] | str:
    """Resolve and check the model and adapter as the bot will; the one-line refusal if bad.

    Imported lazily: ``print``, ``status`` and ``logs`` need no GGUF reader.
    """
    from models.check import check_pair
    from models.resolve import resolve

    resolved = resolve(settings.model_choice())
    if not resolved.ok or resolved.model_path is None:
        return resolved.error or "no model found: run `python -m models pull`"
    result = check_pair(resolved.model_path, resolved.lora_path)
    if not result.ok:
        return result.error_line()
    lora = resolved.lora_path.absolute() if resolved.lora_path is not None else None
    return resolved.model_path.absolute(), lora


def _plist_for(settings: Settings, host: Host, model: Path | None, lora: Path | None) -> bytes:
    return plist_bytes(
        service_plist(
            settings,
            model_path=model,
            lora_path=lora,
            token_file=default_token_file(settings),
            home=host.home,
        )
    )


def print_plist(settings: Settings, host: Host) -> int:
    """Show the plist for the current settings; works on any machine, checks nothing."""
    local = settings.backend != "openai"  # a remote model has no files to name
    model = Path(settings.model_path).expanduser().absolute() if settings.model_path and local else None
    lora = Path(settings.lora_path).expanduser().absolute() if settings.lora_path and local else None
    try:
        data = _plist_for(settings, host, model, lora)
    except ValueError as exc:  # a secret in a URL (bot.launchd_plist): one line, nothing shown
        host.complain(str(exc))
        return 2
    host.out.write(data.decode("utf-8"))
    return 0


def write_token_file(path: Path, token: str) -> None:
    """Write the token readable by its owner only (launchd's bot reads it from here)."""
    from agent.apikey import write_secret_file

    write_secret_file(path, token)


def check_remote(settings: Settings, environ: Mapping[str, str] | None = None) -> str | None:
    """For the openai backend: server, model name and a usable key (env or owner-only file)."""
    from agent.apikey import KeyProblem, key_file, key_from_environment, read_key_file
    from agent.app import openai_problem

    problem = openai_problem(settings, environ)
    if problem:
        return problem
    try:
        if key_from_environment(environ) is None and read_key_file(key_file(settings)) is None:
            return (f"no API key for {settings.base_url}: set AGENT_API_KEY (install moves it to "
                    f"{key_file(settings)}, mode 600) or write it there yourself and chmod 600 it")
    except KeyProblem as exc:
        return str(exc)
    return None


def install(settings: Settings, host: Host, environ: Mapping[str, str] | None = None) -> int:
    """Check, write token (and API key) file and plist, then (re)load the agent into the user's GUI domain."""
    if host.launchctl is None:
        host.complain(NO_LAUNCHCTL)
        return 2
    bot = load_bot_config(settings)
    if isinstance(bot, ConfigProblem):
        host.complain(f"not installing: {bot.message}")
        return 2
    model: Path | None = None
    lora: Path | None = None
    if settings.backend == "openai":
        remote = check_remote(settings, environ)
        if remote:
            host.complain(f"not installing: {remote}")
            return 2
    else:
        checked = check_model(settings)
        if isinstance(checked, str):
            host.complain(f"not installing: {checked}")
            return 2
        model, lora = checked

    try:
        plist = _plist_for(settings, host, model, lora)  # before any file is written
    except ValueError as exc:  # a secret in a URL (bot.launchd_plist)
        host.complain(f"not installing: {exc}")
        return 2
    token_file = default_token_file(settings)
    if bot.token_file is None:
        write_token_file(token_file, bot.token)
        host.say(f"wrote the bot token to {token_file} (mode 600); the plist names only this file")
    if settings.backend == "openai":
        from agent.apikey import key_file, key_from_environment, write_key_file

        env_key = key_from_environment(environ)
        if env_key:
            write_key_file(key_file(settings), env_key)
            host.say(f"wrote the API key to {key_file(settings)} (mode 600); the plist names only this file")
    return install_plist(host, plist, private_dirs=(settings.data_dir,))
