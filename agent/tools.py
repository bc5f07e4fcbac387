"""The runtime's tool contract: a domain's plain functions as model-visible schemas and safe calls.

A domain (e.g. ``tools.calendar``) builds a ``Registry`` of ``Tool``s bound to its store. The
agent runtime only ever talks to this class: it never imports a domain by name. It lives in
``agent/`` because it is the runtime's own contract; domains depend on it, not the other way.
"""

from __future__ import annotations

import json
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

from pydantic import BaseModel, ValidationError

from agent.result_ceiling import within_ceiling

# The stable code of a call that was approved for a target which changed before it ran (a sync,
# another chat, another device): the approval covered what was shown, so nothing is run.
TARGET_CHANGED = "target_changed"
TARGET_CHANGED_MESSAGE = (  # first what a person must read on a cut line: nothing was done, and why
    "Nothing was changed: what this call acts on changed after the user was asked (a sync, another "
    "device or another chat changed it), so their approval does not cover it. Look it up again, tell "
    "the user what it is now, and ask again if they still want it."
)


@dataclass(frozen=True)
class ToolResult:
    """What a tool returns. A failure is a result with a stable code, never an exception."""

    ok: bool
    data: Any = None
    error: str | None = None  # stable code: "not_found", "conflict", "invalid_arguments", ...
    message: str = ""

    @classmethod
    def success(cls, data: Any = None, message: str = "") -> ToolResult:
        return cls(ok=True, data=data, message=message)

    @classmethod
    def failure(cls, error: str, message: str, data: Any = None) -> ToolResult:
        return cls(ok=False, data=data, error=error, message=message)

    def to_text(self) -> str:
        """The exact text the model sees as the tool's result (compact, UTF-8, stable order)."""
        body: dict[str, Any] = {"ok": self.ok}
        if self.error:
            body["error"] = self.error
        if self.message:
            body["message"] = self.message
        if self.data is not None:
            body["data"] = self.data
        text = json.dumps(body, ensure_ascii=False, separators=(", ", ": "), default=str)
        return within_ceiling(text, self.ok, self.error)  # no one result may fill the context


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    arguments: type[BaseModel]
    run: Callable[[Any], ToolResult]  # receives a validated ``arguments`` instance
    destructive: bool = False
    # For destructive tools: the exact action in words a human can approve ("Delete 'Dentist',
    # Tue 3 Dec 15:00-16:00"). Receives the validated arguments.
    describe: Callable[[Any], str] | None = None
    # Changes the domain's state (create, update, delete): the verifier's "no change before the
    # information", "looked up before changing" and duplicate rules read it. A destructive tool
    # always mutates, whether or not this is set (see ``Registry.mutates``). Last, so that
    # positional construction keeps its meaning.
    mutates: bool = False
    # Optional, for tools that ask first: an opaque fingerprint of what a call would change or
    # delete, as it is now (e.g. a hash of the stored rows). The gate takes it when it asks and
    # hands it back with the approved call; ``Registry.execute`` re-reads it inside ``atomic``
    # and runs the call there only if it is unchanged, so an approval executes what was shown.
    fingerprint: Callable[[Any], str] | None = None
    # The domain's transaction (re-entrant: the tool's own joins it), so the re-check and the
    # write are one unit no other writer can come between. None: no atomicity is promised.
    atomic: Callable[[], AbstractContextManager[Any]] | None = None
    # Optional, for tools that are not destructive but may ask in some turns (a bulk change):
    # given the validated arguments and how many calls of each tool already ran (ok) in this
    # turn, the exact words to ask with, or None to run without asking.
    asks_when: Callable[[Any, Mapping[str, int]], str | None] | None = None

    def schema(self) -> dict[str, Any]:
        """OpenAI ``tools`` entry; pydantic's schema without the noise small models don't need."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": _strip_titles(self.arguments.model_json_schema()),
            },
        }


def _strip_titles(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _strip_titles(v) for k, v in node.items() if k != "title" or not isinstance(v, str)}
    if isinstance(node, list):
        return [_strip_titles(v) for v in node]
    return node


def trim_validation_error(exc: ValidationError, limit: int = 400) -> str:
    """pydantic's message, one line per problem, without the documentation URLs."""
    lines = []
    for err in exc.errors(include_url=False):
        where = ".".join(str(p) for p in err.get("loc", ())) or "arguments"
        lines.append(f"{where}: {err.get('msg', 'invalid')}")
    text = "; ".join(lines)
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass
class Registry:
    tools: list[Tool] = field(default_factory=list)

    def __post_init__(self) -> None:
        names = [t.name for t in self.tools]
        if len(names) != len(set(names)):
            raise ValueError(f"duplicate tool names in registry: {names}")
        self._by_name = {t.name: t for t in self.tools}

    @classmethod
    def of(cls, tools: Iterable[Tool]) -> Registry:
        return cls(list(tools))

    @property
    def names(self) -> list[str]:
        return [t.name for t in self.tools]

    def get(self, name: str) -> Tool | None:
        return self._by_name.get(name)

    def is_destructive(self, name: str) -> bool:
        tool = self.get(name)
        return bool(tool and tool.destructive)

    def mutates(self, name: str) -> bool:
        """Does a call of ``name`` change the domain's state? Destructive tools always do."""
        tool = self.get(name)
        return bool(tool and (tool.mutates or tool.destructive))

    def schemas(self) -> list[dict[str, Any]]:
        return [t.schema() for t in self.tools]

    def validate(self, name: str, arguments: Any) -> BaseModel | ToolResult:
        """Validated arguments, or a failure result that names the problem for the model."""
        tool = self.get(name)
        if tool is None:
            return ToolResult.failure(
                "unknown_tool", f"There is no tool named {name!r}. Available tools: {', '.join(self.names)}."
            )
        if not isinstance(arguments, dict):
            return ToolResult.failure(
                "invalid_arguments", f"Arguments for {name} must be a JSON object, got {type(arguments).__name__}."
            )
        try:
            return tool.arguments.model_validate(arguments)
        except ValidationError as exc:
            return ToolResult.failure("invalid_arguments", f"{name}: {trim_validation_error(exc)}")

    def describe(self, name: str, args: BaseModel) -> str:
        """Human-readable action for the approval prompt; falls back to name + arguments."""
        tool = self.get(name)
        if tool is not None and tool.describe is not None:
            try:
                return tool.describe(args)
            except Exception:  # a describe bug must not hide the call from the human
                pass
        return f"{name}({json.dumps(args.model_dump(mode='json', exclude_none=True), ensure_ascii=False)})"

    def asks_first(self, name: str, args: BaseModel, ran: Mapping[str, int]) -> str | None:
        """The words to ask with before a non-destructive call that needs approval in this turn
        (its ``asks_when``), or None. A hook that fails asks (with the plain call): a bug must
        not let a bulk change through unasked."""
        tool = self.get(name)
        if tool is None or tool.asks_when is None:
            return None
        try:
            return tool.asks_when(args, ran)
        except Exception:
            return f"{name}({json.dumps(args.model_dump(mode='json', exclude_none=True), ensure_ascii=False)})"

    def fingerprint(self, name: str, args: BaseModel) -> str | None:
        """What the call would act on, as it is now (None: the tool has no fingerprint). A hook
        that fails gives a marker that the re-check at execution reaches the same way, where a
        failure is the call's failure: never an unchecked run."""
        tool = self.get(name)
        if tool is None or tool.fingerprint is None:
            return None
        try:
            return tool.fingerprint(args)
        except Exception as exc:
            return f"unreadable: {type(exc).__name__}"

    def execute(self, name: str, args: BaseModel, expected: str | None = None) -> ToolResult:
        """Run a validated call. A crashing tool becomes a failure result; the loop keeps going.

        ``expected``: the fingerprint the user approved. The target is read again inside the
        tool's ``atomic`` context, and the call runs in that same context only if it matches;
        otherwise nothing runs and the result is ``TARGET_CHANGED``."""
        tool = self.get(name)
        if tool is None:
            return ToolResult.failure("unknown_tool", f"There is no tool named {name!r}.")
        try:
            if expected is None or tool.fingerprint is None:
                result = tool.run(args)
            else:
                with (tool.atomic or nullcontext)():
                    if tool.fingerprint(args) != expected:
                        return ToolResult.failure(TARGET_CHANGED, TARGET_CHANGED_MESSAGE)
                    result = tool.run(args)
        except Exception as exc:  # tools are expected to return failures; this is the safety net
            return ToolResult.failure("tool_crashed", f"{name} failed: {type(exc).__name__}: {exc}")
        if not isinstance(result, ToolResult):
            return ToolResult.success(result)
        return result
