"""The terminal REPL: ``python -m agent``. Readline editing, inline approvals, compact tool traces.

On a terminal the turn is shown live: a thinking indicator while the model works, the visible
part of its text as it is generated (``VisibleText`` hides reasoning and tool-call JSON), and
each tool call as it finishes. Piped, the REPL prints each finished turn at once, so a script
reads stable text.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any, Callable

from agent.approval import ApprovalRequest, ApproveAll, Approver, Decision, DenyAll
from agent.formats.chat_format import DEFAULT_FORMAT, ChatFormat, format_named, format_of
from agent.language import ENGLISH
from agent.records import CallStatus, StopReason, Turn
from agent.repl_help import help_text
from agent.runtime import Runtime
from agent.visible import QUESTION_LIMIT, visible_line, visible_text

CONVERSATION = "repl"

STOP_NOTES = {
    StopReason.STEP_BUDGET: "stopped: too many model steps for one message",
    StopReason.TOOL_CALL_BUDGET: "stopped: too many tool calls for one message",
    StopReason.REPEATED_FAILURE: "stopped: the same call kept failing",
    StopReason.NO_PROGRESS: "stopped: the model made no progress",
    StopReason.MODEL_ERROR: "stopped: the model failed",
    StopReason.INTERRUPTED: "interrupted",
    StopReason.CONTEXT_LIMIT: "stopped: the conversation is too long for the model's context; /new starts afresh",
    StopReason.CUT_OFF: "cut off: the reply reached the length limit before it ended",
}


class TerminalApprover:
    """Asks y/N on the terminal for the exact action; anything but a yes (one of ``yes_words``,
    the domain's language's: ``Language.yes_words``) is a no."""

    def __init__(self, ask: Callable[[str], str] = input, out: IO[str] = sys.stdout,
                 yes_words: frozenset[str] = ENGLISH.yes_words) -> None:
        self.ask = ask
        self.out = out
        self.yes_words = yes_words

    def decide(self, request: ApprovalRequest) -> Decision:
        try:
            answer = self.ask(f"  ⚠ {visible_line(request.description, QUESTION_LIMIT)}\n  Approve? [y/N] ")
        except EOFError:
            return Decision(False, "no answer")
        approved = answer.strip().lower() in self.yes_words
        return Decision(approved, "user approved" if approved else "user denied")


def format_call(name: str, arguments: Any, status: str, ok: bool, result: str) -> str:
    """One line per call; the model's arguments and the result hold outside text (titles), so
    each part is made visible and kept on the line (``agent.visible``)."""
    args = visible_line(json.dumps(arguments, ensure_ascii=False), 400)
    return f"  {'✓' if ok else '✗'} {visible_line(name, 80)}({args}) → {visible_line(status, 80)}: {visible_line(result, 200)}"


def stop_note(turn: Turn) -> str:
    note = STOP_NOTES.get(turn.stop_reason)
    return f"[{note}{': ' + turn.error if turn.error else ''}]" if note else ""


def format_turn(turn: Turn) -> str:
    """Each call on one line (name, arguments, outcome), then the reply, then the 📅 receipt."""
    lines = [format_call(c.name, c.arguments, c.status.value, c.status is CallStatus.OK, c.result) for c in turn.calls]
    if turn.reply:
        lines.append(turn.reply)
    if stop_note(turn):
        lines.append(stop_note(turn))
    if turn.receipt:
        lines.append(turn.receipt)
    return visible_text("\n".join(lines))




class VisibleText:
    """Turns raw model output, piece by piece, into the text a user should see as it streams.

    Drops ``<think>…</think>``, ``<tool_call>…</tool_call>`` and special tokens written as text
    (``<|im_end|>``); holds back a ``<`` until it is clear whether a tag starts there. Leading
    whitespace of a step is dropped. Never raises, whatever the pieces are. The tags are the
    model's chat format's (the backend's); the spans the user never sees are its reasoning and its
    call JSON (a call is shown as its own line), and its turn-end text is dropped like a stray tag.
    """

    def __init__(self, chat_format: ChatFormat | None = None) -> None:
        fmt = chat_format or format_named(DEFAULT_FORMAT)
        self.call_open = fmt.call_open
        self.hidden = {fmt.think_open: fmt.think_close, fmt.call_open: fmt.call_close}
        self.stray = (*self.hidden.values(), *fmt.stop_markers)
        self.reset()

    def reset(self) -> None:
        self._pending = ""
        self._closing: str | None = None
        self._started = False

    def feed(self, piece: str) -> str:
        self._pending += piece
        out: list[str] = []
        while self._pending:
            if self._closing is not None:
                end = self._pending.find(self._closing)
                if end < 0:  # keep only a tail that may begin the closing tag
                    self._pending = self._pending[-(len(self._closing) - 1):]
                    break
                self._pending = self._pending[end + len(self._closing):]
                self._closing = None
                continue
            lt = self._pending.find("<")
            if lt < 0:
                out.append(self._pending)
                self._pending = ""
                break
            out.append(self._pending[:lt])
            rest = self._pending[lt:]
            opened = next((tag for tag in self.hidden if rest.startswith(tag)), None)
            stray = next((tag for tag in self.stray if rest.startswith(tag)), None)
            if opened is not None:
                self._closing, self._pending = self.hidden[opened], rest[len(opened):]
            elif stray is not None:
                self._pending = rest[len(stray):]
            elif rest.startswith("<|") and "|>" in rest:
                self._pending = rest[rest.index("|>") + 2:]
            elif len(rest) < 16 and any(t.startswith(rest) for t in (*self.hidden, *self.stray, "<|")) or (
                rest.startswith("<|") and len(rest) < 32
            ):
                self._pending = rest  # might still become a tag: wait for the next piece
                break
            else:
                out.append("<")
                self._pending = rest[1:]
        text = "".join(out)
        if not self._started:
            text = text.lstrip()
            self._started = bool(text)
        return text

    def flush(self) -> str:
        """What is held back at the end of a step (a lone ``<`` that never became a tag)."""
        text = "" if self._closing is not None or self._pending.startswith("<|") else self._pending
        self._pending = ""
        return text


DIM, RESET, CLEAR_LINE = "\033[2m", "\033[0m", "\r\033[K"


class LiveView:
    """A turn as it happens, on a terminal: the indicator, streamed text, call lines.

    It is the backend's ``stream`` (``agent.backends.base.TextSink``) and the runtime's
    ``observe`` hook; the approver calls ``pause`` before it asks.
    """

    def __init__(self, out: IO[str], chat_format: ChatFormat | None = None) -> None:
        self.out = out
        self.filter = VisibleText(chat_format)
        self.call_open = self.filter.call_open
        self._indicator = False
        self._line_open = False
        self.step_shown = False  # the current step's text reached the screen
        self._calls: dict[str, tuple[str, Any]] = {}

    def _write(self, text: str) -> None:
        self.out.write(text)
        self.out.flush()

    def _show_indicator(self, what: str = "thinking") -> None:
        if not self._indicator and not self._line_open:
            self._write(f"{DIM}… {what}{RESET}")
            self._indicator = True

    def pause(self) -> None:
        """Clear the indicator and end an open line (before a question or a printed line)."""
        if self._indicator:
            self._write(CLEAR_LINE)
            self._indicator = False
        if self._line_open:
            self._write("\n")
            self._line_open = False

    def begin_turn(self) -> None:
        self._calls.clear()
        self.step_shown = False
        self._show_indicator()

    # TextSink
    def start_step(self) -> None:
        self._emit(self.filter.flush())
        self.filter.reset()
        self.step_shown = False
        self._show_indicator()

    def text(self, piece: str) -> None:
        if self.call_open in piece and not self._line_open:
            self.pause()
            self._show_indicator("calling a tool")
        self._emit(self.filter.feed(piece))

    def _emit(self, visible: str) -> None:
        visible = visible_text(visible)  # the model may copy an ESC or a bidi override from a title
        if not visible:
            return
        if self._indicator:
            self._write(CLEAR_LINE)
            self._indicator = False
        self._write(visible)
        self._line_open = True
        self.step_shown = True

    # Runtime.handle(observe=...)
    def message(self, message: dict[str, Any]) -> None:
        for call in message.get("tool_calls") or []:
            fn = call.get("function", {})
            try:
                args = json.loads(fn.get("arguments") or "{}")
            except ValueError:
                args = fn.get("arguments")
            self._calls[call.get("id", "")] = (fn.get("name", "?"), args)
        if message.get("role") == "tool":
            name, args = self._calls.get(message.get("tool_call_id", ""), (message.get("name", "?"), {}))
            content = str(message.get("content", ""))
            try:
                body = json.loads(content)
            except ValueError:
                body = {}
            ok = bool(isinstance(body, dict) and body.get("ok"))
            status = "ok" if ok else str(body.get("error", "failed")) if isinstance(body, dict) else "failed"
            self.pause()
            self._write(format_call(name, args, status, ok, content) + "\n")

    def end_turn(self, turn: Turn | None) -> None:
        self._emit(self.filter.flush())
        self.pause()
        if turn is None:
            return
        if turn.reply and not self.step_shown:  # not streamed (another backend, or a cut-off think)
            self._write(visible_text(turn.reply) + "\n")
        if stop_note(turn):
            self._write(visible_text(stop_note(turn)) + "\n")
        if turn.receipt:  # what really happened, last, whatever the reply said
            self._write(visible_text(turn.receipt) + "\n")


def banner(runtime: Runtime, tz: str | None) -> list[str]:
    """What a user should know before typing: which model, which time zone, which conversation."""
    ident = runtime.agent.backend.identity()
    model_path, adapter = ident.get("model_path"), ident.get("adapter_path")
    if ident.get("backend") == "llama" and model_path:
        model = f"model {Path(model_path).name}" + (f" + adapter {Path(adapter).name}" if adapter else " (no adapter)")
    else:
        model = f"backend {ident.get('backend')}" + (f" ({model_path})" if model_path else "")
    lines = [f"iljeong — your calendar assistant: {model}"]
    if tz:
        lines.append(f"time zone {tz} (--tz or AGENT_TZ changes it)")
    count = len(runtime.sessions.history(runtime.sessions.current(CONVERSATION)))
    lines.append(f"continuing your conversation: {count} messages; /new starts fresh" if count else "a new conversation")
    remote = runtime.domain.remote
    if remote is not None:
        lines.append(visible_line(remote.status(), None))  # e.g. "iCloud calendar sync: offline since 14:02 (...), 2 changes waiting"
    lines.append("/help for commands, /quit or Ctrl-D to leave")
    return lines


def _enable_history(path: Path) -> None:
    try:
        import readline
    except ImportError:  # Windows without pyreadline: plain input still works
        return
    try:
        readline.read_history_file(path)
    except OSError:
        pass
    import atexit

    atexit.register(lambda: _save_history(readline, path))


def _save_history(readline_module, path: Path) -> None:  # type: ignore[no-untyped-def]
    try:
        readline_module.write_history_file(path)
    except OSError:
        pass


def system_clock() -> datetime:
    return datetime.now(timezone.utc)


class Terminated(KeyboardInterrupt):
    """SIGTERM (a logout, ``kill``): ends the REPL the way Ctrl-C ends a turn -- the turn in hand
    is closed off in the history (``Runtime.handle``) -- and then leaves, so that the caller's
    ``runtime.close()`` runs and the chat's state is kept for the next start."""


def _terminate(signum: int, frame: Any) -> None:
    raise Terminated()


def _on_sigterm() -> Any:
    """Install the SIGTERM handler (main thread only); returns the previous one to restore."""
    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGTERM, _terminate)


