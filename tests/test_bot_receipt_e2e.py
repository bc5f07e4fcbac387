"""End to end: the 📅 receipt is the last paragraph of the bot's final reply, in the same message.

The real ``python -m bot run`` with the calendar domain and a scripted model (the same turns as
the REPL's receipt test): a claimed deletion after Deny gets "nothing changed", a created, a
moved and a deleted event each get their line, a read-only turn none.
"""

from __future__ import annotations

from pathlib import Path

from tests.bot_harness import ALICE, RECEIPTS, TOKEN, BotProcess, approval_message, buttons, receipt_script, replies
from tests.fake_telegram import FakeTelegram


def test_the_final_reply_carries_the_receipt_of_what_really_happened(tmp_path: Path) -> None:
    server = FakeTelegram(TOKEN).start()
    process = BotProcess(server, tmp_path, receipt_script(), domain="tools.calendar.domain",
                         extra_config='tz = "Asia/Seoul"\n').start()
    try:
        asked = 0

        def say(text: str, tap: str | None = None) -> str:
            nonlocal asked
            before = len(replies(server, ALICE))
            server.send_text(ALICE, ALICE, text)
            if tap is not None:
                asked += 1
                question = approval_message(server, ALICE, asked)
                server.tap(ALICE, ALICE, buttons(question)[tap])
            final = lambda: [r for r in replies(server, ALICE)[before:] if not r.startswith("Approve this action?")]  # noqa: E731
            return server.wait_for(lambda: final() and final()[0], 30, f"the reply to {text!r}")

        assert say("book the dentist") == f"Booked it.\n\n{RECEIPTS['book']}"
        denied = say("remove the dentist", "Deny")
        assert denied == f"완료했어요: 12월 4일 15:00 '치과 예약' 일정을 삭제했어요.\n\n{RECEIPTS['remove']}"
        assert say("move it to 5 pm", "Approve") == f"Moved it.\n\n{RECEIPTS['move']}"
        assert say("what is on friday?") == "You have the dentist."  # read only: no line
        assert say("drop it", "Approve") == f"Deleted it.\n\n{RECEIPTS['drop']}"
        assert not any(r.startswith("📅") for r in replies(server, ALICE))  # never a message of its own
    finally:
        assert process.stop() == 0
        server.close()
