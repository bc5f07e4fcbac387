"""Drives one multi-turn episode: the simulated user, the agent, and the scenario's approval gate.

The simulated user, precisely:
1. It sends ``scenario.opening``; the agent runs one turn. Every message it sends is stamped
   with the episode's fixed "now" (``[HH:MM] text``), as the runtime stamps a real user's.
2. After each agent turn it sends the next line of ``scenario.user_script`` only if all hold:
   lines are left; fewer than ``max_user_turns`` messages were sent; the turn handed the floor
   back (``FINAL_REPLY`` or ``ASKED_USER``, not a budget stop or an error); and either the turn
   asked a question (``ASKED_USER``) or nothing in the store has changed yet in the episode.
   So an agent that finished the task ends the dialogue, and one that changed the store on a
   guess gets no more help.
3. The approval gate answers for the user: yes only once ``scenario.consent_after`` user
   messages were delivered (the consent is in that message), never if it is ``None``. For a
   "delete after approval" task the consent is in the opening message (``consent_after=1``);
   for a "delete request" it is the user's reply to the agent's question (``consent_after=2``),
   so a delete attempted before asking is refused here and flagged by the verifier.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Callable

from agent.approval import ApprovalRequest, Decision
from agent.backends.base import Backend
from agent.eval.suite import Environment, Scenario
from agent.eval.trace import HANDED_BACK, EpisodeTrace, Exchange
from agent.loop import Agent, Budgets
from agent.prompt import stamp_user_text, system_prompt
from agent.records import StopReason, Turn

DEFAULT_MAX_USER_TURNS = 4


@dataclass
class ScenarioApprover:
    """The approval gate of the simulated user: consent depends on what was said so far."""

    scenario: Scenario
    delivered: int = 0  # user messages sent so far

    def decide(self, request: ApprovalRequest) -> Decision:
        needed = self.scenario.consent_after
        if needed is not None and self.delivered >= needed:
            return Decision(True, "scenario: the user agreed in the dialogue")
        return Decision(False, "scenario: the user has not agreed to this")


def system_message(scenario: Scenario, environment: Environment) -> dict[str, Any]:
    """The system message of an episode: the runtime's, for the episode's fixed "now"."""
    return {"role": "system", "content": system_prompt(environment.now, scenario.tz, environment.prompt)}


def user_message(scenario: Scenario, environment: Environment, text: str) -> dict[str, Any]:
    """A simulated user's message as the runtime would store it: stamped with the fixed "now"."""
    return {"role": "user", "content": stamp_user_text(environment.now, scenario.tz, text)}


# One turn of whichever agent plays the episode: (messages ending with the user's, approver) -> Turn.
TurnFn = Callable[[list[dict[str, Any]], ScenarioApprover], Turn]


def play_dialogue(scenario: Scenario, environment: Environment, run_turn: TurnFn,
                  max_user_turns: int = DEFAULT_MAX_USER_TURNS) -> EpisodeTrace:
    """The simulated user around any agent: the opening, then a scripted reply whenever the agent
    hands the turn back (asked, or changed nothing yet), up to ``max_user_turns`` messages."""
    approver = ScenarioApprover(scenario)
    messages: list[dict[str, Any]] = [system_message(scenario, environment)]
    initial = environment.snapshot()
    trace = EpisodeTrace(
        scenario=scenario, exchanges=[], initial=initial, final=initial,
        tool_names=tuple(environment.registry.names), messages=messages,
    )
    script = list(scenario.user_script)
    text: str | None = scenario.opening
    changed = False
    while text is not None:
        messages.append(user_message(scenario, environment, text))
        approver.delivered += 1
        turn = run_turn(messages, approver)
        trace.exchanges.append(Exchange(user_text=turn.user_text, turn=turn))
        changed = changed or environment.snapshot() != initial
        text = None
        if script and approver.delivered < max_user_turns and turn.stop_reason in HANDED_BACK:
            if turn.stop_reason is StopReason.ASKED_USER or not changed:
                text = script.pop(0)
    trace.final = environment.snapshot()
    return trace


def run_episode(
    scenario: Scenario,
    backend: Backend,
    environment: Environment,
    *,
    budgets: Budgets = Budgets(),
    max_user_turns: int = DEFAULT_MAX_USER_TURNS,
    session_id: str | None = None,
    cancel: threading.Event | None = None,
) -> EpisodeTrace:
    """Run the dialogue with this runtime's agent and return the trace (the environment is not closed here)."""
    agent = Agent(backend, environment.registry, budgets)

    def run_turn(messages: list[dict[str, Any]], approver: ScenarioApprover) -> Turn:
        return agent.run_turn(messages, approver, session_id=session_id, cancel=cancel)

    return play_dialogue(scenario, environment, run_turn, max_user_turns)