def show_due_reminders(runtime: Runtime, out: IO[str], clock: Callable[[], datetime] = system_clock) -> int:
    """Print the domain's due reminders (each once: claimed in the store first); how many."""
    notifier = runtime.domain.notifier
    if notifier is None:
        return 0
    now = clock()
    shown = 0
    for notice in notifier.due(now):
        if notifier.claim(notice, now):
            print(visible_text(notice.text), file=out, flush=True)
            shown += 1
    return shown


def run_repl(
    runtime: Runtime,
    *,
    yes: bool = False,
    stdin: IO[str] = sys.stdin,
    out: IO[str] = sys.stdout,
    clock: Callable[[], datetime] = system_clock,
    tz: str | None = None,
) -> int:
    """Read lines until EOF, /quit or Ctrl-C at the prompt (all exit 0)."""
    interactive = stdin.isatty()
    live = LiveView(out, format_of(runtime.agent.backend)) if interactive else None
    approver: Approver
    if yes:
        approver = ApproveAll()
    elif live is not None:
        def ask(question: str) -> str:
            live.pause()
            return input(question)

        approver = TerminalApprover(ask=ask, out=out, yes_words=runtime.domain.language.yes_words)
        _enable_history(runtime.sessions.path.parent / "repl_history")
    else:
        approver = DenyAll()

    def read() -> str | None:
        if interactive:
            try:
                return input("you> ")
            except (EOFError, KeyboardInterrupt):  # Ctrl-D / Ctrl-C / SIGTERM at the prompt: leave cleanly
                print(file=out)
                return None
        try:
            line = stdin.readline()
        except Terminated:
            return None
        return None if line == "" else line.rstrip("\n")

    if runtime.domain.remote is not None:
        runtime.domain.remote.start()  # the first sync runs while the banner prints
    print("\n".join(banner(runtime, tz)), file=out, flush=True)
    backend = runtime.agent.backend
    streams = live is not None and hasattr(backend, "stream")
    if streams:
        backend.stream = live  # type: ignore[attr-defined]
    previous_sigterm = _on_sigterm()
    try:
        while True:
            show_due_reminders(runtime, out, clock)  # between turns: a reminder never cuts into a turn
            line = read()
            if line is None:
                break
            text = line.strip()
            if not text:
                continue
            if text.startswith("/"):
                if handle_command(text, runtime, out, clock) == "quit":
                    break
                continue
            if live is None:
                try:
                    print(format_turn(runtime.handle(CONVERSATION, text, approver)), file=out, flush=True)
                except Terminated:
                    break
                continue
            try:
                live.begin_turn()  # inside: a Ctrl-C that lands while "thinking" is written is this turn's
                turn = runtime.handle(CONVERSATION, text, approver, observe=live.message)
            except KeyboardInterrupt as exc:
                live.end_turn(None)
                print("[interrupted: the reply was dropped; anything already done stays done]", file=out, flush=True)
                if isinstance(exc, Terminated):
                    break
                continue
            live.end_turn(turn)
    except Terminated:  # between turns (a reminder, a command): leave as after /quit
        pass
    finally:
        if previous_sigterm is not None:
            signal.signal(signal.SIGTERM, previous_sigterm)
        if streams:
            backend.stream = None  # type: ignore[attr-defined]
    return 0


