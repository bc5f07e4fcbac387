"""Training texts tokenized as the runtime tokenizes its prompts: data stays plain text.

Hugging Face tokenizers turn every added token's spelling into that token wherever it stands
(Qwen's ``<tool_call>`` and ``<|im_start|>`` alike), as llama.cpp does. The runtime cuts such
spellings where they lie in data (``agent.segments``, ``Engine.tokenize_prompt``); a training row
that did not would teach the model on tokens it is never served. The same cuts are made here, so
a row's ids are llama.cpp's ids for the same rendered prompt (a test holds the two equal).
"""

from __future__ import annotations

from typing import Any

from agent.segments import Rendered, pieces, tokenize_cut


def encode(tokenizer: Any, prompt: Rendered) -> tuple[list[int], list[tuple[int, int]]]:
    """The ids of ``prompt`` and each one's character span, no special tokens where data lies."""
    special = control_ids(tokenizer)

    def encode_at(at: list[int]) -> tuple[tuple[list[int], list[tuple[int, int]]], list[tuple[int, int]]]:
        ids, offsets = _encode_at(tokenizer, prompt.text, at)
        return (ids, offsets), [span for token, span in zip(ids, offsets) if token in special]

    return tokenize_cut(encode_at, prompt.data)  # no data: one encoding, nothing to cut


def control_ids(tokenizer: Any) -> set[int]:
    """The special and added tokens that text spelling them would turn into, but for those that
    are only whitespace (Gemma's runs of newlines): the runtime's rule (``Engine.is_special``)."""
    added = getattr(tokenizer, "added_tokens_decoder", {}) or {}
    special = set(tokenizer.all_special_ids)
    # ASCII whitespace only, as ``bytes.isspace`` in the engine; a special (control) token stays one
    blank = {i for i, token in added.items()
             if (text := str(getattr(token, "content", token))).isascii() and text.isspace() and i not in special}
    return (special | set(added)) - blank


def _encode_at(tokenizer: Any, text: str, at: list[int]) -> tuple[list[int], list[tuple[int, int]]]:
    ids: list[int] = []
    offsets: list[tuple[int, int]] = []
    for a, b in pieces(len(text), at):
        enc = tokenizer(text[a:b], add_special_tokens=False, return_offsets_mapping=True)
        ids.extend(enc["input_ids"])
        offsets.extend((a + s, a + e) for s, e in enc["offset_mapping"])
    return ids, offsets
