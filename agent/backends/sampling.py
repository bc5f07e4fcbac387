"""Sampling settings per completion, and the seeding scheme that makes k samples differ yet each
one re-runnable.

A backend's ``complete(..., sampling=Sampling(...))`` decodes with those settings; ``None`` keeps
the backend's own default (greedy for llama.cpp, ``temperature 0`` on the wire). Eval and
expert iteration wrap the shared backend once per episode in ``SeededBackend``
(``agent.backends.seeded``): the episode gets a seed derived from (base seed, scenario id, sample
index), and its n-th model step the seed derived from (episode seed, n). So the k samples of a
scenario draw different random numbers, and one episode re-run alone (delete its JSON from the
results folder and run the same command) draws exactly the numbers it drew the first time.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, replace
from typing import Any


def derive_seed(*parts: object) -> int:
    """A stable 31-bit seed from any parts (sha256, so neither Python's hash salt nor the
    platform changes it; 31 bits because llama.cpp takes a uint32 and some servers an int32)."""
    text = "\x1f".join(str(p) for p in parts)
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:4], "big") & 0x7FFFFFFF


@dataclass(frozen=True)
class Sampling:
    """How one completion picks tokens. ``temperature <= 0`` is greedy (top_p and seed unused)."""

    temperature: float = 0.0
    top_p: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")

    @property
    def greedy(self) -> bool:
        return self.temperature <= 0.0

    def for_sample(self, scenario_id: str, sample: int) -> Sampling:
        """The settings of sample ``sample`` of a scenario: same temperature/top_p, its own seed."""
        return replace(self, seed=derive_seed(self.seed, scenario_id, sample))

    def for_step(self, index: int) -> Sampling:
        """The settings of an episode's ``index``-th model step (0-based, across all its turns)."""
        return replace(self, seed=derive_seed(self.seed, "step", index))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

