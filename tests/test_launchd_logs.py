"""The bot's own rotating log: where it goes, that it rotates, and that tokens stay out."""

from __future__ import annotations

import logging
from logging.handlers import RotatingFileHandler
from pathlib import Path
from typing import Iterator

import pytest

from bot.log_file import configure_log_file
from launchd.logs import BACKUP_COUNT, MAX_BYTES, configure_logging, default_log_dir

TOKEN = "123456789:AAHf4k3-t0k3n_for_tests_only_xyzABC"


@pytest.fixture
def clean_root() -> Iterator[None]:
    """Remove the handlers a test adds, so that later tests do not write into its tmp dir."""
    root = logging.getLogger()
    before, level = list(root.handlers), root.level
    yield
    for handler in root.handlers[:]:
        if handler not in before:
            root.removeHandler(handler)
            handler.close()
    root.setLevel(level)


def test_log_dir_is_library_logs_on_macos_and_data_dir_elsewhere(tmp_path: Path) -> None:
    assert default_log_dir(tmp_path / "d", platform="darwin", home=tmp_path) == tmp_path / "Library/Logs/iljeong"
    assert default_log_dir(tmp_path / "d", platform="linux", home=tmp_path) == tmp_path / "d" / "logs"


def test_configure_logging_writes_redacted_lines_once(tmp_path: Path, clean_root: None) -> None:
    path = configure_log_file(tmp_path / "logs")
    assert configure_log_file(tmp_path / "logs") == path  # no second handler
    ours = [h for h in logging.getLogger().handlers if isinstance(h, RotatingFileHandler) and Path(h.baseFilename) == path]
    assert len(ours) == 1
    logging.getLogger("bot.test").info("polling https://api.telegram.org/bot%s/getUpdates", TOKEN)
    ours[0].flush()
    text = path.read_text()
    assert "getUpdates" in text and "<token>" in text
    assert TOKEN not in text
    assert logging.getLogger("httpx").getEffectiveLevel() >= logging.WARNING


def test_log_rotates_at_the_size_cap(tmp_path: Path, clean_root: None) -> None:
    path = configure_logging(tmp_path, logging.Formatter("%(message)s"))
    line = "x" * 200
    for _ in range(MAX_BYTES // 200 + 100):
        logging.getLogger("bot.test").info(line)
    assert path.stat().st_size <= MAX_BYTES
    assert (tmp_path / "bot.log.1").is_file()
    assert BACKUP_COUNT >= 1
