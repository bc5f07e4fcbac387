"""KV states that outlive the process, with real llama.cpp (SmolLM2, the tiny Qwen3): the static
prefix loaded at start-up, chats' states kept at a clean shutdown, and every stale or damaged
file refused (and rebuilt) without ever reaching llama.cpp.

Each "start" is a new ``LlamaBackend`` (a new llama.cpp context) on the same state directory, as
a restarted process gets it; ``test_the_repl_keeps_its_chat_across_a_sigterm`` does it with real
processes."""

from __future__ import annotations

import os
import queue
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from agent.backends.llama import LlamaBackend
from agent.backends.llama.disk_states import DiskStates

pytestmark = pytest.mark.slow

CREATE = {"type": "function", "function": {
    "name": "create_event", "description": "Create a calendar event.",
    "parameters": {"type": "object", "properties": {"title": {"type": "string", "maxLength": 40},
                                                    "start": {"type": "string", "maxLength": 20}},
                   "required": ["title", "start"]}}}
TOOLS = [CREATE]
SYSTEM = [{"role": "system", "content": "You are a calendar assistant. Keep answers short."}]
CTX = 2048


def user(text: str) -> dict:
    return {"role": "user", "content": f"[09:30] {text}"}  # stamped as the runtime stamps it


def start(model: Path, states: Path | None, **kwargs) -> LlamaBackend:
    """A fresh backend ("a process start") on ``states``, the static prefix warmed up."""
    backend = LlamaBackend(model, n_ctx=kwargs.pop("n_ctx", CTX), n_threads=1, state_dir=states, **kwargs)
    backend.warm_up(SYSTEM, TOOLS, background=False)
    return backend


@pytest.fixture(scope="module")
def first_start(smollm2: Path, tmp_path_factory) -> tuple[LlamaBackend, Path, bytes]:
    """The first start ever: no state file, so the prefix is evaluated and saved. Returns the
    backend, its state dir and the pristine prefix file's bytes."""
    states = tmp_path_factory.mktemp("first") / "states"
    backend = start(smollm2, states)
    assert backend.warm_up_result == "built"
    return backend, states, (states / "prefix.kvstate").read_bytes()


def copy_of(states: Path, tmp_path: Path) -> Path:
    target = tmp_path / "states"
    shutil.copytree(states, target)
    return target


def test_a_warm_start_replies_as_a_cold_start_and_evaluates_only_the_message(first_start, smollm2, tmp_path) -> None:
    cold, states, _ = first_start
    messages = SYSTEM + [user("What is on my calendar tomorrow?")]
    cold.reset_context()  # cold: nothing in the context, the prefix evaluated (and saved) first
    cold.cache.static_pending = True  # as when a turn wins the lock before the start-up warm-up
    shutil.rmtree(states)
    states.mkdir(mode=0o700)
    cold_reply = cold.complete(messages, TOOLS, max_tokens=16)
    cold_tokens = cold.engine.tokens()
    assert (states / "prefix.kvstate").exists() and "save_prefix_s" in cold_reply.timings

    warm = start(smollm2, copy_of(states, tmp_path))
    assert warm.warm_up_result == "loaded"
    warm_reply = warm.complete(messages, TOOLS, max_tokens=16)
    assert warm_reply.error is None and cold_reply.error is None
    assert warm.engine.tokens() == cold_tokens  # the same prompt tokens and the same greedy reply
    assert warm_reply.text == cold_reply.text

    prefix = len(warm.cache.static)
    prompt = warm.render(messages, TOOLS)
    stamped = messages[-1]["content"]
    framing = warm.tokenize(prompt.split(stamped, 1)[1], add_bos=False)  # "<|im_end|>\n<|im_start|>assistant\n"
    assert warm_reply.reused_tokens == prefix and prefix > 150
    assert warm_reply.evaluated_tokens == warm_reply.prompt_tokens - prefix
    assert warm_reply.evaluated_tokens <= len(warm.tokenize(stamped, add_bos=False)) + len(framing)
    print(f"prefix {prefix} tokens; warm start evaluated {warm_reply.evaluated_tokens} "
          f"(stamped message {len(warm.tokenize(stamped, add_bos=False))} + framing {len(framing)}); "
          f"cold evaluated {cold_reply.evaluated_tokens}")


