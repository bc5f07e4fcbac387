"""A tiny domain for the bot's end-to-end tests: events by title, one destructive tool.

The bot process (and the REPL) load it through ``domain = "tests.toy_domain"`` in the
config file, so the tests do not depend on the calendar domain's wording. The store is a
SQLite file in the data dir, so a test can check what a turn really changed. ``TOY_RULES``
is the scripted policy that drives it (``add X`` creates, ``delete X`` asks, then deletes),
shared by the scripted bot and the strict OpenAI server's toy policy.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from pydantic import BaseModel

from agent.domain import Domain
from agent.tools import Registry, Tool, ToolResult

STORE_NAME = "toy_events.sqlite3"

CALL = '<tool_call>{{"name": "{tool}", "arguments": {{"title": "{{title}}"}}}}</tool_call>'
TOY_RULES = [
    {"match": r"^add (?P<title>.+)$", "steps": [CALL.format(tool="create_event"), "Created: {title}"]},
    {"match": r"^delete (?P<title>.+)$", "steps": [CALL.format(tool="delete_event"), "Result: {result}"]},
]
ECHO = ["You said: {user}"]  # the default reply of every toy script


class CreateArgs(BaseModel):
    title: str
    start: str = "12:00"


class DeleteArgs(BaseModel):
    title: str


def titles(data_dir: Path) -> list[str]:
    """The titles stored in ``data_dir`` (read by tests)."""
    path = data_dir / STORE_NAME
    if not path.exists():
        return []
    with sqlite3.connect(path) as conn:
        return [r[0] for r in conn.execute("SELECT title FROM events ORDER BY rowid")]


def load_domain(settings) -> Domain:
    conn = sqlite3.connect(settings.data_dir / STORE_NAME, check_same_thread=False, isolation_level=None)
    conn.execute("CREATE TABLE IF NOT EXISTS events (title TEXT NOT NULL, start TEXT NOT NULL)")

    def create(args: CreateArgs) -> ToolResult:
        conn.execute("INSERT INTO events VALUES (?, ?)", (args.title, args.start))
        return ToolResult.success({"title": args.title, "start": args.start}, "created")

    def delete(args: DeleteArgs) -> ToolResult:
        gone = conn.execute("DELETE FROM events WHERE title = ?", (args.title,)).rowcount
        if not gone:
            return ToolResult.failure("not_found", f"no event titled {args.title!r}")
        return ToolResult.success({"deleted": args.title}, "deleted")

    def today(_argument: str) -> str:
        rows = conn.execute("SELECT start, title FROM events ORDER BY start, rowid").fetchall()
        return "Today:\n" + "\n".join(f"{s} {t}" for s, t in rows) if rows else "Nothing today."

    def boom(_argument: str) -> str:
        raise RuntimeError("toy command exploded")

    registry = Registry.of([
        Tool("create_event", "Create an event.", CreateArgs, create),
        Tool("delete_event", "Delete an event by title.", DeleteArgs, delete, destructive=True,
             describe=lambda a: f"Delete the event '{a.title}'"),
    ])
    return Domain("toy", registry, "You manage a toy calendar.", {"today": today, "boom": boom},
                  descriptions={"today": "today's events"}, close=conn.close)
