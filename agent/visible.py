"""What a person sees cannot be rewritten by data: text made safe to show, at the display boundary.

A field from an imported file, a sync server or a model's tool arguments may hold characters
that act on the screen instead of being read: ESC starts terminal sequences (``\\x1b[2J\\x1b[H``
clears the screen and draws over the approval prompt), ``\\r`` returns the cursor so later text
overwrites earlier text, ``\\n`` starts a fake line ("nothing changed") under a real one, and
the bidi controls U+202A–U+202E / U+2066–U+2069 reorder what follows them, so that
"Delete 'txt.exe'" can be stored as "Delete '\\u202eexe.txt'". Every string shown to a person
passes through one of the two functions here, just before it is shown; stored data, exports and
what the model reads are never rewritten (an export stays byte-faithful).

How each kind is neutralised, and why:

- C0 controls and DEL become their Unicode Control Pictures (ESC → ␛, BEL → ␇, DEL → ␡): the
  person sees that something was there and which character it was, and nothing acts on the
  terminal. C1 controls (U+0080–U+009F, which terminals also obey: U+009B is a one-byte CSI)
  have no pictures and become U+FFFD.
- Line breaks belong to the message our own code builds. In a one-line place (``visible_line``:
  a title, a location, an approval question's action) every run of whitespace -- ``\\n``, ``\\r``,
  tab, U+2028/U+2029, U+0085 -- becomes one space, so a field can neither end its line nor start
  a fake one, and multi-line notes still read as words. In a message body (``visible_text``)
  ``\\n`` stays, U+2028/U+2029/U+0085/VT/FF become ``\\n`` (they end lines where they are shown
  anyway), ``\\r\\n`` becomes ``\\n`` and a lone ``\\r`` is dropped (it only moves the cursor back
  to overwrite); tabs stay (they move forward only).
- Bidi embeddings, overrides, isolates and marks (U+202A–U+202E, U+2066–U+2069, U+200E, U+200F,
  U+061C) become U+FFFD: they exist to reorder text, and a visible mark tells the person that
  this text was tampered with rather than silently showing it in another order.
- Other invisible format characters (Unicode category Cf: zero-width space U+200B, word joiner,
  U+FEFF, soft hyphen, interlinear annotation U+FFF9–U+FFFB which can hide a span, the tag
  characters U+E0000–U+E007F that can smuggle invisible ASCII) are removed: they are invisible by
  design, so removing them changes nothing a person could see except what they hide.
  Kept: ZWJ U+200D and ZWNJ U+200C (emoji sequences such as 👩‍👩‍👧 and the shaping of several
  scripts need them; they cannot reorder or hide text), and variation selectors (not Cf).
- A lone surrogate (a broken UTF-16 escape in JSON) becomes U+FFFD: it cannot be encoded to send.

Long fields are cut (``limit``) with "…", so that a 10,000-character name cannot push the
action, the scope or the count of an approval question out of the message that carries its buttons.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable

FIELD_LIMIT = 80  # characters of one outside field (a name, a place) shown in one line
# An approval question's action in words: far more than an honest one needs (a domain that cuts
# its fields stays under ~700 characters), and with the question's own words and outcome well inside one Telegram
# message (4096), so the buttons always come with the whole action.
QUESTION_LIMIT = 2000
ELLIPSIS = "…"
PLACEHOLDER = "\ufffd"  # U+FFFD REPLACEMENT CHARACTER

BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c")
KEPT_FORMAT = frozenset("\u200c\u200d")  # ZWNJ, ZWJ: needed by emoji sequences and scripts
LINE_ENDS = frozenset("\n\u2028\u2029\u0085\x0b\x0c")  # shown as a line break in a message body


def _neutral(char: str) -> str:
    """One character as it may be shown (the character itself, a picture, U+FFFD or nothing)."""
    code = ord(char)
    if code < 0x20:
        return chr(0x2400 + code)  # U+2400.. Control Pictures: ␀ ␁ … ␛ …
    if code == 0x7F:
        return "\u2421"  # ␡
    if 0x80 <= code <= 0x9F or char in BIDI_CONTROLS:
        return PLACEHOLDER
    category = unicodedata.category(char)
    if category == "Cs":
        return PLACEHOLDER
    if category == "Cf" and char not in KEPT_FORMAT:
        return ""
    return char


def _unsafe(char: str) -> bool:
    return _neutral(char) != char


def _neutralised(text: str) -> str:
    if not any(_unsafe(c) for c in text):  # the common case: nothing to do, no copy
        return text
    return "".join(_neutral(c) for c in text)


def clip(text: str, limit: int | None) -> str:
    """``text`` cut to ``limit`` characters, the last one "…" when anything was cut."""
    if limit is None or len(text) <= limit:
        return text
    return text[: max(limit - 1, 0)].rstrip() + ELLIPSIS


def visible_line(value: object, limit: int | None = FIELD_LIMIT) -> str:
    """A data field (or one line we built around data) as it may be shown in a one-line place:
    whitespace runs (line breaks included) are one space, controls and bidi marks neutralised,
    then cut to ``limit`` characters (None: no cut)."""
    text = value if isinstance(value, str) else str(value)
    return clip(_neutralised(" ".join(text.split())), limit)


def visible_text(value: object) -> str:
    """A message body our own code built (a reply, a listing), as it may be shown: its line
    breaks kept, every other control and bidi character neutralised. Fields inside it should
    already have gone through ``visible_line``; this is the last line of defence."""
    text = value if isinstance(value, str) else str(value)
    if not any(_unsafe(c) or c in LINE_ENDS for c in text if c != "\n" and c != "\t"):
        return text
    out: list[str] = []
    for char in text:
        if char == "\n" or char == "\t":
            out.append(char)
        elif char in LINE_ENDS:
            out.append("\n")
        elif char == "\r":
            continue  # "\r\n" is a line break already; a lone "\r" only moves the cursor back
        else:
            out.append(_neutral(char))
    return "".join(out)


def visible_list(
    items: Iterable[object], max_items: int = 10, item_limit: int = 40, more: str = "and {n} more", sep: str = ", "
) -> str:
    """Names in one line: each through ``visible_line`` (cut to ``item_limit``), at most
    ``max_items`` of them, the rest counted (``more``), so 5,000 names stay one short line."""
    shown: list[str] = []
    total = 0
    for item in items:
        if total < max_items:
            shown.append(visible_line(item, item_limit))
        total += 1
    text = sep.join(shown)
    if total > max_items:
        text += " " + more.format(n=f"{total - max_items:,}")
    return text
