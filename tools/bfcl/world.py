"""BFCL's own executable classes as one episode's world, and its function docs as our tools.

The classes (``GorillaFileSystem``, ``TwitterAPI``, ``TradingBot``, ...) are BFCL's, imported from
``bfcl_eval``, each loaded with the case's ``initial_config`` exactly as BFCL's executor loads
them (``_load_scenario(deepcopy(config), long_context=...)``). A call runs the instance's method
with the arguments the model wrote (defaults left to the method, as BFCL's ``eval`` leaves them).

The tools: one per function doc of the case's ``involved_classes``, less its
``excluded_function``; a miss_func case's ``missed_function`` are held out until their turn. BFCL's ``"type": "dict"`` is a JSON-schema ``object`` and its other type
names map as BFCL's own ``GORILLA_TO_OPENAPI`` table says (``float`` → ``number``, ...); the
argument models are pydantic, built from the docs (see ``arguments_model`` for what they check). None of these tools is destructive: BFCL's worlds are simulations, and its
tasks expect the model to act without asking. All but the stateless ``MathAPI`` change state.
"""

from __future__ import annotations

import copy
import importlib
import json
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, create_model

from agent.tools import Registry, Tool, ToolResult
from tools.bfcl.data import Case, function_docs

class _Arguments(BaseModel):
    model_config = ConfigDict(extra="forbid")


def json_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """A BFCL parameter schema in JSON-schema types, by BFCL's own table (``GORILLA_TO_OPENAPI``:
    ``dict`` → ``object``, ``float`` → ``number``, ...), nested properties and items included."""
    from bfcl_eval.constants.type_mappings import GORILLA_TO_OPENAPI

    out = dict(schema)
    if "type" in out:
        if out["type"] not in GORILLA_TO_OPENAPI:
            raise ValueError(f"BFCL type {out['type']!r} has no JSON-schema mapping")
        out["type"] = GORILLA_TO_OPENAPI[out["type"]]
    if "properties" in out:
        out["properties"] = {k: json_schema(v) for k, v in out["properties"].items()}
    if "items" in out:
        out["items"] = json_schema(out["items"])
    return out


def arguments_model(name: str, parameters: dict[str, Any]) -> type[BaseModel]:
    """The argument model of one function, from its BFCL ``parameters``.

    The schema it shows (the prompt's tool block, the llama backend's grammar) is BFCL's, typed.
    What it checks is the names: the required ones present, no unknown one. Values go to BFCL's
    method as the model wrote them, as BFCL's harness passes them (its ``eval`` checks nothing),
    so a wrong type gets BFCL's own error back; BFCL's ground truth itself passes a string
    ``ticket_id`` where its doc says integer (``multi_turn_base_173``).
    """
    required = set(parameters.get("required", ()))
    fields: dict[str, Any] = {}
    for prop, schema in parameters.get("properties", {}).items():
        shown = {k: v for k, v in json_schema(schema).items() if k not in ("description", "default")}
        kwargs: dict[str, Any] = {"description": schema.get("description"), "json_schema_extra": shown}
        if prop not in required:
            kwargs["default"] = schema.get("default")
        fields[prop] = (Any, Field(**kwargs))
    return create_model(f"{name}_arguments", __base__=_Arguments, **fields)


def load_class(class_name: str) -> type:
    from bfcl_eval.constants.executable_backend_config import CLASS_FILE_PATH_MAPPING

    return getattr(importlib.import_module(CLASS_FILE_PATH_MAPPING[class_name]), class_name)


def new_instance(class_name: str, initial_config: dict[str, Any], long_context: bool) -> Any:
    """A BFCL class loaded as BFCL's executor loads it (stateless classes get no scenario)."""
    from bfcl_eval.constants.executable_backend_config import STATELESS_CLASSES

    instance = load_class(class_name)()
    if class_name not in STATELESS_CLASSES:
        instance._load_scenario(copy.deepcopy(initial_config.get(class_name, {})), long_context=long_context)
    return instance


def result_of(value: Any) -> ToolResult:
    """A method's return value as our result. BFCL's methods report failure as ``{"error": ...}``:
    that is a failure with the stable code ``bfcl_error`` and BFCL's words as its message."""
    if isinstance(value, dict) and set(value) == {"error"}:
        return ToolResult.failure("bfcl_error", str(value["error"]))
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        value = str(value)  # BFCL's executor does the same with what JSON cannot hold
    return ToolResult.success(value)


def _runner(instance: Any, method: str) -> Any:
    def run(args: BaseModel) -> ToolResult:
        return result_of(getattr(instance, method)(**args.model_dump(exclude_unset=True)))

    return run


class GrowingRegistry(Registry):
    """A registry that gains tools during an episode (BFCL's miss_func): the agent holds this
    object, and reads its schemas at the start of every turn."""

    def add(self, tool: Tool) -> None:
        self.tools.append(tool)
        self.__post_init__()  # the name index, and the duplicate check


@dataclass
class World:
    """One case's instances (class name → instance), the tools bound to them, and the tools held
    out until a turn (miss_func: turn index → tools)."""

    instances: dict[str, Any]
    registry: GrowingRegistry
    held_out: dict[int, list[Tool]] = field(default_factory=dict)

    def on_user_turn(self, index: int) -> None:
        """Before user turn ``index``: the functions BFCL holds out until then become tools."""
        for tool in self.held_out.pop(index, []):
            self.registry.add(tool)

    def snapshot(self) -> dict[str, Any]:
        """The public attributes of every instance (what BFCL's state checker compares), as JSON."""
        state = {name: {k: v for k, v in vars(obj).items() if not k.startswith("_")}
                 for name, obj in self.instances.items()}
        return json.loads(json.dumps(state, default=str))


def case_tools(case_classes: tuple[str, ...], excluded: tuple[str, ...]) -> list[tuple[str, dict[str, Any]]]:
    """(class name, function doc) of every tool a case exposes, in BFCL's order."""
    return [(name, doc) for name in case_classes for doc in function_docs(name) if doc["name"] not in excluded]


@lru_cache(maxsize=None)
def _arguments_of(class_name: str, function: str) -> type[BaseModel]:
    """One argument model per function, made once: the docs are the same in every case."""
    doc = next(d for d in function_docs(class_name) if d["name"] == function)
    return arguments_model(function, doc["parameters"])


def build_world(case: Case) -> World:
    from bfcl_eval.constants.executable_backend_config import STATELESS_CLASSES

    instances = {name: new_instance(name, case.initial_config, case.long_context) for name in case.involved_classes}
    turn_of = {function: int(turn) for turn, functions in case.missed_function.items() for function in functions}
    shown: list[Tool] = []
    held_out: dict[int, list[Tool]] = {}
    for name, doc in case_tools(case.involved_classes, case.excluded_function):
        tool = Tool(doc["name"], doc["description"], _arguments_of(name, doc["name"]),
                    _runner(instances[name], doc["name"]), mutates=name not in STATELESS_CLASSES)
        if doc["name"] in turn_of:
            held_out.setdefault(turn_of[doc["name"]], []).append(tool)
        else:
            shown.append(tool)
    return World(instances, GrowingRegistry(shown), held_out)
