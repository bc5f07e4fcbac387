"""Which part of a prompt llama.cpp need not evaluate again: KV-prefix alignment and saved states.

The one context holds the tokens of the conversation that used it last. A new prompt is compared
with them, and with the saved state of the calling session if another conversation took the
context over meanwhile; only the differing tail is evaluated (``PrefixCache.place``).

A saved state is llama.cpp's sequence-0 state (the KV cache; no logits, far smaller than
``Llama.save_state``) plus the tokens it holds. ``capture`` and ``restore`` read and write one;
the per-session store keeps them in memory, least recently used first out, within a count and a
byte budget. States on disk (``disk_states``) are two more sources: the static prefix (system
prompt and tool block) loaded at start-up, and a chat's state from the last clean shutdown,
loaded when that chat's next turn comes.
"""

from __future__ import annotations

import ctypes
import logging
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Callable, Sequence

import llama_cpp

from agent.backends.llama.disk_states import DiskStates
from agent.backends.llama.engine import Engine
from agent.segments import Rendered, shifted

log = logging.getLogger(__name__)

# The start-up prefix is evaluated in pieces this long, checking between them whether the process
# is shutting down: a quit right after start waits for one piece, not the whole prompt (on a loaded
# machine, where a niced process gets a small share of a core, one 512-token batch can take most of
# a minute). It costs no speed on the CPU: 1,536 SmolLM2 tokens took 7.5 s in pieces of 128, 8.0 s
# in llama.cpp's batches of 512 (1 thread, here).
WARM_UP_BATCH = 128


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading tokens two sequences share: the part of a prompt the KV cache already holds."""
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


@dataclass
class SessionState:
    """A context's KV cache (sequence 0) and the tokens it holds."""

    tokens: list[int]
    data: bytearray
    used_at: float = field(default_factory=time.time)  # when its conversation last ran (disk LRU order)


def capture(engine: Engine) -> SessionState:
    """The context's state. llama.cpp writes it straight into the bytes that are kept: no second
    copy of a state that is ~440 MB for a 3k-token Qwen3-4B chat."""
    ctx = engine.context
    size = engine.state_size()
    data = bytearray(size)
    view = (ctypes.c_uint8 * size).from_buffer(data)
    written = llama_cpp.llama_state_seq_get_data(ctx, view, size, 0)
    del view  # releases the buffer, so the bytearray may shrink
    del data[written:]
    return SessionState(tokens=engine.tokens(), data=data)


def restore(engine: Engine, state: SessionState) -> None:
    """Make the context hold ``state``; raises ``RuntimeError`` (context emptied) if llama.cpp refuses it."""
    engine.keep(0)
    view = (ctypes.c_uint8 * len(state.data)).from_buffer(state.data)  # no copy
    restored = llama_cpp.llama_state_seq_set_data(engine.context, view, len(state.data), 0)
    del view
    if restored == 0:  # the context is left empty (``keep(0)`` above)
        raise RuntimeError("could not restore the session's saved state")
    engine.mark_held(state.tokens)


def align(engine: Engine, cached: list[int], canonical: list[int], prompt: Rendered, bos_text: str) -> list[int]:
    """Prompt tokens that start with as much of ``cached`` as spells the same text.

    The model's own output is rarely tokenized the way the tokenizer would split the same
    text (grammar-driven tokens especially), so comparing canonical tokens would throw away
    the cache from the first reply on. Instead the cached tokens are kept for as long as
    their text matches the prompt, and only the rest is tokenized. The model then sees its
    reply exactly as it produced it. ``bos_text``: the template's BOS text ("" if none). The rest
    is tokenized as ``canonical`` was, its data as plain text (``Engine.tokenize_prompt``).
    """
    m = common_prefix(cached, canonical)
    if m in (len(cached), len(canonical)):
        return canonical
    data, spans = prompt.encoded()
    head = canonical[:m]
    if head and head[0] == engine.bos and not (bos_text and prompt.text.startswith(bos_text)):
        head = head[1:]  # a BOS the tokenizer added is not in the text
    spelled = b"".join(engine.piece(t) for t in head)
    if not data.startswith(spelled):
        return canonical
    offset = len(spelled)
    k = m
    while k < len(cached):
        piece = engine.piece(cached[k])
        if not piece or not data.startswith(piece, offset):
            break
        end = offset + len(piece)
        if engine.is_special(cached[k]) and any(a < end and offset < b for a, b in spans):
            break  # a special the model generated where the prompt now has data: tokenized as text
        offset = end
        k += 1
    if k == m:
        return canonical
    return cached[:k] + engine.tokenize_prompt(data[offset:], shifted(spans, offset), add_bos=False)


