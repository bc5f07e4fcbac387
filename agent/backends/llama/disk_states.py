"""KV states on disk: the static prompt prefix and each chat's state, kept across restarts.

Why: after every restart (launchd restarts the bot on a crash, at login, after an update) the
first message would evaluate the whole system prompt and tool block again: seconds before the
first word. A state file lets the next process start where the last one stopped.

What a file is: llama.cpp's sequence-0 state (``llama_state_seq_get_data``: the KV cache, no
logits) and the tokens it holds, behind a header this module writes and checks. llama.cpp does
not check what it is given: bytes from another model, another build or a truncated write would be
read as they are (garbage KV at best, a crash at worst). So nothing reaches llama.cpp before all
of this holds:

- the magic and the format version of this module;
- the file's size is exactly header + meta + tokens + state;
- the meta's ``engine`` key equals this engine's (``engine_key``): model fingerprint, adapter
  sha256 and scale, GPU layers, every context parameter that changes the state bytes (n_ctx, n_batch,
  n_ubatch, type_k/type_v, flash attention, rope...), the llama-cpp-python version and the
  llama.cpp build's CPU features; and, for a chat, the session id;
- a sha256 over meta, tokens and state matches; every token is inside the vocabulary and the
  tokens fit the context.

A file that fails any check is removed (it is never loaded, and would only be rebuilt). Files are
written atomically (a temp file, fsync, rename), owner-only (0600, the directory 0700, like the
other data files), and kept within a disk budget, least recently used first out: a file's mtime
is the time its state was last used (set on write, touched on load).

Why not llama-cpp-python's ``Llama.save_state``/``load_state``: its ``LlamaState`` holds the whole
context state (``llama_state_get_data``: KV plus the output buffers) and a copy of ``Llama.scores``
rows (up to n_batch × n_vocab floats, ~100 MB of logits for SmolLM2, not needed: a step always
evaluates at least one token), with no file format, identity or checksum; ``load_state`` hands
the bytes to llama.cpp as they are. llama.cpp's ``llama_state_seq_save_file`` writes a magic and
the tokens but neither the model's identity nor a checksum of the KV, and its loader reads
straight into the context. So the sequence's bytes come from ``llama_state_seq_get_data`` (as
the in-memory saved states do) and this module owns the file around them.

The files: ``prefix.kvstate`` (the static prefix: system prompt and tool block, one per data
dir: a new day's date or a new adapter rebuilds it) and ``chat-<sha256 of the session id>.kvstate``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import struct
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np

log = logging.getLogger(__name__)

MAGIC = b"IJKVSTAT"
FORMAT_VERSION = 1
# magic, format version, meta length, token count, state length, sha256(meta + tokens + state)
HEADER = struct.Struct("<8sIIQQ32s")
SUFFIX = ".kvstate"
PREFIX_FILE = "prefix" + SUFFIX
STALE_TEMP_S = 3600  # a temp file this old is a write that died (a live write takes seconds)


@dataclass
class StoredState:
    """A state read back from disk, checked: the tokens it holds and llama.cpp's bytes."""

    tokens: list[int]
    data: bytearray
    meta: dict[str, Any]


