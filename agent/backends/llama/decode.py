"""Decoding one step: free text, a lazy tool-call grammar, and cheap constrained sampling.

Why tokens are driven by hand (``Llama.eval`` + our own samplers) rather than
``create_chat_completion``: the grammar must be *lazy*. The model writes free text; only once
it opens ``<tool_call>`` must what follows be a valid call, and after ``</tool_call>`` it is
free again (more calls, or a closing sentence). llama.cpp's native lazy grammar cannot release
the constraint after a call, and it would also fire on a ``<tool_call>`` inside ``<think>``.

``Decoder`` builds the samplers and picks grammar-valid tokens in three stages (see
``sample_constrained``); ``generate`` is the loop. The loop keeps the tokens it has sampled but
not yet evaluated apart (``out[evaluated:]``) and evaluates them only when it needs logits, so a
run of tokens that the grammar forces is appended and evaluated in one batch with the token
sampled before it when ``Decoder.jump_forward`` is on (``forced_tokens``).
How tokens are drawn (temperature, top-p, seed) is a ``agent.backends.sampling.Sampling`` per
step; the decoder's own is the default when a step brings none.
"""

from __future__ import annotations

import codecs
import json
import weakref
from dataclasses import dataclass
from typing import Any

import llama_cpp
import numpy as np

from agent.backends.base import TextSink
from agent.backends.candidates import CandidateIndex, best_allowed, grammar_keeps
from agent.backends.llama.engine import Engine
from agent.backends.sampling import Sampling
from agent.formats.chat_format import ChatFormat

# -------------------------------------------------------------------------------------------------

TOP_CANDIDATES = 256  # most likely tokens offered to the grammar inside a free string
NEXT_BEST_TRIES = 4  # inside a free string, tokens asked one at a time (most likely first) before those
NARROWED_MAX_SHARE = 1 / 8  # above this share of the vocabulary, narrowing by characters does not pay


