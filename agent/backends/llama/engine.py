"""The loaded model: llama.cpp's one context, its tokens and their pieces, and what it is.

This is the only module of the package that touches llama-cpp-python's private members
(``Llama._ctx``, ``Llama._model``): the two module functions below do it for any ``Llama``, so the
bench's bare baseline drives its own ``Llama`` exactly as the backend drives this one.

What may be loaded is decided before: ``ModelFiles.check`` runs ``models.check`` (llama-cpp-python
0.3.36 accepts a missing, truncated or mismatched file silently and segfaults on the first decode),
and ``Engine`` takes only a ``ModelFiles``.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import llama_cpp
import numpy as np
from llama_cpp import Llama
from llama_cpp import _internals

from agent.segments import pieces, tokenize_cut


# ggml's log levels as the llama.cpp that llama-cpp-python 0.3.36 builds numbers them (ggml.h). The
# package's own filter still reads the older numbering (WARN 2, ERROR 3), so with verbose=False every
# llama.cpp warning reaches stderr as an error: a LoRA on a repacked Q4_K_M (Gemma 3) prints one line
# per adapted tensor before the chat starts. The runtime shows llama.cpp's errors and nothing else.
GGML_LOG_LEVEL_ERROR = 4
GGML_LOG_LEVEL_CONT = 5


def errors_only(level: int, text: bytes, last_level: list[int]) -> bytes:
    """What of one llama.cpp log call reaches stderr: an error and its continued lines, else nothing.
    ``last_level`` carries the level a continued line belongs to."""
    if level != GGML_LOG_LEVEL_CONT:
        last_level[0] = level
    return text if last_level[0] == GGML_LOG_LEVEL_ERROR else b""


@llama_cpp.llama_log_callback
def _llama_log(level: int, text: bytes, user_data: ctypes.c_void_p) -> None:
    shown = errors_only(level, text, _LAST_LEVEL)
    if shown:
        os.write(2, shown)


_LAST_LEVEL = [0]  # the level of llama.cpp's previous log call (for its continued lines)
# Instead of the package's own callback (set when llama_cpp was imported, above); kept alive by this module.
llama_cpp.llama_log_set(_llama_log, ctypes.c_void_p(0))


class ModelRefused(ValueError):
    """The model or adapter file failed the models check; llama.cpp never saw it."""


@dataclass(frozen=True)
class ModelFiles:
    """A model and its optional adapter that passed ``models.check``: the files ``Engine`` loads.

    Build it with ``ModelFiles.check``; the entry point does (``agent.app.build_llama_backend``),
    so the headers are read once per load and the backend trusts what it is given.
    """

    model_path: str
    lora_path: str | None = None

    @classmethod
    def check(cls, model_path: str | os.PathLike[str], lora_path: str | os.PathLike[str] | None = None) -> ModelFiles:
        """The files, if llama.cpp may load them; else ``ModelRefused`` with one line naming the path.

        Raises rather than exiting (``models.check.require_loadable`` exits the process, which a
        library call must not do); entry points turn ``ModelRefused`` into exit status 2.
        """
        from models.check import check_pair

        result = check_pair(model_path, lora_path)
        if not result.ok:
            raise ModelRefused(result.error_line())
        return cls(str(model_path), str(lora_path) if lora_path else None)


ALL_LAYERS = -1  # llama-cpp-python's "offload every layer"


def default_gpu_layers(system: str | None = None, machine: str | None = None,
                       gpu_offload: bool | None = None) -> int:
    """The layers offloaded when ``gpu_layers`` is not set: all of them on Apple silicon with a
    build that can offload (Metal, which pip builds there by default; unified memory, so the
    model always fits), none elsewhere, where a CUDA or Vulkan card may hold less than the model.

    What llama-cpp-python 0.3.36 does with the value: ``Llama`` writes it into
    ``model_params.n_gpu_layers`` (-1 as INT32_MAX, "all layers"), and llama.cpp places layers on
    the GPU devices it has. A build without a GPU backend has none, so any value runs on the CPU;
    ``llama_supports_gpu_offload()`` tells which build this is. The arguments fake the platform
    and the build, for tests."""
    system = platform.system() if system is None else system
    machine = platform.machine() if machine is None else machine
    if gpu_offload is None:
        gpu_offload = bool(llama_cpp.llama_supports_gpu_offload())
    return ALL_LAYERS if gpu_offload and (system, machine) == ("Darwin", "arm64") else 0


def keep_prefix(llm: Llama, n: int) -> None:
    """Keep the first ``n`` tokens of a ``Llama``'s context (KV cache and token record), drop the rest."""
    llm._ctx.kv_cache_seq_rm(-1, n, -1)
    llm.n_tokens = n


def sample(llm: Llama, sampler: Any) -> int:
    """Run a sampler (chain) on the last logits of a ``Llama``'s context; returns the token."""
    return sampler.sample(llm._ctx, -1)


