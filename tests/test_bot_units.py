"""The bot's small pure parts: splitting, callback data, access rules, scripted rules, inbox."""

from __future__ import annotations

from pathlib import Path

from bot.access import Access
from bot.approvals import callback_data, parse_callback_data
from bot.inbox import Inbox
from bot.scripted import rule_script
from bot.text import split_message


def test_split_prefers_paragraphs_then_lines_then_words() -> None:
    paragraphs = ["a" * 3000, "b" * 3000, "c" * 100]
    assert split_message("\n\n".join(paragraphs)) == ["a" * 3000, "b" * 3000 + "\n\n" + "c" * 100]
    lines = "\n".join(["x" * 1000] * 5)
    assert [len(p) for p in split_message(lines)] == [4 * 1000 + 3, 1000]
    assert split_message("y" * 5000) == ["y" * 4096, "y" * 904]
    assert split_message("   ") == []
    assert split_message("short") == ["short"]


def test_callback_data_is_short_and_round_trips() -> None:
    data = callback_data("A" * 22, "y")
    assert len(data.encode()) <= 64 and parse_callback_data(data) == ("A" * 22, "y")
    for bad in (None, "", "ap:x", "ap:x:maybe", "zz:x:y", "ap:x:y:z"):
        assert parse_callback_data(bad) is None


def test_access_rules() -> None:
    access = Access(users=frozenset({1}), chats=frozenset({-5, 7}))
    assert access.allows(1, "private", 1)
    assert access.allows(7, "private", 7)  # a private chat listed by its chat id
    assert not access.allows(2, "private", 2)
    assert not access.allows(-9, "group", 1)  # unlisted group, even for a listed user
    assert access.allows(-5, "supergroup", 1)
    assert not access.allows(-5, "group", 2)  # listed group, unlisted user
    assert not Access(frozenset(), frozenset({-5})).allows(-5, "group", 2)  # a group without users admits nobody
    assert "TELEGRAM_ALLOWED_USERS" in Access(frozenset(), frozenset({-5})).refusal(-5, "group")
    assert not access.allows(1, "private", None)


def test_rule_script_picks_rule_step_and_fills_placeholders() -> None:
    script = rule_script({
        "rules": [{"match": r"^add (?P<title>.+)$", "steps": ["call {title}", "done: {result}"]}],
        "default": ["echo {user}"],
    })
    history = [{"role": "system", "content": "s"}, {"role": "user", "content": "add Tea"}]
    assert script(history) == "call Tea"
    history += [{"role": "assistant", "content": "call Tea"}, {"role": "tool", "content": "ok"}]
    assert script(history) == "done: ok"
    assert script([{"role": "user", "content": "hi"}]) == "echo hi"


def test_inbox_records_once_and_survives_reopening(tmp_path: Path) -> None:
    path = tmp_path / "inbox.sqlite3"
    inbox = Inbox(path)
    assert inbox.next_offset() is None
    assert inbox.record(10, {"update_id": 10}) and not inbox.record(10, {"update_id": 10})
    assert inbox.record(11, {"update_id": 11})
    inbox.done(10)
    inbox.close()
    again = Inbox(path)
    assert again.pending() == [(11, {"update_id": 11})]
    assert again.next_offset() == 12
    again.close()


def test_clean_replaces_lone_surrogates_and_keeps_real_characters() -> None:
    from bot.inbox import clean

    body = {"text": "a\ud800b 😀 한글", "list": ["\udfff"], "\ud83d": 1}
    assert clean(body) == {"text": "a\ufffdb 😀 한글", "list": ["\ufffd"], "\ufffd": 1}


def test_inbox_stores_a_poisoned_update_and_keeps_why_it_failed(tmp_path: Path) -> None:
    inbox = Inbox(tmp_path / "inbox.sqlite3")
    assert inbox.record(5, {"update_id": 5, "message": {"text": "\ud800"}})
    inbox.failed(5, "unreadable update: TypeError: missing persistent_id")
    inbox.done(5)  # a later "done" does not hide the failure
    assert inbox.state(5) == ("failed", "unreadable update: TypeError: missing persistent_id")
    assert inbox.pending() == []
    inbox.close()


