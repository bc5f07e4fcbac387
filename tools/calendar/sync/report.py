"""What one sync did, and how a sync that could not finish failed.

``SyncReport`` is what ``calendar sync`` prints and what the status table remembers, so its
counts and its one line are the sync's whole answer to the user; ``SyncFailed`` carries the
``kind`` the service and the status line act on (a busy lock is not an outage).
"""

from __future__ import annotations

from dataclasses import dataclass, field


class SyncFailed(Exception):
    """A sync that could not finish; ``kind`` is auth | signin (a Google sign-in to renew) | limited
    (a provider's rate limit) | unreachable | busy | refused."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass
class SyncReport:
    pulled: int = 0  # server objects applied here (new, changed)
    removed_here: int = 0  # events deleted here because the server deleted them
    pushed: int = 0  # local changes the server took (PUT)
    removed_there: int = 0  # local deletions the server took (DELETE)
    conflicts: int = 0  # fields both sides changed (the server's value kept, ours recorded)
    skipped: list[str] = field(default_factory=list)  # one line per object not applied or not taken
    requests: int = 0
    bytes_sent: int = 0
    bytes_received: int = 0
    seconds: float = 0.0
    error: str | None = None
    kind: str | None = None  # SyncFailed.kind when it failed

    @property
    def ok(self) -> bool:
        return self.error is None

    def line(self) -> str:
        """What `calendar sync` prints: one line."""
        head = (f"pulled {self.pulled + self.removed_here}, pushed {self.pushed + self.removed_there}, "
                f"conflicts {self.conflicts}")
        if self.skipped:
            head += f", skipped {len(self.skipped)}"
        traffic = f"({self.requests} requests, {_size(self.bytes_sent + self.bytes_received)}, {self.seconds:.1f} s)"
        return f"{head} {traffic}" if self.ok else f"sync failed: {self.error} ({head} before it)"


def _size(count: int) -> str:
    return f"{count / 1024:.1f} kB" if count < 1024 * 1024 else f"{count / 1024 / 1024:.1f} MB"
