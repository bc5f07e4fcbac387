"""The terminal REPL: ``python -m agent``. Readline editing, inline approvals, compact tool traces."""

from __future__ import annotations

import json
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Callable

from agent.approval import ApprovalRequest, ApproveAll, Approver, Decision, DenyAll
from agent.records import CallStatus, StopReason, Turn
from agent.runtime import Runtime

CONVERSATION = "repl"
HELP = """Commands:
  /new            start a fresh conversation (the calendar is kept)
  /reset          same as /new
  /tools          list the tools the model can call
  /events [DATE]  events for today or DATE (YYYY-MM-DD), without the model
  /reminders      upcoming reminders (due ones are shown between messages)
  /help           this text
  /quit           leave (Ctrl-D works too)
Anything else is sent to the assistant."""

STOP_NOTES = {
    StopReason.STEP_BUDGET: "stopped: too many model steps for one message",
    StopReason.TOOL_CALL_BUDGET: "stopped: too many tool calls for one message",
    StopReason.REPEATED_FAILURE: "stopped: the same call kept failing",
    StopReason.NO_PROGRESS: "stopped: the model made no progress",
    StopReason.MODEL_ERROR: "stopped: the model failed",
    StopReason.INTERRUPTED: "interrupted",
    StopReason.CONTEXT_LIMIT: "stopped: the conversation is too long for the model's context; /new starts afresh",
}


class TerminalApprover:
    """Asks y/N on the terminal for the exact action; anything but yes is a no."""

    def __init__(self, ask: Callable[[str], str] = input, out: IO[str] = sys.stdout) -> None:
        self.ask = ask
        self.out = out

    def decide(self, request: ApprovalRequest) -> Decision:
        try:
            answer = self.ask(f"  ⚠ {request.description}\n  Approve? [y/N] ")
        except EOFError:
            return Decision(False, "no answer")
        approved = answer.strip().lower() in ("y", "yes", "예", "네", "ㅇ")
        return Decision(approved, "user approved" if approved else "user denied")


def format_turn(turn: Turn) -> str:
    """Each call on one line (name, arguments, outcome), then the reply."""
    lines = []
    for call in turn.calls:
        args = json.dumps(call.arguments, ensure_ascii=False)
        mark = "✓" if call.status is CallStatus.OK else "✗"
        result = call.result if len(call.result) <= 200 else call.result[:199] + "…"
        lines.append(f"  {mark} {call.name}({args}) → {call.status.value}: {result}")
    if turn.reply:
        lines.append(turn.reply)
    note = STOP_NOTES.get(turn.stop_reason)
    if note:
        lines.append(f"[{note}{': ' + turn.error if turn.error else ''}]")
    return "\n".join(lines)


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


def show_due_reminders(runtime: Runtime, out: IO[str], clock: Callable[[], datetime] = system_clock) -> int:
    """Print the domain's due reminders (each once: claimed in the store first); how many."""
    notifier = runtime.domain.notifier
    if notifier is None:
        return 0
    now = clock()
    shown = 0
    for notice in notifier.due(now):
        if notifier.claim(notice, now):
            print(notice.text, file=out, flush=True)
            shown += 1
    return shown


def run_repl(
    runtime: Runtime,
    *,
    yes: bool = False,
    stdin: IO[str] = sys.stdin,
    out: IO[str] = sys.stdout,
    clock: Callable[[], datetime] = system_clock,
) -> int:
    interactive = stdin.isatty()
    approver: Approver
    if yes:
        approver = ApproveAll()
    elif interactive:
        approver = TerminalApprover(out=out)
        _enable_history(runtime.sessions.path.parent / "repl_history")
    else:
        approver = DenyAll()

    def read() -> str | None:
        if interactive:
            try:
                return input("you> ")
            except EOFError:
                return None
        line = stdin.readline()
        return None if line == "" else line.rstrip("\n")

    if interactive:
        print("iljeong — your calendar assistant. /help for commands, /quit to leave.", file=out)
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
        try:
            turn = runtime.handle(CONVERSATION, text, approver)
        except KeyboardInterrupt:
            print("[interrupted]", file=out)
            continue
        print(format_turn(turn), file=out, flush=True)
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
    elif command == "events":
        today = runtime.domain.commands.get("today")
        print(today(arg.strip()) if today else "This domain has no event listing.", file=out)
    elif command == "reminders":
        notifier = runtime.domain.notifier
        print(notifier.upcoming(clock()) if notifier else "This domain has no reminders.", file=out)
    elif command == "help":
        print(HELP, file=out)
    else:
        print(f"Unknown command /{command}. {HELP}", file=out)
    return None
