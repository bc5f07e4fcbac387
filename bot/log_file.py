"""The bot's own log file, set up at start-up: where and how it rotates is ``launchd.logs``;
what a line may show is decided here, because only the bot knows its secrets.
"""

from __future__ import annotations

import logging
from pathlib import Path

from bot.masking import MaskingFormatter
from launchd.logs import configure_logging

LINE_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def configure_log_file(log_dir: Path) -> Path:
    """Send the root logger to ``<log_dir>/bot.log`` (1 MB x 5, tokens redacted); return its path.

    Calling it again with the same directory does not add a second handler.
    """
    # python-telegram-bot puts the token into every request URL (".../bot<id>:<secret>/getUpdates").
    # Until bot.masking.mask_handlers names the token, anything shaped like one is masked.
    path = configure_logging(log_dir, MaskingFormatter(logging.Formatter(LINE_FORMAT), None))
    # httpx logs every long-polling request at INFO: noise, and the URL carries the token.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    return path
