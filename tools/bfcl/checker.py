"""Scoring an episode with BFCL's own multi-turn checker, called, not rewritten.

``bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker`` takes, per turn, the calls of each
model step as Python call strings, replays them on fresh instances of BFCL's classes beside the
ground truth, and after every turn compares the instances' state and the calls' results. Here
the steps are our loop's steps, and a step's calls are those the gate executed (``ok`` or
``failed``): a call that was invalid, skipped or answered as a repeat never ran in the episode's
world, so the checker does not run it either. A step with no executed call is left out, as BFCL's
own runner leaves out a step that decodes to nothing.

Two things around the call are BFCL's runner's, redone here because its module imports the
whole harness (model handlers, tree-sitter): the turn-count check (``multi_turn:force_terminated``)
and turning a call into the string (``convert_to_function_call``'s one line:
``name(k=repr(v),...)``). The checker keeps its instances in its module's globals under a name
made of the model name and the case id; each verification uses a name of its own and removes
what it left, so samples of one case never share state and a long run does not grow.

The checker ``eval``s the strings. Only executed calls reach it, so every name is a tool of the
case and every keyword a parameter its argument model declares, and every value is the
``repr`` of a JSON value: nothing the model wrote is evaluated as code.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agent.eval.record import EpisodeRecord
from agent.eval.suite import Verdict
from agent.eval.trace import EpisodeTrace
from agent.records import CallStatus
from tools.bfcl.world import case_tools

EXECUTED = (CallStatus.OK, CallStatus.FAILED)


def call_string(name: str, arguments: dict[str, Any]) -> str:
    """One call as BFCL's ``convert_to_function_call`` writes it: ``cd(folder='document')``."""
    return f"{name}({','.join(f'{k}={v!r}' for k, v in arguments.items())})"


def decoded_turns(trace: EpisodeTrace) -> list[list[list[str]]]:
    """Per user turn, per model step, the executed calls as call strings."""
    turns: list[list[list[str]]] = []
    for exchange in trace.exchanges:
        steps = []
        for step in exchange.turn.steps:
            calls = [call_string(c.name, c.arguments) for c in step.calls
                     if CallStatus(c.status) in EXECUTED and isinstance(c.arguments, dict)]
            if calls:
                steps.append(calls)
        turns.append(steps)
    return turns


def check(decoded: list[list[list[str]]], ground_truth: list[list[str]], entry: dict[str, Any]) -> dict[str, Any]:
    """BFCL's verdict (``valid``, ``error_type``, ``error_message``) on these calls."""
    from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_utils
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import multi_turn_checker

    if len(decoded) != len(ground_truth):
        return {"valid": False, "error_type": "multi_turn:force_terminated",
                "error_message": f"the episode has {len(decoded)} turns, the ground truth {len(ground_truth)}"}
    model_name = f"iljeong_{uuid.uuid4().hex}"
    category = entry["id"].rsplit("_", 1)[0]
    try:
        return multi_turn_checker(decoded, ground_truth, entry, category, model_name)
    except Exception as exc:  # the checker asserts on shapes it does not expect: a failed case, not a crash
        return {"valid": False, "error_type": "multi_turn:checker_error", "error_message": f"{type(exc).__name__}: {exc}"}
    finally:
        names = vars(multi_turn_utils)
        for key in [k for k in names if k.startswith(model_name)]:
            del names[key]


def turns_passed(decoded: list[list[list[str]]], ground_truth: list[list[str]], entry: dict[str, Any]) -> int:
    """How many leading turns BFCL's checker passes: the checker run again on the first k turns of
    both sides, for k = 1, 2, ... until it fails. A case is all or nothing; this is the same
    checker's finer grain, so two weak models that both fail every case can still be told apart."""
    for k in range(1, min(len(decoded), len(ground_truth)) + 1):
        if not check(decoded[:k], ground_truth[:k], entry).get("valid"):
            return k - 1
    return min(len(decoded), len(ground_truth))


class BfclVerifier:
    """The verdict of BFCL's checker: success is its ``valid``; its error type is kept in
    ``errors`` (``multi_turn:instance_state_mismatch: ...``) and in the components, beside
    ``bfcl_turns``, the share of the case's turns passed before the first failing one. The
    reward is the checker's valid alone."""

    def verify(self, trace: EpisodeTrace) -> Verdict:
        scenario = trace.scenario
        entry = {"id": scenario.id, "initial_config": scenario.initial["initial_config"],
                 "involved_classes": scenario.initial["involved_classes"]}
        ground_truth = scenario.expected["ground_truth"]
        calls = trace.calls()
        decoded = decoded_turns(trace)
        if trace.error is not None:
            result: dict[str, Any] = {"valid": False, "error_type": "runner_error", "error_message": trace.error}
        else:
            result = check(decoded, ground_truth, entry)
        valid = bool(result.get("valid"))
        passed = len(ground_truth) if valid else turns_passed(decoded, ground_truth, entry)
        components = {"bfcl_valid": 1.0 if valid else 0.0,
                      "bfcl_turns": passed / len(ground_truth) if ground_truth else 1.0}
        errors: list[str] = []
        if not valid:
            error_type = str(result.get("error_type") or "multi_turn:unknown")
            components[f"bfcl_error:{error_type}"] = 1.0  # a column per error type in errors.csv
            errors.append(f"{error_type}: {result.get('error_message', '')}")
        unreadable = trace.unreadable_blocks()
        # the case's tools, held-out ones included (the trace's names are those of the first turn)
        known = {doc["name"] for _, doc in case_tools(tuple(scenario.initial["involved_classes"]),
                                                      tuple(scenario.initial.get("excluded_function", ())))}
        wrong = sum(1 for c in calls if c.status is CallStatus.INVALID or c.name not in known)
        return Verdict(
            success=valid, policy_ok=True, reward=1.0 if valid else 0.0, components=components, errors=errors,
            valid_calls=len(calls) - wrong, attempted_calls=len(calls) + unreadable,
        )


def turns_report(out_dir: Path, records: Sequence[EpisodeRecord]) -> str | None:
    """The eval's extra line (``EvalSuite.reports``): the mean share of turns passed before the
    first failure, per category, for episodes scored with it (nothing is written)."""
    shares: dict[str, list[float]] = {}
    for record in records:
        share = record.verdict.components.get("bfcl_turns")
        if share is not None:
            shares.setdefault(record.scenario.template, []).append(share)
    if not shares:
        return None
    lines = ["BFCL turns passed before the first failing turn (BFCL's checker on each prefix of the case):"]
    for category, values in shares.items():
        lines.append(f"  {category}: {100 * sum(values) / len(values):.1f} % of turns, mean over {len(values)} episodes; "
                     f"turn 1 passed in {sum(v > 0 for v in values)}")
    return "\n".join(lines)
