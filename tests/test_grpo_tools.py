"""The GRPO environment's tool methods are made from the runtime registry's schemas, so what TRL
shows the model in training is what the runtime declares: same names, parameters, required ones,
descriptions and types; a parameter added to a schema reaches the method; a call passes on the
arguments it was given, as given."""

from __future__ import annotations

import copy
import inspect
from typing import Any

import pytest
from transformers.utils import get_json_schema

from tools.calendar.lab.grpo_env import CONTROL_METHODS, CalendarGRPOEnv, tool_schemas
from tools.calendar.lab.grpo_tools import tool_method, with_tools


def methods(cls: type) -> dict[str, Any]:
    """What TRL takes as tools: every public function of the class but its controls."""
    return {name: fn for name, fn in inspect.getmembers(cls, inspect.isfunction)
            if not name.startswith("_") and name not in CONTROL_METHODS}


def registry() -> dict[str, dict[str, Any]]:
    return {s["function"]["name"]: s["function"] for s in tool_schemas()}


def test_each_method_has_exactly_the_registry_tools_parameters_and_required_ones() -> None:
    tools, declared = methods(CalendarGRPOEnv), registry()
    assert sorted(tools) == sorted(declared)
    for name, fn in tools.items():
        params = {p.name: p for p in list(inspect.signature(fn).parameters.values())[1:]}
        spec = declared[name]["parameters"]
        assert set(params) == set(spec["properties"]), name
        assert {n for n, p in params.items() if p.default is inspect.Parameter.empty} == set(spec.get("required", [])), name


def test_what_transformers_reads_from_each_method_is_the_registry_schema() -> None:
    """get_json_schema (what TRL renders) gives the registry's description, each parameter's
    description and JSON type, and the required list; only the constraints it cannot express differ."""
    declared = registry()
    for name, fn in methods(CalendarGRPOEnv).items():
        seen = get_json_schema(getattr(CalendarGRPOEnv(), name))["function"]
        ours = declared[name]
        assert seen["name"] == name and seen["description"] == ours["description"]
        assert set(seen["parameters"].get("required", [])) == set(ours["parameters"].get("required", []))
        for prop, spec in ours["parameters"]["properties"].items():
            assert seen["parameters"]["properties"][prop]["description"] == spec["description"], (name, prop)
            assert seen["parameters"]["properties"][prop]["type"] == spec["type"], (name, prop)
            if "items" in spec:
                assert seen["parameters"]["properties"][prop]["items"]["type"] == spec["items"]["type"], (name, prop)


def test_a_parameter_added_to_a_schema_appears_in_the_generated_method() -> None:
    schemas = copy.deepcopy(tool_schemas())
    create = next(s["function"] for s in schemas if s["function"]["name"] == "create_event")
    create["parameters"]["properties"]["priority"] = {"type": "integer", "description": "1 (low) to 3 (high)."}
    create["parameters"]["required"].append("priority")
    del create["parameters"]["properties"]["notes"]

    @with_tools(schemas)
    class Changed:
        def _call(self, name: str, **arguments: Any) -> str:
            return name

    before = inspect.signature(CalendarGRPOEnv.create_event).parameters
    after = inspect.signature(Changed.create_event).parameters
    assert "priority" not in before and "notes" in before
    assert "priority" in after and after["priority"].default is inspect.Parameter.empty and "notes" not in after
    seen = get_json_schema(Changed().create_event)["function"]["parameters"]
    assert seen["properties"]["priority"] == {"type": "integer", "description": "1 (low) to 3 (high)."}
    assert "priority" in seen["required"]


class Recorder:
    """Stands in for the environment's ``_call`` (which runs the call through the gate)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def _call(self, name: str, **arguments: Any) -> str:
        self.calls.append((name, arguments))
        return "{}"


def test_a_call_passes_on_the_arguments_given_as_given() -> None:
    create = next(s["function"] for s in tool_schemas() if s["function"]["name"] == "create_event")
    method = tool_method(create)
    recorder = Recorder()
    method(recorder, title="치과", date="2026-12-01", start_time=None, allow_conflict=False)
    assert recorder.calls == [("create_event", {"title": "치과", "date": "2026-12-01", "allow_conflict": False})]
    method(recorder, title="x" * 500, date="not a date")  # validation is the gate's job, not the signature's
    assert recorder.calls[-1] == ("create_event", {"title": "x" * 500, "date": "not a date"})


def test_an_unknown_or_missing_argument_is_a_type_error_as_with_a_written_method() -> None:
    create = next(s["function"] for s in tool_schemas() if s["function"]["name"] == "create_event")
    method, recorder = tool_method(create), Recorder()
    with pytest.raises(TypeError, match="priority"):
        method(recorder, title="a", date="2026-12-01", priority=1)
    with pytest.raises(TypeError, match="date"):
        method(recorder, title="a")
    assert recorder.calls == []


def test_a_tool_the_class_already_defines_is_refused() -> None:
    with pytest.raises(ValueError, match="already defines search_events"):
        @with_tools(tool_schemas())
        class Clash:
            def search_events(self) -> str:
                return ""
