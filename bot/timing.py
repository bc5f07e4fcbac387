"""How long the bot waits between retries, on one dial the end-to-end tests can turn.

Retry delays (sending, polling, the outbox's backoff) are written in real seconds and go
through ``TIME``: ``sleep`` sleeps them, ``after`` dates a retry that many seconds from
now. ``python -m bot run --time-scale 0.05`` (a hidden test flag) makes every such wait 20
times shorter, so a test can play a 45-second Bot API outage in about two seconds and still
exercise exactly the backoff schedule the bot uses in earnest. Ages (the outbox's one day)
are on the wall clock, unscaled: a test ages a row by editing it.
"""

from __future__ import annotations

import asyncio
import time


class Timing:
    def __init__(self, scale: float = 1.0) -> None:
        self.scale = scale

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(seconds, 0.0) * self.scale)

    @staticmethod
    def now() -> float:
        """The wall clock (seconds since the epoch)."""
        return time.time()

    def after(self, seconds: float) -> float:
        """The wall-clock instant a wait of ``seconds`` ends (scaled like ``sleep``)."""
        return time.time() + max(seconds, 0.0) * self.scale

    def set_scale(self, scale: float) -> None:
        if scale <= 0:
            raise ValueError("the time scale must be positive")
        self.scale = scale


TIME = Timing()
