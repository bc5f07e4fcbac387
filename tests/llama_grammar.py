"""Tests' view of llama.cpp's grammar sampler: does llama.cpp parse a call grammar, and does it
accept a text token by token.

The runtime builds its grammar sampler in ``agent.backends.llama.decode``; the call grammar is the
chat format's (``HERMES.call_gbnf``, built by ``agent.formats.gbnf``). This module checks both
against llama.cpp itself, which only the tests need.
"""

from __future__ import annotations

import ctypes
import functools
import math
from typing import TYPE_CHECKING, Any

import llama_cpp
from llama_cpp.llama_grammar import LlamaGrammar

if TYPE_CHECKING:
    from llama_cpp import Llama


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