class Decoder:
    """How tokens are chosen on one engine: the samplers for a step's ``Sampling`` (greedy, or
    seeded temperature/top-p), with or without a grammar, and the constrained fast paths.

    (Not ``Sampling``: that name is the per-step settings in ``agent.backends.sampling``.)

    ``chat_format`` is the model's (the backend's, chosen once per model): the one object that
    knows its tags, turn-end text, grammar and trigger; ``generate`` asks it. The trigger is the
    parser's own scanner, so a tag inside a code fence, inline code, reasoning or a quoted tool
    result is read as text here exactly as the parser reads it."""

    def __init__(self, engine: Engine, temperature: float = 0.0, seed: int = 0,
                 candidates: CandidateIndex | None = None, *, chat_format: ChatFormat) -> None:
        self.engine = engine
        self.chat_format = chat_format
        self.default = Sampling(temperature=temperature, seed=seed)  # a step that brings no settings
        # False: every constrained token by the full mask, the reference the fast paths must match
        self.fast_paths = True
        # Greedy only: text the grammar alone decides is appended in one batch (``forced_tokens``).
        # With the canonical call grammar it spares over half the decodes of a call (~0.6x its
        # time, docs/performance.md). Off by default: a forced run is written in the longest
        # vocabulary pieces, which need not be the tokens the model would have chosen, so the text
        # after it is the same only where the model agrees (the oracle's calls, SmolLM2 here), not
        # on the random-weight Qwen3 fixture; to be checked on the real model before it is turned on.
        self.jump_forward = False
        # how constrained tokens were found beyond the model's first choice (see sample_constrained)
        self.grammar_paths: dict[str, int] = {"next": 0, "top": 0, "narrowed": 0, "full_mask": 0}
        self._candidates = candidates  # the vocabulary index, shareable between engines of one model
        self._grammars: dict[str, str] = {}  # tool schemas (JSON) -> their call grammar
        # GBNF text -> that grammar parsed, never advanced: each call starts from a copy of it
        self._parsed: dict[str, Any] = {}
        weakref.finalize(self, _free_all, self._parsed)

    def sampler(self, gbnf: str | None = None, settings: Sampling | None = None) -> tuple[Any, Any]:
        """Greedy, or seeded temperature/top-p sampling (``settings``, else the decoder's default),
        optionally after a GBNF grammar (which masks first, so what is drawn is always a token the
        grammar allows).

        Returns the chain and the grammar sampler inside it (None without a grammar), so the
        caller can offer a single token to the grammar without running the whole chain.
        """
        sampler = self.engine.sampler_chain()
        grammar = None
        if gbnf is not None:
            grammar = llama_cpp.llama_sampler_clone(self._compiled(gbnf))
            llama_cpp.llama_sampler_chain_add(sampler.sampler, grammar)  # the chain owns it now
        settings = settings or self.default
        if settings.greedy:
            sampler.add_greedy()
        else:
            # temperature before top-p, as transformers and vLLM apply them: the same settings
            # mean the same on the llama and the openai backend
            sampler.add_temp(settings.temperature)
            if settings.top_p < 1.0:
                sampler.add_top_p(settings.top_p, 1)
            sampler.add_dist(settings.seed)
        return sampler, grammar

    def sample_constrained(self, free: Any, chain: Any, grammar: Any, greedy: bool | None = None) -> int:
        """Grammar-valid token, cheaply when possible; ``free`` and ``(chain, grammar)`` come from
        ``sampler()`` and ``sampler(gbnf)``; ``greedy``: whether they were built greedy (None: the
        decoder's default settings).

        Masking the whole vocabulary costs ~5 ms a token on 49k entries and ~15 ms on Qwen3's
        151k. So: (1) offer the unconstrained choice alone to the grammar (what llama.cpp's
        common sampler does; for seeded sampling this is exact rejection sampling). Greedy only:
        (2) where the grammar allows few characters (between keys, in numbers), the tokens that
        start with one of them (``CandidateIndex``), the most likely first; inside a free string,
        where nearly any token may follow, the next most likely tokens one at a time
        (``NEXT_BEST_TRIES``), then the ``TOP_CANDIDATES`` most likely. The most likely token the
        grammar keeps (the lowest id among equals, as llama.cpp's greedy sampler breaks ties) is
        exactly the greedy constrained choice: every token left out has a lower logit or is one
        the grammar rejects. (3) The full mask.
        """
        engine = self.engine
        greedy = self.default.greedy if greedy is None else greedy
        if self.fast_paths:
            token = engine.sample(free)
            if grammar_keeps(grammar, np.array([token], dtype=np.int32)).size:
                llama_cpp.llama_sampler_accept(grammar, token)
                return token
            if greedy:  # the argmax over grammar-kept tokens; a sampled step goes to the full mask
                stage, found = self._greedy_allowed(grammar, token)
                if found is not None:
                    llama_cpp.llama_sampler_accept(grammar, found)
                    self.grammar_paths[stage] += 1
                    return found
        self.grammar_paths["full_mask"] += 1
        return engine.sample(chain)  # masks, samples, and advances the grammar

    def _greedy_allowed(self, grammar: Any, rejected: int) -> tuple[str, int | None]:
        """The greedy choice among the tokens ``grammar`` allows, found without the full mask, and
        how (see ``sample_constrained``); None where the cheap stages find none. ``rejected`` is the
        unconstrained choice, which the grammar refused."""
        logits = self.engine.logits()
        candidates = self.candidate_index().candidates(grammar)
        if len(candidates) <= NARROWED_MAX_SHARE * self.engine.n_vocab:
            return "narrowed", best_allowed(grammar, candidates, logits)
        scores = logits.copy()  # never write into llama.cpp's buffer: the full mask reads it
        scores[rejected] = -np.inf
        for _ in range(NEXT_BEST_TRIES):
            token = int(np.argmax(scores))
            if not np.isfinite(scores[token]):
                break
            if grammar_keeps(grammar, np.array([token], dtype=np.int32)).size:
                return "next", token
            scores[token] = -np.inf
        top = np.argpartition(scores, -TOP_CANDIDATES)[-TOP_CANDIDATES:].astype(np.int32)
        return "top", best_allowed(grammar, top, logits, exact_below=scores[top].min())

    def forced_tokens(self, grammar: Any, budget: int, greedy: bool | None = None) -> list[int]:
        """Jump-forward (SGLang's compressed-FSM decoding): where the grammar admits exactly one
        continuation (``", "arguments": {"title": "``, the rest of a key once its prefix is unique,
        the ``-`` of a date, ``</tool_call>``), tokens for it, already accepted by ``grammar``; []
        where it admits more.

        The model's logits cannot change forced text, so greedy output stays the same text; what
        jump-forward saves is decodes: ``generate`` evaluates the run in the same batch as the
        token sampled before it. Two choices keep the tokens close to what greedy decoding writes
        (and so the run short): each token is the longest vocabulary piece that starts the rest of
        the text, as a BPE model writes it, not the tokenizer's split of the run on its own (which
        takes more, shorter tokens); and the run's last token is left to the sampler where the
        grammar allows a longer token in its place, one that runs on into the free text after the
        run (``' "D'`` for the forced ``' "'`` before a title): greedy may write that one. Where no
        allowed token runs on (``-`` before a digit in a tokenizer that splits digits, or the
        closing tag, after which the grammar takes nothing) the last token is forced too. Seeded
        sampling keeps the token-by-token path, so its draws stay what they were.
        """
        greedy = self.default.greedy if greedy is None else greedy
        if not self.jump_forward or not greedy or budget <= 0:
            return []
        text, closes = self.candidate_index().forced_run(grammar)
        if not text:
            return []
        pieces = self._longest_pieces(text.encode("utf-8"))[:budget]
        tokens: list[int] = []
        for i, token in enumerate(pieces):
            if not grammar_keeps(grammar, np.array([token], dtype=np.int32)).size:
                break  # a token the grammar does not take as it stands (cannot happen for forced text)
            if i == len(pieces) - 1 and not closes and self._runs_on(grammar, self.engine.piece(token)):
                break
            llama_cpp.llama_sampler_accept(grammar, token)
            tokens.append(token)
        return tokens

    def _runs_on(self, grammar: Any, piece: bytes) -> bool:
        """Whether ``grammar`` allows a token here that starts with ``piece`` and is longer."""
        allowed = grammar_keeps(grammar, self.candidate_index().candidates(grammar))
        return any(len(p) > len(piece) and p.startswith(piece) for p in map(self.engine.piece, allowed.tolist()))

    def _longest_pieces(self, text: bytes) -> list[int]:
        """``text`` as vocabulary pieces, longest first at every position (the tokenizer's own split
        where no piece covers a position: a byte no piece starts with cannot be forced otherwise)."""
        engine = self.engine
        by_piece, longest = self.candidate_index().piece_ids(engine.n_vocab, engine.read_piece, engine.is_eog)
        tokens: list[int] = []
        at = 0
        while at < len(text):
            for end in range(min(len(text), at + longest), at, -1):
                token = by_piece.get(text[at:end])
                if token is not None:
                    tokens.append(token)
                    at = end
                    break
            else:
                return tokens + self.engine.tokenize(text[at:], add_bos=False)
        return tokens

    def candidate_index(self) -> CandidateIndex:
        """The vocabulary grouped by first characters: built on the first token that needs it (~0.5 s
        for 151k tokens), then kept."""
        if self._candidates is None:
            engine = self.engine
            self._candidates = CandidateIndex((engine.read_piece(t) for t in range(engine.n_vocab)), engine.is_eog)
        return self._candidates

    def _compiled(self, gbnf: str) -> Any:
        """``gbnf`` parsed once: parsing the calendar's grammar takes ~6 ms, a copy of the parsed
        one ~0.2 ms, and a call opens one per step (two tokens of a small model)."""
        grammar = self._parsed.get(gbnf)
        if grammar is None:
            grammar = llama_cpp.llama_sampler_init_grammar(self.engine.vocab, gbnf.encode("utf-8"), b"root")
            if not grammar:
                raise ValueError("tool-call grammar does not parse")
            if len(self._parsed) >= 8:  # as grammar_for: tools rarely change; never grow without bound
                _free_all(self._parsed)
            self._parsed[gbnf] = grammar
        return grammar

    def grammar_for(self, tools: list[dict[str, Any]]) -> str:
        """The tool-call GBNF, built once per set of tools (every step would rebuild it otherwise)."""
        key = json.dumps(tools, sort_keys=True)
        if key not in self._grammars:
            if len(self._grammars) >= 8:  # tools rarely change; never grow without bound
                self._grammars.clear()
            self._grammars[key] = self.chat_format.call_gbnf(tools)
        return self._grammars[key]