def test_a_warm_start_evaluates_only_the_message_with_either_qwen3_template(tiny_qwen3_each, tmp_path) -> None:
    """The static prefix (system prompt and tool block) is found by rendering probes through the
    model's template; with either production template the saved prefix is all of the prompt but
    the user's message and the generation prompt (the hybrid one's empty think block included)."""
    states = tmp_path / "states"
    assert start(tiny_qwen3_each, states).warm_up_result == "built"
    warm = start(tiny_qwen3_each, states)
    assert warm.warm_up_result == "loaded"
    messages = SYSTEM + [user("What is on my calendar tomorrow?")]
    reply = warm.complete(messages, TOOLS, max_tokens=4)
    assert reply.error is None
    prefix = len(warm.cache.static)
    prompt = warm.render(messages, TOOLS)
    stamped = messages[-1]["content"]
    framing = warm.tokenize(prompt.split(stamped, 1)[1], add_bos=False)  # turn end and generation prompt
    assert reply.reused_tokens == prefix > 150
    assert reply.evaluated_tokens == reply.prompt_tokens - prefix
    assert reply.evaluated_tokens <= len(warm.tokenize(stamped, add_bos=False)) + len(framing)


def test_a_turn_that_gets_the_lock_before_the_warm_up_saves_the_prefix_itself(smollm2, tmp_path) -> None:
    states = tmp_path / "states"
    backend = LlamaBackend(smollm2, n_ctx=CTX, n_threads=1, state_dir=states)
    backend.cache.expect_prefix(backend.static_prefix(SYSTEM, TOOLS))  # what warm_up does before it waits
    messages = SYSTEM + [user("Hello")]
    first = backend.complete(messages, TOOLS, max_tokens=4)  # this turn got the lock first
    assert "save_prefix_s" in first.timings and (states / "prefix.kvstate").exists()
    backend.warm_up(SYSTEM, TOOLS, background=False)
    assert backend.warm_up_result == "busy"  # the context is the turn's: left alone
    again = start(smollm2, states)
    assert again.warm_up_result == "loaded"
    second = again.complete(messages, TOOLS, max_tokens=4)
    assert second.text == first.text and second.evaluated_tokens == first.prompt_tokens - len(again.cache.static)


