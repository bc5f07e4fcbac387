"""llama.cpp in-process backend: own chat template, KV prefix reuse, per-session states, lazy grammar.

Why tokens are driven by hand (``Llama.eval`` + our own samplers) rather than
``create_chat_completion``: the grammar must be *lazy*. The model writes free text; only once
it opens ``<tool_call>`` must what follows be a valid call, and after ``</tool_call>`` it is
free again (more calls, or a closing sentence). llama.cpp's native lazy grammar cannot release
the constraint after a call, and it would also fire on a ``<tool_call>`` inside ``<think>``.

Prefix reuse: the prompt's tokens are compared with the tokens in the context (and with the
saved state of the calling session); only the differing tail is evaluated.
"""

from __future__ import annotations

import codecs
import ctypes
import hashlib
import json
import os
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import llama_cpp
import numpy as np
from llama_cpp import Llama
from llama_cpp import _internals

from agent.backends.base import Completion, TextSink
from agent.backends.candidates import CandidateIndex, grammar_keeps
from agent.backends.sampling import Sampling
from agent.prompt import PromptError, PromptRenderer

CALL_OPEN = "<tool_call>"
CALL_CLOSE = "</tool_call>"
END_MARKERS = ("<|im_end|>",)  # stop text for models whose EOS differs from the turn end
TOP_CANDIDATES = 256  # most likely tokens offered to the grammar inside a free string
NARROWED_MAX_SHARE = 1 / 8  # above this share of the vocabulary, narrowing by characters does not pay


class ModelRefused(ValueError):
    """The model or adapter file failed the models check; llama.cpp never saw it."""


def _check_paths(model_path: str, lora_path: str | None) -> None:
    """Refuse files that would segfault llama-cpp-python, before it sees them.

    Uses ``check_pair`` rather than ``require_loadable`` because the latter exits the process,
    which a library object must not do; entry points turn ``ModelRefused`` into exit status 2.
    """
    from models.check import check_pair

    result = check_pair(model_path, lora_path)
    if not result.ok:
        raise ModelRefused(result.error_line())


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading tokens two sequences share: the part of a prompt the KV cache already holds."""
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


@dataclass
class _SessionState:
    """A session's KV cache (sequence 0 only: no logits, far smaller than ``Llama.save_state``)."""

    tokens: list[int]
    data: bytearray


