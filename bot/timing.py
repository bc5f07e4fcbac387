"""How long the bot waits between retries, on one dial the end-to-end tests can turn.

Retry delays (sending, polling, the outbox's backoff) are written in real seconds and slept
through ``TIME.sleep``. ``python -m bot run --time-scale 0.02`` (a hidden test flag) makes
every such wait 50 times shorter, so a test can play a 45-second Bot API outage in about a
second and still exercise exactly the backoff schedule the bot uses in earnest. The outbox's
"too old" age is measured on ``TIME.now()``, which runs faster by the same factor.
"""

from __future__ import annotations

import asyncio
import time


class Timing:
    def __init__(self, scale: float = 1.0) -> None:
        self.scale = scale
        self._start_wall = time.time()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(seconds, 0.0) * self.scale)

    def now(self) -> float:
        """Seconds since the epoch on the bot's clock (the wall clock, sped up by 1/scale)."""
        wall = time.time()
        return self._start_wall + (wall - self._start_wall) / self.scale

    def set_scale(self, scale: float) -> None:
        if scale <= 0:
            raise ValueError("the time scale must be positive")
        self._start_wall = time.time()
        self.scale = scale


TIME = Timing()
