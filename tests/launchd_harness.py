"""launchd without a Mac: a fake ``launchctl`` and a ``Host`` that points ``launchd.service`` at a temp home.

Only launchctl itself is faked: the fake records the exact argument lists that would run and
answers like launchctl does (``print`` of an unknown service exits 113, ``bootout`` of one that
is not loaded exits 3). Files, modes and plists are real, under ``tmp_path``.
"""

from __future__ import annotations

import io
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from launchd.service import Host

TOKEN = "123456789:AAHf4k3-t0k3n_for_tests_only_xyzABC"
LAUNCHCTL = "/bin/launchctl"
UID = 501
TARGET = f"gui/{UID}/com.iljeong.bot"


@dataclass
class FakeLaunchctl:
    """Stands in for ``subprocess.run``: records argv, keeps a loaded/unloaded state."""

    loaded: bool = False
    bootstrap_failures: int = 0
    calls: list[list[str]] = field(default_factory=list)
    captured: list[bool] = field(default_factory=list)

    def __call__(self, argv: Sequence[str], capture: bool) -> subprocess.CompletedProcess[str]:
        argv = list(argv)
        self.calls.append(argv)
        self.captured.append(capture)
        code = 0
        if argv[:2] == [LAUNCHCTL, "print"]:
            code = 0 if self.loaded else 113
        elif argv[:2] == [LAUNCHCTL, "bootout"]:
            code, self.loaded = (0, False) if self.loaded else (3, False)
        elif argv[:2] == [LAUNCHCTL, "bootstrap"]:
            if self.bootstrap_failures:
                self.bootstrap_failures -= 1
                code = 5
            else:
                self.loaded = True
        return subprocess.CompletedProcess(argv, code, "", "")


def make_host(tmp_path: Path, fake: FakeLaunchctl, launchctl: str | None = LAUNCHCTL, platform: str = "darwin") -> Host:
    return Host(
        home=tmp_path / "home", uid=UID, launchctl=launchctl, run=fake, platform=platform,
        out=io.StringIO(), err=io.StringIO(), sleep=lambda _s: None,
    )


def plist_path(tmp_path: Path) -> Path:
    return tmp_path / "home" / "Library" / "LaunchAgents" / "com.iljeong.bot.plist"
