"""agent/sqlite.py on real files: one setup for every database, private files, numbered migrations."""

from __future__ import annotations

import os
import sqlite3
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from agent.sqlite import BUSY_TIMEOUT_S, Database, add_missing_columns, connect, split_sql

STEPS = [
    "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL);",
    "ALTER TABLE notes ADD COLUMN tag TEXT; INSERT INTO notes (body, tag) VALUES ('made by step 2; with a semicolon', 'x');",
]


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_every_connection_gets_wal_foreign_keys_full_sync_and_the_busy_timeout(tmp_path: Path) -> None:
    conn = connect(tmp_path / "a.sqlite3")
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
        assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
        assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == int(BUSY_TIMEOUT_S * 1000)
        assert conn.isolation_level is None  # transactions are explicit
    finally:
        conn.close()


def test_a_new_file_and_its_wal_are_owner_only_and_a_missing_dir_is_made_0700(tmp_path: Path) -> None:
    before = os.umask(0o022)  # a permissive umask: the modes must not depend on it
    try:
        db = Database(tmp_path / "private" / "a.sqlite3", STEPS)
        db.execute("INSERT INTO notes (body) VALUES ('x')")
        files = [tmp_path / "private" / name for name in ("a.sqlite3", "a.sqlite3-wal", "a.sqlite3-shm")]
        assert {p.name: oct(mode(p)) for p in files} == {p.name: "0o600" for p in files}
        assert oct(mode(tmp_path / "private")) == "0o700"
        db.close()
    finally:
        os.umask(before)


def test_an_existing_loose_file_is_tightened_but_an_existing_dir_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    path.write_bytes(b"")
    path.chmod(0o644)
    tmp_path.chmod(0o755)
    Database(path, STEPS).close()
    assert oct(mode(path)) == "0o600"
    assert oct(mode(tmp_path)) == "0o755"


def test_migrations_run_in_order_once_and_the_version_is_in_user_version(tmp_path: Path) -> None:
    path = tmp_path / "m.sqlite3"
    Database(path, STEPS[:1]).close()
    db = Database(path, STEPS)  # the program grew a step: only that one runs
    assert db.version == 2
    assert db.execute("SELECT body, tag FROM notes").fetchall() == [("made by step 2; with a semicolon", "x")]
    db.close()
    db = Database(path, STEPS)  # nothing pending: nothing runs again
    assert db.execute("SELECT COUNT(*) FROM notes").fetchone()[0] == 1
    db.close()
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA user_version").fetchone()[0] == 2


