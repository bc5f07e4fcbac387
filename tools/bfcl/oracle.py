"""The oracle: BFCL's ground truth replayed through our loop and gate, as a model's output.

BFCL's ground truth is a list of Python call strings per turn (``cd(folder='document')``,
``sort('final_report.pdf')``). Each becomes our tool call: the name, and the arguments by
keyword, positional ones named from the method's own signature (BFCL's classes are the
reference), values read with ``ast.literal_eval``. At each user turn the oracle writes every call
of that turn in one reply, then, once the results are in, a short final reply; a turn whose
ground truth is empty (the task cannot be done, or a detail is missing) gets a question and no
call. It scoring 100 % under BFCL's checker shows that the harness (tools, world, dialogue,
recording, scoring) is right before any model is scored.
"""

from __future__ import annotations

import ast
import inspect
from typing import Any

from agent.eval.suite import PolicyFn, Scenario
from agent.formats import format_tool_call
from tools.bfcl.world import case_tools, load_class

DONE = "Done."
CANNOT = "I cannot do that with the tools I have. Could you give me what is missing?"


def parse_call(text: str, signatures: dict[str, inspect.Signature]) -> tuple[str, dict[str, Any]]:
    """``name(a, k=v)`` as (name, {parameter: value}); ValueError for anything else."""
    node = ast.parse(text.strip(), mode="eval").body
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        raise ValueError(f"not a plain function call: {text!r}")
    name = node.func.id
    if name not in signatures:
        raise ValueError(f"{text!r}: no tool named {name!r} in this case")
    args = [ast.literal_eval(a) for a in node.args]
    kwargs = {k.arg: ast.literal_eval(k.value) for k in node.keywords if k.arg is not None}
    bound = signatures[name].bind(*args, **kwargs)  # TypeError on a call that does not fit
    return name, dict(bound.arguments)


def _method_signature(cls: type, name: str) -> inspect.Signature:
    """The method's parameters without ``self``, as a call on an instance binds them."""
    signature = inspect.signature(getattr(cls, name))
    return signature.replace(parameters=list(signature.parameters.values())[1:])


def ground_truth_calls(scenario: Scenario) -> list[list[tuple[str, dict[str, Any]]]]:
    """Every turn's ground-truth calls as (name, arguments)."""
    classes = tuple(scenario.initial["involved_classes"])
    excluded = tuple(scenario.initial.get("excluded_function", ()))
    signatures = {doc["name"]: _method_signature(load_class(cls), doc["name"]) for cls, doc in case_tools(classes, excluded)}
    return [[parse_call(text, signatures) for text in turn] for turn in scenario.expected["ground_truth"]]


def oracle(scenario: Scenario) -> PolicyFn:
    """Knows the ground truth; reads only whether the last message is the user's (a new turn)."""
    turns = ground_truth_calls(scenario)
    state = {"turn": -1}

    def policy(messages: list[dict[str, Any]]) -> str:
        if messages[-1].get("role") != "user":
            return DONE  # the turn's calls have their results
        state["turn"] += 1
        calls = turns[state["turn"]] if state["turn"] < len(turns) else []
        if not calls:
            return CANNOT
        return "\n".join(format_tool_call(name, arguments) for name, arguments in calls)

    return policy


def no_calls(scenario: Scenario) -> PolicyFn:
    """Answers every turn in words and calls nothing: the floor, which BFCL's checker must fail
    on every case with an action (``multi_turn:empty_turn_model_response``)."""
    return lambda messages: CANNOT


POLICIES = {"oracle": oracle, "no_calls": no_calls}
