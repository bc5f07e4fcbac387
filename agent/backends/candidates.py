"""The tokens a grammar could allow next, found by asking it which characters it allows.

Why: masking Qwen3's whole 151,936-token vocabulary costs ~15 ms a token. At a structural point
of a tool call (after ``{``, between keys, inside a date) the grammar allows a handful of
characters, so only the tokens that start with one of them can pass. The grammar is asked by
offering it the vocabulary's single-character tokens; it then still checks every remaining
candidate itself, so the narrowing never lets through a token the grammar rejects, and it
never loses one: a token whose first character is rejected is rejected.

Two refinements keep the candidate sets small. Tokens that start with a space (a third of a
byte-level BPE vocabulary) are narrowed by their second character, asked of a copy of the
grammar that has accepted a space. Tokens that start with a non-ASCII byte are kept only if
the grammar allows a non-ASCII character (probed with "é"): the tool-call grammar allows
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
SPACE = 0x20
NON_ASCII = -1  # key of the group of tokens whose (first or second) byte is not ASCII
NON_ASCII_PROBE = "é".encode()


def grammar_keeps(grammar: Any, tokens: np.ndarray) -> np.ndarray:
    """The subset of ``tokens`` the grammar allows next (its state is not advanced)."""
    data = np.zeros(len(tokens), dtype=TOKEN_DATA)
    data["id"] = tokens
    array = llama_cpp.llama_token_data_array(
        data=ctypes.cast(data.ctypes.data, llama_cpp.llama_token_data_p), size=len(tokens), selected=-1, sorted=False,
    )
    llama_cpp.llama_sampler_apply(grammar, ctypes.byref(array))
    return data["id"][np.isfinite(data["logit"])]


def _key(byte: int) -> int:
    return byte if byte < 0x80 else NON_ASCII


class CandidateIndex:
    """The vocabulary grouped by first byte (and by second byte for tokens that start with a space)."""

    def __init__(self, pieces: Iterable[bytes], is_eog: Callable[[int], bool]) -> None:
        first: dict[int, list[int]] = defaultdict(list)
        second: dict[int, list[int]] = defaultdict(list)  # tokens " x...", by x
        always: list[int] = []  # empty pieces, the bare space and end-of-generation tokens
        bare_spaces: set[int] = set()  # tokens that are one blank: they start with a space, probed or not
        probe_ids: dict[int, int] = {}  # character -> the token that is exactly that character
        for token, piece in enumerate(pieces):
            if is_eog(token) or not piece or piece == b" ":
                always.append(token)
                if piece == b" " and not is_eog(token):
                    bare_spaces.add(token)
            elif piece[0] == SPACE:
                second[_key(piece[1])].append(token)
            else:
                first[_key(piece[0])].append(token)
            if len(piece) == 1 and piece[0] < 0x80:
                probe_ids.setdefault(piece[0], token)
            elif piece == NON_ASCII_PROBE:
                probe_ids.setdefault(NON_ASCII, token)
        # A character the vocabulary has no single token for cannot be asked about: the tokens
        # starting with it are always offered (all space-led ones, if there is no " " token).
        for key in [k for k in first if k not in probe_ids]:
            always += first.pop(key)
        space_unprobed: list[int] = []
        for key in [k for k in second if k not in probe_ids or SPACE not in probe_ids]:
            (space_unprobed if SPACE in probe_ids else always).extend(second.pop(key))
        self._first = {k: np.array(v, dtype=np.int32) for k, v in first.items()}
        self._second = {k: np.array(v, dtype=np.int32) for k, v in second.items()}
        self._always = np.array(always, dtype=np.int32)
        # what ``forced_text`` must find disallowed: a bare blank starts with the space it probes
        self._unforced = np.array([t for t in always if t not in bare_spaces], dtype=np.int32)
        self._space_unprobed = np.array(space_unprobed, dtype=np.int32)
        self._probes = np.array(list(probe_ids.values()), dtype=np.int32)
        self._probe_of = dict(probe_ids)
        self._key_of = {token: key for key, token in probe_ids.items()}  # probe token -> its character
        self._space = probe_ids.get(SPACE)
        self._cache: dict[tuple[frozenset[int], frozenset[int]], np.ndarray] = {}
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
        """A superset of the tokens ``grammar`` allows next; usually a few hundred, not the vocabulary."""
        allowed = self._allowed_keys(grammar)
        after_space: frozenset[int] = frozenset()
        if SPACE in allowed and self._space is not None:
            branch = llama_cpp.llama_sampler_clone(grammar)
            try:
                llama_cpp.llama_sampler_accept(branch, self._space)
                after_space = self._allowed_keys(branch)
            finally:
                llama_cpp.llama_sampler_free(branch)
        key = (allowed, after_space)
        if key not in self._cache:
            empty = self._always[:0]
            groups = [self._always] + [self._first.get(k, empty) for k in allowed]
            groups += [self._second.get(k, empty) for k in after_space]
            if SPACE in allowed:
                groups.append(self._space_unprobed)
            self._cache[key] = np.concatenate(groups)
        return self._cache[key]

    def forced_run(self, grammar: Any, limit: int = 64) -> tuple[str, bool]:
        """The text ``grammar`` admits as its only continuation (up to ``limit`` characters; '' when
        more than one character could follow), and whether the grammar is complete after it (no
        character may follow: the run closes the call). Asked of a copy, so ``grammar`` is not
        advanced.

        A character is forced when it is the only probed character the grammar allows and no token
        of the ``always`` group (end of generation, empty pieces, characters without a probe) is
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
        allowed = self._allowed_keys(grammar)
        if len(allowed) != 1 or NON_ASCII in allowed:
            return None
        if self._unforced.size and grammar_keeps(grammar, self._unforced).size:
            return None
        (key,) = allowed
        return key

    def _allowed_keys(self, grammar: Any) -> frozenset[int]:
        return frozenset(map(self._key_of.__getitem__, grammar_keeps(grammar, self._probes).tolist()))