class Engine:
    """One ``llama_cpp.Llama`` with its context, and the per-token facts the decoder needs."""

    def __init__(self, files: ModelFiles, lora_scale: float = 1.0, n_ctx: int = 8192,
                 n_threads: int | None = None, seed: int = 0, gpu_layers: int | None = None,
                 vocab_only: bool = False) -> None:
        """``vocab_only``: the tokenizer and metadata without the weights (nothing can be decoded):
        for checking what the runtime's own tokenization makes of a rendered prompt, cheaply."""
        self.files = files
        self.lora_scale = lora_scale
        self.gpu_layers = default_gpu_layers() if gpu_layers is None else gpu_layers  # -1: all
        # Public for instruments (the bench) that drive llama.cpp directly; the backend goes through
        # the methods below.
        self.llm = Llama(
            files.model_path, lora_path=files.lora_path, lora_scale=lora_scale, n_ctx=n_ctx,
            n_batch=min(512, n_ctx), n_threads=n_threads, n_threads_batch=n_threads, seed=seed,
            n_gpu_layers=self.gpu_layers, verbose=False, vocab_only=vocab_only,
        )
        self.n_ctx = self.llm.n_ctx()
        self.n_vocab = self.llm.n_vocab()
        self.vocab = self.llm._model.vocab  # the llama_vocab pointer: grammars and token facts
        self.bos = self.llm.token_bos()
        self.eos = self.llm.token_eos()
        self._pieces: dict[int, bytes] = {}  # token -> its bytes, read from llama.cpp once
        self._attrs: dict[int, int] = {}  # token -> its llama_token_attr flags, read once
        self._identity: dict[str, Any] | None = None

    # -- what is loaded -------------------------------------------------------------------

    @property
    def metadata(self) -> dict[str, str]:
        """The GGUF header's key/values (chat template, special token ids, architecture)."""
        return self.llm.metadata

    @property
    def n_threads(self) -> int:
        return self.llm.context_params.n_threads

    def state_key(self) -> dict[str, Any]:
        """What a saved state's bytes depend on (``disk_states.engine_key``): a state file written
        under another key is never loaded."""
        from agent.backends.llama.disk_states import engine_key

        return engine_key(self.identity(), self.llm.context_params, self.n_ctx, self.n_vocab)

    def identity(self) -> dict[str, Any]:
        """Computed once: hashing a 4 GB model fully would cost ~10 s per start.

        The model gets a fingerprint (size, mtime, sha256 of the first MiB); the adapter (tens of
        MB, the thing that changes between training runs) gets its full sha256. ``gpu_layers`` is
        what was offloaded (GPU kernels round differently, so outputs may differ): 0 on a build
        that cannot offload, whatever was asked.
        """
        if self._identity is None:
            lora = self.files.lora_path
            self._identity = {
                "model_path": self.files.model_path,
                "model_fingerprint": fingerprint(self.files.model_path),
                "adapter_path": lora,
                "adapter_sha256": sha256(lora) if lora else None,
                "lora_scale": self.lora_scale if lora else None,
                "gpu_layers": self.gpu_layers if llama_cpp.llama_supports_gpu_offload() else 0,
            }
        return dict(self._identity)

    # -- tokens ---------------------------------------------------------------------------

    def tokenize(self, data: bytes, *, add_bos: bool) -> list[int]:
        """Special tokens in the text (``<|im_start|>``, ``<tool_call>``) become their ids."""
        return self.llm.tokenize(data, add_bos=add_bos, special=True)

    def tokenize_prompt(self, data: bytes, spans: Sequence[tuple[int, int]], *, add_bos: bool) -> list[int]:
        """``data`` tokenized with special tokens parsed everywhere but in ``spans`` (byte spans
        that are data: ``agent.segments``). Where the whole text's tokenization holds a special
        token that data spelled, the text is cut inside that spelling and tokenized in pieces, so
        it stays plain text; text whose data spells none is tokenized exactly as ``tokenize`` does.
        """
        if not spans:
            return self.tokenize(data, add_bos=add_bos)
        return tokenize_cut(lambda at: self._tokenize_at(data, at, add_bos), spans, lambda i: _utf8_len(data[i]))

    def _tokenize_at(self, data: bytes, at: Sequence[int], add_bos: bool) -> tuple[list[int], list[tuple[int, int]]]:
        """``data`` tokenized piece by piece (cut at ``at``), and the byte spans of the special
        tokens in it. A piece whose tokens do not spell it back (a tokenizer that adds a prefix
        space) gets its specials placed by searching their text, which finds them all the same."""
        tokens: list[int] = []
        found: list[tuple[int, int]] = []
        for n, (a, b) in enumerate(pieces(len(data), at)):
            part = self.llm.tokenize(data[a:b], add_bos=add_bos and n == 0, special=True)
            if part and n == 0 and add_bos and part[0] == self.bos and not data.startswith(self.piece(self.bos)):
                tokens.append(part.pop(0))  # the BOS the tokenizer added is in no text
            exact = b"".join(self.piece(t) for t in part) == data[a:b]
            offset = a
            for t in part:
                piece = self.piece(t)
                if self.is_special(t):
                    start = offset if exact else data.find(piece, offset, b)
                    if start >= 0:
                        found.append((start, start + len(piece)))
                        offset = start
                offset += len(piece)
            tokens.extend(part)
        return tokens, found

    def is_special(self, token: int) -> bool:
        """A control or user-defined token: one that text spelling it would turn into.

        Not a user-defined token that is only whitespace: Gemma's vocabulary has them for runs of
        newlines and spaces (``\n\n`` is 108), which data holds anyway and which carry no role.
        Cutting them in data would feed a blank line as two ``\n`` tokens, unlike pretraining
        (``agent.train.tokens`` keeps the same rule, so training sees what is served)."""
        attr = self._attrs.get(token)
        if attr is None:
            attr = int(llama_cpp.llama_vocab_get_attr(self.vocab, token))
            if not attr & llama_cpp.LLAMA_TOKEN_ATTR_CONTROL and self.piece(token).isspace():
                attr &= ~llama_cpp.LLAMA_TOKEN_ATTR_USER_DEFINED
            self._attrs[token] = attr
        return bool(attr & (llama_cpp.LLAMA_TOKEN_ATTR_CONTROL | llama_cpp.LLAMA_TOKEN_ATTR_USER_DEFINED))

    def detokenize(self, tokens: Sequence[int]) -> str:
        return self.llm.detokenize(list(tokens), special=True).decode("utf-8", errors="replace")

    def token_text(self, token: int) -> str:
        """The vocabulary's text of a token (names the specials, e.g. the template's BOS)."""
        return self.llm._model.token_get_text(token)

    def piece(self, token: int) -> bytes:
        """The token's exact bytes (``LlamaModel.token_to_piece`` returns its whole 32-byte buffer)."""
        piece = self._pieces.get(token)
        if piece is None:
            piece = self._pieces[token] = self.read_piece(token)
        return piece

    def read_piece(self, token: int) -> bytes:
        """Like ``piece``, uncached (building the candidate index reads every token once)."""
        buf = ctypes.create_string_buffer(64)
        n = llama_cpp.llama_token_to_piece(self.vocab, token, buf, len(buf), 0, True)
        if n < 0:  # a longer piece: -n bytes are needed
            buf = ctypes.create_string_buffer(-n)
            n = llama_cpp.llama_token_to_piece(self.vocab, token, buf, len(buf), 0, True)
        return buf.raw[:n]

    def is_eog(self, token: int) -> bool:
        """End of generation (EOS, EOT, ``<|im_end|>`` where the vocabulary marks it)."""
        return bool(llama_cpp.llama_vocab_is_eog(self.vocab, token))

    # -- the context ----------------------------------------------------------------------

    @property
    def context(self) -> Any:
        """The raw ``llama_context`` pointer, for llama.cpp's C functions (state save and load)."""
        return self.llm.ctx

    @property
    def n_tokens(self) -> int:
        """How many tokens the context holds."""
        return self.llm.n_tokens

    def tokens(self) -> list[int]:
        """The tokens the context holds, in order."""
        return self.llm.input_ids[: self.llm.n_tokens].tolist()

    def keep(self, n: int) -> None:
        """Keep the first ``n`` tokens of the context, drop the rest."""
        keep_prefix(self.llm, n)

    def mark_held(self, tokens: Sequence[int]) -> None:
        """Record that the context holds ``tokens`` (a saved state was just written into it)."""
        self.llm.input_ids[: len(tokens)] = tokens
        self.llm.n_tokens = len(tokens)

    def eval(self, tokens: Sequence[int]) -> None:
        """Append ``tokens`` to the context (in batches of ``n_batch``); the last one's logits are next."""
        self.llm.eval(tokens)

    def reset(self) -> None:
        """Forget what the context holds: the next prompt is evaluated from its first token."""
        self.llm.reset()

    def sample(self, sampler: Any) -> int:
        return sample(self.llm, sampler)

    def logits(self) -> np.ndarray:
        """The last evaluated token's logits, as a writable view (no copy) of llama.cpp's buffer."""
        return np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(self.llm.ctx, -1), shape=(self.n_vocab,))

    def state_size(self) -> int:
        """Bytes of the context's sequence-0 state (its KV cache, no logits)."""
        return llama_cpp.llama_state_seq_get_size(self.llm.ctx, 0)

    def sampler_chain(self) -> _internals.LlamaSampler:
        """An empty sampler chain (``decode`` fills it)."""
        return _internals.LlamaSampler()


def _utf8_len(lead: int) -> int:
    """Bytes of the UTF-8 character that starts with byte ``lead`` (1 for a stray continuation byte)."""
    return 4 if lead >= 0xF0 else 3 if lead >= 0xE0 else 2 if lead >= 0xC0 else 1


def sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def fingerprint(path: str) -> str:
    """size:mtime:sha256(first MiB) — cheap, and changes whenever the file is replaced."""
    stat = Path(path).stat()
    with open(path, "rb") as fh:
        head = hashlib.sha256(fh.read(1 << 20)).hexdigest()
    return f"{stat.st_size}:{int(stat.st_mtime)}:{head}"
