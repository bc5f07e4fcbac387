"""The calendar as an environment for TRL ``GRPOTrainer(environment_factory=CalendarGRPOEnv)``.

TRL builds one instance per rollout, calls ``reset(**row)`` with the columns of a prompt row
(written by ``python -m agent export grpo``), exposes every public method except ``reset`` as a
tool (its JSON schema comes from the type hints and the Google-style docstring, through
``transformers.utils.get_json_schema``), and then asks ``reward_func`` for the rewards, which
reads each environment's ``get_reward()``.

The store is rebuilt from the scenario generator (``build_scenario(template, index, seed)``), so a
row names its scenario and never carries the answer. Calls go through the same registry,
call gate as the runtime and the eval (``agent.gate``: validation, the repeat, failure-streak and
budget rules, then the approval with the validated arguments): the simulated user has sent
only the opening message, so a destructive call is approved only when the consent is in that
message.
The reward is the eval verifier's, on the whole rollout.

The environment plays no user replies: rows of scenarios that need a second user message are
left out of the export by default (``needs_dialogue``).
"""

from __future__ import annotations

import json
from typing import Any

from agent.eval.dialogue import ScenarioApprover, user_message
from agent.eval.suite import Environment, Scenario, Verdict
from agent.eval.trace import EpisodeTrace, Exchange
from agent.gate import TurnLedger, run_call
from agent.loop import QUESTION_ENDINGS, Budgets
from agent.formats import ToolCall, format_tool_call
from agent.records import CallRecord, CallStatus, StepRecord, StopReason, Turn
from tools.calendar.lab.eval_suite import make_environment
from tools.calendar.lab.grpo_tools import with_tools
from tools.calendar.lab.scenarios import build_scenario
from tools.calendar.lab.verify import CalendarVerifier
from agent.tools import ToolResult

ROW_KEYS = ("scenario_id", "template", "index", "seed")


def tool_schemas() -> list[dict[str, Any]]:
    """The registry's schemas of the environment's tools, with every constraint the validators apply.

    TRL renders ``transformers.utils.get_json_schema(method)`` into the prompt, and that function
    reads only type hints and the docstring: it cannot say ``pattern``, ``maxLength``,
    ``maxItems``, ``minimum`` or ``maximum``. What it cannot say is still enforced (each call is
    validated by the registry, ``invalid_arguments`` otherwise); and a rollout generated under a
    grammar (llama.cpp) must build the grammar from these schemas, not from the method signatures,
    or a small model may write ``"attendees": ["Mike", "Mike", ...`` until its budget runs out.
    """
    from tools.calendar.store import CalendarStore
    from tools.calendar.tools import build_registry

    store = CalendarStore(":memory:")
    try:
        return build_registry(store).schemas()
    finally:
        store.close()


# What each tool's result holds, for the docstring's Returns: (get_json_schema writes it into the
# schema TRL renders). Everything else of a tool comes from the registry (``grpo_tools``).
RETURNS = {
    "search_events": "The tool result as JSON text: ok, and the matching events with their ids.",
    "create_event": "The tool result as JSON text: ok, and the created event or the conflict.",
    "update_event": "The tool result as JSON text: ok, and the updated event.",
    "delete_event": "The tool result as JSON text: ok, and the deleted event.",
    "find_free_slots": "The tool result as JSON text: ok, and the free slots.",
    "find_common_free_time": "The tool result as JSON text: ok, and the common free slots.",
}


