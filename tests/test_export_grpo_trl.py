"""The GRPO environment as TRL and transformers see it (the train extra is installed for tests)."""

from __future__ import annotations

import inspect

from transformers.utils import get_json_schema

from tests.test_export_sft import suite
from tools.calendar.grpo_env import CalendarGRPOEnv


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


def test_one_rollout_of_the_real_small_model_is_scored(smollm2) -> None:
    """Generate with SmolLM2 in llama.cpp from a GRPO prompt row, run its calls on the environment's
    tool methods as TRL does, and score the rollout. SmolLM2 never opens a call by itself, so the
    reply starts with ``<tool_call>`` (the grammar writes the rest)."""
    from agent.backends.llama import LlamaBackend
    from agent.export.grpo import prompt_rows
    from agent.parsing import parse_reply
    from tools.calendar.grpo_env import reward_func

    row = prompt_rows(suite(), split="train", per_template=2)[0]
    environment = CalendarGRPOEnv()
    assert environment.reset(**row) is None  # the row's prompt is complete: TRL appends nothing
    tools = {t.__name__: t for t in trl_tools(environment)}
    schemas = [get_json_schema(t) for t in tools.values()]

    backend = LlamaBackend(smollm2, n_ctx=4096, n_threads=2)
    completion = backend.complete(row["prompt"], schemas, max_tokens=256, assistant_prefix="<tool_call>")
    assert completion.error is None
    calls = parse_reply(completion.text).tool_calls
    assert calls and calls[0].name in tools  # the grammar admits only known tools
    results = [tools[c.name](**c.arguments) for c in calls if c.name in tools]
    assert all(r.startswith('{"ok": ') for r in results)

    (reward,) = reward_func([[{"role": "assistant", "content": "Done."}]], [environment])
    assert 0.0 <= reward <= 1.0
    assert reward == environment.get_reward()
