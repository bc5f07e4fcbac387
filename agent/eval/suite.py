"""What a domain hands the eval runner: scenarios, a fresh environment per episode, a verifier
and scripted policies. Domain-free: the runner finds the suite through the domain module named
by ``Settings.domain`` (its ``load_eval_suite(settings)``), never by importing a domain.

``Scenario`` and ``Verdict`` belong to this contract but are defined in ``agent.eval.types``: the
episode trace and record hold them too, while this module names the trace and the record (for
typing only).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Protocol

from agent.domain import present_modules
from agent.eval.types import Scenario, Verdict
from agent.language import ENGLISH, Language
from agent.prompt import PromptSettings
from agent.receipt import ReceiptFn
from agent.tools import Registry

if TYPE_CHECKING:
    from agent.config import Settings
    from agent.eval.record import EpisodeRecord
    from agent.eval.trace import EpisodeTrace

SPLITS: tuple[str, ...] = ("train", "dev", "test")

# A scripted policy: looks at the whole message list and writes the next raw model output.
PolicyFn = Callable[[list[dict[str, Any]]], str]
# Builds a policy for one scenario (a scripted policy may know the task's intent, not its answer).
PolicyFactory = Callable[[Scenario], PolicyFn]
# A domain's chats with earlier tasks (``Scenario.history``): (last tasks, fewest, most earlier tasks,
# generator seed, the scripted policy that plays the earlier tasks) -> each last task after that many
# earlier tasks finished in the same conversation.
ContinuedFn = Callable[[list[Scenario], int, int, int, str], list[Scenario]]
# A domain's own report on a finished run: (results folder, its episodes) → text to print after the
# summary table (it may write its own files into the folder), or None when the run has nothing for it.
RunReport = Callable[[Path, list["EpisodeRecord"]], "str | None"]


@dataclass
class Environment:
    """A fresh world for one episode: its tools, the domain's prompt, a snapshot function."""

    registry: Registry
    prompt: str
    now: datetime
    snapshot: Callable[[], dict[str, Any]]
    close: Callable[[], None] = lambda: None
    # The domain's 📅 line for a turn (``agent.receipt``): recorded beside the reply in every turn.
    receipt: ReceiptFn | None = None
    short_prompt: str = ""  # the domain's part in the ``short`` prompt style; empty: ``prompt``
    prompt_settings: PromptSettings = PromptSettings()  # the runtime's (the runner sets the run's settings)
    language: Language = ENGLISH  # the domain's (``Domain.language``): as served, so as evaluated and trained
    # The whole system message, for tasks that bring their own (an external benchmark): it replaces
    # the runtime's (date line, rules, the time stamp explained), and user messages are then sent
    # as they are, unstamped, since nothing explains a stamp. None: the runtime's system prompt.
    system_prompt: str | None = None
    # Called with each user turn's index (0: the opening) before the agent plays it: a task whose
    # world changes between turns does it here (BFCL's miss_func adds tools to the registry).
    on_user_turn: Callable[[int], None] = lambda _index: None


class Verifier(Protocol):
    def verify(self, trace: EpisodeTrace) -> Verdict: ...


@dataclass
class EvalSuite:
    name: str
    scenarios: Callable[..., list[Scenario]]  # (split=None, per_template=None, seed=0, templates=None)
    make_environment: Callable[[Scenario], Environment]
    verifier: Verifier
    policies: dict[str, PolicyFactory] = field(default_factory=dict)
    templates: tuple[str, ...] = ()
    # The templates of the published reference figures; the summary gets a row for them together.
    reference_templates: tuple[str, ...] = ()
    # The verifier with other reward weights ({"safety": 0.3, ...}); None: weights are fixed.
    reweight: Callable[[dict[str, float]], Verifier] | None = None
    # Reports beyond the summary that the domain computes from a run's episodes (``RunReport``).
    reports: tuple[RunReport, ...] = ()
    # Named scenario sets the domain serves besides the phrasing splits (``eval --split NAME``), e.g.
    # the calendar's test scenarios with hand-rewritten openings. Eval only: training asks for
    # ``train``/``dev`` by name and never gets them.
    extra_splits: tuple[str, ...] = ()
    # ``eval --history N|A-B``: the selected scenarios as the last task of a chat with earlier tasks
    # (``ContinuedFn``); None: the domain has none.
    continued: ContinuedFn | None = None
    most_earlier: int = 3  # the most earlier tasks ``continued`` makes


def load_eval_suite(settings: Settings) -> EvalSuite:
    """The configured domain's suite: ``load_eval_suite`` of the domain module itself, or of an
    ``eval_suite`` module inside it, in the ``lab`` package beside it (``tools.calendar.domain`` →
    ``tools.calendar.lab.eval_suite``) or beside it. A domain without one is a clear error, not a crash."""
    package = settings.domain.rpartition(".")[0]
    beside = [package + ".lab.eval_suite", package + ".eval_suite"] if package else []
    candidates = [settings.domain, settings.domain + ".eval_suite", *beside]
    for module in present_modules(candidates):
        loader = getattr(module, "load_eval_suite", None)
        if loader is not None:
            return loader(settings)
    raise LookupError(f"domain {settings.domain!r} has no load_eval_suite(settings) (looked in {', '.join(candidates)})")
