"""The OpenAI-style client loop the peers of figure 4 run: how a user of a chat-completions API
with ``tools`` writes an agent, done once so that every peer gets the same loop.

messages + tools → chat completion (``tool_choice="auto"``) → each returned ``tool_call`` goes
through the runtime's call gate (``agent.gate.run_call``: validation, the repeat and budget rules,
the approval gate if destructive, execution against the scenario's environment) → the assistant
message and one tool message per call are appended → again, until a reply without tool calls or the step budget. The transport is a function
(``ChatFn``), so the same loop runs in-process (llama-cpp-python's ``create_chat_completion``)
and over HTTP (``llama_cpp.server``, ``llama-server``).

The loop records what it did as the runtime's own ``Turn``/``StepRecord``/``CallRecord``, and
``run_client_episode`` has the eval's simulated user play around it, so the eval verifier scores
the peers' episodes exactly as it scores the runtime's.
"""

from __future__ import annotations

import json
import time
from typing import Any, Callable

import httpx

from agent.approval import Approver
from agent.eval.dialogue import play_dialogue
from agent.eval.suite import Environment, Scenario
from agent.eval.trace import EpisodeTrace
from agent.gate import TurnLedger, run_call
from agent.loop import QUESTION_ENDINGS, Budgets
from agent.formats import ToolCall
from agent.records import CallRecord, CallStatus, StepRecord, StopReason, Turn
from agent.tools import Registry, ToolResult

# One chat-completions request body in, the ``chat.completion`` response out.
ChatFn = Callable[[dict[str, Any]], dict[str, Any]]


def in_process(llama: Any) -> ChatFn:
    """llama-cpp-python's own chat API on a ``Llama`` made with the chat format under test."""
    return lambda request: dict(llama.create_chat_completion(**request))


def over_http(client: httpx.Client) -> ChatFn:
    """The same request POSTed to an OpenAI-compatible server (``client`` has the base URL)."""

    def chat(request: dict[str, Any]) -> dict[str, Any]:
        response = client.post("/v1/chat/completions", json=request)
        response.raise_for_status()
        return response.json()

    return chat


def run_client_turn(chat: ChatFn, messages: list[dict[str, Any]], registry: Registry,
                    approver: Approver, budgets: Budgets) -> Turn:
    """One user turn (``messages`` ends with the user's message and is appended to).

    Sampling is the runtime's: greedy, no repetition penalty, ``budgets.max_tokens`` asked for
    per request (a server's chat handler may not honour it: that is the peer's behaviour)."""
    started = time.perf_counter()
    turn = Turn(session_id=None, user_text=str(messages[-1].get("content", "")))

    def finish(reason: StopReason, reply: str = "") -> Turn:
        turn.stop_reason, turn.reply, turn.seconds = reason, reply, time.perf_counter() - started
        return turn

    tools = registry.schemas()
    ledger = TurnLedger(max_tool_calls=budgets.max_tool_calls)
    for index in range(budgets.max_steps):
        request = {"messages": messages, "tools": tools, "tool_choice": "auto", "temperature": 0.0,
                   "repeat_penalty": 1.0, "max_tokens": budgets.max_tokens}
        t = time.perf_counter()
        try:
            response = chat(request)
            choice = response["choices"][0]
        except Exception as exc:  # a failed request ends the turn, as a backend error ends ours
            turn.error = f"{type(exc).__name__}: {exc}"[:500]
            return finish(StopReason.MODEL_ERROR)
        message = choice.get("message") or {}
        content = message.get("content") or ""
        tool_calls = message.get("tool_calls") or []
        step = StepRecord(index=index, raw_output=_as_text(content, tool_calls), content=content,
                          finish_reason=str(choice.get("finish_reason") or "stop"),
                          model_seconds=time.perf_counter() - t)
        _count_tokens(step, response)
        turn.steps.append(step)
        # content "" rather than None: llama_cpp.server's request schema wants a string there
        messages.append({"role": "assistant", "content": content, **({"tool_calls": tool_calls} if tool_calls else {})})
        if not tool_calls:
            if not content.strip():
                return finish(StopReason.NO_PROGRESS)
            asked = content.rstrip().endswith(QUESTION_ENDINGS)
            return finish(StopReason.ASKED_USER if asked else StopReason.FINAL_REPLY, content)
        ledger.new_reply()
        for number, call in enumerate(tool_calls):
            record = _run_call(call, registry, approver, ledger, call_id=str(call.get("id") or f"call_{index}_{number}"))
            step.calls.append(record)
            messages.append({"role": "tool", "tool_call_id": record.call_id, "content": record.result})
        if ledger.stop is not None:
            return finish(ledger.stop, content)
    return finish(StopReason.STEP_BUDGET)


def run_client_episode(chat: ChatFn, scenario: Scenario, environment: Environment, budgets: Budgets,
                       max_user_turns: int) -> EpisodeTrace:
    """The scenario's dialogue with the client loop as the agent: the same simulated user, approval
    gate, system and user messages as ``agent.eval.dialogue.run_episode``."""
    def run_turn(messages: list[dict[str, Any]], approver: Approver) -> Turn:
        return run_client_turn(chat, messages, environment.registry, approver, budgets)

    return play_dialogue(scenario, environment, run_turn, max_user_turns)


def _run_call(call: dict[str, Any], registry: Registry, approver: Approver, ledger: TurnLedger,
              call_id: str) -> CallRecord:
    """Arguments that are not JSON are the client's own failure; everything else goes through the
    runtime's call gate (validate, repeat/budget rules, approval, execute)."""
    function = call.get("function") or {}
    name, raw = str(function.get("name") or ""), function.get("arguments")
    try:
        arguments = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        failure = ToolResult.failure("invalid_arguments", f"{name}: the arguments are not JSON")
        ledger.settle(name + str(raw), CallStatus.INVALID)
        return CallRecord(name, raw, CallStatus.INVALID, failure.to_text(), call_id)
    return run_call(ToolCall(name, arguments), registry, approver, ledger, call_id=call_id)


def _count_tokens(step: StepRecord, response: dict[str, Any]) -> None:
    """The token counts a response reports: ``usage``, and llama-server's ``timings`` (``prompt_n``:
    prompt tokens it evaluated, ``cache_n``: taken from its cache), kept whole in ``step.timings``.
    A server without ``timings`` leaves ``evaluated_tokens`` 0 and ``timings`` empty: unknown, not
    zero (the peers figure reads ``"prompt_n" in step.timings``)."""
    usage = response.get("usage") or {}
    step.prompt_tokens = int(usage.get("prompt_tokens") or 0)
    step.generated_tokens = int(usage.get("completion_tokens") or 0)
    timings = response.get("timings") or {}
    step.timings = {k: float(v) for k, v in timings.items() if isinstance(v, (int, float))}
    if "prompt_n" in step.timings:
        step.evaluated_tokens = int(step.timings["prompt_n"])
        step.reused_tokens = int(step.timings.get("cache_n", 0))


def _as_text(content: str, tool_calls: list[dict[str, Any]]) -> str:
    """The step's output as one text for the trace: the content, then one line per call."""
    lines = [content] if content else []
    for call in tool_calls:
        function = call.get("function") or {}
        lines.append(f"{function.get('name')}: {function.get('arguments')}")
    return "\n".join(lines)
