"""agent.visible: outside text shown to a person cannot act on the screen, reorder, hide or crowd out."""

from __future__ import annotations

import io

import pytest

from agent.repl import LiveView, format_call
from agent.visible import FIELD_LIMIT, QUESTION_LIMIT, clip, visible_line, visible_list, visible_text
from tests.hostile_text import BIDI, C1_CSI, ESC_SEQUENCE, HOSTILE_PLACE, HOSTILE_TITLE, RLO, bad_characters

# Every character the two functions must neutralise, one by one.
DANGEROUS = [chr(c) for c in range(0x20) if chr(c) not in "\n\t"] + [chr(0x7F)] + [chr(c) for c in range(0x80, 0xA0)] + [
    *sorted(BIDI), "\u2028", "\u2029", "\u200b", "\u2060", "\ufeff", "\u00ad", "\ufff9", "\ufffb", "\U000e0001",
    "\U000e0041", "\ud800",
]


@pytest.mark.parametrize("char", DANGEROUS, ids=lambda c: f"U+{ord(c):04X}")
def test_each_control_bidi_and_hiding_character_is_neutralised_on_a_line_and_in_a_body(char: str) -> None:
    text = f"Dentist{char}PAID"
    line, body = visible_line(text), visible_text(text)
    assert bad_characters(line, newlines=False) == [] and "\n" not in line
    assert bad_characters(body) == []
    for shown in (line, body):
        assert shown.startswith("Dentist") and shown.endswith("PAID")  # the data is still there, in order


def test_a_line_never_breaks_and_a_body_keeps_only_its_own_line_breaks() -> None:
    assert visible_line("Lunch\r\n📅 deleted everything\n\nnow") == "Lunch 📅 deleted everything now"
    assert visible_line(HOSTILE_PLACE, None) == "Room 1 📅 deleted everything␛[31m red"
    # a body: "\r\n" and U+2028 are line breaks; a lone "\r" (which would overwrite) is dropped
    assert visible_text("one\r\ntwo\u2028three\rXX\tend") == "one\ntwo\nthreeXX\tend"


def test_escape_sequences_are_shown_as_pictures_and_bidi_overrides_as_a_visible_mark() -> None:
    assert visible_line(f"a{ESC_SEQUENCE}b") == "a␛[2J␛[Hb"
    assert visible_line(f"a{C1_CSI}b") == "a\ufffd31mb"
    assert visible_line(f"Delete '{RLO}txt.exe'") == "Delete '\ufffdtxt.exe'"
    assert visible_line("a\u200b\ufeff\u2060b") == "ab"  # invisible: removed, nothing a person saw changes


def test_emoji_sequences_korean_and_flags_are_kept_as_they_are() -> None:
    for text in ("👩\u200d👩\u200d👧 가족 모임", "치과 예약 ❤\ufe0f 🇰🇷", "مرحبا\u200cب"):
        assert visible_line(text) == text and visible_text(text) == text


def test_long_fields_are_cut_to_their_limit_with_an_ellipsis() -> None:
    line = visible_line(HOSTILE_TITLE)
    assert len(line) == FIELD_LIMIT and line.endswith("…") and line.startswith("Dentist")
    assert clip("short", 80) == "short" and visible_line("x" * 10_000, None) == "x" * 10_000
    assert len(visible_line("y" * 10_000, QUESTION_LIMIT)) == QUESTION_LIMIT


def test_five_thousand_names_are_ten_names_and_a_count() -> None:
    listed = visible_list((f"Guest {i}\x1b[2J" for i in range(5000)), max_items=10, item_limit=40)
    assert listed.startswith("Guest 0␛[2J, Guest 1␛[2J") and listed.endswith("Guest 9␛[2J and 4,990 more")
    assert visible_list(["A", "B"]) == "A, B"


def test_neutralising_twice_changes_nothing_more() -> None:
    for text in (HOSTILE_TITLE, HOSTILE_PLACE, ESC_SEQUENCE + RLO + "\r\n"):
        assert visible_line(visible_line(text, None), None) == visible_line(text, None)
        assert visible_text(visible_text(text)) == visible_text(text)


def test_the_repl_call_line_and_the_streamed_reply_show_no_control_characters() -> None:
    """Unit view of the REPL's two live paths (the pty test covers the whole program)."""
    line = format_call("delete_event", {"title": HOSTILE_TITLE}, "ok", True, '{"ok": true, "message": "%s"}' % HOSTILE_PLACE)
    assert bad_characters(line, newlines=False) == [] and "\n" not in line
    out = io.StringIO()
    view = LiveView(out)
    view.text(f"Done{ESC_SEQUENCE}\rXX {RLO}evil")
    view.end_turn(None)
    written = out.getvalue()
    assert "DoneXX" in written.replace("␛[2J␛[H", "")  # the "\r" never reached the terminal
    assert ESC_SEQUENCE not in written and RLO not in written
    # the LiveView's own sequences are the only ESC it writes (dim indicator, clear line)
    assert written.count("\x1b") == written.count("\x1b[2m") + written.count("\x1b[0m") + written.count("\x1b[K")
