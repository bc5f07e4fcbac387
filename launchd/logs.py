"""Where the bot's logs live, and the rotating log file the bot writes at start-up.

launchd appends a program's stdout/stderr to files it never rotates. The bot therefore logs
to its own size-capped file, and only crashes end up in launchd's files. What a line looks like
(and what is masked in it) is the caller's formatter: this package knows files, not secrets.
"""

from __future__ import annotations

import logging
import sys
from logging.handlers import RotatingFileHandler
from pathlib import Path

BOT_LOG_NAME = "bot.log"
MAX_BYTES = 1_000_000
BACKUP_COUNT = 5


def macos_log_dir(home: Path | None = None) -> Path:
    """``~/Library/Logs/iljeong``: where Console.app looks, and where launchd's files go."""
    return (home or Path.home()) / "Library" / "Logs" / "iljeong"


def default_log_dir(data_dir: Path, *, platform: str | None = None, home: Path | None = None) -> Path:
    """The bot's log directory: ``~/Library/Logs/iljeong`` on macOS, ``<data_dir>/logs`` elsewhere."""
    if (platform or sys.platform) == "darwin":
        return macos_log_dir(home)
    return data_dir / "logs"


def configure_logging(log_dir: Path, formatter: logging.Formatter, *, level: int = logging.INFO) -> Path:
    """Send the root logger to ``<log_dir>/bot.log`` (1 MB x 5) through ``formatter``; return its path.

    Calling it again with the same directory does not add a second handler.
    """
    log_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = (log_dir / BOT_LOG_NAME).absolute()
    root = logging.getLogger()
    root.setLevel(level)
    for handler in root.handlers:
        if isinstance(handler, RotatingFileHandler) and Path(handler.baseFilename) == path:
            return path
    handler = RotatingFileHandler(path, maxBytes=MAX_BYTES, backupCount=BACKUP_COUNT, encoding="utf-8")
    handler.setFormatter(formatter)
    root.addHandler(handler)
    return path
