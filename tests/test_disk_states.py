"""State files on disk (``agent.backends.llama.disk_states``): what is written, and every way a
file is refused before llama.cpp could see its bytes. No model here: the bytes are synthetic; the
real model's files are tested in ``test_persisted_states.py``."""

from __future__ import annotations

import os
import stat
import struct
import time
from pathlib import Path

import pytest

from agent.backends.llama.disk_states import HEADER, DiskStates

ENGINE = {"model_fingerprint": "100:1:abc", "adapter_sha256": None, "lora_scale": None, "gpu_layers": 0, "n_ctx": 512,
          "n_vocab": 1000, "context_params": {"n_batch": 512, "type_k": 1}, "llama_cpp_python": "0.3.36",
          "llama_cpp_build": "f00"}
TOKENS = [1, 17, 999, 42]
DATA = bytes(range(256)) * 40


def store(directory: Path, engine: dict | None = None, max_bytes: int = 1 << 20) -> DiskStates:
    return DiskStates(directory, engine or ENGINE, max_bytes, n_vocab=1000, n_ctx=512)


def test_a_saved_prefix_reads_back_exactly_and_is_owner_only(tmp_path: Path) -> None:
    disk = store(tmp_path / "states")
    assert disk.save_prefix(TOKENS, DATA)
    state = disk.load_prefix(TOKENS)
    assert state is not None and state.tokens == TOKENS and bytes(state.data) == DATA
    assert stat.S_IMODE(disk.prefix_path.stat().st_mode) == 0o600
    assert stat.S_IMODE(disk.directory.stat().st_mode) == 0o700
    assert not [p for p in disk.directory.iterdir() if p.name.endswith(".tmp")]  # renamed into place


def rewrite(path: Path, change) -> None:
    data = bytearray(path.read_bytes())
    path.write_bytes(bytes(change(data)))


def flip(offset_from_end: int):
    def change(data: bytearray) -> bytearray:
        data[len(data) - offset_from_end] ^= 0xFF
        return data
    return change


def set_version(data: bytearray) -> bytearray:
    struct.pack_into("<I", data, 8, 2)  # the format version field follows the 8-byte magic
    return data


DAMAGE = {
    "empty": lambda d: b"",
    "truncated header": lambda d: d[: HEADER.size - 1],
    "truncated state": lambda d: d[:-100],
    "padded": lambda d: d + b"\0",
    "a flipped state byte": flip(500),
    "a flipped token byte": flip(len(DATA) + 3),
    "another magic": lambda d: b"NOTSTATE" + d[8:],
    "another format version": set_version,
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_damaged_file_is_refused_and_removed(tmp_path: Path, damage: str) -> None:
    disk = store(tmp_path)
    disk.save_prefix(TOKENS, DATA)
    rewrite(disk.prefix_path, DAMAGE[damage])
    assert disk.load_prefix(TOKENS) is None
    assert not disk.prefix_path.exists()  # rebuilt next time, never read again


@pytest.mark.parametrize("field,value", [("model_fingerprint", "100:2:abc"), ("adapter_sha256", "ad"),
                                         ("gpu_layers", -1), ("n_ctx", 1024), ("llama_cpp_python", "0.3.35"),
                                         ("context_params", {"n_batch": 256, "type_k": 1})])
def test_a_file_written_for_another_engine_is_refused(tmp_path: Path, field: str, value) -> None:
    store(tmp_path, {**ENGINE, field: value}).save_prefix(TOKENS, DATA)  # a valid file, checksum and all
    disk = store(tmp_path)
    assert disk.load_prefix(TOKENS) is None
    assert not disk.prefix_path.exists()


def test_another_prefix_is_not_loaded(tmp_path: Path) -> None:
    disk = store(tmp_path)
    disk.save_prefix(TOKENS, DATA)
    assert disk.load_prefix(TOKENS[:-1] + [43]) is None  # e.g. another day's system prompt


def test_tokens_outside_the_vocabulary_or_context_are_refused(tmp_path: Path) -> None:
    DiskStates(tmp_path, ENGINE, 1 << 20, n_vocab=5000, n_ctx=512).save_prefix([1, 4999], DATA)
    assert store(tmp_path).load_prefix([1, 4999]) is None  # n_vocab 1000 here
    DiskStates(tmp_path, ENGINE, 1 << 20, n_vocab=1000, n_ctx=5000).save_prefix(list(range(600)), DATA)
    assert store(tmp_path).load_prefix(list(range(600))) is None  # more tokens than n_ctx 512


def test_a_chat_file_is_only_read_for_its_own_session(tmp_path: Path) -> None:
    disk = store(tmp_path)
    disk.save_chat("telegram:1", TOKENS, DATA, time.time())
    os.replace(disk.chat_path("telegram:1"), disk.chat_path("telegram:2"))
    assert disk.load_chat("telegram:2") is None
    disk.save_chat("telegram:1", TOKENS, DATA, time.time())
    assert disk.load_chat("telegram:1").tokens == TOKENS


def test_files_stay_within_the_budget_least_recently_used_first_out(tmp_path: Path) -> None:
    disk = store(tmp_path)
    now = time.time()
    for i, session in enumerate(["a", "b", "c"]):
        disk.save_chat(session, TOKENS, DATA, used_at=now - 100 + i)  # a is the least recently used
    one = disk.chat_path("a").stat().st_size  # each file is this, give or take a byte of its meta
    disk.max_bytes = 2 * one + one // 2  # room for two
    disk.save_chat("d", TOKENS, DATA, used_at=now)
    assert disk.nbytes() <= disk.max_bytes
    assert [disk.load_chat(s) is not None for s in "abcd"] == [False, False, True, True]


def test_loading_a_file_makes_it_recently_used(tmp_path: Path) -> None:
    disk = store(tmp_path)
    now = time.time()
    disk.save_chat("a", TOKENS, DATA, used_at=now - 100)
    disk.save_chat("b", TOKENS, DATA, used_at=now - 50)
    assert disk.load_chat("a") is not None  # a is used now: b is the older one
    disk.max_bytes = disk.chat_path("a").stat().st_size + 100  # room for one
    disk.evict()
    assert disk.chat_path("a").exists() and not disk.chat_path("b").exists()


def test_a_state_larger_than_the_whole_budget_is_not_written(tmp_path: Path) -> None:
    disk = store(tmp_path, max_bytes=len(DATA) // 2)
    assert not disk.save_prefix(TOKENS, DATA)
    assert not list(tmp_path.iterdir())


def test_a_dead_writes_temp_file_is_cleared_at_start(tmp_path: Path) -> None:
    store(tmp_path)
    dead, live = tmp_path / ".prefix.kvstate.1.tmp", tmp_path / ".prefix.kvstate.2.tmp"
    dead.write_bytes(b"half")
    live.write_bytes(b"half")
    os.utime(dead, (time.time() - 7200, time.time() - 7200))
    store(tmp_path)
    assert not dead.exists() and live.exists()  # another process may be writing this one right now