class DiskStates:
    """The state files of one engine in one directory, within ``max_bytes`` (LRU by mtime).

    ``engine``: this engine's key (``engine_key``); ``n_vocab`` and ``n_ctx`` bound the tokens a
    file may hold. Every method is safe to call with a missing, unreadable or foreign file: the
    answer is then "no state", never an exception.
    """

    def __init__(self, directory: Path, engine: dict[str, Any], max_bytes: int, n_vocab: int, n_ctx: int) -> None:
        self.directory = Path(directory)
        self.engine = engine
        self.max_bytes = max_bytes
        self.n_vocab = n_vocab
        self.n_ctx = n_ctx
        self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        try:
            self.directory.chmod(0o700)
        except OSError:
            pass
        self._remove_dead_temps()

    # -- names ----------------------------------------------------------------------------

    def chat_path(self, session_id: str) -> Path:
        """A session id is any text ("telegram:123"); the file is named by its hash."""
        return self.directory / f"chat-{hashlib.sha256(session_id.encode('utf-8')).hexdigest()[:32]}{SUFFIX}"

    @property
    def prefix_path(self) -> Path:
        return self.directory / PREFIX_FILE

    # -- reading --------------------------------------------------------------------------

    def load_prefix(self, tokens: Sequence[int]) -> StoredState | None:
        """The static prefix's state if the file holds exactly ``tokens`` for this engine."""
        state = self._read(self.prefix_path, {"kind": "prefix"})
        if state is not None and state.tokens != list(tokens):  # another day's prompt, other tools
            log.info("state file %s holds another prefix; rebuilding it", self.prefix_path.name)
            self._remove(self.prefix_path)
            return None
        return state

    def load_chat(self, session_id: str) -> StoredState | None:
        return self._read(self.chat_path(session_id), {"kind": "chat", "session": session_id})

    def _read(self, path: Path, expect: dict[str, Any]) -> StoredState | None:
        """The checked state in ``path``, or None (a file that fails a check is removed)."""
        try:
            with open(path, "rb") as fh:
                size = os.fstat(fh.fileno()).st_size
                state, why = self._parse(fh, size, expect)
        except FileNotFoundError:
            return None
        except OSError as exc:
            state, why = None, f"unreadable ({exc.strerror or exc})"
        if state is None:
            log.warning("ignoring state file %s: %s", path.name, why)
            self._remove(path)
            return None
        self._touch(path)  # used now: last out under the budget
        return state

    def _parse(self, fh: Any, size: int, expect: dict[str, Any]) -> tuple[StoredState | None, str]:
        if size < HEADER.size:
            return None, "truncated header"
        magic, version, meta_len, n_tokens, data_len, digest = HEADER.unpack(fh.read(HEADER.size))
        if magic != MAGIC:
            return None, "not a state file"
        if version != FORMAT_VERSION:
            return None, f"format version {version}, this version reads {FORMAT_VERSION}"
        if HEADER.size + meta_len + 4 * n_tokens + data_len != size:
            return None, "size does not match its header (truncated or padded)"
        if not 0 < n_tokens < self.n_ctx or data_len == 0:
            return None, f"{n_tokens} tokens, the context holds {self.n_ctx}"
        hasher = hashlib.sha256()
        meta_bytes = fh.read(meta_len)
        token_bytes = fh.read(4 * n_tokens)
        hasher.update(meta_bytes)
        hasher.update(token_bytes)
        try:
            meta = json.loads(meta_bytes)
        except ValueError:
            return None, "meta is not JSON"
        if not isinstance(meta, dict):
            return None, "meta is not an object"
        if meta.get("engine") != self.engine:
            return None, f"written for another model, adapter, context or version ({self._difference(meta)})"
        for key, value in expect.items():
            if meta.get(key) != value:
                return None, f"its {key} is {meta.get(key)!r}, expected {value!r}"
        data = bytearray(data_len)
        view = memoryview(data)
        got = 0
        while got < data_len:  # readinto: the state is read once, straight into the bytes kept
            n = fh.readinto(view[got:])
            if not n:
                return None, "truncated state"
            got += n
        hasher.update(view)
        del view
        if hasher.digest() != digest:
            return None, "checksum mismatch (damaged)"
        tokens = np.frombuffer(token_bytes, dtype="<i4")
        if tokens.size and (int(tokens.min()) < 0 or int(tokens.max()) >= self.n_vocab):
            return None, "a token outside the vocabulary"
        return StoredState(tokens.tolist(), data, meta), ""

    def _difference(self, meta: dict[str, Any]) -> str:
        """Which engine keys differ (for the log line)."""
        theirs = meta.get("engine") if isinstance(meta.get("engine"), dict) else {}
        keys = sorted(k for k in set(self.engine) | set(theirs) if self.engine.get(k) != theirs.get(k))
        return ", ".join(keys[:4]) or "engine"

    # -- writing --------------------------------------------------------------------------

    def save_prefix(self, tokens: Sequence[int], data: bytes | bytearray) -> bool:
        return self._write(self.prefix_path, {"kind": "prefix"}, tokens, data, time.time())

    def save_chat(self, session_id: str, tokens: Sequence[int], data: bytes | bytearray, used_at: float) -> bool:
        """``used_at``: when the chat last used its state (the file's mtime, for the LRU order)."""
        return self._write(self.chat_path(session_id), {"kind": "chat", "session": session_id}, tokens, data, used_at)

    def _write(self, path: Path, meta: dict[str, Any], tokens: Sequence[int], data: bytes | bytearray,
               used_at: float) -> bool:
        """Write atomically; False (and nothing written) if it cannot fit the budget or the disk fails."""
        meta_bytes = json.dumps({**meta, "engine": self.engine, "saved_at": time.time()}, sort_keys=True).encode()
        token_bytes = np.asarray(tokens, dtype="<i4").tobytes()
        size = HEADER.size + len(meta_bytes) + len(token_bytes) + len(data)
        if size > self.max_bytes or not tokens:
            log.info("not saving %s: %d bytes, the budget is %d", path.name, size, self.max_bytes)
            return False
        hasher = hashlib.sha256()
        for part in (meta_bytes, token_bytes, data):
            hasher.update(part)
        header = HEADER.pack(MAGIC, FORMAT_VERSION, len(meta_bytes), len(token_bytes) // 4, len(data), hasher.digest())
        temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "wb") as fh:
                for part in (header, meta_bytes, token_bytes, data):
                    fh.write(part)
                fh.flush()
                os.fsync(fh.fileno())
            os.utime(temp, (used_at, used_at))
            os.replace(temp, path)
            self._sync_directory()
        except OSError as exc:
            log.warning("could not save state file %s: %s", path.name, exc)
            self._remove(temp)
            return False
        self.evict()
        return True

    # -- the budget -----------------------------------------------------------------------

    def files(self) -> list[tuple[float, int, Path]]:
        """(mtime, size, path) of every state file, least recently used first."""
        found = []
        for path in self._state_paths():
            try:
                info = path.stat()
            except OSError:
                continue
            found.append((info.st_mtime, info.st_size, path))
        return sorted(found)

    def nbytes(self) -> int:
        return sum(size for _, size, _ in self.files())

    def evict(self) -> None:
        """Remove least recently used files until the rest fit ``max_bytes``."""
        files = self.files()
        total = sum(size for _, size, _ in files)
        for _, size, path in files:
            if total <= self.max_bytes:
                break
            log.info("state budget: removing %s (least recently used)", path.name)
            self._remove(path)
            total -= size

    def touch_prefix(self) -> None:
        """The prefix is in use for as long as the process runs: at shutdown it counts as used now,
        so the budget drops old chats before the one file every chat starts from."""
        self._touch(self.prefix_path)

    def discard_chat(self, session_id: str) -> None:
        self._remove(self.chat_path(session_id))

    # -- helpers --------------------------------------------------------------------------

    def _state_paths(self) -> Iterator[Path]:
        try:
            yield from (p for p in self.directory.iterdir() if p.name.endswith(SUFFIX) and not p.name.startswith("."))
        except OSError:
            return

    def _touch(self, path: Path) -> None:
        try:
            os.utime(path)
        except OSError:
            pass

    def _remove(self, path: Path) -> None:
        try:
            path.unlink()
        except OSError:
            pass

    def _sync_directory(self) -> None:
        """The rename itself survives a power cut only once the directory is synced (POSIX)."""
        try:
            fd = os.open(self.directory, os.O_RDONLY)
        except OSError:
            return
        try:
            os.fsync(fd)
        except OSError:
            pass
        finally:
            os.close(fd)

    def _remove_dead_temps(self) -> None:
        """Temp files of writes that died (a crash, a SIGKILL mid-save); never a live one."""
        now = time.time()
        try:
            temps = [p for p in self.directory.iterdir() if p.name.startswith(".") and p.name.endswith(".tmp")]
        except OSError:
            return
        for path in temps:
            try:
                if now - path.stat().st_mtime > STALE_TEMP_S:
                    path.unlink()
            except OSError:
                pass


