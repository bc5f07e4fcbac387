"""A bounded GBNF for one JSON tool call, built from the tools' JSON schemas.

A format module wraps this in its own tags (``HERMES.call_gbnf``): what follows the call's
opening tag must be ``{"name": <known tool>, "arguments": <object valid for THAT tool>}`` and then
the format's closing tag. Argument rules come from llama-cpp-python's own JSON-schema converter,
one converter per tool (its ``$defs`` names would otherwise collide across tools), merged under
per-tool rule-name prefixes.

Every repetition is bounded, so any text the grammar admits closes within a known number of
bytes (``max_text_bytes``), hence of tokens: a degenerate model cannot loop on an attendee list
or a title until ``max_tokens`` runs out. The converter honours ``pattern``, ``maxLength``,
``minItems``/``maxItems`` and enums itself; two things are added here by hand:

- integer ``minimum``/``maximum`` (the converter's port has them as a TODO): a digit-range rule;
- a cap for strings and arrays whose schema gives none (``DEFAULT_MAX_STRING``,
  ``DEFAULT_MAX_ITEMS``), so a loose schema of another domain still yields a bounded grammar.

Inside the object, whitespace is exactly canonical JSON, what ``json.dumps`` writes by default:
``{"name": "x", "arguments": {"a": 1, "b": [1, 2]}}``, i.e. ``": "`` after a key, ``", "``
between members and items, and no blank after ``{``/``[`` or before ``}``/``]``. That is the
form the model was trained on (``HERMES.format_tool_call``, the oracle, the SFT rows, and Qwen3's
and Hermes' templates, which write calls with ``tojson``), and it is what lets jump-forward
decoding append runs such as ``", "arguments": {"title": "`` without sampling them: where the
converter's ``space`` (one optional blank after every value and punctuation) admitted two
continuations, the grammar now admits one. Only the llama backend is constrained; the parser
still reads and repairs any spacing a remote model writes. Around the object the tags are
followed and preceded by exactly one newline, as ``format_tool_call`` and the Qwen3/Hermes
templates write them, so ``\n{"name": "`` and ``\n</tool_call>`` are forced text as well. A schema
the grammar still cannot bound (a free-form object) is refused with ``ValueError``.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from llama_cpp.llama_grammar import PRIMITIVE_RULES, RESERVED_NAMES, STRING_FORMAT_RULES, SchemaConverter

# Rules every converter emits with the same body; they are shared, not prefixed per tool.
_SHARED_RULES = {"space", "dot", *PRIMITIVE_RULES, *STRING_FORMAT_RULES}

# llama-cpp-python's JSON string char admits raw control characters (newlines, tabs, NUL):
# invalid JSON, and a way for a small model to loop on newlines inside a string. ``\uXXXX``
# escapes are left out: text is written as UTF-8, and a character then costs at most 4 bytes.
_JSON_CHAR = r'[^"\\\x7F\x00-\x1F] | "\\" ["\\/bfnrt]'

# Caps for strings and arrays whose schema sets no maximum (the calendar's all do).
DEFAULT_MAX_STRING = 500
DEFAULT_MAX_ITEMS = 32
# The converter's integers have at most 16 digits; ranges without a bound use the same limit.
_INT_LIMIT = 10**16 - 1

# The one newline between the tags and the object, as the training data and the templates write it.
_LEAD = r'"\n"'
_TAIL = r'"\n"'

# In a rule body: quoted literals, character classes, repetition counts, or identifiers.
_BODY_TOKEN = re.compile(r'"(?:\\.|[^"\\])*"|\[(?:\\.|[^\]\\])*\]|\{[0-9, ]*\}|[a-zA-Z0-9-]+|.', re.DOTALL)


def json_call_gbnf(tools: list[dict[str, Any]], close: str) -> str:
    """GBNF for the text after a call's opening tag: one call to one of ``tools``, then ``close``.

    ``tools`` are OpenAI-format entries (``{"type": "function", "function": {name, parameters}}``,
    as ``Tool.schema()`` returns); bare ``{name, parameters}`` dicts are accepted too.
    """
    if not tools:
        raise ValueError("a call grammar needs at least one tool")
    rules: dict[str, str] = {}
    alternatives: list[str] = []
    for index, tool in enumerate(tools):
        function = tool.get("function", tool)
        name = function["name"]
        parameters = function.get("parameters") or {"type": "object", "properties": {}}
        prefix = f"t{index}-{_rule_name(name)}"
        arguments_rule = _add_tool_rules(rules, parameters, prefix)
        call_rule = f"{prefix}-call"
        rules[call_rule] = (f'{_literal("{" + json.dumps("name") + ": ")} {_literal(json.dumps(name, ensure_ascii=False))} '
                            f'{_literal(", " + json.dumps("arguments") + ": ")} {arguments_rule} "}}"')
        alternatives.append(call_rule)
    if "char" in rules:
        rules["char"] = _JSON_CHAR
    root = f"root ::= {_LEAD} ({' | '.join(alternatives)}) {_TAIL} {_literal(close)}"
    gbnf = "\n".join([root, *(f"{name} ::= {body}" for name, body in rules.items())]) + "\n"
    if math.isinf(max_text_bytes(gbnf)):
        loose = [rule for rule in _parse_gbnf(gbnf) if math.isinf(max_text_bytes(gbnf, rule))]
        raise ValueError(f"a tool schema leaves the call grammar unbounded (rules {', '.join(loose[:5])}); "
                         "give its free-form objects properties")
    return gbnf


def _add_tool_rules(rules: dict[str, str], parameters: dict[str, Any], prefix: str) -> str:
    """Convert one tool's parameter schema with its own converter; merge under ``prefix``.

    Returns the name of the rule for the arguments object.
    """
    converter = _BoundedConverter(prop_order={}, allow_fetch=False, dotall=False, raw_pattern=False)
    schema = converter.resolve_refs(_with_caps(json.loads(json.dumps(parameters))), f"{prefix}.json")
    top = converter.visit(schema, "")
    converted: dict[str, str] = converter._rules  # noqa: SLF001 - the converter exposes no other accessor
    converted.pop("space", None)  # no rule refers to it once the separators are canonical
    renamed = {name: name if name in _SHARED_RULES else f"{prefix}-{name}" for name in converted}
    for name, body in converted.items():
        rules[renamed[name]] = _rename_references(_canonical_separators(body), renamed)
    return renamed[top]


def _canonical_separators(body: str) -> str:
    """A converter rule body with ``json.dumps``'s separators instead of optional blanks.

    The converter writes ``space`` (an optional blank) after every value and after ``{``, ``[``,
    ``:`` and ``,``. Here ``"," space`` becomes ``", "``, ``":" space`` becomes ``": "``, and
    every other ``space`` goes: no blank after an opening bracket, a value or a closing one.
    """
    out: list[str] = []
    for token in _BODY_TOKEN.findall(body):
        if token != "space":
            out.append(token)
            continue
        last = next((i for i in range(len(out) - 1, -1, -1) if not out[i].isspace()), None)
        if last is not None and out[last] in ('","', '":"'):
            out[last] = f'"{out[last][1]} "'
    return "".join(out)


class _BoundedConverter(SchemaConverter):
    """llama-cpp-python's converter, plus integer ranges (its port leaves them as a TODO)."""

    def visit(self, schema: dict[str, Any], name: str) -> str:
        bounds = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
        if schema.get("type") == "integer" and any(k in schema for k in bounds):
            low, high = _integer_bounds(schema)
            rule_name = name + "-" if name in RESERVED_NAMES else name or "root"
            return self._add_rule(rule_name, f"({int_range_gbnf(low, high)})")
        return super().visit(schema, name)

    def _build_object_rule(self, properties: list[tuple[str, Any]], required: set[str], name: str,
                           additional_properties: Any) -> str:
        """Properties in the order the schema lists them, the optional ones skippable.

        The converter puts every required property first, so a tool whose schema lists an
        optional ``date`` before a required ``duration_minutes`` would have to start with the
        duration although the tool block (and a scripted oracle) list the date first. Here the rule for "the rest from property i" exists twice, before anything was
        written and after (then a comma leads), so the grammar stays linear in the properties.
        """
        if additional_properties is True or isinstance(additional_properties, dict):
            return super()._build_object_rule(properties, required, name, additional_properties)
        prefix = f"{name}{'-' if name else ''}"
        pairs = {}
        for prop_name, prop_schema in properties:
            value = self.visit(prop_schema, f"{prefix}{prop_name}")
            pairs[prop_name] = self._add_rule(
                f"{prefix}{prop_name}-kv", f'{self._format_literal(json.dumps(prop_name) + ": ")} {value}')
        rest_first, rest_more = "", ""  # the rest after property i: nothing written yet / something written
        for index in reversed(range(len(properties))):
            pair = pairs[properties[index][0]]
            take_first = f"{pair} {rest_more}".strip()
            take_more = f'", " {pair} {rest_more}'.strip()
            if properties[index][0] in required:
                first_body, more_body = take_first, take_more
            else:
                first_body = f"{take_first} | {rest_first}" if rest_first else f"({take_first})?"
                more_body = f"{take_more} | {rest_more}" if rest_more else f"({take_more})?"
            rest_first = self._add_rule(f"{prefix}from-{index}", first_body)
            rest_more = self._add_rule(f"{prefix}after-{index}", more_body)
        return f'"{{" {rest_first} "}}"'.replace("  ", " ")


def _integer_bounds(schema: dict[str, Any]) -> tuple[int, int]:
    low, high = -_INT_LIMIT, _INT_LIMIT
    if "minimum" in schema:
        low = max(low, math.ceil(schema["minimum"]))
    if "exclusiveMinimum" in schema:
        low = max(low, math.floor(schema["exclusiveMinimum"]) + 1)
    if "maximum" in schema:
        high = min(high, math.floor(schema["maximum"]))
    if "exclusiveMaximum" in schema:
        high = min(high, math.ceil(schema["exclusiveMaximum"]) - 1)
    if low > high:
        raise ValueError(f"integer schema admits no value: {schema}")
    return low, high


def int_range_gbnf(low: int, high: int) -> str:
    """A GBNF expression for exactly the decimal integers in ``[low, high]`` (no leading zeros)."""
    parts = []
    if low < 0:
        parts.append(f'"-" ({_nonnegative_range(max(1, -high), -low)})')
    if high >= 0:
        parts.append(_nonnegative_range(max(0, low), high))
    return " | ".join(parts)


def _nonnegative_range(low: int, high: int) -> str:
    """Split ``[low, high]`` by number of digits, then digit by digit."""
    alternatives = []
    for digits in range(len(str(low)), len(str(high)) + 1):
        first = max(low, 10 ** (digits - 1) if digits > 1 else 0)
        last = min(high, 10**digits - 1)
        if first <= last:
            alternatives += _same_length_range(str(first), str(last))
    return " | ".join(alternatives)


def _same_length_range(low: str, high: str) -> list[str]:
    """Sequences for the numbers from ``low`` to ``high``, two digit strings of the same length."""
    if len(low) == 1:
        return [_digit_class(low, high)]
    if low[0] == high[0]:
        return [f'"{low[0]}" ({" | ".join(_same_length_range(low[1:], high[1:]))})']
    rest = len(low) - 1
    out, first, last, upper = [], int(low[0]), int(high[0]), None
    if low[1:] != "0" * rest:  # the lowest leading digit covers only part of its tails
        out.append(f'"{low[0]}" ({" | ".join(_same_length_range(low[1:], "9" * rest))})')
        first += 1
    if high[1:] != "9" * rest:
        upper = f'"{high[0]}" ({" | ".join(_same_length_range("0" * rest, high[1:]))})'
        last -= 1
    if first <= last:  # leading digits followed by any tail
        out.append(f"{_digit_class(str(first), str(last))} [0-9]{{{rest}}}")
    return out + ([upper] if upper else [])


def _digit_class(low: str, high: str) -> str:
    return f'"{low}"' if low == high else f"[{low}-{high}]"


def _with_caps(schema: Any) -> Any:
    """``schema`` with a maximum length on every string and array that lacks one."""
    if isinstance(schema, list):
        return [_with_caps(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {key: _with_caps(value) for key, value in schema.items()}
    kind = out.get("type")
    free_string = not any(key in out for key in ("pattern", "enum", "const", "format", "maxLength"))
    if (kind == "string" or kind == ["string", "null"]) and free_string:
        out["maxLength"] = DEFAULT_MAX_STRING
    if kind == "array" and "maxItems" not in out and "prefixItems" not in out:
        out["maxItems"] = DEFAULT_MAX_ITEMS
    return out


# -- how long can an admitted text be? ---------------------------------------------------------

_GBNF_TOKEN = re.compile(r'"(?:\\.|[^"\\])*"|\[(?:\\.|[^\]\\])*\]|\{[0-9]*(?:,[0-9]*)?\}|[a-zA-Z0-9-]+|[()|?*+]')


def _parse_gbnf(gbnf: str) -> dict[str, list[str]]:
    """Rule name -> body tokens, for the GBNF this module writes (one rule per line)."""
    rules: dict[str, list[str]] = {}
    for line in gbnf.splitlines():
        if " ::= " in line:
            name, body = line.split(" ::= ", 1)
            rules[name.strip()] = _GBNF_TOKEN.findall(body)
    return rules


def max_text_bytes(gbnf: str, rule: str = "root") -> float:
    """The most UTF-8 bytes any text that ``rule`` of ``gbnf`` admits can have; ``math.inf`` if unbounded.

    Every token is at least one byte, so this also bounds the number of tokens a grammar-led
    generation needs to finish: give ``max_tokens`` at least this much and the call closes.
    """
    rules = _parse_gbnf(gbnf)
    memo: dict[str, float] = {}

    def rule_max(name: str) -> float:
        if name not in memo:
            memo[name] = math.inf  # a rule that reaches itself again repeats without bound
            memo[name] = alternatives_max(rules[name], 0)[0]
        return memo[name]

    def alternatives_max(tokens: list[str], i: int) -> tuple[float, int]:
        best, total = 0.0, 0.0
        while i < len(tokens) and tokens[i] != ")":
            token = tokens[i]
            if token == "|":
                best, total, i = max(best, total), 0.0, i + 1
                continue
            if token == "(":
                size, i = alternatives_max(tokens, i + 1)
                i += 1  # the closing parenthesis
            else:
                size, i = atom_max(token), i + 1
            if i < len(tokens) and tokens[i] in ("*", "+"):
                size, i = (math.inf if size else 0.0), i + 1
            elif i < len(tokens) and tokens[i] == "?":
                i += 1
            elif i < len(tokens) and tokens[i].startswith("{"):
                counts = tokens[i][1:-1].split(",")
                top = counts[-1]
                size, i = (size * int(top) if top else (math.inf if size else 0.0)), i + 1
            total += size
        return max(best, total), i

    def atom_max(token: str) -> float:
        if token.startswith('"'):
            return float(len(_unescape(token[1:-1]).encode("utf-8")))
        if token.startswith("["):
            return 4.0 if token.startswith("[^") or not token.isascii() or "\\u" in token or "\\U" in token else 1.0
        return rule_max(token)

    return rule_max(rule)


def _unescape(text: str) -> str:
    return re.sub(r"\\(x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|.)",
                  lambda m: {"n": "\n", "r": "\r", "t": "\t"}.get(m[1], chr(int(m[1][1:], 16)) if len(m[1]) > 1 else m[1]),
                  text)


def _rename_references(body: str, renamed: dict[str, str]) -> str:
    """Rewrite the rule names a body refers to, leaving literals and character classes alone."""
    return "".join(renamed.get(token, token) for token in _BODY_TOKEN.findall(body))


def _rule_name(name: str) -> str:
    return re.sub(r"[^a-zA-Z0-9-]+", "-", name).strip("-") or "tool"


def _literal(text: str) -> str:
    """A GBNF string literal for ``text`` (backslash, quote and line breaks escaped)."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")
    return f'"{escaped}"'
