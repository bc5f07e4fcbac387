"""The GRPO environment as TRL and transformers see it (the train extra is installed for tests)."""

from __future__ import annotations

import inspect
import json
from typing import Any

import pytest
from transformers.utils import get_json_schema

from tests.export_helpers import suite
from tools.calendar.lab.grpo_env import CalendarGRPOEnv, tool_schemas


def trl_tools(instance: CalendarGRPOEnv) -> list:
    """GRPOTrainer's own rule (trl 1.x, environment_factory): every public function of the class
    except ``reset`` and ``get_reward`` is a tool."""
    return [
        getattr(instance, name)
        for name, _ in inspect.getmembers(type(instance), predicate=inspect.isfunction)
        if name not in ("reset", "get_reward") and not name.startswith("_")
    ]


def test_transformers_builds_the_registry_schemas_from_the_environment_methods() -> None:
    environment = suite().make_environment(suite().scenarios(per_template=1)[0])
    registry = {s["function"]["name"]: s["function"] for s in environment.registry.schemas()}
    environment.close()
    tools = trl_tools(CalendarGRPOEnv())
    assert sorted(t.__name__ for t in tools) == sorted(registry)
    for tool in tools:
        schema = get_json_schema(tool)["function"]  # raises on a docstring or hint it cannot read
        theirs = registry[schema["name"]]
        assert schema["description"] == theirs["description"]
        assert set(schema["parameters"]["properties"]) == set(theirs["parameters"]["properties"])
        assert set(schema["parameters"].get("required", [])) == set(theirs["parameters"].get("required", []))


# A valid call of each tool, which each constraint check below then breaks in one argument.
VALID = {
    "search_events": {"date": "2026-12-01", "query": "치과"},
    "create_event": {"title": "치과", "date": "2026-12-01", "start_time": "15:00", "duration_minutes": 60},
    "update_event": {"event_id": 1, "title": "치과"},
    "delete_event": {"event_id": 1},
    "find_free_slots": {"date": "2026-12-01", "duration_minutes": 60},
    "find_common_free_time": {"date": "2026-12-01", "attendees": ["민수"], "duration_minutes": 60},
}
TYPES = {"string": str, "integer": int, "boolean": bool, "array": list}


def _outside_and_at_the_edge(prop: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """(constraint, a value just outside it, a value just inside it or None) for each constraint of ``prop``."""
    out: list[tuple[str, Any, Any]] = []
    items = prop.get("items", {})
    if "pattern" in prop:
        out.append(("pattern", "2026-12-01T15:00:00Z", None))
    if "maxLength" in prop:
        out.append(("maxLength", "x" * (prop["maxLength"] + 1), "x" * prop["maxLength"]))
    if "minimum" in prop:
        out.append(("minimum", prop["minimum"] - 1, None))
    if "maximum" in prop:
        out.append(("maximum", prop["maximum"] + 1, prop["maximum"]))
    if "maxItems" in prop:
        many = [f"p{i}" for i in range(prop["maxItems"] + 1)] if items.get("type") == "string" else list(range(prop["maxItems"] + 1))
        out.append(("maxItems", many, many[:-1]))
    if prop.get("minItems") == 1:
        out.append(("minItems", [], None))
    if "maxLength" in items:
        out.append(("items.maxLength", ["x" * (items["maxLength"] + 1)], ["x" * items["maxLength"]]))
    if "maximum" in items:
        out.append(("items.maximum", [items["maximum"] + 1], [items["maximum"]]))
    if "minimum" in items:
        out.append(("items.minimum", [items["minimum"] - 1], [items["minimum"]]))
    return out


def test_the_environments_tools_enforce_each_constraint_of_the_registry_schemas() -> None:
    """What transformers can express (types, required, descriptions) agrees with the registry's
    schemas; every further constraint those schemas carry (and the rollout grammar is built from)
    is one the environment's tool methods refuse just outside and accept at the edge."""
    row = __import__("agent.export.grpo", fromlist=["prompt_rows"]).prompt_rows(suite(), split="train", per_template=1)[0]

    def fresh_tools() -> dict:
        """A new episode per probe: the gate's call budget and repeat rules must not decide them."""
        environment = CalendarGRPOEnv()
        environment.reset(**row)
        return {t.__name__: t for t in trl_tools(environment)}

    tools = fresh_tools()
    registry = {s["function"]["name"]: s["function"]["parameters"] for s in tool_schemas()}
    assert sorted(registry) == sorted(tools) == sorted(VALID)
    checked = 0
    for name, parameters in registry.items():
        theirs = get_json_schema(tools[name])["function"]["parameters"]["properties"]
        for prop_name, prop in parameters["properties"].items():
            assert theirs[prop_name]["type"] == prop["type"], (name, prop_name)
            if "items" in prop:
                assert theirs[prop_name]["items"]["type"] == prop["items"]["type"], (name, prop_name)
            for constraint, outside, edge in _outside_and_at_the_edge(prop):
                refused = json.loads(fresh_tools()[name](**{**VALID[name], prop_name: outside}))
                assert refused.get("error") == "invalid_arguments", (name, prop_name, constraint, refused)
                if edge is not None:
                    taken = json.loads(fresh_tools()[name](**{**VALID[name], prop_name: edge}))
                    assert taken.get("error") != "invalid_arguments", (name, prop_name, constraint, taken)
                checked += 1
    assert checked >= 30


def test_one_rollout_of_the_real_small_model_is_scored(smollm2) -> None:
    """Generate with SmolLM2 in llama.cpp from a GRPO prompt row, run its calls on the environment's
    tool methods as TRL does, and score the rollout. SmolLM2 never opens a call by itself, so the
    reply starts with ``<tool_call>`` (the grammar writes the rest).

    Whatever SmolLM2 writes on this CPU, the call closes: the grammar is built from the registry's
    schemas (``tool_schemas``), in which every string and list is bounded, so no admitted call is
    longer than ``max_text_bytes`` bytes, and the budget is at least that many tokens. The step
    ends as the call closes, as a rollout that scores this one call needs nothing after it."""
    from agent.backends.llama import LlamaBackend
    from agent.export.grpo import prompt_rows
    from agent.formats import HERMES, parse_reply
    from agent.formats.gbnf import max_text_bytes
    from tools.calendar.lab.grpo_env import reward_func

    row = prompt_rows(suite(), split="train", per_template=2)[0]
    environment = CalendarGRPOEnv()
    assert environment.reset(**row) is None  # the row's prompt is complete: TRL appends nothing
    tools = {t.__name__: t for t in trl_tools(environment)}
    schemas = tool_schemas()

    budget = int(max_text_bytes(HERMES.call_gbnf(schemas)))
    backend = LlamaBackend(smollm2, n_ctx=16384, n_threads=2)
    prompt_tokens = len(backend.tokenize(backend.render(row["prompt"], schemas)))
    assert backend.n_ctx - prompt_tokens >= budget  # the budget below is not cut by the context
    completion = backend.complete(row["prompt"], schemas, max_tokens=budget, assistant_prefix="<tool_call>",
                                  stop_after_call=True)
    assert completion.error is None
    assert completion.generated_tokens <= budget
    reply = parse_reply(completion.text)
    assert reply.tool_calls and not reply.problems, completion.text
    calls = reply.tool_calls
    assert calls[0].name in tools  # the grammar admits only known tools
    results = [tools[c.name](**c.arguments) for c in calls]
    assert all(r.startswith('{"ok": ') for r in results)

    (reward,) = reward_func([[{"role": "assistant", "content": "Done."}]], [environment])
    assert 0.0 <= reward <= 1.0
    assert reward == environment.get_reward()