class SavedStates:
    """Saved KV states of conversations that are not live, least recently used first out.

    A state costs KV bytes per token: ~23 KB for SmolLM2-135M, ~144 KB for Qwen3-4B (a 3k-token
    chat is ~440 MB), so the count alone does not bound the memory; ``max_bytes`` does.
    """

    def __init__(self, max_sessions: int, max_bytes: int) -> None:
        self.max_sessions = max_sessions
        self.max_bytes = max_bytes
        self._states: OrderedDict[str, SessionState] = OrderedDict()

    def __len__(self) -> int:
        return len(self._states)

    def nbytes(self) -> int:
        return sum(len(state.data) for state in self._states.values())

    def put(self, session_id: str, state: SessionState) -> None:
        self._states[session_id] = state
        self._states.move_to_end(session_id)
        while self._states and (len(self._states) > self.max_sessions or self.nbytes() > self.max_bytes):
            self._states.popitem(last=False)  # least recently used first; the newest too if it alone is too big

    def take(self, session_id: str) -> SessionState | None:
        """The session's state, out of the store (once loaded it is the live context)."""
        return self._states.pop(session_id, None)

    def discard(self, session_id: str) -> None:
        self._states.pop(session_id, None)

    def newest_first(self) -> list[tuple[str, SessionState]]:
        return list(reversed(self._states.items()))


