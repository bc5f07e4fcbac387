"""The REPL as a person meets it: banner, streamed text, cut-off replies, Ctrl-C and Ctrl-D.

The interactive cases run ``python -m agent --demo`` on a real pseudo-terminal (the Gemma 3 270M pair), so
readline, signals and the terminal's line discipline are the real ones; they assert only what
the REPL does, never what the model writes.
"""

from __future__ import annotations

import fcntl
import io
import json
import os
import pty
import select
import signal
import sqlite3
import subprocess
import sys
import termios
import time
from pathlib import Path
from collections.abc import Iterator
from typing import Any

import pytest

from agent.app import build_runtime
from agent.backends.base import Completion
from agent.backends.scripted import ScriptedBackend
from agent.config import load_settings
from agent.formats import format_tool_call
from agent.repl import CONVERSATION, LiveView, VisibleText, banner, run_repl
from tests.bot_harness import RECEIPTS, ROOT, receipt_script


def settings_for(tmp_path: Path):
    return load_settings({"data_dir": str(tmp_path / "data")}, environ={})


class CutOff:
    """A backend whose every step stops at max_tokens, as llama.cpp reports it ("length")."""

    name = "cutoff"

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], **kw: Any) -> Completion:
        return Completion(text="Your dentist appointment is on", finish_reason="length", generated_tokens=512)

    def identity(self) -> dict[str, Any]:
        return {"backend": self.name, "model_path": None, "adapter_path": None}


def test_a_reply_cut_off_by_max_tokens_is_marked_and_has_its_own_stop_reason(tmp_path: Path) -> None:
    settings = settings_for(tmp_path)
    runtime = build_runtime(settings, CutOff())
    out = io.StringIO()
    assert run_repl(runtime, stdin=io.StringIO("when is the dentist?\n"), out=out) == 0
    runtime.close()
    text = out.getvalue()
    assert "Your dentist appointment is on\n[cut off: the reply reached the length limit before it ended]" in text
    with sqlite3.connect(settings.data_dir / "trajectories.sqlite3") as db:
        rows = db.execute("SELECT stop_reason, turn FROM turns").fetchall()
    assert [r for r, _ in rows] == ["cut_off"]
    recorded = json.loads(rows[0][1])
    assert recorded["stop_reason"] == "cut_off" and recorded["steps"][0]["finish_reason"] == "length"


RAW = (
    "<think>The user wants the dentist. I should search.</think>Let me look that up. "
    + format_tool_call("search_events", {"query": "dentist"})
    + " Found it: 치과 on <b>Tuesday</b> at 15:00 <3<|im_end|>"
)


def test_visible_text_is_the_same_however_the_stream_is_split() -> None:
    """Reasoning, the call's JSON and special tokens never show; the rest shows exactly once."""
    expected = "Let me look that up.  Found it: 치과 on <b>Tuesday</b> at 15:00 <3"
    for cut in range(len(RAW) + 1):
        for second in (cut + 1, cut + 7):
            v = VisibleText()
            shown = v.feed(RAW[:cut]) + v.feed(RAW[cut:second]) + v.feed(RAW[second:]) + v.flush()
            assert shown == expected, (cut, second)
    v = VisibleText()
    assert "".join(v.feed(ch) for ch in RAW) + v.flush() == expected


