"""Install, remove and inspect the bot's LaunchAgent with ``launchctl``.

Every external command goes through ``Host.run`` (one ``subprocess.run`` with a list argv),
so the tests see the exact ``launchctl`` argument lists; launchd is the only thing they fake.
This module knows launchctl, the plist file and the log files; it is handed the plist's bytes and
the paths. Reading the settings and checking the model, the adapter and the bot's configuration
before an install is the bot's side (``bot.launchd_service``): launchd would restart a
misconfigured bot every ``ThrottleInterval`` seconds, forever.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence, TextIO

from launchd.logs import BOT_LOG_NAME, default_log_dir
from launchd.plist import LABEL, ServiceFiles

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


def install_plist(host: Host, plist: bytes, private_dirs: Sequence[Path] = ()) -> int:
    """Write the plist, then (re)load the agent into the user's GUI domain.

    The log directory and ``private_dirs`` (the bot's data) are made owner-only first: the logs
    quote the calendar.
    """
    if host.launchctl is None:
        host.complain(NO_LAUNCHCTL)
        return 2
    files = host.files
    for directory in (files.log_dir, *private_dirs):  # private: logs quote the calendar
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


def log_files(data_dir: Path, host: Host) -> list[Path]:
    """The bot's own rotating log (under ``data_dir`` off macOS), then launchd's captured stderr
    (tracebacks of crashes)."""
    bot_log = default_log_dir(data_dir, platform=host.platform, home=host.home) / BOT_LOG_NAME
    return [bot_log, host.files.stderr]


def logs(host: Host, data_dir: Path, *, lines: int = 50, follow: bool = False) -> int:
    """Tail the log files that exist; ``follow`` keeps reading across rotation (``tail -F``)."""
    present = [p for p in log_files(data_dir, host) if p.exists()]
    if not present:
        host.complain("no logs yet: looked for " + ", ".join(str(p) for p in log_files(data_dir, host)))
        return 1
    argv = ["tail", "-n", str(lines), *(["-F"] if follow else []), *map(str, present)]
    return host.run(argv, False).returncode
