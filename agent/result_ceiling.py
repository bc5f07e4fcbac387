"""The most one tool result may put in front of the model, whatever the tool: the last line of defence.

A domain cuts its own results with words that fit it (the calendar says which events it left
out and how to ask for them). Behind that, every result text passes here: a tool that forgot
to, or data nobody expected to be so large, must not fill the context window (8,192 tokens for
the served model) with one result and push the user's question out of it. A result over the
ceiling is replaced by a shorter one that keeps its ``ok`` and ``error``, shows its beginning,
and says how much was cut and what to do.
"""

from __future__ import annotations

import json
from typing import Any

MAX_RESULT_CHARS = 12_000  # ~3,000-9,000 tokens: the most one result may take of an 8,192-token context
ERROR_CHARS = 200  # of a cut result's error code (codes are short words; this keeps the cut bounded)


def within_ceiling(text: str, ok: bool, error: str | None) -> str:
    """``text`` (a result as the model reads it) if it is at most ``MAX_RESULT_CHARS`` long,
    else a result of at most that length holding its beginning and words about the rest."""
    if len(text) <= MAX_RESULT_CHARS:
        return text
    keep = MAX_RESULT_CHARS - 400
    while True:
        body: dict[str, Any] = {"ok": ok}
        if error:
            body["error"] = error[:ERROR_CHARS]  # a code; one that is not must not carry the flood
        body["message"] = (
            f"This result was cut at {keep:,} of {len(text):,} characters. Do not repeat the call as it "
            "was: call it again asking for less (a narrower range, fewer items), or tell the user the "
            "answer is too long to read here."
        )
        body["partial"] = text[:max(keep, 0)]  # a negative slice would keep nearly all of it
        cut = json.dumps(body, ensure_ascii=False, separators=(", ", ": "))
        if len(cut) <= MAX_RESULT_CHARS or keep <= 0:
            return cut
        keep -= len(cut) - MAX_RESULT_CHARS  # escaping made it longer: take that much less
