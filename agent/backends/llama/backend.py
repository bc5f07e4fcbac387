"""``LlamaBackend``: one llama.cpp model in-process, shared by every session behind one lock.

A step is: render the prompt with the model's own chat template (``agent.prompt``), tokenize it,
let the prefix cache put as much of it in the context as is already known (``states``), evaluate
the rest, and decode (``decode``). The loaded model and its tokens are the ``engine``.

With a ``state_dir``, states outlive the process (``disk_states``): ``warm_up`` puts the static
prefix (system prompt and tool block) in the context at start-up, from its file or by evaluating
and saving it; ``save_states`` (a clean shutdown) writes each chat's state, which that chat's next
turn loads.

The public attributes below are what the bench and the tests read and set; nothing outside the
package reaches into its private members.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path
from typing import Any, Sequence

from agent.backends.base import Completion, TextSink
from agent.backends.llama.decode import Decoder, generate
from agent.backends.llama.disk_states import DiskStates
from agent.backends.llama.engine import Engine, ModelFiles
from agent.backends.llama.states import PrefixCache, common_prefix
from agent.backends.sampling import Sampling
from agent.prompt import PromptError, PromptRenderer
from agent.segments import Rendered, mark_except

log = logging.getLogger(__name__)

# Stands in for the first user message when the static prefix is rendered: the prompt's text up to
# it is the same for every conversation of the day.
_FIRST_MESSAGE = "\x00IJ_FIRST_MESSAGE_51c2\x00"
_STAMPED_PROBE = "[00:00] x"  # a user message as the runtime stamps it (agent.prompt.stamp_user_text)


class LlamaBackend:
    """One llama.cpp model shared by all sessions; a lock serialises use across threads."""

    name = "llama"

    def __init__(
        self,
        model_path: ModelFiles | str | os.PathLike[str],
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
        tool_block: str = "full",
        state_dir: str | os.PathLike[str] | None = None,
        state_disk_mb: float = 2048,
        gpu_layers: int | None = None,
    ) -> None:
        """``model_path``: a ``ModelFiles`` (the entry point checked them: loaded as they are), or a
        path, which is checked here first with the same ``ModelFiles.check`` (``ModelRefused`` on
        a bad file) because llama-cpp-python segfaults on one: no path reaches llama.cpp unchecked,
        and none is checked twice. ``lora_path`` goes with a path only. ``state_dir``: where state
        files live, within ``state_disk_mb`` (None or 0: nothing is kept on disk). ``gpu_layers``:
        layers offloaded to the GPU, -1 all, None the platform's default (``engine.default_gpu_layers``)."""
        if isinstance(model_path, ModelFiles):
            if lora_path is not None:
                raise TypeError("give the adapter inside ModelFiles, not as lora_path")
            files = model_path
        else:
            files = ModelFiles.check(model_path, lora_path)
        self.engine = Engine(files, lora_scale=lora_scale, n_ctx=n_ctx, n_threads=n_threads, seed=seed,
                             gpu_layers=gpu_layers)
        self.model_path, self.lora_path, self.lora_scale = files.model_path, files.lora_path, lora_scale
        self.n_ctx = self.engine.n_ctx
        self.use_grammar = grammar
        self.renderer = PromptRenderer.from_metadata(
            self.engine.metadata, self.engine.token_text, enable_thinking=enable_thinking, tool_block=tool_block,
        )
        # The model's chat format, chosen once by the renderer from its template's family (or, for a
        # GGUF without a template, its architecture): decoding, the loop, eval and export use it.
        self.chat_format = self.renderer.chat_format
        # ``temperature``/``seed``: the steps that bring no ``Sampling`` of their own (greedy by default)
        self.decoder = Decoder(self.engine, temperature=temperature, seed=seed, chat_format=self.chat_format)
        disk = None
        if state_dir is not None and state_disk_mb > 0:
            disk = DiskStates(Path(state_dir), self.engine.state_key(), int(state_disk_mb * 2**20),
                              self.engine.n_vocab, self.n_ctx)
        self.cache = PrefixCache(self.engine, self.renderer.bos_token, max_saved_sessions,
                                 int(max_saved_state_mb * 2**20), disk)
        self._lock = threading.Lock()
        self._stop_warm_up = threading.Event()
        self.warm_up_result: str | None = None  # what the last warm_up did ("loaded", "built", ...)
        self.stream: TextSink | None = None  # gets each step's text as it is generated (the REPL sets it)

    # -- tokens ---------------------------------------------------------------------------

    def tokenize(self, text: str, *, add_bos: bool = True) -> list[int]:
        """Special tokens in the text (``<|im_start|>``, ``<tool_call>``) become their ids."""
        bos = self.renderer.bos_token
        if bos and text.startswith(bos):
            add_bos = False  # the template wrote it already
        return self.engine.tokenize(text.encode("utf-8"), add_bos=add_bos)

    def tokenize_prompt(self, prompt: Rendered, *, add_bos: bool = True) -> list[int]:
        """A rendered prompt's tokens: special tokens from the template's scaffolding and the
        model's own tags only, every message's content as plain text (``agent.segments``)."""
        bos = self.renderer.bos_token
        if bos and prompt.text.startswith(bos):
            add_bos = False
        data, spans = prompt.encoded()
        return self.engine.tokenize_prompt(data, spans, add_bos=add_bos)

    def prompt_tokens(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]],
                      assistant_prefix: str = "") -> list[int]:
        """The tokens ``complete`` would put in the context for these messages (bench, tests)."""
        return self.tokenize_prompt(self._prompt(messages, tools, assistant_prefix))

    def _prompt(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], assistant_prefix: str) -> Rendered:
        """The rendered prompt, with ``assistant_prefix`` read as the model's own text."""
        prompt = self.renderer.render_parts(messages, tools)
        if assistant_prefix:
            prompt = prompt + Rendered.split(mark_except(assistant_prefix, self.chat_format.own_tags))
        return prompt

    def detokenize(self, tokens: Sequence[int]) -> str:
        return self.engine.detokenize(tokens)

    def is_special_token(self, text: str) -> bool:
        """True if ``text`` is a single token of the vocabulary (``<tool_call>`` in Qwen3)."""
        return len(self.engine.tokenize(text.encode(), add_bos=False)) == 1

    # -- steps ----------------------------------------------------------------------------

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
            prompt = self._prompt(messages, tools, assistant_prefix)
        except PromptError as exc:
            return Completion(text="", finish_reason="error", error=f"prompt: {exc}")
        with self._lock:
            if self.stream is not None:
                self.stream.start_step()
            try:
                result = self._complete_locked(prompt, tools, session_id, max_tokens, assistant_prefix,
                                               stop_after_call, sampling)
            except Exception as exc:  # a llama.cpp failure is a step error; start clean next time
                self.cache.drop_live()
                return Completion(text="", finish_reason="error", error=f"llama.cpp: {type(exc).__name__}: {exc}")
        result.seconds = time.perf_counter() - started
        return result

    def _complete_locked(self, prompt: Rendered, tools: list[dict[str, Any]], session_id: str | None,
                         max_tokens: int, assistant_prefix: str, stop_after_call: bool,
                         sampling: Sampling | None = None) -> Completion:
        engine = self.engine
        timings: dict[str, float] = {}
        canonical = self.tokenize_prompt(prompt)
        if len(canonical) >= self.n_ctx:
            return Completion(text="", finish_reason="context_limit", prompt_tokens=len(canonical),
                              error=f"context_limit: prompt is {len(canonical)} tokens, context is {self.n_ctx}")
        tokens, reuse = self.cache.place(canonical, prompt, session_id, timings)
        self.cache.live_clean = False  # until the step has finished: a state cut mid-step is not kept
        t = time.perf_counter()
        self.cache.evaluate(tokens, reuse, timings)
        timings["prompt_eval_s"] = time.perf_counter() - t

        t = time.perf_counter()
        gbnf = self.decoder.grammar_for(tools) if (self.use_grammar and tools) else None
        out = generate(engine, self.decoder, gbnf, min(max_tokens, self.n_ctx - engine.n_tokens), assistant_prefix,
                       stop_after_call, self.stream, sampling)
        timings["generate_s"] = time.perf_counter() - t
        timings["constrained_tokens"] = float(out.constrained)
        timings["forced_tokens"] = float(out.forced)
        self.cache.live_clean = True
        return Completion(
            text=assistant_prefix + out.text, finish_reason=out.finish_reason, prompt_tokens=len(tokens),
            evaluated_tokens=len(tokens) - reuse, reused_tokens=reuse, generated_tokens=out.tokens,
            timings=timings,
        )

    # -- states on disk -------------------------------------------------------------------

    def static_prefix(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> list[int]:
        """The tokens every conversation's prompt starts with: ``messages`` (the system message)
        and the tool block, up to where the first user message's text begins.

        Cut where a stamped message would be tokenized the same way (the common tokens of the
        prefix alone and of a prompt with such a message), so a warm start evaluates the same
        tokens a cold one does. [] if the template cannot render it."""
        try:
            probe = self.renderer.render_parts(messages + [{"role": "user", "content": _FIRST_MESSAGE}], tools)
            real = self.renderer.render_parts(messages + [{"role": "user", "content": _STAMPED_PROBE}], tools)
        except PromptError:
            return []
        if probe.text.count(_FIRST_MESSAGE) != 1:
            return []
        head = self.tokenize_prompt(probe.prefix(probe.text.index(_FIRST_MESSAGE)))
        return head[: common_prefix(head, self.tokenize_prompt(real))]

    def warm_up(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], *,
                background: bool = True) -> threading.Thread | None:
        """At start-up: load the static prefix's state file, or evaluate the prefix and save it.

        Under the backend lock, so it never races a turn; a turn that comes first simply waits (it
        needs the prefix too) or, if it won the lock, saves the prefix itself (``PrefixCache.evaluate``).
        ``background``: in a daemon thread (returned), so a frontend can take messages meanwhile;
        ``save_states`` stops it between batches. No-op (None) without a state directory.
        """
        if self.cache.disk is None:
            return None
        tokens = self.static_prefix(messages, tools)
        self.cache.expect_prefix(tokens)  # before the lock: a turn that wins it saves the prefix
        self._stop_warm_up.clear()

        def job() -> None:
            t = time.perf_counter()
            with self._lock:
                try:
                    self.warm_up_result = self.cache.load_or_build_prefix(tokens, self._stop_warm_up.is_set)
                except Exception as exc:  # a failed warm-up costs a cold first turn, nothing more
                    log.warning("warm-up failed: %s: %s", type(exc).__name__, exc)
                    self.cache.drop_live()
                    self.warm_up_result = "failed"
            log.info("static prefix (%d tokens): %s in %.2f s", len(tokens), self.warm_up_result,
                     time.perf_counter() - t)

        if not background:
            job()
            return None
        thread = threading.Thread(target=job, name="prefix-warm-up", daemon=True)
        thread.start()
        return thread

    def save_states(self) -> int:
        """A clean shutdown: every chat's state to disk (within the budget); how many files were
        written. Stops a warm-up still running first; no-op without a state directory."""
        if self.cache.disk is None:
            return 0
        self._stop_warm_up.set()
        with self._lock:
            try:
                return self.cache.save_to_disk()
            except Exception as exc:  # never let a shutdown fail on a state it could not keep
                log.warning("saving chat states failed: %s: %s", type(exc).__name__, exc)
                return 0

    @property
    def state_dir(self) -> Path | None:
        """Where state files live (None: nothing is kept on disk)."""
        return self.cache.disk.directory if self.cache.disk is not None else None

    # -- identity and sessions ------------------------------------------------------------

    def identity(self) -> dict[str, Any]:
        """Model path and fingerprint, adapter path, sha256 and scale (see ``Engine.identity``), and
        the chat format's name (what eval and export read the recorded turns with)."""
        return {"backend": self.name, **self.engine.identity(), "chat_format": self.chat_format.name}

    def forget_session(self, session_id: str) -> None:
        with self._lock:
            self.cache.forget(session_id)

    def reset_context(self) -> None:
        """Empty the context: the next step evaluates its whole prompt (runs compared from one start)."""
        with self._lock:
            self.cache.drop_live()

    @property
    def grammar_paths(self) -> dict[str, int]:
        """How constrained tokens were found beyond the model's first choice: counts by stage."""
        return self.decoder.grammar_paths

    @property
    def max_saved_sessions(self) -> int:
        """How many conversations that are not live keep their KV state in memory."""
        return self.cache.saved.max_sessions

    @max_saved_sessions.setter
    def max_saved_sessions(self, value: int) -> None:
        self.cache.saved.max_sessions = value

    @property
    def max_saved_state_bytes(self) -> int:
        """The memory budget of those states, in bytes."""
        return self.cache.saved.max_bytes

    @max_saved_state_bytes.setter
    def max_saved_state_bytes(self, value: int) -> None:
        self.cache.saved.max_bytes = value

    @property
    def saved_sessions(self) -> int:
        """How many conversations have a saved state now."""
        return len(self.cache.saved)

    def saved_state_bytes(self) -> int:
        """Memory held by the saved KV states of conversations that are not live."""
        return self.cache.saved.nbytes()