@with_tools(tool_schemas(), RETURNS)
class CalendarGRPOEnv:
    """One rollout's calendar: reset from a prompt row, the calendar tools, the verifier's reward.

    The tools are public methods (TRL exposes each one to the model), made from the runtime
    registry's schemas by ``with_tools``: the registry is the one place they are declared."""

    def __init__(self) -> None:
        self._scenario: Scenario | None = None
        self._environment: Environment | None = None
        self._approver: ScenarioApprover | None = None
        self._turn: Turn | None = None
        self._ledger: TurnLedger | None = None
        self._initial: dict[str, Any] = {}

    # -- episode -------------------------------------------------------------------------------

    def reset(self, **row: Any) -> None:
        """Rebuild the scenario of ``row``. Returns None: the row's prompt already ends with the
        user's opening message, and TRL appends a string that ``reset`` returns to that message."""
        missing = [k for k in ROW_KEYS if k not in row]
        if missing:
            raise KeyError(f"prompt row lacks {missing}; rows come from `python -m agent export grpo`")
        scenario = build_scenario(str(row["template"]), int(row["index"]), int(row["seed"]))
        if scenario.id != row["scenario_id"]:
            raise ValueError(f"row {row['scenario_id']!r} rebuilt as {scenario.id!r}: generator or row changed")
        if "scenario_seed" in row and row["scenario_seed"] is not None and int(row["scenario_seed"]) != scenario.seed:
            raise ValueError(f"scenario {scenario.id} has seed {scenario.seed}, the row says {row['scenario_seed']}")
        if self._environment is not None:
            self._environment.close()
        self._scenario = scenario
        self._environment = make_environment(scenario)
        self._approver = ScenarioApprover(scenario, delivered=1)
        prompt = row.get("prompt")
        if isinstance(prompt, list) and prompt and isinstance(prompt[-1], dict) and prompt[-1].get("role") == "user":
            opening = str(prompt[-1]["content"])  # as the row shows it (time and date notes and all)
        else:
            opening = user_message(scenario, self._environment, scenario.opening)["content"]
        self._turn = Turn(session_id=None, user_text=opening)
        self._ledger = TurnLedger(max_tool_calls=Budgets().max_tool_calls)
        self._initial = self._environment.snapshot()

    def _finish(self, reply: str) -> None:
        """Record the model's final answer to the user (the verifier checks that it answered)."""
        turn = self._require_turn()
        turn.reply = reply.strip()
        ends_with_question = turn.reply.rstrip().endswith(QUESTION_ENDINGS)
        if self._ledger is not None and self._ledger.stop is not None:
            turn.stop_reason = self._ledger.stop  # the gate ended the turn: the reply came too late
        else:
            turn.stop_reason = StopReason.ASKED_USER if ends_with_question else StopReason.FINAL_REPLY

    def _verdict(self) -> Verdict:
        """The verifier's full judgement of the rollout so far."""
        turn = self._require_turn()
        assert self._scenario is not None and self._environment is not None
        trace = EpisodeTrace(
            scenario=self._scenario, exchanges=[Exchange(user_text=turn.user_text, turn=turn)],
            initial=self._initial, final=self._environment.snapshot(),
            tool_names=tuple(self._environment.registry.names),
        )
        return CalendarVerifier().verify(trace)

    def get_reward(self) -> float:
        """The verifier's reward for the rollout, in [0, 1]."""
        return self._verdict().reward

    def _require_turn(self) -> Turn:
        if self._turn is None:
            raise RuntimeError("call reset(**row) first")
        return self._turn

    def _call(self, name: str, **arguments: Any) -> str:
        """Run one call through the runtime's own gate (``agent.gate.run_call``) and record it as
        the loop would. TRL does not say which calls share one model reply, so every call is its
        own step (and "skip the rest of a reply after a failure" never applies here); once a gate
        rule has ended the turn (budget, repeats, failures), later calls are not run and the rollout
        ends with that stop reason, as the runtime's turn would."""
        turn = self._require_turn()
        assert self._environment is not None and self._approver is not None and self._ledger is not None
        arguments = {k: v for k, v in arguments.items() if v is not None}
        index = len(turn.steps)
        call_id = f"call_{index}_0"
        if self._ledger.stop is not None:
            record = CallRecord(name=name, arguments=arguments, status=CallStatus.SKIPPED, call_id=call_id,
                                destructive=self._environment.registry.is_destructive(name),
                                result=ToolResult.failure("skipped", f"Not run: the turn has ended "
                                                          f"({self._ledger.stop.value}).").to_text())
        else:
            self._ledger.new_reply()
            record = run_call(ToolCall(name, arguments), self._environment.registry, self._approver, self._ledger,
                              call_id=call_id)
        turn.steps.append(StepRecord(index=index, raw_output=format_tool_call(name, arguments), calls=[record]))
        return record.result


# Public methods that are the environment's controls, not tools (TRL's own examples keep
# ``reset`` and ``get_reward`` public the same way); everything else public is a tool.
CONTROL_METHODS = frozenset({"reset", "get_reward"})


def final_text(completion: Any) -> str:
    """The model's last visible answer in a TRL completion (a message list or plain text)."""
    if isinstance(completion, str):
        return completion
    for message in reversed(list(completion or [])):
        if isinstance(message, dict) and message.get("role") == "assistant" and not message.get("tool_calls"):
            content = message.get("content")
            return content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
    return ""


def reward_func(completions: list[Any], environments: list[CalendarGRPOEnv], **kwargs: Any) -> list[float]:
    """TRL reward function: each rollout's final answer is recorded, then the verifier scores it."""
    rewards = []
    for completion, environment in zip(completions, environments):
        environment._finish(final_text(completion))
        rewards.append(environment.get_reward())
    return rewards


# What ``python -m agent train grpo`` looks up in a domain's ``grpo_env`` module (agent/ never
# imports a domain by name): the environment class, the reward, and the named reward components
# that are logged one by one (weight 0: they show reward hacking, the total alone trains).
ENVIRONMENT = CalendarGRPOEnv
REWARD_COMPONENTS = ("safety", "progress", "final", "penalty")


def component_reward(name: str) -> Any:
    """A TRL reward function returning one verifier component per rollout (None where the
    scenario's kind has no such component, e.g. ``progress`` for a message that needs no tools)."""
    def component(completions: list[Any], environments: list[CalendarGRPOEnv], **kwargs: Any) -> list[float | None]:
        values: list[float | None] = []
        for completion, environment in zip(completions, environments):
            environment._finish(final_text(completion))  # idempotent: the same reply as reward_func records
            value = environment._verdict().components.get(name)
            values.append(None if value is None else float(value))
        return values

    component.__name__ = name  # TRL logs rewards/<__name__>/mean and /std
    return component
