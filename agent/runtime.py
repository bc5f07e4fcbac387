"""What a frontend (REPL, bot) holds: the agent plus the session store and trajectory log.

``Runtime.handle`` is the single entry point for a user's message: it loads the session,
stamps the message with the time it was sent, persists it before the model sees it (so a
crash loses nothing), runs the loop, persists every produced message as it appears, and logs
the turn. The system prompt holds only the date, and the history is trimmed in blocks
(``agent.history``), so the prompt up to the newest user message is the previous turn's
prompt and reply, byte for byte, and llama.cpp keeps it cached.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Callable

from agent.approval import Approver
from agent.domain import Domain
from agent.history import DEFAULT_HISTORY_TURNS, recent_turns
from agent.loop import Agent
from agent.receipt import DEFAULT_RECEIPT, receipt_line
from agent.records import Turn
from agent.sessions import SessionStore
from agent.trajectory import TrajectoryLog
from agent.tools import ToolResult


@dataclass
class Runtime:
    agent: Agent
    domain: Domain
    sessions: SessionStore
    log: TrajectoryLog
    system_prompt: Callable[[], str]
    history_turns: int = DEFAULT_HISTORY_TURNS
    # Earlier turns dropped at once when the kept ones pass ``history_turns`` (``agent.history``);
    # None: two thirds of the window. 1 is a sliding window, which breaks the cache on every turn.
    history_block: int | None = None
    # The user's text as it is stored and shown to the model: stamped with the local time it
    # was sent (``agent.prompt.stamp_user_text``; ``agent.app`` builds it). None: stored as typed.
    stamp_user: Callable[[str], str] | None = None
    # When the turn ends with the domain's 📅 receipt line (``agent.receipt``: on, off, changes).
    receipt: str = DEFAULT_RECEIPT

    def handle(
        self,
        conversation: str,
        text: str,
        approver: Approver,
        cancel: threading.Event | None = None,
        observe: Callable[[dict[str, Any]], None] | None = None,
    ) -> Turn:
        """``observe`` sees each produced message as it is stored (the REPL prints calls live).

        A KeyboardInterrupt (Ctrl-C in the REPL) propagates, but first the stored history is
        closed off, so the next turn does not continue a half-finished one (see ``_close_interrupted``).
        """
        session_id = self.sessions.current(conversation)
        history = self.sessions.history(session_id)
        user = {"role": "user", "content": self.stamp_user(text) if self.stamp_user else text}
        produced: list[dict[str, Any]] = []

        def store(message: dict[str, Any]) -> None:
            self.sessions.append(session_id, message)
            produced.append(message)
            if observe is not None:
                observe(message)

        # The user message is stored inside the try: a Ctrl-C that lands just after its commit
        # (the REPL shows "thinking" before this call; a durable commit waits for the disk)
        # must close it off too, not leave it dangling.
        remote = self.domain.remote
        if remote is not None:
            remote.before_turn()  # bounded: a stale copy is refreshed, a dead server is not waited on
        try:
            self.sessions.append(session_id, user)
            messages = [{"role": "system", "content": self.system_prompt()}]
            messages += recent_turns(history, self.history_turns, self.history_block) + [user]
            turn = self.agent.run_turn(messages, approver, session_id=session_id, cancel=cancel, on_message=store)
        except KeyboardInterrupt:
            self._close_interrupted(session_id, len(history), produced)
            raise
        turn.receipt = receipt_line(self.domain.receipt, turn, self.receipt)  # logged with the turn
        if remote is not None:
            told = remote.after_turn()  # sends what the turn changed; what the user must hear of it
            if told:
                turn.receipt = "\n".join(([turn.receipt] if turn.receipt else []) + told)
        self.log.record(turn, self.agent.backend.identity(), (self.history_turns, self.history_block))
        return turn

    def _close_interrupted(self, session_id: str, before: int, produced: list[dict[str, Any]]) -> None:
        """After Ctrl-C: if no tool ran, the turn never happened (its user message goes too);
        otherwise every call left unanswered gets an "interrupted" result and the turn ends with
        an assistant note, so the history stays well-formed and records what was done."""
        if not any(m.get("role") == "tool" for m in produced):
            self.sessions.truncate(session_id, before)
            return
        answered = {m.get("tool_call_id") for m in produced if m.get("role") == "tool"}
        for message in produced:
            for call in message.get("tool_calls") or []:
                if call["id"] not in answered:
                    result = ToolResult.failure("interrupted", "Interrupted by the user.").to_text()
                    self.sessions.append(session_id, {"role": "tool", "tool_call_id": call["id"],
                                                      "name": call["function"]["name"], "content": result})
        self.sessions.append(session_id, {"role": "assistant", "content": "(interrupted by the user)"})

    def new_session(self, conversation: str) -> str:
        return self.sessions.start_new(conversation)

    def warm_up(self, background: bool = True) -> None:
        """Before the first message: a backend that keeps states on disk (the llama backend with a
        state dir) loads the static prefix -- this system prompt and tool block -- or evaluates
        and saves it, so the first reply after a restart evaluates only the new message."""
        warm = getattr(self.agent.backend, "warm_up", None)
        if warm is not None:
            warm([{"role": "system", "content": self.system_prompt()}], self.agent.registry.schemas(),
                 background=background)

    def close(self) -> None:
        """A clean shutdown: the backend keeps each chat's state for the next start, if it can."""
        save = getattr(self.agent.backend, "save_states", None)
        if save is not None:
            save()
        self.sessions.close()
        self.log.close()
        self.domain.close()
