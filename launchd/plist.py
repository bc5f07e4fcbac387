"""The LaunchAgent property list for the bot, built as a dict and serialised with plistlib.

launchd starts programs with a bare PATH, no shell profile and no virtual environment, so
everything the bot needs is spelled out as absolute paths and environment variables. What those
variables are comes from the bot's settings (``bot.launchd_plist``), which keeps every secret
out: files in ~/Library/LaunchAgents are readable by other local users, so the plist names the
owner-only token and key files instead.
"""

from __future__ import annotations

import os
import plistlib
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from launchd.logs import macos_log_dir

LABEL = "com.iljeong.bot"
THROTTLE_INTERVAL_S = 30
# Owner-only files: launchd creates StandardOutPath/StandardErrorPath (which may carry a
# traceback's worth of calendar data) with the job's umask, and the bot's own files follow it.
UMASK = 0o077  # the plist says 63: plistlib writes integers in decimal
SYSTEM_PATH = "/usr/bin:/bin:/usr/sbin:/sbin"


@dataclass(frozen=True)
class ServiceFiles:
    """Where the plist and launchd's captured output live for one home directory."""

    plist: Path
    log_dir: Path
    stdout: Path
    stderr: Path

    @classmethod
    def for_home(cls, home: Path) -> "ServiceFiles":
        log_dir = macos_log_dir(home)
        return cls(
            plist=home / "Library" / "LaunchAgents" / f"{LABEL}.plist",
            log_dir=log_dir,
            stdout=log_dir / "launchd.out.log",
            stderr=log_dir / "launchd.err.log",
        )


def venv_python() -> Path:
    """The running interpreter as an absolute path, symlinks kept.

    Resolving ``.venv/bin/python`` would lead to the base interpreter outside the virtual
    environment, which does not see the project's packages.
    """
    return Path(os.path.abspath(sys.executable))


def build_plist(
    environment: Mapping[str, str],
    *,
    working_directory: Path,
    home: Path,
    python: Path | None = None,
) -> dict[str, Any]:
    """The LaunchAgent as a dict: restart on crash only, at most every THROTTLE_INTERVAL_S.

    ``environment`` is everything the bot reads at start-up, already checked to hold no secret
    (the plist is readable by other local users); it goes in as given.
    """
    python = python or venv_python()
    files = ServiceFiles.for_home(home)
    return {
        "Label": LABEL,
        "ProgramArguments": [str(python), "-m", "bot", "run"],
        "WorkingDirectory": str(working_directory),
        "RunAtLoad": True,
        "KeepAlive": {"SuccessfulExit": False},
        "ThrottleInterval": THROTTLE_INTERVAL_S,
        "ProcessType": "Interactive",
        "Umask": UMASK,
        "StandardOutPath": str(files.stdout),
        "StandardErrorPath": str(files.stderr),
        "EnvironmentVariables": dict(environment),
    }


def plist_bytes(plist: Mapping[str, Any]) -> bytes:
    """XML plist bytes, keys sorted so that the output is stable."""
    return plistlib.dumps(dict(plist), fmt=plistlib.FMT_XML, sort_keys=True)