def test_live_view_streams_text_shows_calls_and_does_not_repeat_the_reply(tmp_path: Path) -> None:
    """What a terminal shows for a turn with one call: indicator, call line, streamed reply once."""
    settings = settings_for(tmp_path)

    class Streaming(ScriptedBackend):
        stream = None

        def complete(self, messages, tools, **kw):  # type: ignore[no-untyped-def]
            completion = super().complete(messages, tools, **kw)
            if self.stream is not None:
                self.stream.start_step()
                for i in range(0, len(completion.text), 3):
                    self.stream.text(completion.text[i : i + 3])
            return completion

    backend = Streaming([format_tool_call("search_events", {"query": "dentist"}), "<think>ok</think>Nothing found."])
    runtime = build_runtime(settings, backend)
    out = io.StringIO()
    live = LiveView(out)
    live.begin_turn()
    turn = runtime.handle(CONVERSATION, "is there a dentist?", DenyAllForTest(), observe=live.message)
    live.end_turn(turn)
    runtime.close()
    screen = out.getvalue()
    assert screen.count("Nothing found.") == 1 and "ok</think>" not in screen and '"query"' in screen
    assert screen.index("✓ search_events") < screen.index("Nothing found.")
    assert "thinking" in screen and "<tool_call>" not in screen


class DenyAllForTest:
    def decide(self, request):  # type: ignore[no-untyped-def]
        from agent.approval import Decision

        return Decision(False, "test")


def test_banner_names_backend_time_zone_and_a_resumed_conversation(tmp_path: Path) -> None:
    settings = settings_for(tmp_path)
    runtime = build_runtime(settings, ScriptedBackend(["Hello!"]))
    assert "a new conversation" in banner(runtime, "Europe/Berlin")
    runtime.handle(CONVERSATION, "hi", DenyAllForTest())
    lines = banner(runtime, "Europe/Berlin")
    runtime.close()
    assert "backend scripted" in lines[0]
    assert "time zone Europe/Berlin (--tz or AGENT_TZ changes it)" in lines
    assert "continuing your conversation: 2 messages; /new starts fresh" in lines


def test_an_interrupted_turn_leaves_no_dangling_user_message(tmp_path: Path) -> None:
    settings = settings_for(tmp_path)

    def interrupt_at(step: int):  # type: ignore[no-untyped-def]
        calls = {"n": 0}

        def script(messages):  # type: ignore[no-untyped-def]
            calls["n"] += 1
            if calls["n"] > step:
                raise KeyboardInterrupt
            return format_tool_call("search_events", {"query": "dentist"})

        return script

    class Raising(ScriptedBackend):
        def complete(self, messages, tools, **kw):  # type: ignore[no-untyped-def]
            return Completion(text=self._outputs(messages))  # type: ignore[operator]

    # Ctrl-C in the first step: nothing ran, so the turn never happened.
    runtime = build_runtime(settings, Raising(interrupt_at(0)))
    with pytest.raises(KeyboardInterrupt):
        runtime.handle(CONVERSATION, "find the dentist", DenyAllForTest())
    assert runtime.sessions.history(runtime.sessions.current(CONVERSATION)) == []
    runtime.close()

    # Ctrl-C after a call ran: the history records it and ends with an assistant message.
    runtime = build_runtime(settings, Raising(interrupt_at(1)))
    with pytest.raises(KeyboardInterrupt):
        runtime.handle(CONVERSATION, "find the dentist", DenyAllForTest())
    history = runtime.sessions.history(runtime.sessions.current(CONVERSATION))
    runtime.close()
    assert [m["role"] for m in history] == ["user", "assistant", "tool", "assistant"]
    assert history[-1]["content"] == "(interrupted by the user)"
    asked = {c["id"] for m in history for c in m.get("tool_calls") or []}
    assert asked == {m["tool_call_id"] for m in history if m["role"] == "tool"}


# --------------------------------------------------------------------------- a real terminal