def _free_all(parsed: dict[str, Any]) -> None:
    """Free the parsed grammars a decoder kept (when it is collected, or when they are too many)."""
    for grammar in parsed.values():
        llama_cpp.llama_sampler_free(grammar)
    parsed.clear()


@dataclass
class Generated:
    """What ``generate`` produced: the text after the assistant prefix, and how."""

    text: str
    finish_reason: str  # "stop" | "length"
    tokens: int  # tokens kept in the reply (sampled or forced)
    constrained: int  # of which were sampled under the grammar
    forced: int = 0  # of which the grammar forced (jump-forward; appended without sampling)


def generate(engine: Engine, decoder: Decoder, gbnf: str | None, budget: int, assistant_prefix: str = "",
             stop_after_call: bool = False, stream: TextSink | None = None,
             settings: Sampling | None = None) -> Generated:
    """Sample up to ``budget`` tokens after the context's last token.

    Free text until ``<tool_call>`` appears outside ``<think>``; then the tool-call grammar
    ``gbnf`` (None: never constrained) until ``</tool_call>``; then free again. The
    ``assistant_prefix`` is already in the context; the trigger sees it as written text.
    ``stop_after_call`` ends the step as the first call closes. ``settings``: this step's
    temperature/top-p/seed (None: the decoder's default).
    """
    settings = settings or decoder.default
    fmt = decoder.chat_format
    opens_call = fmt.call_opened  # end index of the tag that opens an unclosed call, or None
    free, _ = decoder.sampler(None, settings)
    # Decoded piece by piece (a multi-byte character split across tokens waits for its end),
    # not by detokenizing the whole output after every token.
    utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
    constrained: tuple[Any, Any] | None = None
    out: list[int] = []
    call_start = -1  # index in the scanned text where the open call's JSON starts
    scan = assistant_prefix  # text the trigger looks at (prefix + output)
    n_constrained = 0
    if gbnf is not None and opens_call(scan, 0) is not None:
        constrained, call_start = decoder.sampler(gbnf, settings), opens_call(scan, 0)
    finish = "length"
    evaluated = 0  # how many of ``out`` are in the KV cache
    n_forced = 0
    while len(out) < budget:
        forced = (decoder.forced_tokens(constrained[1], budget - len(out), settings.greedy)
                  if constrained is not None else [])
        before = scan
        if forced:
            out.extend(forced)
            n_forced += len(forced)
            for token in forced:
                scan += utf8.decode(engine.piece(token))
        else:
            # Evaluated only now that logits are needed: a forced run joins the batch of the token
            # sampled before it, which is the decode jump-forward saves.
            if evaluated < len(out):
                engine.eval(out[evaluated:])
                evaluated = len(out)
            if constrained is not None:
                token = decoder.sample_constrained(free, *constrained, greedy=settings.greedy)
                n_constrained += 1
            else:
                token = engine.sample(free)
            if engine.is_eog(token):
                finish = "stop"
                break
            out.append(token)
            scan += utf8.decode(engine.piece(token))
        if constrained is None and gbnf is not None:
            end = opens_call(scan, max(0, len(before) - len(fmt.call_open)))
            if end is not None:
                if end < len(scan):
                    # The token ran past "<tool_call>": keep only the tag; the grammar writes the rest.
                    out.pop()
                    out.extend(engine.tokenize(scan[len(before):end].encode("utf-8"), add_bos=False))
                    scan = scan[:end]
                    utf8.reset()
                constrained, call_start = decoder.sampler(gbnf, settings), end
        elif constrained is not None and len(scan) > call_start and scan.endswith(fmt.call_close):
            constrained = None
            if stop_after_call:
                finish = "stop"  # the caller wants the call only: end once it has streamed
        if stream is not None and len(scan) > len(before):
            stream.text(scan[len(before):])
        if finish == "stop":
            break
        marker = next((m for m in fmt.stop_markers if scan.endswith(m)), None)  # EOS is not the turn end
        if marker is not None:
            scan, finish = scan[: -len(marker)], "stop"
            break
    else:
        if evaluated < len(out):  # the budget ran out: the context holds the whole reply, as it always has
            engine.eval(out[evaluated:])
    scan += utf8.decode(b"", final=True)  # an unfinished character at the end becomes U+FFFD
    return Generated(scan[len(assistant_prefix):], finish, len(out), n_constrained, n_forced)
