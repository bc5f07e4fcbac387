"""BFCL as a runtime domain (``--domain bfcl`` / ``domain = "tools.bfcl.domain"``).

Its real use is eval (``tools.bfcl.eval_suite``). ``load_domain`` gives the runtime one case's
world to talk to, ``multi_turn_base_0`` (a file system and a Twitter account), so that
``python -m agent`` with this domain shows what a model sees in the benchmark.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent.domain import Domain
from tools.bfcl.data import DEFAULT_CATEGORY, load_cases
from tools.bfcl.eval_suite import load_eval_suite, system_text
from tools.bfcl.world import build_world

if TYPE_CHECKING:
    from agent.config import Settings

__all__ = ["load_domain", "load_eval_suite"]


def load_domain(settings: Settings) -> Domain:
    world = build_world(load_cases(DEFAULT_CATEGORY)[0])
    return Domain(name="bfcl", registry=world.registry, prompt=system_text())
