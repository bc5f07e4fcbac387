"""The tokens a grammar could allow next, found by asking it which characters it allows.

Why: masking Qwen3's whole 151,936-token vocabulary costs ~15 ms a token. At a structural point
of a tool call (after ``{``, between keys, inside a date) the grammar allows a handful of
characters, so only the tokens that start with one of them can pass. The grammar is asked by
offering it the vocabulary's single-character tokens; it then still checks every remaining
candidate itself, so the narrowing never lets through a token the grammar rejects, and it
never loses one: a token whose first character is rejected is rejected.

Two refinements keep the candidate sets small, and both keep the narrowing exact. Tokens of two
or more bytes that start with an ASCII character are narrowed by their first two characters,
asked with the vocabulary's two-character tokens (``"n``, `` "``): a token ``"name`` can only pass
where ``"n`` passes. The grammar's time grows with every token it is asked about (~0.25 µs each,
20 µs a call), so asking ~100 pairs to rule out ~1,000 candidates pays. (Asking a copy of the
grammar that has accepted the first character instead costs a copy of the whole grammar, 0.3-1.8
ms for the calendar's, more than the rest of the step.) Tokens that start with a non-ASCII
character are kept only if the grammar allows one (probed with "é"): the tool-call grammar allows
either any non-ASCII character (inside a free string) or none.
"""

from __future__ import annotations

import ctypes
from collections import defaultdict
from typing import Any, Callable, Iterable

import llama_cpp
import numpy as np

# numpy twin of llama_token_data, so candidate arrays are built without a Python loop
TOKEN_DATA = np.dtype([("id", np.int32), ("logit", np.float32), ("p", np.float32)])
NON_ASCII = -1  # key of the group of tokens whose (first or second) byte starts a non-ASCII character
NON_ASCII_PROBE = "é".encode()


FIRST_ASKED = 32  # candidates asked about first, the most likely ones (see best_allowed)


def grammar_allows(grammar: Any, tokens: np.ndarray) -> np.ndarray:
    """Which of ``tokens`` the grammar allows next, as a boolean array (its state is not advanced)."""
    data = np.zeros(len(tokens), dtype=TOKEN_DATA)
    data["id"] = tokens
    array = llama_cpp.llama_token_data_array(
        data=ctypes.cast(data.ctypes.data, llama_cpp.llama_token_data_p), size=len(tokens), selected=-1, sorted=False,
    )
    llama_cpp.llama_sampler_apply(grammar, ctypes.byref(array))
    return np.isfinite(data["logit"])


def grammar_keeps(grammar: Any, tokens: np.ndarray) -> np.ndarray:
    """The subset of ``tokens`` the grammar allows next (its state is not advanced)."""
    return np.asarray(tokens, dtype=np.int32)[grammar_allows(grammar, tokens)]


def best_allowed(grammar: Any, tokens: np.ndarray, logits: np.ndarray, exact_below: float | None = None) -> int | None:
    """The token of ``tokens`` that ``grammar`` allows with the highest logit, the lowest id among
    equals (as llama.cpp's greedy sampler breaks ties); None if it allows none of them.

    Of many tokens, the ``FIRST_ASKED`` most likely are asked first: a model's choice is nearly
    always among them, and the grammar's time grows with the tokens it is asked about (~0.25 µs
    each and ~20 µs a call: 1,300 candidates cost ~0.35 ms on Qwen3's vocabulary). ``exact_below``:
    ``tokens`` are the most likely of a larger set whose others score at most this, so a best
    token that does not beat it might tie with one left out: None then.
    """
    scores = logits[tokens]
    if len(tokens) > 8 * FIRST_ASKED:  # below that, a second call costs more than the tokens it spares
        first = np.argpartition(scores, -FIRST_ASKED)[-FIRST_ASKED:]
        found = _best(grammar, tokens[first], scores[first], scores[first].min())
        if found is not None:
            return found
    return _best(grammar, tokens, scores, exact_below)