class LlamaBackend:
    """One llama.cpp model shared by all sessions; a lock serialises use across threads."""

    name = "llama"

    def __init__(
        self,
        model_path: str | os.PathLike[str],
        lora_path: str | os.PathLike[str] | None = None,
        lora_scale: float = 1.0,
        n_ctx: int = 8192,
        n_threads: int | None = None,
        seed: int = 0,
        enable_thinking: bool = False,
        grammar: bool = True,
        temperature: float = 0.0,
        max_saved_sessions: int = 4,
        max_saved_state_mb: float = 1024,
        checked: bool = False,
        tool_block: str = "full",
    ) -> None:
        self.model_path = str(model_path)
        self.lora_path = str(lora_path) if lora_path else None
        self.lora_scale = lora_scale
        self.use_grammar = grammar
        self.temperature = temperature
        self.seed = seed
        self.default_sampling = Sampling(temperature=temperature, seed=seed)  # when complete() gets none
        self.max_saved_sessions = max_saved_sessions
        # A state costs KV bytes per token: ~23 KB for SmolLM2-135M, ~144 KB for Qwen3-4B (a 3k-token
        # chat is ~440 MB), so the count alone does not bound the memory.
        self.max_saved_state_bytes = int(max_saved_state_mb * 2**20)
        if not checked:
            _check_paths(self.model_path, self.lora_path)
        self._llm = Llama(
            self.model_path, lora_path=self.lora_path, lora_scale=lora_scale, n_ctx=n_ctx,
            n_batch=min(512, n_ctx), n_threads=n_threads, n_threads_batch=n_threads, seed=seed,
            verbose=False,
        )
        self.n_ctx = self._llm.n_ctx()
        self._vocab = self._llm._model.vocab
        self.renderer = PromptRenderer.from_metadata(
            self._llm.metadata, self._llm._model.token_get_text, enable_thinking=enable_thinking,
            tool_block=tool_block,
        )
        self._lock = threading.Lock()
        # Saved KV caches of conversations that are not live. A state is saved only when another
        # session takes the context over, not after every step (a state is tens of MB).
        self._states: OrderedDict[str, _SessionState] = OrderedDict()
        self._live_session: str | None = None  # whose tokens are in the context now
        self._identity: dict[str, Any] | None = None
        # how constrained tokens were found beyond the model's first choice (see _sample_constrained)
        self.grammar_paths: dict[str, int] = {"top": 0, "narrowed": 0, "full_mask": 0}
        self._candidates: CandidateIndex | None = None
        self._pieces: dict[int, bytes] = {}  # token -> its bytes, read from llama.cpp once
        self._grammars: dict[str, str] = {}  # tool schemas (JSON) -> their call grammar
        self.stream: TextSink | None = None  # gets each step's text as it is generated (the REPL sets it)

    # -- tokens ---------------------------------------------------------------------------

    def tokenize(self, text: str, *, add_bos: bool = True) -> list[int]:
        """Special tokens in the text (``<|im_start|>``, ``<tool_call>``) become their ids."""
        bos = self.renderer.bos_token
        if bos and text.startswith(bos):
            add_bos = False  # the template wrote it already
        return self._llm.tokenize(text.encode("utf-8"), add_bos=add_bos, special=True)

    def detokenize(self, tokens: Sequence[int]) -> str:
        return self._llm.detokenize(list(tokens), special=True).decode("utf-8", errors="replace")

    def _piece(self, token: int) -> bytes:
        """The token's exact bytes (``LlamaModel.token_to_piece`` returns its whole 32-byte buffer)."""
        piece = self._pieces.get(token)
        if piece is None:
            piece = self._pieces[token] = self._read_piece(token)
        return piece

    def _read_piece(self, token: int) -> bytes:
        buf = ctypes.create_string_buffer(64)
        n = llama_cpp.llama_token_to_piece(self._vocab, token, buf, len(buf), 0, True)
        if n < 0:  # a longer piece: -n bytes are needed
            buf = ctypes.create_string_buffer(-n)
            n = llama_cpp.llama_token_to_piece(self._vocab, token, buf, len(buf), 0, True)
        return buf.raw[:n]

    def is_special_token(self, text: str) -> bool:
        """True if ``text`` is a single token of the vocabulary (``<tool_call>`` in Qwen3)."""
        return len(self._llm.tokenize(text.encode(), add_bos=False, special=True)) == 1

    # -- public ---------------------------------------------------------------------------

    def render(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        return self.renderer.render(messages, tools)

    def complete(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        *,
        session_id: str | None = None,
        max_tokens: int = 512,
        assistant_prefix: str = "",
        stop_after_call: bool = False,
        sampling: Sampling | None = None,
    ) -> Completion:
        """One model step. ``assistant_prefix`` starts the reply with given text (it is part of
        ``text``, so the history stays faithful); tests use it to open a call deterministically.
        ``stop_after_call`` ends the step as the first call closes (a rollout that scores one call
        then needs no budget for whatever the model would write after it). ``sampling``: this step's
        temperature/top-p/seed (None: the backend's own, greedy by default)."""
        started = time.perf_counter()
        try:
            prompt = self.renderer.render(messages, tools) + assistant_prefix
        except PromptError as exc:
            return Completion(text="", finish_reason="error", error=f"prompt: {exc}")
        with self._lock:
            if self.stream is not None:
                self.stream.start_step()
            try:
                result = self._complete_locked(prompt, tools, session_id, max_tokens, assistant_prefix,
                                               stop_after_call, sampling or self.default_sampling)
            except Exception as exc:  # a llama.cpp failure is a step error; start clean next time
                self._llm.reset()
                self._live_session = None
                return Completion(text="", finish_reason="error", error=f"llama.cpp: {type(exc).__name__}: {exc}")
        result.seconds = time.perf_counter() - started
        return result

    def identity(self) -> dict[str, Any]:
        """Computed once: hashing a 4 GB model fully would cost ~10 s per start.

        The model gets a fingerprint (size, mtime, sha256 of the first MiB); the adapter (tens of
        MB, the thing that changes between training runs) gets its full sha256.
        """
        if self._identity is None:
            self._identity = {
                "backend": self.name,
                "model_path": self.model_path,
                "model_fingerprint": _fingerprint(self.model_path),
                "adapter_path": self.lora_path,
                "adapter_sha256": _sha256(self.lora_path) if self.lora_path else None,
                "lora_scale": self.lora_scale if self.lora_path else None,
            }
        return dict(self._identity)

    def forget_session(self, session_id: str) -> None:
        with self._lock:
            self._states.pop(session_id, None)
            if self._live_session == session_id:
                self._live_session = None

    # -- internals ------------------------------------------------------------------------

    def _complete_locked(self, prompt: str, tools: list[dict[str, Any]], session_id: str | None,
                         max_tokens: int, assistant_prefix: str, stop_after_call: bool = False,
                         sampling: Sampling = Sampling()) -> Completion:
        llm = self._llm
        timings: dict[str, float] = {}
        canonical = self.tokenize(prompt)
        if len(canonical) >= self.n_ctx:
            return Completion(text="", finish_reason="context_limit", prompt_tokens=len(canonical),
                              error=f"context_limit: prompt is {len(canonical)} tokens, context is {self.n_ctx}")

        # This session's saved state leaves the store: once loaded it is the live context, and
        # saving the other session below must not evict it first.
        saved = self._states.pop(session_id, None) if session_id else None
        if self._live_session is not None and self._live_session != session_id:
            # Another conversation's KV cache is live: keep it before this one overwrites it.
            t = time.perf_counter()
            self._save_state(self._live_session)
            timings["save_state_s"] = time.perf_counter() - t
        self._live_session = session_id
        live = llm.input_ids[: llm.n_tokens].tolist()
        tokens = self._align(live, canonical, prompt)
        reuse = common_prefix(live, tokens)
        if saved is not None:
            saved_tokens = self._align(saved.tokens, canonical, prompt)
            saved_reuse = common_prefix(saved.tokens, saved_tokens)
            if saved_reuse > reuse:
                t = time.perf_counter()
                self._load_state(saved)
                timings["load_state_s"] = time.perf_counter() - t
                tokens, reuse = saved_tokens, saved_reuse
        if len(tokens) >= self.n_ctx:
            tokens, reuse = canonical, common_prefix(llm.input_ids[: llm.n_tokens].tolist(), canonical)
        reuse = min(reuse, len(tokens) - 1)  # at least one token is evaluated to get fresh logits
        llm._ctx.kv_cache_seq_rm(-1, reuse, -1)
        llm.n_tokens = reuse
        t = time.perf_counter()
        llm.eval(tokens[reuse:])
        timings["prompt_eval_s"] = time.perf_counter() - t

        t = time.perf_counter()
        text, finish, n_generated, n_constrained = self._generate(
            tools, min(max_tokens, self.n_ctx - llm.n_tokens), assistant_prefix, stop_after_call, sampling
        )
        timings["generate_s"] = time.perf_counter() - t
        timings["constrained_tokens"] = float(n_constrained)

        return Completion(
            text=assistant_prefix + text, finish_reason=finish, prompt_tokens=len(tokens),
            evaluated_tokens=len(tokens) - reuse, reused_tokens=reuse, generated_tokens=n_generated,
            timings=timings,
        )

    def _align(self, cached: list[int], canonical: list[int], prompt: str) -> list[int]:
        """Prompt tokens that start with as much of ``cached`` as spells the same text.

        The model's own output is rarely tokenized the way the tokenizer would split the same
        text (grammar-driven tokens especially), so comparing canonical tokens would throw away
        the cache from the first reply on. Instead the cached tokens are kept for as long as
        their text matches the prompt, and only the rest is tokenized. The model then sees its
        reply exactly as it produced it.
        """
        m = common_prefix(cached, canonical)
        if m in (len(cached), len(canonical)):
            return canonical
        data = prompt.encode("utf-8")
        head = canonical[:m]
        bos_text = self.renderer.bos_token
        if head and head[0] == self._llm.token_bos() and not (bos_text and prompt.startswith(bos_text)):
            head = head[1:]  # a BOS the tokenizer added is not in the text
        spelled = b"".join(self._piece(t) for t in head)
        if not data.startswith(spelled):
            return canonical
        offset = len(spelled)
        k = m
        while k < len(cached):
            piece = self._piece(cached[k])
            if not piece or not data.startswith(piece, offset):
                break
            offset += len(piece)
            k += 1
        if k == m:
            return canonical
        return cached[:k] + self._llm.tokenize(data[offset:], add_bos=False, special=True)

    def _sampler(self, gbnf: str | None = None, sampling: Sampling = Sampling()) -> tuple[_internals.LlamaSampler, Any]:
        """Greedy, or seeded top-p/temperature sampling, optionally after a GBNF grammar (which
        masks first, so what is sampled is always a token the grammar allows).

        Returns the chain and the grammar sampler inside it (None without a grammar), so the
        caller can offer a single token to the grammar without running the whole chain.
        """
        sampler = _internals.LlamaSampler()
        grammar = None
        if gbnf is not None:
            grammar = llama_cpp.llama_sampler_init_grammar(self._vocab, gbnf.encode("utf-8"), b"root")
            if not grammar:
                raise ValueError("tool-call grammar does not parse")
            llama_cpp.llama_sampler_chain_add(sampler.sampler, grammar)  # the chain owns it now
        if sampling.greedy:
            sampler.add_greedy()
        else:
            # temperature before top-p, as transformers and vLLM apply them: the same settings
            # mean the same on the llama and the openai backend
            sampler.add_temp(sampling.temperature)
            if sampling.top_p < 1.0:
                sampler.add_top_p(sampling.top_p, 1)
            sampler.add_dist(sampling.seed)
        return sampler, grammar

    def _sample_constrained(self, free: _internals.LlamaSampler, chain: _internals.LlamaSampler,
                            grammar: Any, greedy: bool = True) -> int:
        """Grammar-valid token, cheaply when possible.

        Masking the whole vocabulary costs ~5 ms a token on 49k entries and ~15 ms on Qwen3's
        151k. So: (1) offer the unconstrained choice alone to the grammar (what llama.cpp's
        common sampler does; for seeded sampling this is exact rejection sampling). Greedy only:
        (2) where the grammar allows few characters (between keys, in numbers), the tokens that
        start with one of them (``CandidateIndex``); inside a free string, the
        ``TOP_CANDIDATES`` most likely tokens; the most likely one the grammar keeps is exactly
        the greedy constrained choice, because every token left out has a lower logit or is one
        the grammar rejects. (3) The full mask.
        """
        token = free.sample(self._llm._ctx, -1)
        if grammar_keeps(grammar, np.array([token], dtype=np.int32)).size:
            llama_cpp.llama_sampler_accept(grammar, token)
            return token
        if greedy:
            n_vocab = self._llm.n_vocab()
            logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(self._llm._ctx.ctx, -1), shape=(n_vocab,))
            stage, candidates = "narrowed", self._candidate_index().candidates(grammar)
            if len(candidates) > NARROWED_MAX_SHARE * n_vocab:  # a free string: nearly any token may follow
                stage, candidates = "top", np.argpartition(logits, -TOP_CANDIDATES)[-TOP_CANDIDATES:].astype(np.int32)
            kept = grammar_keeps(grammar, candidates)
            if kept.size:
                token = int(kept[np.argmax(logits[kept])])
                llama_cpp.llama_sampler_accept(grammar, token)
                self.grammar_paths[stage] += 1
                return token
        self.grammar_paths["full_mask"] += 1
        return chain.sample(self._llm._ctx, -1)  # masks, samples, and advances the grammar

    def _grammar_for(self, tools: list[dict[str, Any]]) -> str:
        """The tool-call GBNF, built once per set of tools (every step would rebuild it otherwise)."""
        from agent.grammar import tool_call_gbnf

        key = json.dumps(tools, sort_keys=True)
        if key not in self._grammars:
            if len(self._grammars) >= 8:  # tools rarely change; never grow without bound
                self._grammars.clear()
            self._grammars[key] = tool_call_gbnf(tools)
        return self._grammars[key]

    def _candidate_index(self) -> CandidateIndex:
        """Built on the first token that needs it (~0.5 s for 151k tokens), then kept."""
        if self._candidates is None:
            self._candidates = CandidateIndex(
                (self._read_piece(t) for t in range(self._llm.n_vocab())),
                lambda t: bool(llama_cpp.llama_vocab_is_eog(self._vocab, t)),
            )
        return self._candidates

    def _generate(self, tools: list[dict[str, Any]], budget: int,
                  assistant_prefix: str, stop_after_call: bool = False,
                  sampling: Sampling = Sampling()) -> tuple[str, str, int, int]:
        """Sample up to ``budget`` tokens; returns (text, finish_reason, generated, constrained).

        Free text until ``<tool_call>`` appears outside ``<think>``; then the tool-call grammar
        until ``</tool_call>``; then free again.
        """
        llm = self._llm
        gbnf = self._grammar_for(tools) if (self.use_grammar and tools) else None
        free, _ = self._sampler(None, sampling)
        # Decoded piece by piece (a multi-byte character split across tokens waits for its end),
        # not by detokenizing the whole output after every token.
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        constrained: tuple[_internals.LlamaSampler, Any] | None = None
        out: list[int] = []
        call_start = -1  # index in the scanned text where the open call's JSON starts
        scan = assistant_prefix  # text the trigger looks at (prefix + output)
        n_constrained = 0
        if gbnf is not None and _opens_call(scan, 0) is not None:
            constrained, call_start = self._sampler(gbnf, sampling), _opens_call(scan, 0)
        finish = "length"
        evaluated = 0  # how many of ``out`` are in the KV cache
        while len(out) < budget:
            if constrained is not None:
                token = self._sample_constrained(free, *constrained, greedy=sampling.greedy)
                n_constrained += 1
            else:
                token = free.sample(llm._ctx, -1)
            if llama_cpp.llama_vocab_is_eog(self._vocab, token):
                finish = "stop"
                break
            before = scan
            out.append(token)
            scan += decoder.decode(self._piece(token))
            if constrained is None and gbnf is not None:
                end = _opens_call(scan, max(0, len(before) - len(CALL_OPEN)))
                if end is not None:
                    if end < len(scan):
                        # The token ran past "<tool_call>": keep only the tag; the grammar writes the rest.
                        out.pop()
                        out.extend(self.tokenize(scan[len(before):end], add_bos=False))
                        scan = scan[:end]
                        decoder.reset()
                    constrained, call_start = self._sampler(gbnf, sampling), end
            elif constrained is not None and len(scan) > call_start and scan.endswith(CALL_CLOSE):
                constrained = None
                if stop_after_call:
                    finish = "stop"  # the caller wants the call only: end once it has streamed
            if self.stream is not None and len(scan) > len(before):
                self.stream.text(scan[len(before):])
            if finish == "stop":
                break
            marker = next((m for m in END_MARKERS if scan.endswith(m)), None)
            if marker is not None:
                scan, finish = scan[: -len(marker)], "stop"
                break
            llm.eval(out[evaluated:])
            evaluated = len(out)
        scan += decoder.decode(b"", final=True)  # an unfinished character at the end becomes U+FFFD
        return scan[len(assistant_prefix):], finish, len(out), n_constrained

    def _save_state(self, session_id: str) -> None:
        """llama.cpp writes the state straight into the bytes that are kept: no second copy of a
        state that is ~440 MB for a 3k-token Qwen3-4B chat."""
        ctx = self._llm._ctx.ctx
        size = llama_cpp.llama_state_seq_get_size(ctx, 0)
        data = bytearray(size)
        view = (ctypes.c_uint8 * size).from_buffer(data)
        written = llama_cpp.llama_state_seq_get_data(ctx, view, size, 0)
        del view  # releases the buffer, so the bytearray may shrink
        del data[written:]
        self._states[session_id] = _SessionState(
            tokens=self._llm.input_ids[: self._llm.n_tokens].tolist(), data=data,
        )
        self._states.move_to_end(session_id)
        while self._states and (len(self._states) > self.max_saved_sessions
                                or self.saved_state_bytes() > self.max_saved_state_bytes):
            self._states.popitem(last=False)  # least recently used first; the newest too if it alone is too big

    def saved_state_bytes(self) -> int:
        """Memory held by the saved KV states of conversations that are not live."""
        return sum(len(state.data) for state in self._states.values())

    def _load_state(self, state: _SessionState) -> None:
        llm = self._llm
        llm._ctx.kv_cache_seq_rm(-1, 0, -1)
        view = (ctypes.c_uint8 * len(state.data)).from_buffer(state.data)  # no copy
        restored = llama_cpp.llama_state_seq_set_data(llm._ctx.ctx, view, len(state.data), 0)
        del view
        if restored == 0:
            llm.n_tokens = 0
            raise RuntimeError("could not restore the session's saved state")
        llm.input_ids[: len(state.tokens)] = state.tokens
        llm.n_tokens = len(state.tokens)


def _opens_call(text: str, start: int) -> int | None:
    """End index of the first ``<tool_call>`` at/after ``start`` that is not inside ``<think>``."""
    pos = text.find(CALL_OPEN, start)
    while pos != -1:
        if text.rfind("<think>", 0, pos) <= text.rfind("</think>", 0, pos):
            if text.find(CALL_CLOSE, pos) == -1:
                return pos + len(CALL_OPEN)
        pos = text.find(CALL_OPEN, pos + 1)
    return None


def _sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _fingerprint(path: str) -> str:
    """size:mtime:sha256(first MiB) — cheap, and changes whenever the file is replaced."""
    stat = Path(path).stat()
    with open(path, "rb") as fh:
        head = hashlib.sha256(fh.read(1 << 20)).hexdigest()
    return f"{stat.st_size}:{int(stat.st_mtime)}:{head}"