def test_a_refused_update_keeps_its_id_and_times_but_not_the_strangers_text(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "inbox.sqlite3"
    inbox = Inbox(path)
    stranger = {"update_id": 7, "message": {"text": "my bank pin is 4921", "from": {"id": 333}}}
    assert inbox.record(7, stranger)
    inbox.refused(7)
    assert inbox.state(7) == ("refused", None) and inbox.pending() == []
    assert not inbox.record(7, stranger)  # a re-delivery is still recognised
    assert inbox.next_offset() == 8
    inbox.close()
    assert not path.with_name(path.name + "-wal").exists()  # closed: checkpointed and removed
    assert b"4921" not in path.read_bytes()  # secure_delete: the old row's bytes are zeroed too
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT body, done_at IS NOT NULL FROM updates").fetchall() == [("null", 1)]
    conn.close()


def test_prune_deletes_old_handled_rows_but_never_a_pending_one_or_the_newest(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "inbox.sqlite3"
    inbox = Inbox(path)
    for update_id in range(1, 7):
        inbox.record(update_id, {"update_id": update_id, "message": {"text": f"text {update_id}"}})
    inbox.done(1)
    inbox.failed(2, "handler failed: boom")
    inbox.refused(3)
    inbox.done(5)  # 4 stays pending: a message a crash left unhandled
    inbox.done(6)  # the newest: polling resumes after its id
    conn = sqlite3.connect(path)  # 1..4 and 6 are eight days old, 5 is an hour old
    with conn:
        conn.execute("UPDATE updates SET received_at = received_at - 8 * 86400 WHERE update_id != 5")
        conn.execute("UPDATE updates SET received_at = received_at - 3600 WHERE update_id = 5")
    conn.close()
    assert inbox.prune().updates == 3
    wal = path.with_name(path.name + "-wal")
    assert not wal.exists() or wal.stat().st_size == 0  # checkpointed and emptied while the bot runs
    assert b"text 1" not in path.read_bytes()
    conn = sqlite3.connect(path)
    assert [r[0] for r in conn.execute("SELECT update_id FROM updates ORDER BY update_id")] == [4, 5, 6]
    conn.close()
    assert [u for u, _ in inbox.pending()] == [4] and inbox.next_offset() == 7
    assert inbox.prune().updates == 0
    inbox.close()
    data = path.read_bytes()  # secure_delete: deleted rows leave no text in the file's free space
    # 6 stays for its id, but what it said goes with the others past the retention
    assert [f"text {n}".encode() in data for n in range(1, 7)] == [False, False, False, True, True, False]


def test_prune_deletes_old_finished_replies_but_never_a_queued_one(tmp_path: Path) -> None:
    import sqlite3

    from agent.domain import Document
    from bot.inbox import Pruned
    from bot.outbox import Outbox

    path = tmp_path / "inbox.sqlite3"
    inbox, outbox = Inbox(path), Outbox(path)  # as the bot opens its one spool file
    # one chat each, so every reply is its chat's head and can be finished in any state
    ids = [outbox.put(n, f"reply {n}: dentist at 15:00") for n in range(1, 6)]
    ids.append(outbox.put_document(6, Document("cal.ics", b"BEGIN:VCALENDAR reply 6", "reply 6")))
    heads = {r.id: r for r in outbox.heads()}
    for row_id, state in zip(ids, ["sent", "dropped", "late", "queued", "sent", "sent"]):
        if state != "queued":
            outbox.finish(heads[row_id], state)
    conn = sqlite3.connect(path)  # all but reply 5 are eight days old, reply 5 an hour
    with conn:
        conn.execute("UPDATE outbox SET created_at = created_at - 8 * 86400 WHERE id != ?", (ids[4],))
        conn.execute("UPDATE outbox SET created_at = created_at - 3600 WHERE id = ?", (ids[4],))
    conn.close()
    assert inbox.prune() == Pruned(updates=0, replies=4)
    wal = path.with_name(path.name + "-wal")
    assert not wal.exists() or wal.stat().st_size == 0  # checkpointed and emptied while the bot runs
    data = path.read_bytes()  # secure_delete: the deleted replies leave no text in free space
    assert [f"reply {n}".encode() in data for n in range(1, 7)] == [False, False, False, True, True, False]
    assert [(r.id, r.text) for r in outbox.heads()] == [(ids[3], "reply 4: dentist at 15:00")]  # still to send
    assert inbox.prune() == Pruned(0, 0)
    assert outbox.put(6, "a new reply") > max(ids)  # a deleted id is never reused: order per chat holds
    outbox.close()
    inbox.close()


def test_mask_hides_the_token_its_secret_and_anything_token_shaped() -> None:
    from bot.config import mask

    token = "123456789:" + "S" * 35
    text = f"url /bot{token}/getMe; secret {'S' * 35}; other 987654321:{'x' * 30}"
    assert mask(text, token) == "url /bot<token>/getMe; secret <token>; other <token>"


def test_outbox_sends_each_chats_oldest_first_and_collapses_stale_replies(tmp_path: Path) -> None:
    from bot.outbox import LATE, MAX_AGE_S, Outbox, backoff

    outbox = Outbox(tmp_path / "inbox.sqlite3")
    first, _second = outbox.put(1, "a"), outbox.put(1, "b")
    other = outbox.put(2, "c")
    assert [(r.id, r.text) for r in outbox.heads()] == [(first, "a"), (other, "c")]
    head = outbox.heads()[0]
    apology = outbox.replace_with_apology(head, head.created_at + MAX_AGE_S + 1)
    assert apology.text == LATE and [r.text for r in outbox.heads()] == [LATE, "c"]  # "b" went with it
    assert [backoff(n) for n in range(4)] == [1.0, 2.0, 4.0, 8.0] and backoff(30) == 300.0
    outbox.close()


def test_secure_data_dir_tightens_a_log_dir_outside_the_data_dir(tmp_path: Path) -> None:
    """macOS: the logs are in ~/Library/Logs/iljeong, not under the data dir."""
    import os
    import stat

    from bot.run import secure_data_dir

    data, logs = tmp_path / "data", tmp_path / "Library" / "Logs" / "iljeong"
    logs.mkdir(parents=True, mode=0o755)
    logs.chmod(0o755)
    (logs / "bot.log").write_text("an older run's lines")
    (logs / "bot.log").chmod(0o644)
    before = os.umask(0o022)
    try:
        secure_data_dir(data, logs)
        assert os.umask(0o022) == 0o077  # everything created from here on is owner-only
    finally:
        os.umask(before)
    assert {p.name: oct(stat.S_IMODE(p.stat().st_mode)) for p in (data, logs, logs / "bot.log")} == {
        "data": "0o700", "iljeong": "0o700", "bot.log": "0o600"}


def test_a_failing_apology_rolls_back_and_leaves_no_open_transaction(tmp_path: Path) -> None:
    import sqlite3

    import pytest

    from bot.outbox import MAX_AGE_S, Outbox

    outbox = Outbox(tmp_path / "inbox.sqlite3")
    outbox.put(1, "a")
    outbox.put(1, "b")
    with sqlite3.connect(tmp_path / "inbox.sqlite3") as conn:  # the apology's second statement fails
        conn.execute("CREATE TRIGGER refuse BEFORE UPDATE OF text ON outbox BEGIN SELECT RAISE(ABORT, 'disk says no'); END")
    head = outbox.heads()[0]
    with pytest.raises(sqlite3.IntegrityError, match="disk says no"):
        outbox.replace_with_apology(head, head.created_at + MAX_AGE_S + 1)
    assert not outbox._conn.in_transaction
    with sqlite3.connect(tmp_path / "inbox.sqlite3") as conn:  # the first statement was undone too
        assert conn.execute("SELECT text, state FROM outbox ORDER BY id").fetchall() == [("a", "queued"), ("b", "queued")]
    outbox.put(2, "c")  # the connection still works (a BEGIN inside a dangling transaction would fail)
    assert [r.text for r in outbox.heads()] == ["a", "c"]
    outbox.close()


def test_inbox_schema_has_the_error_column_and_an_old_file_gets_it(tmp_path: Path) -> None:
    import sqlite3

    from bot.inbox import SCHEMA

    assert "error TEXT" in SCHEMA  # a new file is created with it, not patched afterwards
    old = tmp_path / "old.sqlite3"
    with sqlite3.connect(old) as conn:  # an inbox file from before failed updates kept their error
        conn.execute("CREATE TABLE updates (update_id INTEGER PRIMARY KEY, body TEXT NOT NULL, "
                     "state TEXT NOT NULL, received_at REAL NOT NULL, done_at REAL)")
        conn.execute("INSERT INTO updates VALUES (7, '{}', 'pending', 0, NULL)")
    for path in (tmp_path / "new.sqlite3", old):
        inbox = Inbox(path)
        inbox.failed(7, "boom")
        inbox.close()
    assert Inbox(old).state(7) == ("failed", "boom")


def test_the_log_file_masks_token_shapes_then_the_exact_token_with_one_formatter(tmp_path: Path) -> None:
    """The bot's log file and bot.masking share one masker: the file handler is wrapped once."""
    import logging

    from bot.masking import MaskingFormatter, mask_handlers
    from bot.log_file import configure_log_file

    root = logging.getLogger()
    before, level = list(root.handlers), root.level
    try:
        configure_log_file(tmp_path)
        [handler] = [h for h in root.handlers if h not in before]
        mask_handlers("12:short-secret-xyz", root)  # not token-shaped: only the exact token masks it
        assert isinstance(handler.formatter, MaskingFormatter) and not isinstance(handler.formatter.inner, MaskingFormatter)
        assert not handler.filters
        logging.getLogger("t").warning("url /bot12:short-secret-xyz/x and 123456789:%s", "A" * 35)
        handler.flush()
        assert (tmp_path / "bot.log").read_text().rstrip().endswith("url /bot<token>/x and <token>")
    finally:
        for h in root.handlers[:]:
            if h not in before:
                root.removeHandler(h)
                h.close()
        root.setLevel(level)


def test_an_outbox_file_from_before_documents_gets_the_columns_and_keeps_its_replies(tmp_path: Path) -> None:
    import sqlite3

    from agent.domain import Document
    from bot.outbox import LATE, MAX_AGE_S, Outbox

    old = tmp_path / "old.sqlite3"
    with sqlite3.connect(old) as conn:  # the outbox table as the first release created it
        conn.execute("CREATE TABLE outbox (id INTEGER PRIMARY KEY AUTOINCREMENT, chat_id INTEGER NOT NULL, "
                     "text TEXT NOT NULL, markup TEXT, update_id INTEGER, state TEXT NOT NULL, "
                     "created_at REAL NOT NULL, next_at REAL NOT NULL, attempts INTEGER NOT NULL DEFAULT 0, "
                     "pieces_sent INTEGER NOT NULL DEFAULT 0, last_error TEXT)")
        conn.execute("INSERT INTO outbox (chat_id, text, state, created_at, next_at) VALUES (1, 'old reply', 'queued', 0, 0)")
    outbox = Outbox(old)
    outbox.put_document(1, Document("cal.ics", b"BEGIN:VCALENDAR", "caption"))
    heads = outbox.heads()
    assert [(r.text, r.filename) for r in heads] == [("old reply", None)]  # the old reply still goes first
    outbox.finish(heads[0], "sent")
    [document] = outbox.heads()
    assert (document.text, document.filename, document.document) == ("caption", "cal.ics", b"BEGIN:VCALENDAR")
    apology = outbox.replace_with_apology(document, document.created_at + MAX_AGE_S + 1)
    assert apology.text == LATE
    assert [(r.text, r.filename, r.document) for r in outbox.heads()] == [(LATE, None, None)]  # a late file: words only
    outbox.close()