class PrefixCache:
    """Whose conversation the context holds, the others' saved states, and how to reuse both.

    With ``disk`` (a ``DiskStates``), also the static prefix kept across restarts
    (``load_or_build_prefix``, ``evaluate``) and the chats' states saved at a clean shutdown
    (``save_to_disk``) and loaded at each chat's next turn (``place``).
    """

    def __init__(self, engine: Engine, bos_text: str, max_sessions: int, max_bytes: int,
                 disk: DiskStates | None = None) -> None:
        self.engine = engine
        self.bos_text = bos_text
        self.saved = SavedStates(max_sessions, max_bytes)
        self.live_session: str | None = None  # whose tokens are in the context now
        self.disk = disk
        self.static: list[int] = []  # the static prefix's tokens (system prompt + tool block), once known
        self.static_pending = False  # known, but no state file written or loaded for it yet
        self.prefix_timings: dict[str, float] = {}  # the start-up prefix's read/load or eval/save, s
        self.live_clean = True  # the live context ends on a finished step (a state worth keeping)
        self._disk_tried: set[str] = set()  # sessions whose state file was looked for in this process

    def place(self, canonical: list[int], prompt: Rendered, session_id: str | None,
              timings: dict[str, float]) -> tuple[list[int], int]:
        """Prepare the context for ``prompt``: returns (tokens, reuse), the prompt's tokens as they
        will be evaluated and how many of them the context now holds; the caller evaluates
        ``tokens[reuse:]`` (``evaluate``). ``canonical``: the prompt as the tokenizer splits it
        (shorter than ``n_ctx``). Saving or loading a state is timed into ``timings``.

        A state is saved only when another session takes the context over, not after every step
        (a state is tens of MB).
        """
        engine = self.engine
        # This session's saved state leaves the store: once loaded it is the live context, and
        # saving the other session below must not evict it first.
        saved = self.saved.take(session_id) if session_id else None
        from_disk = False
        if saved is None and session_id and session_id != self.live_session:
            saved, from_disk = self._from_disk(session_id, timings), True
        if self.live_session is not None and self.live_session != session_id:
            # Another conversation's KV cache is live: keep it before this one overwrites it.
            t = time.perf_counter()
            self.saved.put(self.live_session, capture(engine))
            timings["save_state_s"] = time.perf_counter() - t
        self.live_session = session_id
        live = engine.tokens()
        tokens = align(engine, live, canonical, prompt, self.bos_text)
        reuse = common_prefix(live, tokens)
        if saved is not None:
            saved_tokens = align(engine, saved.tokens, canonical, prompt, self.bos_text)
            saved_reuse = common_prefix(saved.tokens, saved_tokens)
            if saved_reuse > reuse:
                t = time.perf_counter()
                try:
                    restore(engine, saved)
                except RuntimeError:
                    if not from_disk:
                        raise
                    # checked, yet llama.cpp refused it: the context is empty; start from scratch
                    log.warning("llama.cpp refused a chat's saved state from disk; evaluating its prompt")
                    if self.disk is not None and session_id:
                        self.disk.discard_chat(session_id)
                    saved_tokens, saved_reuse = canonical, 0
                timings["load_state_s"] = time.perf_counter() - t
                tokens, reuse = saved_tokens, saved_reuse
        if len(tokens) >= engine.n_ctx:
            tokens, reuse = canonical, common_prefix(engine.tokens(), canonical)
        reuse = min(reuse, len(tokens) - 1)  # at least one token is evaluated to get fresh logits
        engine.keep(reuse)
        return tokens, reuse

    def _from_disk(self, session_id: str, timings: dict[str, float]) -> SessionState | None:
        """The chat's state from the last clean shutdown, looked for once per process."""
        if self.disk is None or session_id in self._disk_tried:
            return None
        self._disk_tried.add(session_id)
        t = time.perf_counter()
        stored = self.disk.load_chat(session_id)
        if stored is None:
            return None
        timings["read_state_file_s"] = time.perf_counter() - t
        return SessionState(tokens=stored.tokens, data=stored.data)

    def evaluate(self, tokens: list[int], reuse: int, timings: dict[str, float]) -> None:
        """Evaluate ``tokens[reuse:]`` after ``place``. If they cover the static prefix and its
        state file is not there yet (the start-up build lost the race to this turn, or there was
        none), the prefix is evaluated on its own first and saved: the next process loads it."""
        n = len(self.static)
        if self.static_pending and reuse < n < len(tokens) and tokens[:n] == self.static:
            self.engine.eval(tokens[reuse:n])
            t = time.perf_counter()
            self._save_static()
            timings["save_prefix_s"] = time.perf_counter() - t
            reuse = n
        self.engine.eval(tokens[reuse:])

    def expect_prefix(self, tokens: list[int]) -> bool:
        """The static prefix is ``tokens``; it is pending until its file is loaded or written.

        Set before the start-up job waits for the lock, so a turn that gets the lock first saves
        the prefix itself (``evaluate``). False if there is nothing to keep (no disk, no prefix)."""
        self.static = list(tokens)
        self.static_pending = self.disk is not None and 0 < len(tokens) < self.engine.n_ctx
        return self.static_pending

    def load_or_build_prefix(self, tokens: list[int], stop: Callable[[], bool] = lambda: False) -> str:
        """Make the empty context hold the static prefix ``tokens``: from its state file if that is
        valid, else by evaluating them and saving the file. Returns what happened: "loaded",
        "built", "stopped" (``stop()`` turned true between batches), "busy" (a turn had the
        context first and saved the prefix, or will: ``evaluate``) or "off" (nothing to keep).
        """
        engine = self.engine
        if self.static != list(tokens):
            self.expect_prefix(tokens)
        if self.disk is None or not 0 < len(tokens) < engine.n_ctx:
            return "off"
        if self.live_session is not None or engine.n_tokens > 0:
            return "busy"
        if stop():  # the process is shutting down: load nothing into a context about to be freed
            return "stopped"
        self.static_pending = True
        t = time.perf_counter()
        stored = self.disk.load_prefix(tokens)
        self.prefix_timings["read_s"] = time.perf_counter() - t
        if stored is not None:
            try:
                t = time.perf_counter()
                restore(engine, SessionState(tokens=stored.tokens, data=stored.data))
                self.prefix_timings["load_s"] = time.perf_counter() - t
                self.static_pending = False
                return "loaded"
            except RuntimeError:
                log.warning("llama.cpp refused the prefix state file; rebuilding it")
                engine.reset()
        t = time.perf_counter()
        for start in range(0, len(tokens), WARM_UP_BATCH):
            if stop():
                engine.reset()
                return "stopped"
            engine.eval(tokens[start:start + WARM_UP_BATCH])
        self.prefix_timings["eval_s"] = time.perf_counter() - t
        t = time.perf_counter()
        self._save_static()
        self.prefix_timings["save_s"] = time.perf_counter() - t
        return "built"

    def _save_static(self) -> None:
        """Once per process, whatever the outcome (a state over the budget is not retried every step)."""
        assert self.disk is not None
        self.static_pending = False
        state = capture(self.engine)
        self.disk.save_prefix(state.tokens, state.data)

    def save_to_disk(self) -> int:
        """A clean shutdown: the live chat's state and every saved one go to disk, newest first (so
        that a shutdown cut short still keeps the most recent). Returns how many were written."""
        if self.disk is None:
            return 0
        self.disk.touch_prefix()
        written = 0
        if self.live_session is not None and self.live_clean and self.engine.n_tokens > 0:
            state = capture(self.engine)
            written += self.disk.save_chat(self.live_session, state.tokens, state.data, state.used_at)
        for session_id, state in self.saved.newest_first():
            written += self.disk.save_chat(session_id, state.tokens, state.data, state.used_at)
        return written

    def forget(self, session_id: str) -> None:
        self.saved.discard(session_id)
        if self.disk is not None:
            self.disk.discard_chat(session_id)
        if self.live_session == session_id:
            self.live_session = None

    def drop_live(self) -> None:
        """Empty the context and own it to nobody (after a failure, or to start from scratch)."""
        self.engine.reset()
        self.live_session = None
