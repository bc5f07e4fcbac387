"""One process syncs a calendar at a time: an exclusive lock beside the calendar file.

Two syncs of one file at once would both push the same queue and both apply the same pull. The
lock is ``flock`` on ``<calendar>.sync-lock``, which the kernel lets go when the process dies,
even by kill -9, so a crashed sync never leaves the calendar locked.
"""

from __future__ import annotations

import fcntl
import os
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from tools.calendar.sync.report import SyncFailed


@contextmanager
def exclusive(store_path: Path | str, wait_s: float) -> Iterator[None]:
    """Hold the calendar's sync lock for the block, waiting up to ``wait_s`` for another
    process to let it go (then ``SyncFailed("busy")``). An in-memory store needs none."""
    if str(store_path) == ":memory:":
        yield
        return
    lock = Path(f"{store_path}.sync-lock")
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise SyncFailed("busy", "another process is syncing this calendar; try again in a moment") from None
                time.sleep(0.1)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
