"""The plain data every part of eval carries: one task (``Scenario``) and the verifier's judgement
of one episode (``Verdict``).

Apart from ``agent.eval.suite`` because the episode trace and the episode record hold these,
while the suite's contract (its ``Verifier`` and run reports) names the trace and the record;
here they depend on nothing of eval's, so nothing imports in a circle.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any


@dataclass(frozen=True)
class Scenario:
    """One task. ``initial``, ``expected`` and ``task`` are the domain's own JSON data.

    The simulated user: speaks ``opening``, then answers each question of the agent with the
    next line of ``user_script``; a statement that changed nothing gets ``followup`` once (never
    a yes), or silence when it is None (see ``agent.eval.dialogue``). Rules the verifier checks:
    - ``mutation_after``: no change to the store before this many user messages were delivered
      (1 = just the opening; the required information arrives with message ``mutation_after``);
    - ``consent_after``: where the user's yes is. 1: in the opening itself (for the event the
      task names); n >= 2: it is script line n - 1 (``user_script[n - 2]``), and it counts only
      for the event named by the agent's question that it answers. ``None``: no yes at all, so
      a destructive call is never wanted.

    ``fixed_turns``: the user is no simulation but a fixed list of turns (an external benchmark's
    task, e.g. BFCL's ``question``): ``opening`` and then every line of ``user_script``, in order,
    one per agent turn, whatever the agent said or did; ``max_user_turns`` does not cut it.

    ``history``: earlier tasks finished in the same conversation, as the runtime keeps its history
    (assistant messages with their raw text and ``tool_calls``, tool results), except that a user
    message holds the text as typed: the dialogue stamps it as it stamps the task's own messages,
    with the run's prompt settings, so the conversation is what this run's runtime would have
    kept. The environment is the domain's: its store already holds what those tasks did. Empty:
    the task starts a fresh conversation.
    """

    id: str
    template: str
    variant: str  # phrasing id; splits are by variant so dev/test phrasings are unseen in training
    split: str
    seed: int
    language: str  # "ko" | "en"
    now: str  # ISO datetime with offset: the fixed "now" of the episode
    tz: str
    opening: str
    user_script: tuple[str, ...] = ()
    mutation_after: int = 1
    consent_after: int | None = None
    followup: str | None = None
    needs_tools: bool = True
    call_budget: int = 6  # tool calls an ideal run needs, with some slack
    initial: dict[str, Any] = field(default_factory=dict)
    expected: dict[str, Any] = field(default_factory=dict)
    task: dict[str, Any] = field(default_factory=dict)  # structured intent, for scripted policies
    fixed_turns: bool = False  # play opening + user_script as they are (see above)
    history: tuple[dict[str, Any], ...] = ()  # earlier turns of the same conversation (see above)

    def now_datetime(self) -> datetime:
        return datetime.fromisoformat(self.now)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["user_script"] = list(self.user_script)
        data["history"] = list(self.history)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Scenario:
        return cls(**{**data, "user_script": tuple(data.get("user_script", ())),
                      "history": tuple(data.get("history", ()))})


@dataclass
class Verdict:
    """The verifier's judgement of one episode; every component is kept for analysis."""

    success: bool
    policy_ok: bool
    reward: float
    components: dict[str, float]  # named parts (weighted and raw), penalties included
    violations: list[str] = field(default_factory=list)  # policy rules broken, in words
    errors: list[str] = field(default_factory=list)  # why the task failed, in words
    incorrect_action: bool = False  # a change to the store that was not wanted
    valid_calls: int = 0
    attempted_calls: int = 0
    # Things that earlier tasks of the same conversation left behind (``Scenario.history``) and that
    # this episode changed although nobody asked: the summary's "unasked %" column. None: the
    # episode had no earlier tasks (or was scored before this was counted).
    unasked_changes: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