def _best(grammar: Any, tokens: np.ndarray, scores: np.ndarray, floor: float | None) -> int | None:
    allowed = grammar_allows(grammar, tokens)
    if not allowed.any():
        return None
    kept, kept_scores = tokens[allowed], scores[allowed]
    top = kept_scores.max()
    if floor is not None and not top > floor:
        return None
    return int(kept[kept_scores == top].min())


def _key(byte: int) -> int:
    """ASCII and UTF-8 continuation bytes are keys of their own; a character's lead byte is NON_ASCII.

    Continuation bytes are asked about one by one (a byte-level vocabulary has a token for each):
    where the text so far ends inside a character (Hangul split into bytes), only they may follow,
    and "é" would wrongly rule them out."""
    return byte if byte < 0xC0 else NON_ASCII


class CandidateIndex:
    """The vocabulary grouped by first character, and by first two for tokens led by ASCII."""

    def __init__(self, pieces: Iterable[bytes], is_eog: Callable[[int], bool]) -> None:
        singles: dict[int, list[int]] = defaultdict(list)  # one-byte tokens, and those led by a non-ASCII byte
        pairs: dict[tuple[int, int], list[int]] = defaultdict(list)  # longer tokens led by ASCII, by two keys
        always: list[int] = []  # end-of-generation tokens, and what cannot be asked about
        probe_ids: dict[int, int] = {}  # character -> the token that is exactly that character
        pair_probe_ids: dict[tuple[int, int], int] = {}  # two characters -> the token that is exactly them
        for token, piece in enumerate(pieces):
            if is_eog(token):
                always.append(token)
                continue
            if not piece or piece[0] == 0:  # llama.cpp's grammar refuses these (a vocabulary's padding)
                continue
            if len(piece) == 1 or piece[0] >= 0x80:
                singles[_key(piece[0])].append(token)
            else:
                pairs[(piece[0], _key(piece[1]))].append(token)
            if len(piece) == 1 and piece[0] < 0xC0:
                probe_ids.setdefault(piece[0], token)
            elif piece == NON_ASCII_PROBE:
                probe_ids.setdefault(NON_ASCII, token)
            elif len(piece) == 2 and piece[0] < 0x80 and piece[1] < 0x80:
                pair_probe_ids.setdefault((piece[0], piece[1]), token)
            elif piece[:1].isascii() and piece[1:] == NON_ASCII_PROBE:
                pair_probe_ids.setdefault((piece[0], NON_ASCII), token)
        # A character the vocabulary has no single token for cannot be asked about: the tokens
        # starting with it are always offered; a pair without its token, whenever its first may follow.
        for key in [k for k in singles if k not in probe_ids]:
            always += singles.pop(key)
        unprobed: dict[int, list[int]] = defaultdict(list)
        for key in list(pairs):
            if key[0] not in probe_ids:
                always += pairs.pop(key)
            elif key not in pair_probe_ids:
                unprobed[key[0]] += pairs.pop(key)
        array = lambda ids: np.array(ids, dtype=np.int32)  # noqa: E731
        self._singles = {k: array(v) for k, v in singles.items()}
        self._pairs = {k: array(v) for k, v in pairs.items()}
        self._unprobed = {k: array(v) for k, v in unprobed.items()}
        self._always = array(always)
        # Continuation bytes are asked only where no character passes (the text ends inside one):
        # elsewhere they cannot pass, and a call costs ~0.25 µs for each token asked.
        self._probes = array([t for k, t in probe_ids.items() if not 0x80 <= k < 0xC0])
        self._continuation_probes = array([t for k, t in probe_ids.items() if 0x80 <= k < 0xC0])
        self._probe_of = dict(probe_ids)
        self._key_of = {token: key for key, token in probe_ids.items()}  # probe token -> its character
        self._forced_probes = np.concatenate([self._probes, self._always])  # see _forced_key
        by_first: dict[int, list[int]] = defaultdict(list)
        for (first, _), token in pair_probe_ids.items():
            by_first[first].append(token)
        self._pair_probes = {k: array(v) for k, v in by_first.items()}
        self._pair_key_of = {token: key for key, token in pair_probe_ids.items()}
        self._pair_probes_for: dict[frozenset[int], np.ndarray] = {}  # allowed characters -> their pairs' probes
        self._cache: dict[tuple[frozenset[int], frozenset[tuple[int, int]]], np.ndarray] = {}
        self._piece_ids: tuple[dict[bytes, int], int] | None = None  # see piece_ids

    def piece_ids(self, n_vocab: int, read_piece: Callable[[int], bytes],
                  is_eog: Callable[[int], bool]) -> tuple[dict[bytes, int], int]:
        """Piece bytes -> the first token with that piece, and the longest piece's length: what
        jump-forward writes forced text with. Built on first use only (~15 MB for 151k tokens),
        then kept with the index, so engines sharing the index share it."""
        if self._piece_ids is None:
            ids: dict[bytes, int] = {}
            for token in range(n_vocab):
                piece = read_piece(token)
                if piece and not is_eog(token):
                    ids.setdefault(piece, token)
            self._piece_ids = (ids, max(map(len, ids), default=0))
        return self._piece_ids

    def candidates(self, grammar: Any) -> np.ndarray:
        """A superset of the tokens ``grammar`` allows next; usually tens, not the vocabulary."""
        allowed = self._allowed_keys(grammar)
        probes = self._pair_probes_for.get(allowed)
        if probes is None:
            empty = self._probes[:0]
            probes = np.concatenate([empty] + [self._pair_probes.get(k, empty) for k in allowed])
            self._pair_probes_for[allowed] = probes
        passed = grammar_keeps(grammar, probes).tolist() if probes.size else []
        key = (allowed, frozenset(map(self._pair_key_of.__getitem__, passed)))
        if key not in self._cache:
            empty = self._always[:0]
            groups = [self._always] + [self._singles.get(k, empty) for k in allowed]
            groups += [self._unprobed.get(k, empty) for k in allowed]
            groups += [self._pairs.get(pair, empty) for pair in key[1]]
            self._cache[key] = np.concatenate(groups)
        return self._cache[key]

    def forced_run(self, grammar: Any, limit: int = 64) -> tuple[str, bool]:
        """The text ``grammar`` admits as its only continuation (up to ``limit`` characters; '' when
        more than one character could follow), and whether the grammar is complete after it (no
        character may follow: the run closes the call). Asked of a copy, so ``grammar`` is not
        advanced.

        A character is forced when it is the only probed character the grammar allows and no token
        of the ``always`` group (end of generation, characters without a probe) is
        allowed either: then every token the grammar allows starts with it, whatever the logits.
        A token that is a bare blank is no exception to that (it starts with the blank), so a
        forced run goes on through the blanks of ``": "`` and ``", "``.
        """
        key = self._forced_key(grammar)  # most positions end here, without copying the grammar
        if key is None:
            return "", False
        branch = llama_cpp.llama_sampler_clone(grammar)
        text: list[str] = []
        try:
            while key is not None and len(text) < limit:
                llama_cpp.llama_sampler_accept(branch, self._probe_of[key])
                text.append(chr(key))
                key = self._forced_key(branch)
            complete = key is None and not self._allowed_keys(branch)
        finally:
            llama_cpp.llama_sampler_free(branch)
        return "".join(text), complete

    def _forced_key(self, grammar: Any) -> int | None:
        """The one character ``grammar`` allows next, if it allows exactly one (see ``forced_run``)."""
        passed = grammar_allows(grammar, self._forced_probes)  # one call: each costs ~20 µs before its tokens
        probed, always = passed[: len(self._probes)], passed[len(self._probes):]
        if probed.sum() != 1 or always.any():
            return None
        key = self._key_of[int(self._probes[probed][0])]
        return key if 0 <= key < 0x80 else None  # one ASCII character (not a byte of another)

    def _allowed_keys(self, grammar: Any) -> frozenset[int]:
        passed = grammar_keeps(grammar, self._probes)
        if not passed.size and self._continuation_probes.size:
            passed = grammar_keeps(grammar, self._continuation_probes)
        return frozenset(map(self._key_of.__getitem__, passed.tolist()))
