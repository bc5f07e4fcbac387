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
