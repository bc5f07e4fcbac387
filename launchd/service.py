"""Install, remove and inspect the bot's LaunchAgent with ``launchctl``.

Every external command goes through ``Host.run`` (one ``subprocess.run`` with a list argv),
so the tests see the exact ``launchctl`` argument lists; launchd is the only thing they fake.
``install`` checks the model, the adapter and the bot's configuration first: launchd would
restart a misconfigured bot every ``ThrottleInterval`` seconds, forever.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Sequence, TextIO

from agent.config import Settings
from bot.config import ConfigProblem, default_token_file, load_bot_config
from launchd.logs import BOT_LOG_NAME, default_log_dir
from launchd.plist import LABEL, ServiceFiles, build_plist, plist_bytes

Runner = Callable[[Sequence[str], bool], "subprocess.CompletedProcess[str]"]

NO_LAUNCHCTL = (
    "launchctl not found: LaunchAgents exist only on macOS. "
    "`python -m bot launchd print` shows the plist; `python -m bot run` runs the bot in the foreground."
)
BOOTSTRAP_ATTEMPTS = 3


def run_command(argv: Sequence[str], capture: bool = False) -> "subprocess.CompletedProcess[str]":
    """Run one command, never through a shell; ``capture`` keeps its output off the terminal."""
    return subprocess.run(list(argv), check=False, text=True, capture_output=capture)


@dataclass
class Host:
    """What the commands touch on this machine; tests build one with a fake ``run``."""

    home: Path
    uid: int
    launchctl: str | None
    run: Runner = run_command
    platform: str = sys.platform
    out: TextIO = field(default_factory=lambda: sys.stdout)
    err: TextIO = field(default_factory=lambda: sys.stderr)
    sleep: Callable[[float], None] = time.sleep

    @classmethod
    def current(cls) -> "Host":
        return cls(home=Path.home(), uid=os.getuid(), launchctl=shutil.which("launchctl"))

    @property
    def files(self) -> ServiceFiles:
        return ServiceFiles.for_home(self.home)

    @property
    def domain(self) -> str:
        return f"gui/{self.uid}"

    @property
    def target(self) -> str:
        return f"gui/{self.uid}/{LABEL}"

    def say(self, line: str) -> None:
        print(line, file=self.out)

    def complain(self, line: str) -> None:
        print(line, file=self.err)


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
        build_plist(
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
    except ValueError as exc:  # a secret in a URL (launchd.plist): one line, nothing shown
        host.complain(str(exc))
        return 2
    host.out.write(data.decode("utf-8"))
    return 0


def write_token_file(path: Path, token: str) -> None:
    """Write the token readable by its owner only (launchd's bot reads it from here)."""
    from agent.apikey import write_secret_file

    write_secret_file(path, token)


def write_plist(path: Path, data: bytes) -> None:
    """Replace the plist in one step, mode 0644 as launchd expects."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".plist.tmp")
    tmp.write_bytes(data)
    tmp.chmod(0o644)
    tmp.replace(path)


def is_loaded(host: Host) -> bool:
    assert host.launchctl is not None
    return host.run([host.launchctl, "print", host.target], True).returncode == 0


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
    except ValueError as exc:  # a secret in a URL (launchd.plist)
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
    files = host.files
    for directory in (files.log_dir, settings.data_dir):  # private: logs quote the calendar
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        directory.chmod(0o700)  # one left 0755 by an older install
    write_plist(files.plist, plist)
    host.say(f"wrote {files.plist}")

    if is_loaded(host):
        host.run([host.launchctl, "bootout", host.target], False)
    host.run([host.launchctl, "enable", host.target], False)
    for attempt in range(BOOTSTRAP_ATTEMPTS):
        # Right after a bootout the old job may still be stopping ("Bootstrap failed: 5").
        if host.run([host.launchctl, "bootstrap", host.domain, str(files.plist)], False).returncode == 0:
            host.say(f"loaded {LABEL}; check it with `python -m bot launchd status` and `... logs`")
            return 0
        if attempt + 1 < BOOTSTRAP_ATTEMPTS:
            host.sleep(1.0)
    host.complain(f"launchctl bootstrap {host.domain} {files.plist} failed; see `python -m bot launchd logs`")
    return 1


def uninstall(host: Host) -> int:
    """Stop and unload the agent, then remove its plist; the token file and data stay."""
    if host.launchctl is None:
        host.complain(NO_LAUNCHCTL)
        return 2
    plist = host.files.plist
    loaded = is_loaded(host)
    if loaded and host.run([host.launchctl, "bootout", host.target], False).returncode != 0:
        host.complain(f"launchctl bootout {host.target} failed; {plist} left in place")
        return 1
    existed = plist.exists()
    if existed:
        plist.unlink()
    if loaded or existed:
        host.say(f"removed {LABEL}")
    else:
        host.say(f"{LABEL} was not installed; nothing to remove")
    return 0


def status(host: Host) -> int:
    """Show launchd's view of the agent (state, pid, last exit status)."""
    if host.launchctl is None:
        host.complain(NO_LAUNCHCTL)
        return 2
    if host.run([host.launchctl, "print", host.target], False).returncode == 0:
        return 0
    where = "present" if host.files.plist.exists() else "absent"
    host.complain(f"{LABEL} is not loaded (plist {host.files.plist} is {where}); `python -m bot launchd install`")
    return 1


def log_files(settings: Settings, host: Host) -> list[Path]:
    """The bot's own rotating log, then launchd's captured stderr (tracebacks of crashes)."""
    bot_log = default_log_dir(settings.data_dir, platform=host.platform, home=host.home) / BOT_LOG_NAME
    return [bot_log, host.files.stderr]


def logs(settings: Settings, host: Host, *, lines: int = 50, follow: bool = False) -> int:
    """Tail the log files that exist; ``follow`` keeps reading across rotation (``tail -F``)."""
    present = [p for p in log_files(settings, host) if p.exists()]
    if not present:
        host.complain("no logs yet: looked for " + ", ".join(str(p) for p in log_files(settings, host)))
        return 1
    argv = ["tail", "-n", str(lines), *(["-F"] if follow else []), *map(str, present)]
    return host.run(argv, False).returncode