def engine_key(identity: dict[str, Any], context_params: Any, n_ctx: int, n_vocab: int) -> dict[str, Any]:
    """Everything that changes what a state's bytes mean, as plain JSON values.

    ``identity``: ``Engine.identity()`` (the model's fingerprint: size, mtime and sha256 of the
    first MiB; hashing a 4 GB model fully costs ~10 s per start, which is what this module saves;
    the adapter's full sha256 and scale; the layers offloaded to a GPU). ``context_params``: llama.cpp's ``llama_context_params``
    struct; every scalar field counts except the thread counts (each output element is computed
    by one thread, so they do not change the values) and ``no_perf``.
    """
    import llama_cpp

    params = {}
    for name, _ in context_params._fields_:
        if name in ("n_threads", "n_threads_batch", "no_perf"):
            continue
        value = getattr(context_params, name)
        if isinstance(value, (bool, int, float)):
            params[name] = value
    system = llama_cpp.llama_print_system_info()
    return {
        "model_fingerprint": identity.get("model_fingerprint"),
        "adapter_sha256": identity.get("adapter_sha256"),
        "lora_scale": identity.get("lora_scale"),
        "gpu_layers": identity.get("gpu_layers"),  # a GPU computes other float values than the CPU
        "n_ctx": n_ctx,
        "n_vocab": n_vocab,
        "context_params": params,
        "llama_cpp_python": llama_cpp.__version__,
        "llama_cpp_build": hashlib.sha256(system if isinstance(system, bytes) else str(system).encode()).hexdigest()[:16],
    }