def test_a_failing_step_leaves_the_file_exactly_as_it_was(tmp_path: Path) -> None:
    path = tmp_path / "m.sqlite3"
    Database(path, STEPS[:1]).close()
    broken = [*STEPS, "CREATE TABLE half (id INTEGER); INSERT INTO nowhere VALUES (1);"]
    with pytest.raises(sqlite3.OperationalError, match="nowhere"):
        Database(path, broken)
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA user_version").fetchone()[0] == 1
        tables = {r[0] for r in raw.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        columns = {r[1] for r in raw.execute("PRAGMA table_info(notes)")}
    assert tables == {"notes"} and "tag" not in columns  # step 2 (which succeeded) was undone too


def test_a_step_that_leaves_dangling_references_is_refused_and_undone(tmp_path: Path) -> None:
    path = tmp_path / "fk.sqlite3"
    steps = [
        "CREATE TABLE parent (id INTEGER PRIMARY KEY); "
        "CREATE TABLE child (parent_id INTEGER REFERENCES parent(id)); INSERT INTO parent VALUES (1);"
        "INSERT INTO child VALUES (1);",
    ]
    Database(path, steps).close()
    with pytest.raises(RuntimeError, match="dangling"):
        Database(path, [*steps, "DELETE FROM parent;"])  # runs with foreign keys off, so only the check sees it
    db = Database(path, steps)
    assert db.execute("SELECT COUNT(*) FROM parent").fetchone()[0] == 1
    assert db.execute("PRAGMA foreign_keys").fetchone()[0] == 1  # back on after migrating
    db.close()


def test_a_file_from_a_newer_program_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "new.sqlite3"
    Database(path, STEPS).close()
    with pytest.raises(RuntimeError, match="newer than this program knows"):
        Database(path, STEPS[:1])
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA user_version").fetchone()[0] == 2


def test_legacy_version_lets_an_unversioned_file_continue_where_it_was(tmp_path: Path) -> None:
    path = tmp_path / "legacy.sqlite3"
    with sqlite3.connect(path) as raw:  # step 1 was applied by an older program that kept no version
        raw.execute(STEPS[0].rstrip(";"))
    db = Database(path, STEPS, legacy_version=lambda conn: 1)
    assert db.version == 2 and db.execute("SELECT COUNT(*) FROM notes").fetchone()[0] == 1
    db.close()


def test_a_function_step_sees_the_connection_and_add_missing_columns_adds_only_the_missing(tmp_path: Path) -> None:
    def adopt(conn: sqlite3.Connection) -> None:
        conn.execute("CREATE TABLE IF NOT EXISTS notes (id INTEGER PRIMARY KEY, body TEXT)")
        add_missing_columns(conn, "notes", {"body": "TEXT", "tag": "TEXT"})

    path = tmp_path / "f.sqlite3"
    with sqlite3.connect(path) as raw:
        raw.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
    db = Database(path, [adopt])
    assert [r[1] for r in db.execute("PRAGMA table_info(notes)")] == ["id", "body", "tag"]
    db.close()


def test_a_failed_transaction_rolls_back_and_nested_ones_join_the_outer(tmp_path: Path) -> None:
    db = Database(tmp_path / "t.sqlite3", STEPS[:1])
    with pytest.raises(KeyboardInterrupt):
        with db.transaction() as conn:
            conn.execute("INSERT INTO notes (body) VALUES ('lost')")
            with db.transaction():
                conn.execute("INSERT INTO notes (body) VALUES ('lost too')")
            raise KeyboardInterrupt
    assert not db.conn.in_transaction
    assert db.execute("SELECT COUNT(*) FROM notes").fetchone()[0] == 0
    with db.transaction() as conn:
        conn.execute("INSERT INTO notes (body) VALUES ('kept')")
    assert db.execute("SELECT body FROM notes").fetchall() == [("kept",)]
    db.close()


def test_writes_from_threads_and_a_second_connection_all_land(tmp_path: Path) -> None:
    path = tmp_path / "w.sqlite3"
    db = Database(path, STEPS[:1])
    other = Database(path, STEPS[:1])  # another process's connection, as far as SQLite knows

    def write(target: Database, tag: str) -> None:
        for i in range(20):
            with target.transaction() as conn:
                conn.execute("INSERT INTO notes (body) VALUES (?)", (f"{tag}{i}",))

    threads = [threading.Thread(target=write, args=(d, t)) for d, t in ((db, "a"), (db, "b"), (other, "c"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert db.execute("SELECT COUNT(*) FROM notes").fetchone()[0] == 60
    db.close()
    other.close()


def test_a_second_open_of_the_same_file_keeps_the_first_connections_commits_visible_to_other_processes(
    tmp_path: Path,
) -> None:
    """The inbox and the outbox open one file in one process. Opening it must not drop the first
    connection's POSIX locks, or a reader in another process deletes the live WAL on closing."""
    path = tmp_path / "shared.sqlite3"
    first = Database(path, STEPS[:1])
    second = Database(path, STEPS[:1])

    def count_elsewhere() -> int:
        code = f"import sqlite3; c = sqlite3.connect({str(path)!r}); print(c.execute('SELECT COUNT(*) FROM notes').fetchone()[0]); c.close()"
        return int(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)

    first.execute("INSERT INTO notes (body) VALUES ('one')")
    assert count_elsewhere() == 1
    first.execute("INSERT INTO notes (body) VALUES ('two')")
    second.execute("INSERT INTO notes (body) VALUES ('three')")
    assert count_elsewhere() == 3
    first.close()
    second.close()


def test_memory_databases_make_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    db = Database(":memory:", STEPS)
    assert db.version == 2
    db.close()
    assert list(tmp_path.iterdir()) == []


def test_split_sql_keeps_semicolons_inside_literals_and_comments() -> None:
    script = "CREATE TABLE t (a TEXT); -- a comment; still a comment\nINSERT INTO t VALUES ('x;y');"
    assert split_sql(script) == [
        "CREATE TABLE t (a TEXT);",
        "-- a comment; still a comment\nINSERT INTO t VALUES ('x;y');",
    ]
