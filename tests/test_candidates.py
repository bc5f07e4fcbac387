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
    """Makes the stand-in grammar allow exactly the given first characters (no space)."""
    def set_allowed(*chars: bytes) -> None:
        def keeps(grammar, tokens: np.ndarray) -> np.ndarray:
            return np.array([t for t in tokens if PIECES[t] in chars], dtype=np.int32)

        monkeypatch.setattr(module, "grammar_keeps", keeps)
    return set_allowed


def test_tokens_led_by_an_allowed_character_are_candidates(allow) -> None:
    allow(b"a")
    found = set(CandidateIndex(PIECES, lambda t: False).candidates(None).tolist())
    assert {0, 1} <= found
    assert not found & {4, 5, 6, 7}  # space-led and non-ASCII tokens cannot follow


def test_a_character_with_no_single_token_cannot_be_ruled_out(allow) -> None:
    """No token is exactly "x", so the grammar cannot be asked about it: "xy" is always offered."""
    allow(b"a")
    assert 2 in CandidateIndex(PIECES, lambda t: False).candidates(None).tolist()


def test_non_ascii_tokens_follow_the_probe(allow) -> None:
    allow("é".encode())
    found = set(CandidateIndex(PIECES, lambda t: False).candidates(None).tolist())
    assert {6, 7} <= found and not found & {0, 1}


def test_end_of_generation_and_empty_pieces_are_always_offered(allow) -> None:
    allow()
    found = set(CandidateIndex(PIECES, lambda t: t == 1).candidates(None).tolist())
    assert {1, 8} <= found