def handle_command(
    text: str, runtime: Runtime, out: IO[str], clock: Callable[[], datetime] = system_clock
) -> str | None:
    command, _, arg = text[1:].partition(" ")
    if command in ("quit", "exit", "q"):
        return "quit"
    if command in ("new", "reset"):
        runtime.new_session(CONVERSATION)
        print("(new conversation)", file=out)
    elif command == "tools":
        for tool in runtime.domain.registry.tools:
            flag = " [asks first]" if tool.destructive else ""
            print(f"  {tool.name}{flag}: {tool.description.splitlines()[0]}", file=out)
    elif command in ("events", "today"):
        today = runtime.domain.commands.get("today")
        print(visible_text(today(arg.strip())) if today else "This domain has no event listing.", file=out)
    elif command == "week":
        week = runtime.domain.commands.get("week")
        print(visible_text(week(arg.strip())) if week else "This domain has no week view.", file=out)
    elif command == "reminders":
        notifier = runtime.domain.notifier
        print(visible_text(notifier.upcoming(clock())) if notifier else "This domain has no reminders.", file=out)
    elif command == "help":
        print(help_text(runtime.domain.language), file=out)
    elif command in runtime.domain.commands:  # the domain's own, e.g. /sync
        print(visible_text(runtime.domain.commands[command](arg.strip())), file=out)
    else:
        print(f"Unknown command /{visible_line(command, 40)}. {help_text(runtime.domain.language)}", file=out)
    return None
