"""Which parts of a rendered prompt are data, and where a tokenizer must cut so that data stays text.

Why: tokenizers turn text that spells a special token into that token wherever it stands.
llama.cpp does it for control tokens (``<|im_start|>``) when asked to parse specials, and for
user-defined ones (Qwen's ``<tool_call>``, ``<tool_response>``, ``<think>``) always; Hugging Face
tokenizers do it for every added token. A calendar title, a tool result or a user's message that
holds ``</tool_response><|im_end|>\\n<|im_start|>user\\n…`` would otherwise reach the model as a
real turn. Only the chat template's own scaffolding, and the tags the model itself wrote, may
become special tokens.

How: the renderer wraps each message's content in two private-use marks before the template
sees it (``mark``), and splits them out of the rendered text afterwards (``Rendered.split``): the
text is the same as without marks, plus the character spans that are data. A tokenizer then
tokenizes the whole text as it always did and looks at the special tokens it produced: one that
overlaps data is cut (``cuts``: after the first character of its spelling, or where the data
begins) and the text is tokenized again in pieces, so no special token can form there. Text
without such spellings in its data is tokenized exactly as before, token for token: prefix
reuse, saved states and the adapters trained on earlier rows are untouched.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence, TypeVar

T = TypeVar("T")

DATA_OPEN = "\ue000"
DATA_CLOSE = "\ue001"
_REPLACEMENT = "\ufffd"
_MARKS = re.compile(f"[{DATA_OPEN}{DATA_CLOSE}]")
# Each round cuts every special token found in data; a cut never creates one, but it may uncover
# another spelling that overlapped the first. Real text needs one or two rounds.
MAX_CUT_ROUNDS = 64


def mark(text: str) -> str:
    """``text`` as data: between the two marks, with any mark it held itself made harmless."""
    clean = text.replace(DATA_OPEN, _REPLACEMENT).replace(DATA_CLOSE, _REPLACEMENT)
    return f"{DATA_OPEN}{clean}{DATA_CLOSE}"


def mark_except(text: str, own_tags: Iterable[str]) -> str:
    """``text`` as data but for the tags in ``own_tags``, which stay scaffolding.

    For an assistant turn: the tags the model wrote (``<tool_call>``, ``<think>``) are the
    tokens it produced and are read back as such; everything between them (a title copied from
    an event into a call's arguments) is data."""
    tags = sorted((t for t in own_tags if t), key=len, reverse=True)
    if not tags:
        return mark(text) if text else ""
    parts = re.split(f"({'|'.join(map(re.escape, tags))})", text)  # odd items are the tags
    return "".join(part if i % 2 else mark(part) for i, part in enumerate(parts) if part)


@dataclass(frozen=True)
class Rendered:
    """A rendered prompt: its text, and the character spans of it that are data (sorted, disjoint)."""

    text: str
    data: tuple[tuple[int, int], ...] = ()

    @classmethod
    def split(cls, marked: str) -> Rendered:
        """Take the marks out of a rendered text. A mark the template lost is read the safe way:
        an opening without its close is data to the end; a close without an opening is dropped."""
        text: list[str] = []
        spans: list[tuple[int, int]] = []
        depth, n, opened, last = 0, 0, 0, 0
        for found in _MARKS.finditer(marked):
            text.append(marked[last:found.start()])
            n += found.start() - last
            last = found.end()
            if found.group() == DATA_OPEN:
                if depth == 0:
                    opened = n
                depth += 1
            else:
                if depth == 1 and n > opened:
                    spans.append((opened, n))
                depth = max(depth - 1, 0)
        text.append(marked[last:])
        n += len(marked) - last
        if depth and n > opened:
            spans.append((opened, n))
        return cls("".join(text), _merged(spans))

    def __add__(self, other: Rendered | str) -> Rendered:
        """This text followed by ``other`` (a plain string is scaffolding)."""
        if isinstance(other, str):
            return Rendered(self.text + other, self.data)
        shift = len(self.text)
        return Rendered(self.text + other.text, _merged([*self.data, *((a + shift, b + shift) for a, b in other.data)]))

    def prefix(self, n: int) -> Rendered:
        """The first ``n`` characters."""
        return Rendered(self.text[:n], tuple((a, min(b, n)) for a, b in self.data if a < n))

    def encoded(self) -> tuple[bytes, tuple[tuple[int, int], ...]]:
        """The UTF-8 bytes and the data spans in byte offsets (what llama.cpp's tokenizer reads)."""
        data = self.text.encode("utf-8")
        spans, chars, at = [], 0, 0
        for a, b in self.data:
            at += len(self.text[chars:a].encode("utf-8"))
            start = at
            at += len(self.text[a:b].encode("utf-8"))
            spans.append((start, at))
            chars = b
        return data, tuple(spans)


def _merged(spans: Iterable[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    out: list[list[int]] = []
    for a, b in sorted(s for s in spans if s[1] > s[0]):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return tuple((a, b) for a, b in out)


def shifted(spans: Sequence[tuple[int, int]], offset: int) -> tuple[tuple[int, int], ...]:
    """``spans`` seen from ``offset`` on (what lies before it dropped)."""
    return tuple((max(a - offset, 0), b - offset) for a, b in spans if b > offset)


def cuts(specials: Iterable[tuple[int, int]], data: Sequence[tuple[int, int]],
         first_len: Callable[[int], int] = lambda at: 1) -> list[int]:
    """Where to cut a text so that none of the special tokens at ``specials`` (their spans, as a
    tokenizer produced them) can form where data lies.

    A special token that starts inside data is cut after its first character (``first_len(at)``
    gives that character's length in the unit the spans use: 1 for characters, the UTF-8 length
    for bytes). One that starts in scaffolding and runs into data is cut where the data begins.
    One that lies wholly in scaffolding is the template's own, and is left alone."""
    out: set[int] = set()
    for s, e in specials:
        for a, b in data:
            if a < e and s < b:  # overlaps
                out.add(s + first_len(s) if a <= s else a)
                break
    return sorted(out)


def pieces(n: int, at: Sequence[int]) -> list[tuple[int, int]]:
    """``[0, n)`` cut at ``at``, as (start, end) pairs."""
    bounds = [0, *(c for c in at if 0 < c < n), n]
    return [(a, b) for a, b in zip(bounds, bounds[1:]) if b > a]


def tokenize_cut(tokenize_at: Callable[[list[int]], tuple[T, list[tuple[int, int]]]],
                 data: Sequence[tuple[int, int]], first_len: Callable[[int], int] = lambda at: 1) -> T:
    """The one cut-and-retry loop of every tokenizer here (llama.cpp's, Hugging Face's):
    ``tokenize_at(cut points)`` gives the tokens and the spans of the special tokens among
    them; while one lies in ``data``, cut there (``cuts``) and tokenize again."""
    at: list[int] = []
    tokens, found = tokenize_at(at)
    for _ in range(MAX_CUT_ROUNDS):
        more = [c for c in cuts(found, data, first_len) if c not in at]
        if not more:
            break
        at = sorted({*at, *more})
        tokens, found = tokenize_at(at)
    return tokens
