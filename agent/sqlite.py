"""One way to open a SQLite file: private, WAL, foreign keys, one durability rule, migrations.

Every database of the program (the calendar, sessions, trajectories, the bot's inbox and
outbox) opens through ``Database``, so they cannot drift apart again. Before this module
the calendar and the inbox synced with ``synchronous=FULL`` and the sessions (and, through
the same helper, the trajectory log) with ``NORMAL``.

The one rule is ``synchronous=FULL``: every COMMIT is on disk before it returns. In WAL mode
``NORMAL`` never corrupts a file, but a power cut can roll back the last commits; each of these
files records something the program has already acted on -- a tool call reported as done, a
Telegram update acknowledged (Telegram will not send it again), a reply or reminder promised,
a message the model will be shown again -- so losing a commit is losing data, not only time.
The cost is one fsync of the WAL per commit, and the program commits once per message, tool
call and turn: on the Linux VM this was measured on, a commit took ~8 ms instead of ~0.02 ms,
and a scripted six-step turn (five calendar writes) 60-200 ms instead of ~30 ms -- small next
to the model's seconds per step. (On macOS SQLite's FULL is a plain fsync, much cheaper.)

Files are owner-only: a new file is created 0600 (its ``-wal`` and ``-shm`` files inherit that
mode from it), an existing one is tightened to 0600, and a missing parent directory is created
0700. A directory that already exists is left alone: it may be one the user chose (``bot run``
tightens its own data dir, see ``bot.run.secure_data_dir``).

Migrations are numbered by position: ``migrations[i]`` takes a file from version ``i`` to
``i + 1``, and the version lives in the file header (``PRAGMA user_version``). Never edit a
released step; append one. All pending steps run in one transaction, with foreign keys off (so
a table rebuild does not cascade, SQLite's documented procedure) and a foreign-key check
before the commit: a file is either fully migrated or untouched.

This module is generic: it knows no table of any domain.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence, Union

SYNCHRONOUS = "FULL"  # the one durability rule (see the module docstring)
BUSY_TIMEOUT_S = 30.0  # a writer in another process (the bot while the REPL runs) is waited for
MEMORY = ":memory:"  # SQLite's name for a database that is no file (scenarios, tests)
FILE_MODE = 0o600
DIR_MODE = 0o700

# A step is SQL (one or more statements) or a function given the connection, for a step that
# must look before it changes (e.g. add a column only where an older file lacks it).
Migration = Union[str, Callable[[sqlite3.Connection], None]]


def _private_file(path: Path) -> None:
    """Create ``path`` 0600 if missing (and its parents 0700); tighten it and its WAL files if loose.

    An existing file is never opened here, only chmod-ed: closing any descriptor of a file drops
    every POSIX lock this process holds on it, including those of a SQLite connection already
    open on it (the inbox's, when the outbox opens the same file). Another process then takes
    itself for the last connection and deletes the WAL that connection is still writing to:
    its commits from then on are lost. (SQLite's "How To Corrupt" page, 2.2.)
    """
    if not path.parent.is_dir():
        path.parent.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
    try:
        os.close(os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, FILE_MODE))
    except FileExistsError:
        pass
    for candidate in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        try:
            mode = stat.S_IMODE(candidate.stat().st_mode)
        except FileNotFoundError:
            continue
        if mode & 0o077:
            candidate.chmod(mode & 0o700)


def connect(path: Path | str) -> sqlite3.Connection:
    """A connection set up by the rules above, usable from any thread (callers serialise).

    ``isolation_level=None``: nothing is implicit, callers say ``BEGIN``/``COMMIT`` (see
    ``Database.transaction``).
    """
    path = Path(path)
    if str(path) != MEMORY:
        _private_file(path)
    conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute(f"PRAGMA synchronous = {SYNCHRONOUS}")
    return conn


def split_sql(script: str) -> list[str]:
    """The statements of a script, split where SQLite says a statement is complete.

    ``executescript`` cannot be used inside a transaction (it commits first), so a step's
    statements are run one by one; ``complete_statement`` keeps a ``;`` inside a literal or a
    comment from splitting a statement.
    """
    statements, buffer = [], ""
    for piece in script.split(";"):
        buffer += piece + ";"
        if sqlite3.complete_statement(buffer):
            if buffer.strip(" \t\r\n;"):
                statements.append(buffer.strip())
            buffer = ""
    if buffer.strip(" \t\r\n;"):
        statements.append(buffer.strip().rstrip(";"))
    return statements


class Database:
    """One SQLite file behind one connection and one (re-entrant) lock, migrated on open.

    ``legacy_version`` reads the version of a file written before the program kept it in
    ``user_version`` (it is asked only while ``user_version`` is 0), so such a file continues
    from where it was instead of being migrated from scratch.
    """

    def __init__(
        self,
        path: Path | str,
        migrations: Sequence[Migration],
        *,
        legacy_version: Callable[[sqlite3.Connection], int] | None = None,
    ) -> None:
        self.path = Path(path)
        self.lock = threading.RLock()
        self.conn = connect(self.path)
        self._depth = 0
        try:
            self._migrate(migrations, legacy_version)
        except BaseException:
            self.conn.close()
            raise

    @property
    def version(self) -> int:
        return int(self.fetchone("PRAGMA user_version")[0])

    def execute(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> sqlite3.Cursor:
        """One statement under the lock (a write on its own is its own transaction); read rows
        with ``fetchall``/``fetchone``, which fetch them before the lock is let go."""
        with self.lock:
            return self.conn.execute(sql, params)

    def fetchall(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> list[Any]:
        with self.lock:
            return self.conn.execute(sql, params).fetchall()

    def fetchone(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> Any:
        with self.lock:
            return self.conn.execute(sql, params).fetchone()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """BEGIN IMMEDIATE … COMMIT, or ROLLBACK on any exception (a Ctrl-C too, so the shared
        connection is never left inside a transaction nobody commits). Nested calls join the
        outer one."""
        with self.lock:
            if self._depth:
                self._depth += 1
                try:
                    yield self.conn
                finally:
                    self._depth -= 1
                return
            self.conn.execute("BEGIN IMMEDIATE")
            self._depth = 1
            try:
                yield self.conn
            except BaseException:
                self._depth = 0
                self.conn.execute("ROLLBACK")
                raise
            self._depth = 0
            try:
                self.conn.execute("COMMIT")
            except BaseException:
                if self.conn.in_transaction:
                    self.conn.execute("ROLLBACK")
                raise

    def close(self) -> None:
        with self.lock:
            self.conn.close()

    def _migrate(
        self, migrations: Sequence[Migration], legacy_version: Callable[[sqlite3.Connection], int] | None
    ) -> None:
        target = len(migrations)
        # Foreign keys cannot change inside a transaction: off before BEGIN, on after the end.
        self.conn.execute("PRAGMA foreign_keys = OFF")
        try:
            with self.transaction() as conn:
                current = int(conn.execute("PRAGMA user_version").fetchone()[0])
                if current == 0 and legacy_version is not None:
                    current = legacy_version(conn)
                if current > target:
                    raise RuntimeError(
                        f"{self.path}: schema version {current} is newer than this program knows ({target})"
                    )
                if current == target:
                    return
                for step in migrations[current:]:
                    if callable(step):
                        step(conn)
                    else:
                        for statement in split_sql(step):
                            conn.execute(statement)
                broken = conn.execute("PRAGMA foreign_key_check").fetchall()
                if broken:
                    raise RuntimeError(
                        f"{self.path}: migration left {len(broken)} dangling references; nothing was changed"
                    )
                conn.execute(f"PRAGMA user_version = {int(target)}")
        finally:
            self.conn.execute("PRAGMA foreign_keys = ON")


def add_missing_columns(conn: sqlite3.Connection, table: str, columns: dict[str, str]) -> None:
    """``ALTER TABLE … ADD COLUMN`` for each of ``columns`` the table lacks (for files that
    predate numbered migrations, whose columns depend on which release wrote them)."""
    present = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
    for name, kind in columns.items():
        if name not in present:
            conn.execute(f"ALTER TABLE {table} ADD COLUMN {name} {kind}")
