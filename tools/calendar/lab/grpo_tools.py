"""The GRPO environment's tool methods, made from the runtime registry's tool schemas.

TRL (``GRPOTrainer(environment_factory=...)``) exposes every public method of the environment
as a tool and writes its schema into the prompt with ``transformers.utils.get_json_schema``,
which reads only the method's signature (type hints, which parameters have a default) and its
Google-style docstring. Written by hand, those methods repeated the registry's six schemas and
drifted from them; made here from the schemas the runtime serves, a tool's name, description,
parameters, their descriptions and types, and which are required cannot differ.

What get_json_schema cannot say (patterns, lengths, bounds, enums) is still enforced: a method
hands the arguments it was given, as given, to the environment's ``_call``, which runs them
through the runtime's call gate and the registry's validation, as the runtime does with a
model's call.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable, TypeVar

JSON_TYPES: dict[str, Any] = {"string": str, "integer": int, "boolean": bool, "number": float}
DEFAULT_RETURNS = "The tool result as JSON text."

Env = TypeVar("Env", bound=type)


def python_type(prop: dict[str, Any]) -> Any:
    """The type hint get_json_schema turns back into ``prop``'s JSON type (arrays with their items)."""
    kind = prop.get("type")
    if kind == "array":
        return list[python_type(prop.get("items") or {"type": "string"})]  # type: ignore[misc]
    if kind == "object":
        return dict[str, Any]
    if kind not in JSON_TYPES:
        raise ValueError(f"no Python type for the JSON type {kind!r}")
    return JSON_TYPES[kind]


def parameters(schema: dict[str, Any]) -> list[inspect.Parameter]:
    """The tool's parameters, keyword-only: the required ones first, then the others, each group
    in the schema's order. A parameter the schema gives a default keeps that default and is not
    nullable; any other optional one is ``T | None = None`` (a None is left out of the call)."""
    properties = schema.get("parameters", {}).get("properties", {})
    required = list(schema.get("parameters", {}).get("required", []))
    out = []
    for name in [*required, *(n for n in properties if n not in required)]:
        prop, hint = properties[name], python_type(properties[name])
        if name in required:
            out.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=hint))
        elif "default" in prop:
            out.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=hint, default=prop["default"]))
        else:
            out.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=hint | None, default=None))
    return out


def docstring(schema: dict[str, Any], returns: str) -> str:
    """The Google-style docstring get_json_schema reads the description and each argument's from."""
    properties = schema.get("parameters", {}).get("properties", {})
    lines = [schema["description"], "", "Args:"]
    for parameter in parameters(schema):
        description = properties[parameter.name].get("description")
        if not description:
            raise ValueError(f"{schema['name']}.{parameter.name} has no description for the model")
        lines.append(f"    {parameter.name}: {description}")
    return "\n".join([*lines, "", "Returns:", f"    {returns}"])


def tool_method(schema: dict[str, Any], returns: str = DEFAULT_RETURNS, owner: str = "") -> Callable[..., str]:
    """A plain function (a method once set on a class) that TRL lists and get_json_schema reads as
    ``schema``. Called, it checks the arguments against its signature (an unknown or missing one
    is a TypeError, as with a written method) and passes the ones given, Nones left out, to
    ``self._call(name, **arguments)``."""
    name = schema["name"]
    params = parameters(schema)
    signature = inspect.Signature(
        [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD), *params], return_annotation=str)

    def method(self: Any, **arguments: Any) -> str:
        given = signature.bind(self, **arguments).arguments
        return self._call(name, **{k: v for k, v in given.items() if k != "self" and v is not None})

    method.__name__ = name
    method.__qualname__ = f"{owner}.{name}" if owner else name
    method.__doc__ = docstring(schema, returns)
    method.__signature__ = signature  # type: ignore[attr-defined]
    method.__annotations__ = {**{p.name: p.annotation for p in params}, "return": str}
    return method


def with_tools(schemas: list[dict[str, Any]], returns: dict[str, str] | None = None) -> Callable[[Env], Env]:
    """Class decorator: one method per tool schema (``{"type": "function", "function": {...}}`` as
    ``Registry.schemas()`` gives them), ``returns`` naming what each tool's result holds."""
    def decorate(cls: Env) -> Env:
        for entry in schemas:
            schema = entry.get("function", entry)
            if schema["name"] in vars(cls):
                raise ValueError(f"{cls.__name__} already defines {schema['name']}")
            text = (returns or {}).get(schema["name"], DEFAULT_RETURNS)
            setattr(cls, schema["name"], tool_method(schema, text, owner=cls.__qualname__))
        return cls

    return decorate