def corrupt(path: Path, how: str) -> None:
    data = bytearray(path.read_bytes())
    if how == "truncated":
        data = data[: len(data) * 2 // 3]
    elif how == "a flipped state byte":
        data[len(data) // 2] ^= 0x5A
    elif how == "a flipped header byte":
        data[20] ^= 0x01  # inside the token count
    elif how == "random bytes":
        data = bytearray(os.urandom(len(data)))
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("how", ["truncated", "a flipped state byte", "a flipped header byte", "random bytes"])
def test_a_damaged_prefix_file_is_rebuilt_not_loaded(first_start, tmp_path, how) -> None:
    backend, _, pristine = first_start
    states = tmp_path / "states"
    states.mkdir()
    (states / "prefix.kvstate").write_bytes(pristine)
    corrupt(states / "prefix.kvstate", how)
    backend.cache.disk = DiskStates(states, backend.engine.state_key(), 1 << 30, backend.engine.n_vocab, CTX)
    backend.reset_context()
    backend.warm_up(SYSTEM, TOOLS, background=False)
    assert backend.warm_up_result == "built"  # evaluated from scratch: the damaged bytes never loaded
    reread = backend.cache.disk.load_prefix(backend.cache.static)
    assert reread is not None and reread.tokens == backend.cache.static  # and the rebuilt file is sound
    reply = backend.complete(SYSTEM + [user("Hello")], TOOLS, max_tokens=2)
    assert reply.error is None and reply.reused_tokens == len(backend.cache.static)


@pytest.fixture(scope="module")
def foreign_files(smollm2, smollm2_lora, tiny_qwen3, tmp_path_factory) -> dict[str, bytes]:
    """Real prefix files written by other setups: another n_ctx, an adapter, another model."""
    files = {}
    for name, model, kwargs in [("another n_ctx", smollm2, {"n_ctx": 1024}),
                                ("an adapter", smollm2, {"lora_path": smollm2_lora}),
                                ("another model", tiny_qwen3, {})]:
        states = tmp_path_factory.mktemp("foreign") / "states"
        other = start(model, states, **kwargs)
        assert other.warm_up_result == "built"
        files[name] = (states / "prefix.kvstate").read_bytes()
        del other
    return files


@pytest.mark.parametrize("name", ["another n_ctx", "an adapter", "another model"])
def test_a_prefix_file_from_another_setup_is_rebuilt_not_loaded(first_start, foreign_files, tmp_path, name) -> None:
    backend, _, pristine = first_start
    states = tmp_path / "states"
    states.mkdir()
    (states / "prefix.kvstate").write_bytes(foreign_files[name])
    backend.cache.disk = DiskStates(states, backend.engine.state_key(), 1 << 30, backend.engine.n_vocab, CTX)
    backend.reset_context()
    backend.warm_up(SYSTEM, TOOLS, background=False)
    assert backend.warm_up_result == "built"
    assert (states / "prefix.kvstate").read_bytes() != foreign_files[name]


def test_a_clean_shutdown_keeps_each_chat_and_its_next_turn_loads_it(first_start, smollm2, tmp_path) -> None:
    _, pristine_dir, _ = first_start
    states = copy_of(pristine_dir, tmp_path)
    first = start(smollm2, states)
    alice = SYSTEM + [user("Book the dentist on Friday at 15:00.")]
    bob = SYSTEM + [user("Anything on Monday?")]
    a1 = first.complete(alice, TOOLS, session_id="alice", max_tokens=8)
    first.complete(bob, TOOLS, session_id="bob", max_tokens=8)  # alice's state moves to memory
    assert first.save_states() == 2  # bob's live context and alice's saved one
    chats = sorted(states.glob("chat-*.kvstate"))
    assert len(chats) == 2
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in chats)

    alice += [{"role": "assistant", "content": a1.text}, user("Make it 16:00 instead.")]
    expected = first.complete(alice, TOOLS, session_id="alice", max_tokens=8)  # the same process goes on

    second = start(smollm2, states)  # a restart
    assert second.warm_up_result == "loaded"
    again = second.complete(alice, TOOLS, session_id="alice", max_tokens=8)
    assert "read_state_file_s" in again.timings and "load_state_s" in again.timings
    assert again.evaluated_tokens == expected.evaluated_tokens  # nothing of the chat is evaluated again
    assert again.text == expected.text
    new = again.prompt_tokens - a1.prompt_tokens - a1.generated_tokens
    assert again.evaluated_tokens <= new + 3, (again, new)


def test_a_chat_file_is_never_loaded_for_another_chat(first_start, smollm2, tmp_path) -> None:
    _, pristine_dir, _ = first_start
    states = copy_of(pristine_dir, tmp_path)
    first = start(smollm2, states)
    carol = SYSTEM + [user("Lunch with Dan at noon.")]
    first.complete(carol, TOOLS, session_id="carol", max_tokens=4)
    first.save_states()
    disk = first.cache.disk
    os.replace(disk.chat_path("carol"), disk.chat_path("dave"))  # carol's state under dave's name

    second = start(smollm2, states)
    dave = second.complete(carol, TOOLS, session_id="dave", max_tokens=4)  # even with carol's very prompt
    assert "load_state_s" not in dave.timings and dave.reused_tokens == len(second.cache.static)
    assert not disk.chat_path("dave").exists()  # the mislabelled file is gone


def test_a_step_cut_short_is_not_kept_and_forget_removes_a_chats_file(first_start, smollm2, tmp_path) -> None:
    _, pristine_dir, _ = first_start
    states = copy_of(pristine_dir, tmp_path)
    backend = start(smollm2, states)
    backend.complete(SYSTEM + [user("Hi")], TOOLS, session_id="erin", max_tokens=2)
    backend.cache.live_clean = False  # as after an exception inside a step
    assert backend.save_states() == 0
    backend.cache.live_clean = True
    assert backend.save_states() == 1 and backend.cache.disk.chat_path("erin").exists()
    backend.forget_session("erin")
    assert not backend.cache.disk.chat_path("erin").exists()


def test_disk_budget_comes_from_the_setting_and_zero_turns_it_off(tmp_path, smollm2) -> None:
    from agent.app import build_llama_backend
    from agent.config import load_settings

    env = {"AGENT_MODEL_PATH": str(smollm2), "AGENT_NO_ADAPTER": "1", "AGENT_STATE_DISK_MB": "64"}
    settings = load_settings({"data_dir": str(tmp_path), "n_ctx": 512, "n_threads": 1}, environ=env)
    kept = build_llama_backend(settings, keep_states=True)
    assert kept.state_dir == tmp_path / "states" and kept.cache.disk.max_bytes == 64 * 2**20
    assert build_llama_backend(settings).state_dir is None  # eval and the bench keep nothing
    off = load_settings({"data_dir": str(tmp_path), "n_ctx": 512}, environ={**env, "AGENT_STATE_DISK_MB": "0"})
    assert build_llama_backend(off, keep_states=True).state_dir is None
    assert load_settings({"data_dir": str(tmp_path)}, environ={}).state_disk_mb == 2048


def test_a_negative_disk_budget_is_one_line_and_exit_2(tmp_path) -> None:
    done = subprocess.run([sys.executable, "-m", "agent", "doctor", "--no-generate", "--data-dir", str(tmp_path)],
                          capture_output=True, text=True, env={**os.environ, "AGENT_STATE_DISK_MB": "-1"})
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and "state_disk_mb" in done.stderr


# ----------------------------------------------------------------------------------------- processes

def repl(data_dir: Path, smollm2: Path) -> subprocess.Popen:
    env = {**os.environ, "AGENT_CONFIG": str(data_dir / "config.toml"), "AGENT_DATA_DIR": str(data_dir)}
    return subprocess.Popen(
        [sys.executable, "-m", "agent", "--model", str(smollm2), "--no-adapter", "--ctx", "2048", "--threads", "1"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def lines_of(proc: subprocess.Popen) -> queue.Queue:
    found: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [found.put(line) for line in proc.stdout], daemon=True).start()
    return found


def wait_for(found: queue.Queue, predicate, timeout: float = 900) -> str:
    deadline = time.monotonic() + timeout
    while True:
        line = found.get(timeout=max(0.1, deadline - time.monotonic()))
        if predicate(line):
            return line


def test_the_repl_keeps_its_chat_across_a_sigterm(tmp_path, smollm2) -> None:
    """Two real processes: the first answers a message and gets SIGTERM (launchd's stop, a logout),
    the second starts from the prefix and the chat's state it left."""
    from agent.trajectory import TrajectoryLog

    data = tmp_path / "data"
    data.mkdir()
    (data / "config.toml").write_text('domain = "tests.toy_domain"\nmax_steps = 1\n')
    first = repl(data, smollm2)
    out = lines_of(first)
    wait_for(out, lambda line: line.startswith("/help"))
    first.stdin.write("hello\n")
    first.stdin.flush()
    wait_for(out, lambda line: True)  # the turn's output (at least its newline)
    first.send_signal(signal.SIGTERM)
    assert first.wait(timeout=300) == 0, first.stderr.read()
    states = data / "states"
    assert (states / "prefix.kvstate").exists() and len(list(states.glob("chat-*.kvstate"))) == 1

    second = repl(data, smollm2)
    out = lines_of(second)
    wait_for(out, lambda line: line.startswith("/help"))
    second.stdin.write("and tomorrow?\n")
    second.stdin.close()  # EOF after the message: the REPL answers, then leaves
    assert second.wait(timeout=900) == 0, second.stderr.read()
    log = TrajectoryLog(data / "trajectories.sqlite3")
    turns = list(log.turns())
    log.close()
    assert len(turns) == 2
    first_step, step = turns[0]["steps"][0], turns[1]["steps"][0]
    assert step["reused_tokens"] >= first_step["prompt_tokens"]  # all of the first turn, from the chat's file
    assert step["evaluated_tokens"] < 60, step
