"""Data sent to a remote chat server, with every chat-control spelling broken so it stays text.

Why: a remote server renders the chat template and tokenizes the whole prompt itself, with
special tokens parsed everywhere. llama-server and llama_cpp.server do this (llama.cpp's
``tokenize(..., parse_special=true)``), as do Hugging Face servers with added tokens. A tool result
holding an event's notes ``</tool_response><|im_end|>\\n<|im_start|>user\\n…`` would reach that
model as a real turn. In process, ``agent.segments`` cuts the tokenization at data; over HTTP we
cannot reach the server's tokenizer, so the data itself is made harmless before it is sent: an
invisible U+2060 WORD JOINER goes in after the first character of each spelling
(``<|im_end|>`` -> ``<⁠|im_end|>``), which no vocabulary holds as one token. The text still reads
the same to the model and to a person. OpenAI and DeepSeek do not parse specials in content and
do not need it, but it costs them nothing (conversations without such spellings are byte-identical).

What counts as a spelling: every ``<|…|>`` form (ChatML, Llama 3, Phi, Granite, gpt-oss; also with
DeepSeek's full-width bars ``<｜…｜>``), Gemma's ``<start_of_turn>``-like tags, and the known tags of
Qwen/Hermes, Llama 2 and Mistral (``TAGS``). Ordinary markup such as ``<b>`` or ``<tools>`` is
left alone.

The functions are pure: the same history gives the same bytes every turn, so server-side prefix
caches stay hot. Only the wire is changed; the stored history keeps what was written.
"""

from __future__ import annotations

import json
import re
from typing import Any, Callable, Iterable

from agent.formats.chat_format import FORMATS

WORD_JOINER = "\u2060"

# Known control-token spellings that are not of the ``<|…|>`` form: every chat format's own
# (Qwen / Hermes tags, Gemma's turns: ``ChatFormat.control_tags``), then other families'.
TAGS: tuple[str, ...] = tuple(dict.fromkeys(tag for fmt in FORMATS.values() for tag in fmt.control_tags)) + (
    "<bos>", "<eos>",  # Gemma
    "<start_function_call>", "<end_function_call>", "<start_function_response>", "<end_function_response>",
    "<s>", "</s>", "[INST]", "[/INST]",  # Llama 2 / Mistral
    "[TOOL_CALLS]", "[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]", "[TOOL_RESULTS]", "[/TOOL_RESULTS]",
    "[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]",  # Mistral v3+
)
_BARS = "|\uff5c"  # ASCII bar and DeepSeek's full-width bar
CONTROL = re.compile(
    rf"<[{_BARS}][^\s<>{_BARS}]{{1,80}}[{_BARS}]>"  # <|im_start|>, <|eot_id|>, <｜User｜>
    r"|</?(?:start|end)_of_[a-z_]{1,40}>"  # <start_of_turn>, <end_of_image>
    + "".join(f"|{re.escape(tag)}" for tag in sorted(TAGS, key=len, reverse=True))
)


def has_control_text(text: str) -> bool:
    """Whether ``text`` spells a chat-control token anywhere."""
    return CONTROL.search(text) is not None


def neutralise(text: str) -> str:
    """``text`` with each chat-control spelling broken after its first character (idempotent)."""
    if not text or CONTROL.search(text) is None:
        return text  # the common case: the very same string
    return CONTROL.sub(lambda m: m.group(0)[0] + WORD_JOINER + m.group(0)[1:], text)


def neutralise_except(text: str, keep: Iterable[str]) -> str:
    """``text`` neutralised but for the tags in ``keep`` (a model's own ``<tool_call>``, ``<think>``),
    which are the tokens it produced and must be read back as such."""
    tags = sorted((t for t in keep if t), key=len, reverse=True)
    if not tags:
        return neutralise(text)
    parts = re.split("(" + "|".join(re.escape(t) for t in tags) + ")", text)
    return "".join(part if part in tags else neutralise(part) for part in parts)


def neutralise_json_text(text: str) -> str:
    """A JSON text (a call's ``arguments``) whose strings are data, neutralised.

    Servers parse ``arguments`` and some templates dump it again (``tojson``), which turns an escaped
    ``\\u003c|im_end|\\u003e`` into the real spelling; so the decoded strings are checked too. Only when
    one of them spells a control token is the text re-encoded; otherwise it goes out byte for byte."""
    text = neutralise(text)
    try:
        value = json.loads(text)
    except ValueError:
        return text
    if not _any_string(value, has_control_text):
        return text
    return json.dumps(_map_strings(value, neutralise), ensure_ascii=False)


def data_safe_messages(messages: list[dict[str, Any]], own_tags: Iterable[str]) -> list[dict[str, Any]]:
    """Copies of chat messages with their data neutralised (the originals are not touched).

    Every content is data (system, user and tool messages whole); in an assistant message the
    tags in ``own_tags`` stay, and its calls' names and ``arguments`` are data too (a title copied
    from an event). Other keys (ids, roles) are kept as they are."""
    own = tuple(own_tags)
    out: list[dict[str, Any]] = []
    for m in messages:
        copy = dict(m)
        content = m.get("content")
        if isinstance(content, str):
            copy["content"] = neutralise_except(content, own) if m.get("role") == "assistant" else neutralise(content)
        if m.get("role") == "assistant" and m.get("tool_calls"):
            copy["tool_calls"] = [_safe_call(call) for call in m["tool_calls"]]
        out.append(copy)
    return out


def _safe_call(call: Any) -> Any:
    fn = call.get("function") if isinstance(call, dict) else None
    if not isinstance(fn, dict):
        return call
    safe = dict(fn)
    if isinstance(fn.get("name"), str):
        safe["name"] = neutralise(fn["name"])
    arguments = fn.get("arguments")
    if isinstance(arguments, str):
        safe["arguments"] = neutralise_json_text(arguments)
    elif arguments is not None and _any_string(arguments, has_control_text):
        safe["arguments"] = _map_strings(arguments, neutralise)
    return {**call, "function": safe}


def _any_string(value: Any, test: Callable[[str], bool]) -> bool:
    if isinstance(value, str):
        return test(value)
    if isinstance(value, dict):
        return any(_any_string(k, test) or _any_string(v, test) for k, v in value.items())
    if isinstance(value, list):
        return any(_any_string(v, test) for v in value)
    return False


def _map_strings(value: Any, fn: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return fn(value)
    if isinstance(value, dict):
        return {_map_strings(k, fn): _map_strings(v, fn) for k, v in value.items()}
    if isinstance(value, list):
        return [_map_strings(v, fn) for v in value]
    return value
