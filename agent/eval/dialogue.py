"""Drives one multi-turn episode: the simulated user, the agent, and the scenario's approval gate.

The simulated user, precisely:
1. It sends ``scenario.opening``; the agent runs one turn. Every message it sends is stamped
   with the episode's fixed "now" (``[HH:MM] text``), as the runtime stamps a real user's.
2. It answers only questions. After each agent turn that handed the floor back (``FINAL_REPLY``
   or ``ASKED_USER``, not a budget stop or an error), while fewer than ``max_user_turns``
   messages were sent:
   - the turn asked a question (``ASKED_USER``, or its reply ends with "?"): the next line of
     ``scenario.user_script``, if any is left;
   - it made a statement and nothing in the store has changed yet: ``scenario.followup`` once
     (never a yes), or silence when the scenario has none;
   - otherwise silence. So an agent that finished ends the dialogue, one that changed the
     store on a guess gets no more help, and a yes only ever answers a question.
3. The approval gate answers for the user: yes once the user's consent was given (the opening
   itself when ``scenario.consent_after == 1``; otherwise the consent line of the script,
   ``user_script[consent_after - 2]``, delivered as the answer to a question), never if
   ``consent_after`` is ``None``. The gate cannot tell which event the question named; the
   verifier checks that the call acts on the event the answered question named.
4. A scenario with earlier tasks (``scenario.history``) starts with their turns after the system
   message, each user message stamped like the task's own (``history_messages``); nothing of
   the above counts them: the task's messages are counted from its opening.
5. A scenario with ``fixed_turns`` (an external benchmark's list of user turns) skips 2: every
   line of the script follows the previous turn, whatever it did, until the script is done.
   An environment with its own ``system_prompt`` gets its messages unstamped, and each user
   turn is announced to the environment first (``Environment.on_user_turn``).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Callable

from agent.approval import ApprovalRequest, Decision
from agent.backends.base import Backend
from agent.eval.suite import Environment, Scenario
from agent.eval.trace import HANDED_BACK, EpisodeTrace, Exchange, asked_question
from agent.formats.chat_format import format_of
from agent.history import DEFAULT_HISTORY_TURNS, recent_turns
from agent.loop import Agent, Budgets
from agent.receipt import receipt_line
from agent.records import Turn

DEFAULT_MAX_USER_TURNS = 4


@dataclass
class ScenarioApprover:
    """The approval gate of the simulated user: consent depends on what was said so far."""

    scenario: Scenario
    delivered: int = 0  # user messages sent so far
    consented: bool = False  # the script's consent line was delivered, as the answer to a question

    def decide(self, request: ApprovalRequest) -> Decision:
        opening_consent = self.scenario.consent_after == 1 and self.delivered >= 1
        if opening_consent or self.consented:
            return Decision(True, "scenario: the user agreed in the dialogue")
        return Decision(False, "scenario: the user has not agreed to this")


def system_message(scenario: Scenario, environment: Environment) -> dict[str, Any]:
    """The system message of an episode: the runtime's, for the episode's fixed "now" (or the
    environment's own, ``Environment.system_prompt``)."""
    if environment.system_prompt is not None:
        return {"role": "system", "content": environment.system_prompt}
    return {"role": "system", "content": environment.prompt_settings.system_prompt(
        environment.now, scenario.tz, environment.prompt, environment.short_prompt, environment.language)}


def user_message(scenario: Scenario, environment: Environment, text: str) -> dict[str, Any]:
    """A simulated user's message as the runtime would store it: stamped with the fixed "now"
    (as it is, when the environment brings its own system message)."""
    if environment.system_prompt is not None:
        return {"role": "user", "content": text}
    return {"role": "user", "content": environment.prompt_settings.stamp(
        environment.now, scenario.tz, text, environment.language)}


def history_messages(scenario: Scenario, environment: Environment) -> list[dict[str, Any]]:
    """The earlier turns of the conversation (``scenario.history``) as the runtime keeps them: its
    user messages stamped (``user_message``), the rest as they are (copies: a turn appends to the list)."""
    return [user_message(scenario, environment, str(m.get("content", ""))) if m.get("role") == "user" else dict(m)
            for m in scenario.history]


def served(messages: list[dict[str, Any]], keep: int = DEFAULT_HISTORY_TURNS,
           block: int | None = None) -> list[dict[str, Any]]:
    """The prompt's messages as the runtime would show them: the system message, the earlier
    turns trimmed by the runtime's rule (``agent.history``, with the runtime's ``history_turns``
    and ``history_block``), the new user message. A copy: the turn appends to it, and the
    episode's full ``messages`` get the produced ones after."""
    return messages[:1] + recent_turns(messages[1:-1], keep, block) + messages[-1:]


# One turn of whichever agent plays the episode: (messages ending with the user's, approver) -> Turn.
TurnFn = Callable[[list[dict[str, Any]], ScenarioApprover], Turn]


def play_dialogue(scenario: Scenario, environment: Environment, run_turn: TurnFn,
                  max_user_turns: int = DEFAULT_MAX_USER_TURNS, history_turns: int = DEFAULT_HISTORY_TURNS,
                  history_block: int | None = None) -> EpisodeTrace:
    """The simulated user around any agent: the opening, then a script line for each question the
    agent asks (the follow-up, once, for a statement that changed nothing), up to
    ``max_user_turns`` messages; with ``scenario.fixed_turns``, every script line in turn. Each
    turn sees the history window the runtime would show with these
    ``history_turns``/``history_block`` settings."""
    approver = ScenarioApprover(scenario)
    messages: list[dict[str, Any]] = [system_message(scenario, environment), *history_messages(scenario, environment)]
    initial = environment.snapshot()
    trace = EpisodeTrace(
        scenario=scenario, exchanges=[], initial=initial, final=initial,
        tool_names=tuple(environment.registry.names), messages=messages,
    )
    script = list(scenario.user_script)
    consent_line = None if scenario.consent_after is None else scenario.consent_after - 2
    text: str | None = scenario.opening
    line: int | None = None
    followup_left = scenario.followup is not None
    changed = False
    while text is not None:
        environment.on_user_turn(approver.delivered)
        messages.append(user_message(scenario, environment, text))
        approver.delivered += 1
        if line is not None and line == consent_line:
            approver.consented = True
        shown = served(messages, history_turns, history_block)
        before = len(shown)
        turn = run_turn(shown, approver)  # appends what the turn produced to ``shown``
        turn.receipt = receipt_line(environment.receipt, turn, "on")  # beside the reply, read-only turns too
        messages.extend(shown[before:])
        trace.exchanges.append(Exchange(user_text=turn.user_text, turn=turn, script_line=line))
        changed = changed or environment.snapshot() != initial
        text, line = None, None
        if scenario.fixed_turns:  # the next turn of the task, whatever this one did
            if script:
                line = len(scenario.user_script) - len(script)
                text = script.pop(0)
            continue
        if approver.delivered >= max_user_turns or turn.stop_reason not in HANDED_BACK:
            continue
        if asked_question(turn):
            if script:
                line = len(scenario.user_script) - len(script)
                text = script.pop(0)
        elif followup_left and not changed:
            text, followup_left = scenario.followup, False
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
    history_turns: int = DEFAULT_HISTORY_TURNS,
    history_block: int | None = None,
) -> EpisodeTrace:
    """Run the dialogue with this runtime's agent and return the trace (the environment is not closed here)."""
    agent = Agent(backend, environment.registry, budgets)

    def run_turn(messages: list[dict[str, Any]], approver: ScenarioApprover) -> Turn:
        return agent.run_turn(messages, approver, session_id=session_id, cancel=cancel)

    trace = play_dialogue(scenario, environment, run_turn, max_user_turns, history_turns, history_block)
    trace.chat_format = format_of(backend)  # the verifier reads the replies in the model's format
    return trace
