"""CandidateIndex: the narrowed candidate set must contain every token the grammar could allow.

The grammar is stood in for by a function of the probe tokens (which single characters it
allows); the real llama.cpp grammar is exercised in tests/test_backend_llama.py, where the fast
paths are compared token for token with the full-vocabulary mask.
"""

from __future__ import annotations

import numpy as np
import pytest

from agent.backends import candidates as module
from agent.backends.candidates import CandidateIndex

# token ids:   0     1      2      3     4      5       6             7              8
PIECES = [b"a", b"ab", b"xy", b" ", b" a", b" zz", "é".encode(), "ét".encode(), b""]


@pytest.fixture
def allow(monkeypatch):
    """Makes the stand-in grammar allow any text that starts with one of the given characters."""
    def set_allowed(*chars: bytes) -> None:
        def keeps(grammar, tokens: np.ndarray) -> np.ndarray:
            return np.array([t for t in tokens if PIECES[t].decode()[:1].encode() in chars], dtype=np.int32)

        monkeypatch.setattr(module, "grammar_keeps", keeps)
    return set_allowed


def test_tokens_led_by_an_allowed_character_are_candidates(allow) -> None:
    allow(b"a")
    found = set(CandidateIndex(PIECES, lambda t: False).candidates(None).tolist())
    assert {0, 1} <= found
    assert not found & {4, 5, 6, 7}  # space-led and non-ASCII tokens cannot follow


def test_a_longer_token_is_left_out_where_its_first_two_characters_cannot_follow(monkeypatch) -> None:
    """A grammar that allows the text "a" and nothing after it: "ab" is led by an allowed character,
    but its pair "ab" (a token of its own) is refused, so it is not offered."""
    monkeypatch.setattr(module, "grammar_keeps",
                        lambda grammar, tokens: np.array([t for t in tokens if PIECES[t] == b"a"], dtype=np.int32))
    found = set(CandidateIndex(PIECES, lambda t: False).candidates(None).tolist())
    assert 0 in found and 1 not in found


def test_a_character_with_no_single_token_cannot_be_ruled_out(allow) -> None:
    """No token is exactly "x", so the grammar cannot be asked about it: "xy" is always offered."""
    allow(b"a")
    assert 2 in CandidateIndex(PIECES, lambda t: False).candidates(None).tolist()


def test_non_ascii_tokens_follow_the_probe(allow) -> None:
    allow("é".encode())
    found = set(CandidateIndex(PIECES, lambda t: False).candidates(None).tolist())
    assert {6, 7} <= found and not found & {0, 1}


def test_end_of_generation_is_always_offered_and_an_empty_piece_never(allow) -> None:
    """llama.cpp's grammar refuses a token with an empty piece (a vocabulary's padding) whatever its
    state, so asking about one would only cost time; an end-of-generation token it may allow."""
    allow()
    found = set(CandidateIndex(PIECES, lambda t: t == 1).candidates(None).tolist())
    assert 1 in found and 8 not in found


# ----------------------------------------------------------------------------- llama.cpp's grammar

CALLS = [  # text after the opening tag, with blanks and non-ASCII inside strings
    '\n{"name": "create_event", "arguments": {"title": "팀 회의 with Bob", "date": "2026-12-07", '
    '"start_time": "10:00", "duration_minutes": 60, "repeat": {"freq": "weekly", "by_weekday": ["MO"]}}}'
    '\n</tool_call>',
    '\n{"name": "find_common_free_time", "arguments": {"date": "2026-12-08", "attendees": ["Alice", "Bob Kim"], '
    '"duration_minutes": 30}}\n</tool_call>',
]


@pytest.mark.parametrize("vocabulary", ["smollm2", "tiny_qwen3"])
def test_candidates_hold_every_token_the_grammar_allows_and_the_best_is_the_full_masks(
        vocabulary, calendar_tools, request) -> None:
    """At every position of real calls (blanks and Hangul inside strings included), the narrowed set
    holds every token llama.cpp's grammar allows over the whole vocabulary, and ``best_allowed`` on
    it picks what greedy decoding under the full mask picks, ties included (the lowest id wins)."""
    import llama_cpp

    from agent.backends.llama import LlamaBackend
    from agent.formats import HERMES

    model = LlamaBackend(request.getfixturevalue(vocabulary), n_ctx=512, n_threads=1)
    index, vocab = model.decoder.candidate_index(), np.arange(model.engine.n_vocab, dtype=np.int32)
    rng = np.random.default_rng(0)
    positions = 0
    for call in CALLS:
        _, grammar = model.decoder.sampler(HERMES.call_gbnf(calendar_tools))
        for token in model.engine.tokenize(call.encode(), add_bos=False):
            allowed = module.grammar_keeps(grammar, vocab)
            found = index.candidates(grammar)
            assert set(allowed.tolist()) <= set(found.tolist()), (vocabulary, call, positions)
            logits = rng.integers(0, 4, model.engine.n_vocab).astype(np.float32)  # many ties
            best = allowed[logits[allowed] == logits[allowed].max()].min()
            assert module.best_allowed(grammar, found, logits) == best
            llama_cpp.llama_sampler_accept(grammar, token)
            positions += 1
    assert positions > 60
