"""The calendar's GRPO hooks with a probe: the trained reward is the verifier's plus ``SPREAD``
times the rollout's position in its group, and every rollout is written to ``$GRPO_PROBE_LOG``.

Why a test needs this. GRPO moves the policy by each rollout's advantage, its reward minus its
group's mean. A test cannot make the verifier's rewards of one group differ: rollouts that a
logit bias forces are identical and earn one reward, and what a random-weight model writes
unforced ties or not by chance. The probe's term (0 for the first rollout of the group, SPREAD
for the second; the train test uses one prompt, so a batch is one group) differs by more than
any two verifier rewards in [0, 1] can, so every advantage is non-zero by construction. The
verifier's own reward is still computed on the real rollouts and logged in its own columns
(``CalendarGRPOEnv``, each component), which is what the test checks against a replay; the probe
only adds a known, separately logged amount to the column that trains.
"""

from __future__ import annotations

import json
import os
from typing import Any

from tools.calendar.lab.grpo_env import ENVIRONMENT, REWARD_COMPONENTS, CalendarGRPOEnv, component_reward
from tools.calendar.lab.grpo_env import reward_func as verifier_reward

__all__ = ["ENVIRONMENT", "REWARD_COMPONENTS", "component_reward", "reward_func", "SPREAD"]

SPREAD = 2.0


def reward_func(completions: list[Any], environments: list[CalendarGRPOEnv], **kwargs: Any) -> list[float]:
    """The verifier's reward plus SPREAD × position; each rollout (messages, gate records, verdict) is logged."""
    rewards = verifier_reward(completions, environments, **kwargs)
    log = os.environ.get("GRPO_PROBE_LOG")
    if log:
        with open(log, "a", encoding="utf-8") as f:
            for position, (completion, environment, reward) in enumerate(zip(completions, environments, rewards)):
                verdict = environment._verdict()
                calls = [{"name": c.name, "arguments": c.arguments, "status": c.status.value, "result": c.result}
                         for step in environment._require_turn().steps for c in step.calls]
                f.write(json.dumps({"position": position, "completion": completion, "calls": calls,
                                    "reward": reward, "components": verdict.components},
                                   ensure_ascii=False, default=str) + "\n")
    return [reward + SPREAD * position for position, reward in enumerate(rewards)]