def _own_terminal() -> None:
    """In the child: a new session whose controlling terminal is the pty, so Ctrl-C is SIGINT.

    SIGINT goes back to its default first: a test run started in the background (``pytest &``)
    inherits it ignored, and Python installs no KeyboardInterrupt handler for an ignored signal."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    os.setsid()
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


DEMO_REPL = ["-m", "agent", "--demo", "--ctx", "4096"]


class Terminal:
    """``python -m agent --demo`` (or ``argv``) on a pseudo-terminal; read what it shows, type keys."""

    def __init__(self, tmp_path: Path, argv: list[str] = DEMO_REPL) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_", "HF_"))}
        env.update(AGENT_DATA_DIR=str(tmp_path / "data"), HF_HUB_OFFLINE="1", TERM="xterm")
        self.master, slave = pty.openpty()
        self.proc = subprocess.Popen([sys.executable, *argv], stdin=slave, cwd=ROOT,
                                     stdout=slave, stderr=slave, env=env, close_fds=True, preexec_fn=_own_terminal)
        os.close(slave)
        self.seen = b""

    def wait_for(self, text: str, timeout: float = 300, count: int = 1) -> str:
        """Wait until ``text`` has been shown ``count`` times in all."""
        deadline = time.monotonic() + timeout
        while self.seen.count(text.encode()) < count:
            if time.monotonic() > deadline or self.proc.poll() is not None and not self._read(0.1):
                raise AssertionError(f"never saw {text!r}; screen:\n{self.seen.decode(errors='replace')}")
            self._read(0.5)
        return self.seen.decode(errors="replace")

    def wait_any(self, *wanted: tuple[str, int], timeout: float = 300) -> str:
        """Wait until one of the (text, count) pairs has been shown that many times in all: for a
        real model, whose turn may end at the prompt or stop at an approval question first."""
        deadline = time.monotonic() + timeout
        while not any(self.seen.count(text.encode()) >= count for text, count in wanted):
            if time.monotonic() > deadline or self.proc.poll() is not None and not self._read(0.1):
                raise AssertionError(f"never saw any of {wanted!r}; screen:\n{self.seen.decode(errors='replace')}")
            self._read(0.5)
        return self.seen.decode(errors="replace")

    def _read(self, wait: float) -> bool:
        ready, _, _ = select.select([self.master], [], [], wait)
        if not ready:
            return False
        try:
            chunk = os.read(self.master, 65536)
        except OSError:
            return False
        self.seen += chunk
        return bool(chunk)

    def type(self, keys: bytes) -> None:
        os.write(self.master, keys)

    def wait_until_reading(self, timeout: float = 60) -> None:
        """Wait until the main thread sleeps in readline's select().

        Python's readline prints the prompt and only then enters select(); a SIGINT that lands in
        between trips Python's flag but interrupts nothing, and the select() then waits for the next
        key (CPython's ``readline_until_enter_or_signal`` checks signals only on EINTR). A person
        cannot type inside those microseconds; a test that types the moment it sees the prompt can,
        on a loaded machine, so it waits for the sleep first. Where there is no /proc, it returns."""
        wchan = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/wchan")
        deadline = time.monotonic() + timeout
        while wchan.exists() and time.monotonic() < deadline:
            try:
                if any(word in wchan.read_text() for word in ("poll", "select")):
                    return
            except OSError:
                return
            self._read(0.05)

    def exit_code(self, timeout: float = 60) -> int | None:
        """The exit status, or None if it did not exit in time (it is killed then)."""
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None and time.monotonic() < deadline:
            self._read(0.2)
        self._read(0.2)
        return self.close()

    def close(self) -> int | None:
        code = self.proc.poll()
        if code is None:
            self.proc.kill()
            self.proc.wait()
        try:
            os.close(self.master)
        except OSError:
            pass
        return code


@pytest.fixture
def terminal(tmp_path: Path, gemma3: Path) -> Iterator[Terminal]:
    term = Terminal(tmp_path)
    yield term
    term.close()


@pytest.mark.parametrize("key", [b"\x03", b"\x04"], ids=["ctrl-c", "ctrl-d"])
def test_ctrl_c_or_ctrl_d_at_the_prompt_leaves_cleanly(terminal: Terminal, key: bytes) -> None:
    term = terminal
    term.wait_for("you> ")
    term.wait_until_reading()
    term.type(key)
    assert term.exit_code() == 0
    screen = term.seen.decode(errors="replace")
    assert "Traceback" not in screen and "KeyboardInterrupt" not in screen
    assert screen.endswith("you> \r\n") or screen.endswith("you> ^C\r\n")  # the shell prompt starts on a new line


def test_ctrl_c_during_a_reply_returns_to_the_prompt_without_a_dangling_message(terminal: Terminal, tmp_path: Path) -> None:
    term = terminal
    term.wait_for("you> ")
    term.type(b"what is on my calendar tomorrow?\r")
    term.wait_for("thinking")
    term.type(b"\x03")
    term.wait_for("[interrupted")
    term.wait_for("you> ", timeout=60, count=2)  # the prompt again, ready for the next message
    term.type(b"\x04")
    assert term.exit_code() == 0
    assert "Traceback" not in term.seen.decode(errors="replace")
    with sqlite3.connect(tmp_path / "data" / "sessions.sqlite3") as db:
        history = [json.loads(m) for (m,) in db.execute("SELECT message FROM messages ORDER BY idx")]
    assert not history or history[-1]["role"] == "assistant"
    asked = {c["id"] for m in history for c in m.get("tool_calls") or []}
    assert asked == {m["tool_call_id"] for m in history if m["role"] == "tool"}


def test_the_llama_backend_streams_exactly_the_text_it_returns(smollm2: Path) -> None:
    """What the REPL shows live is the step's own text, piece by piece, one step at a time."""
    from agent.backends.llama import LlamaBackend

    class Recorder:
        def __init__(self) -> None:
            self.steps: list[list[str]] = []

        def start_step(self) -> None:
            self.steps.append([])

        def text(self, piece: str) -> None:
            self.steps[-1].append(piece)

    backend = LlamaBackend(smollm2, n_ctx=1024, n_threads=2)
    recorder = Recorder()
    backend.stream = recorder
    messages = [{"role": "user", "content": "Say hello."}]
    first = backend.complete(messages, [], max_tokens=12)
    second = backend.complete(messages, [], max_tokens=5)
    assert len(recorder.steps) == 2
    for pieces, completion in zip(recorder.steps, (first, second)):
        assert pieces and all(pieces)
        streamed = "".join(pieces)
        assert streamed.removesuffix("<|im_end|>") == completion.text  # an end marker is streamed, then cut
    assert second.finish_reason in ("length", "stop") and len(recorder.steps[1]) <= 5


def test_the_receipt_on_a_terminal_says_what_really_happened(tmp_path: Path) -> None:
    """The scripted model claims a deletion the user declined: the 📅 line under it says nothing
    changed; a created, a moved and a deleted event each get their line; a read-only turn none."""
    script = tmp_path / "script.json"
    script.write_text(json.dumps(receipt_script(), ensure_ascii=False), encoding="utf-8")
    term = Terminal(tmp_path, ["-m", "tests.repl_scripted", str(script)])
    try:
        term.wait_for("you> ")
        prompts, approvals = 1, 0
        for text, answer in (("book the dentist", None), ("remove the dentist", b"n"), ("move it to 5 pm", b"y"),
                             ("what is on friday?", None), ("drop it", b"y")):
            term.type(text.encode() + b"\r")
            if answer is not None:
                approvals += 1
                term.wait_for("Approve? [y/N] ", count=approvals)
                term.type(answer + b"\r")
            prompts += 1
            term.wait_for("you> ", count=prompts)
        term.type(b"\x04")
        assert term.exit_code() == 0
        screen = term.seen.decode(errors="replace")
        for receipt in RECEIPTS.values():
            assert screen.count(receipt) == 1, receipt
        claim = screen.index("일정을 삭제했어요.")
        assert claim < screen.index(RECEIPTS["remove"]) < screen.index("move it to 5 pm")
        read_only = screen[screen.index("what is on friday?"):screen.index("drop it")]
        assert "You have the dentist." in read_only and "📅" not in read_only
        assert "Traceback" not in screen
    finally:
        term.close()
