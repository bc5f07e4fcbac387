"""Chat templates: the one Jinja setup that renders them, and which family a GGUF's template is.

The runtime (``agent.prompt``) renders prompts with a model's own ``tokenizer.chat_template``;
``models verify`` and ``agent doctor`` name what that template is. Both use the environment
built here, so what the check says is what the runtime will do.

The families are told apart by what the template *renders*, not by its text (a GGUF's template
may be a re-published copy with small edits): one probe conversation (a system message, a user
message and one sentinel tool, ``add_generation_prompt=True``, ``enable_thinking=False``).

- ``2507``: Qwen3-Instruct-2507 (the ``reference`` profile): ChatML turns, tools rendered by the
  template, and a generation prompt that is ``<|im_start|>assistant\\n`` and nothing more.
- ``hybrid``: the hybrid Qwen3 (Qwen3-4B, base of the ``calendar-rlvr`` profile): the same, but with
  thinking off the generation prompt ends in an empty ``<think>\\n\\n</think>\\n\\n``, which the
  history form of the same turn does not have.
- ``chatml``: ChatML that ignores ``tools`` (SmolLM2): the runtime writes its own tool block.
- ``gemma``: Gemma 3's turns (``<start_of_turn>user\\n…<end_of_turn>``) that ignore ``tools``: the
  runtime writes its own tool block, as for ``chatml``.
- ``unknown``: anything else, including a template that does not compile or raises.

``renders_tools`` is whether the template shows the tool schemas itself; when it does not, the
runtime writes the chat format's tool block into the system message (``agent.formats``). Which
chat format a family is served with is decided in ``agent.formats.chat_format`` (``models`` may
not import ``agent``; the family names are the contract between the two).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

SENTINEL_TOOL = "ij_sentinel_tool_7f3a"
FAMILIES = ("2507", "hybrid", "chatml", "gemma", "unknown")
_DESCRIPTIONS = {
    "2507": "Qwen3-Instruct-2507 (no think block at the generation prompt)",
    "hybrid": "hybrid Qwen3 (an empty think block at the generation prompt with thinking off)",
    "chatml": "ChatML without tool support",
    "gemma": "Gemma 3 turns without tool support",
    "unknown": "not a template family the runtime knows",
}
_ASSISTANT = "<|im_start|>assistant\n"
_EMPTY_THINK = "<think>\n\n</think>\n\n"
_GEMMA_USER = "<start_of_turn>user\n"


class _IgnoreGenerationTags(jinja2.ext.Extension):
    """HF's ``{% generation %}`` tag is a training marker; render its body unchanged."""

    tags = {"generation"}

    def parse(self, parser: Any) -> Any:
        parser.stream.skip(1)
        return parser.parse_statements(("name:endgeneration",), drop_needle=True)


def _tojson(x: Any, ensure_ascii: bool = False, indent: int | None = None,
            separators: tuple[str, str] | None = None, sort_keys: bool = False) -> str:
    """Same JSON rendering as transformers' chat templates (non-ASCII kept)."""
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def compile_template(source: str) -> jinja2.Template:
    """The template as transformers compiles it (sandboxed, trim/lstrip blocks, its ``tojson``).

    Raises ``jinja2.TemplateError`` when it does not compile."""
    env = ImmutableSandboxedEnvironment(
        loader=jinja2.BaseLoader(), trim_blocks=True, lstrip_blocks=True,
        extensions=[_IgnoreGenerationTags, jinja2.ext.loopcontrols],
    )
    env.filters["tojson"] = _tojson
    return env.from_string(source)


def sentinel_tools() -> list[dict[str, Any]]:
    """One tool whose name shows whether a rendering carries the tool schemas."""
    return [{"type": "function", "function": {"name": SENTINEL_TOOL, "description": "probe",
                                              "parameters": {"type": "object", "properties": {}}}}]


@dataclass(frozen=True)
class TemplateFamily:
    """Which family a chat template is (``FAMILIES``) and whether it renders the tool schemas."""

    name: str
    renders_tools: bool

    def describe(self) -> str:
        """One line for ``models verify`` and ``agent doctor``."""
        tools = ("tools rendered by the template" if self.renders_tools
                 else "tools not rendered by the template: the runtime writes its own tool block")
        return f"{self.name}: {_DESCRIPTIONS[self.name]}; {tools}"


def _raise(message: str) -> None:
    raise jinja2.TemplateError(message)


def template_family(source: str | None) -> TemplateFamily:
    """The family of ``source`` (a GGUF's ``tokenizer.chat_template``); never raises."""
    if not source:
        return TemplateFamily("unknown", False)
    try:
        compiled = compile_template(source)
    except Exception:  # a template that does not compile is one the runtime cannot use
        return TemplateFamily("unknown", False)
    return family_of(compiled)


def family_of(compiled: jinja2.Template) -> TemplateFamily:
    """The family of a template already compiled by ``compile_template`` (the runtime's renderer
    has one, and need not compile it twice); never raises."""
    try:
        text = compiled.render(
            messages=[{"role": "system", "content": "s"}, {"role": "user", "content": "hi"}],
            tools=sentinel_tools(), add_generation_prompt=True, enable_thinking=False,
            bos_token="", eos_token="", raise_exception=_raise, strftime_now=lambda fmt: "",
        )
    except Exception:  # a template that raises on the probe is one the runtime cannot use
        return TemplateFamily("unknown", False)
    renders_tools = SENTINEL_TOOL in text
    if _GEMMA_USER in text and "hi<end_of_turn>\n" in text:
        # a Gemma template that renders tools writes them in a format of its own: not ours
        return TemplateFamily("unknown" if renders_tools else "gemma", renders_tools)
    if "<|im_start|>user\nhi<|im_end|>\n" not in text:
        return TemplateFamily("unknown", renders_tools)
    if not renders_tools:
        return TemplateFamily("chatml", False)
    if "<tool_call>" not in text:
        return TemplateFamily("unknown", True)
    if text.endswith(_ASSISTANT + _EMPTY_THINK):
        return TemplateFamily("hybrid", True)
    if text.endswith(_ASSISTANT):
        return TemplateFamily("2507", True)
    return TemplateFamily("unknown", True)
