"""Constrained decoding: a GBNF grammar that admits only a valid call to a known tool.

The runtime decodes lazily: free text until the model writes ``<tool_call>``, then the rest of
the block under :func:`tool_call_gbnf`, so what follows the tag must be
``{"name": <known tool>, "arguments": <object valid for THAT tool>}`` and then
``</tool_call>``. Argument rules come from llama-cpp-python's own JSON-schema converter, one
converter per tool (its ``$defs`` names would otherwise collide across tools), merged under
per-tool rule-name prefixes. Whitespace is bounded everywhere, so a small model cannot spin
forever on blanks.
"""

from __future__ import annotations

import ctypes
import functools
import json
import math
import re
from typing import TYPE_CHECKING, Any

import llama_cpp
from llama_cpp.llama_grammar import PRIMITIVE_RULES, STRING_FORMAT_RULES, LlamaGrammar, SchemaConverter

if TYPE_CHECKING:
    from llama_cpp import Llama

CALL_CLOSE = "</tool_call>"

# Rules every converter emits with the same body; they are shared, not prefixed per tool.
_SHARED_RULES = {"space", "dot", *PRIMITIVE_RULES, *STRING_FORMAT_RULES}

# llama-cpp-python's JSON string char admits raw control characters (newlines, tabs, NUL):
# invalid JSON, and a way for a small model to loop on newlines inside a string.
_JSON_CHAR = r'[^"\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4})'

# Bounded whitespace: before the object (the tag is usually followed by one newline) and after it.
_LEAD = r"[ \n]{0,2}"
_TAIL = r"[ \n]{0,2}"

# In a rule body: quoted literals, character classes, repetition counts, or identifiers.
_BODY_TOKEN = re.compile(r'"(?:\\.|[^"\\])*"|\[(?:\\.|[^\]\\])*\]|\{[0-9, ]*\}|[a-zA-Z0-9-]+|.', re.DOTALL)


def tool_call_gbnf(tools: list[dict[str, Any]]) -> str:
    """GBNF for the text after ``<tool_call>``: one call to one of ``tools``, then ``</tool_call>``.

    ``tools`` are OpenAI-format entries (``{"type": "function", "function": {name, parameters}}``,
    as ``Tool.schema()`` returns); bare ``{name, parameters}`` dicts are accepted too.
    """
    if not tools:
        raise ValueError("tool_call_gbnf needs at least one tool")
    rules: dict[str, str] = {}
    alternatives: list[str] = []
    for index, tool in enumerate(tools):
        function = tool.get("function", tool)
        name = function["name"]
        parameters = function.get("parameters") or {"type": "object", "properties": {}}
        prefix = f"t{index}-{_rule_name(name)}"
        arguments_rule = _add_tool_rules(rules, parameters, prefix)
        call_rule = f"{prefix}-call"
        rules[call_rule] = (
            f'"{{" space {_literal(json.dumps("name"))} space ":" space {_literal(json.dumps(name, ensure_ascii=False))} space '
            f'"," space {_literal(json.dumps("arguments"))} space ":" space {arguments_rule} "}}"'
        )
        alternatives.append(call_rule)
    if "char" in rules:
        rules["char"] = _JSON_CHAR
    root = f"root ::= {_LEAD} ({' | '.join(alternatives)}) {_TAIL} {_literal(CALL_CLOSE)}"
    return "\n".join([root, *(f"{name} ::= {body}" for name, body in rules.items())]) + "\n"


@functools.lru_cache(maxsize=16)
def compile_grammar(gbnf: str) -> LlamaGrammar:
    """The LlamaGrammar for ``gbnf``, built once per distinct text (the tool set rarely changes)."""
    return LlamaGrammar.from_string(gbnf, verbose=False)


def check_grammar(llm: Llama, gbnf: str) -> None:
    """Raise ValueError if llama.cpp cannot parse ``gbnf``.

    llama-cpp-python hands an unparsable grammar to the sampler chain as a NULL pointer and
    crashes later; checking once, up front, turns that into an error message.
    """
    sampler = _grammar_sampler(llm, gbnf)
    llama_cpp.llama_sampler_free(sampler)


def grammar_accepts(llm: Llama, gbnf: str, text: str, *, partial: bool = False) -> bool:
    """Whether ``text`` matches ``gbnf``, checked token by token by llama.cpp's own grammar sampler.

    Each token of ``text`` is offered to the sampler alone; a token the grammar masks (logit
    -inf) means rejection. A complete match must also admit end-of-generation at the end;
    with ``partial=True`` a valid beginning (e.g. output cut off by ``max_tokens``) is enough.
    Special tokens in ``text`` are tokenized as special (``</tool_call>`` is one in Qwen3).
    """
    sampler = _grammar_sampler(llm, gbnf)
    try:
        for token in llm.tokenize(text.encode("utf-8"), add_bos=False, special=True):
            if not _allows(sampler, token):
                return False
            llama_cpp.llama_sampler_accept(sampler, token)
        return partial or _allows(sampler, llm.token_eos())
    finally:
        llama_cpp.llama_sampler_free(sampler)


def _grammar_sampler(llm: Llama, gbnf: str) -> Any:
    vocab = llama_cpp.llama_model_get_vocab(llm.model)
    sampler = llama_cpp.llama_sampler_init_grammar(vocab, gbnf.encode("utf-8"), b"root")
    if not sampler:
        raise ValueError("llama.cpp could not parse the grammar (see its log for the line)")
    return sampler


def _allows(sampler: Any, token: int) -> bool:
    """Apply the grammar to a one-candidate array: was the candidate left alive?"""
    data = (llama_cpp.llama_token_data * 1)(llama_cpp.llama_token_data(token, 0.0, 0.0))
    candidates = llama_cpp.llama_token_data_array(
        data=ctypes.cast(data, llama_cpp.llama_token_data_p), size=1, selected=-1, sorted=False
    )
    llama_cpp.llama_sampler_apply(sampler, ctypes.byref(candidates))
    return math.isfinite(data[0].logit)


def _add_tool_rules(rules: dict[str, str], parameters: dict[str, Any], prefix: str) -> str:
    """Convert one tool's parameter schema with its own converter; merge under ``prefix``.

    Returns the name of the rule for the arguments object.
    """
    converter = SchemaConverter(prop_order={}, allow_fetch=False, dotall=False, raw_pattern=False)
    schema = converter.resolve_refs(json.loads(json.dumps(parameters)), f"{prefix}.json")
    top = converter.visit(schema, "")
    converted: dict[str, str] = converter._rules  # noqa: SLF001 - the converter exposes no other accessor
    renamed = {name: name if name in _SHARED_RULES else f"{prefix}-{name}" for name in converted}
    for name, body in converted.items():
        rules[renamed[name]] = _rename_references(body, renamed)
    return renamed[top]


def _rename_references(body: str, renamed: dict[str, str]) -> str:
    """Rewrite the rule names a body refers to, leaving literals and character classes alone."""
    return "".join(renamed.get(token, token) for token in _BODY_TOKEN.findall(body))


def _rule_name(name: str) -> str:
    return re.sub(r"[^a-zA-Z0-9-]+", "-", name).strip("-") or "tool"


def _literal(text: str) -> str:
    """A GBNF string literal for ``text`` (backslash, quote and line breaks escaped)."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")
    return f'"{escaped}"'
