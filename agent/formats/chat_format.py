"""What a chat format is (``ChatFormat``), and the one place a model's format is chosen.

Why one object per model: the tags a model writes a call in, the tool block it is shown, the text
that ends its turn, the grammar trigger, the parser and (for a GGUF that carries none) the chat
template all belong together; mixing two families' pieces gives a prompt the model was never
trained on or a parser that misses its calls. So the backend chooses the format once, when it
loads the model (``format_for``, from the template family ``models.templates`` detects, or from
the GGUF's architecture when it has no template), and everything downstream (the loop, the REPL,
eval, export, training) takes it from the backend (``format_of``) or from the record the backend
wrote (``format_named``), never by importing a concrete format module.

``models/`` names the families (it may not import ``agent``); the mapping from a family to a
format lives here and nowhere else. A new family is a format module beside ``hermes.py``, one
entry in ``FORMATS`` and one line in ``_BY_FAMILY`` (and the family's probe in ``models.templates``).
"""

from __future__ import annotations

from typing import Any, Iterable, Protocol

from agent.formats.gemma import GEMMA
from agent.formats.hermes import HERMES
from agent.formats.reply import ParsedReply

DEFAULT_FORMAT = "hermes"


class ChatFormat(Protocol):
    """Every member callers use; ``HermesFormat`` is the reference implementation."""

    @property
    def name(self) -> str: ...  # recorded in a backend's identity, so a record names its format

    @property
    def call_open(self) -> str: ...

    @property
    def call_close(self) -> str: ...

    @property
    def response_open(self) -> str: ...

    @property
    def response_close(self) -> str: ...

    @property
    def think_open(self) -> str: ...

    @property
    def think_close(self) -> str: ...

    @property
    def stop_markers(self) -> tuple[str, ...]: ...  # text that ends a turn when EOS does not

    @property
    def own_tags(self) -> tuple[str, ...]: ...  # tags the model writes: scaffolding, not data

    @property
    def control_tags(self) -> tuple[str, ...]: ...  # every spelling of it a tokenizer may parse

    @property
    def template(self) -> str | None: ...  # the chat template it brings for a GGUF that has none

    @property
    def call_example(self) -> str: ...

    def format_tool_call(self, name: str, arguments: dict[str, Any]) -> str: ...

    def call_text(self, name: str, arguments: str) -> str: ...

    def tool_block(self, tools: Iterable[dict[str, Any]], tool_block: str = "full") -> str: ...

    def tool_response(self, content: str) -> str: ...

    def plain_chat(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]],
                   tool_block: str = "full") -> list[dict[str, Any]]: ...

    def parse_reply(self, text: str) -> ParsedReply: ...

    def call_opened(self, text: str, start: int = 0) -> int | None: ...

    def call_gbnf(self, tools: list[dict[str, Any]]) -> str: ...


FORMATS: dict[str, ChatFormat] = {HERMES.name: HERMES, GEMMA.name: GEMMA}

# Template family (``models.templates.FAMILIES``) -> format name. "unknown" is a template the
# runtime can still render (it renders tools itself, or it is plain turns): Hermes is the tags
# every model here was trained with.
_BY_FAMILY = {"2507": "hermes", "hybrid": "hermes", "chatml": "hermes", "unknown": "hermes", "gemma": "gemma"}
# ``general.architecture`` -> format name, asked only when the template names no family: a GGUF
# without a template (Google's Gemma 3 270M GGUF has none) gets that format's own template.
_BY_ARCHITECTURE = {"gemma3": "gemma"}


def format_named(name: str) -> ChatFormat:
    """The format a record names (``identity()["chat_format"]``); a clear error for any other."""
    try:
        return FORMATS[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown chat format {name!r}: known formats are {', '.join(sorted(FORMATS))}") from None


def format_for(family: str, architecture: str = "") -> ChatFormat:
    """THE mapping from a model to its format: by its template's family, or, when that says
    nothing (``unknown``: no template, or one no family matches), by its GGUF architecture."""
    if family == "unknown" and architecture in _BY_ARCHITECTURE:
        return FORMATS[_BY_ARCHITECTURE[architecture]]
    if family not in _BY_FAMILY:
        raise ValueError(f"unknown template family {family!r}: known families are {', '.join(_BY_FAMILY)}")
    return FORMATS[_BY_FAMILY[family]]


def format_of(backend: Any) -> ChatFormat:
    """The format of the model behind ``backend`` (its ``chat_format``). A backend that has none
    (a test double, a wrapper written before formats travelled with the model) runs Hermes."""
    found = getattr(backend, "chat_format", None)
    return found if found is not None else FORMATS[DEFAULT_FORMAT]
