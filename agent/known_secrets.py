"""The secrets this process has read, so that whatever writes logs can mask every one of them.

Why a registry: each secret is read by its own owner (``agent.apikey`` the API key, a domain's
settings the password of its server, later an OAuth token), and the log masks live in the frontend that
writes the log (``bot.masking``). Neither side should import the other, so an owner that reads a
secret registers it here, with the label that replaces it, and the masks read it from here.
"""

from __future__ import annotations

import threading
from urllib.parse import quote

MIN_LENGTH = 8  # shorter values are no credential worth the name, and masking them would garble logs

_lock = threading.Lock()
_secrets: dict[str, str] = {}  # value -> label, e.g. "<api key>"


def remember(secret: str | None, label: str) -> None:
    """Mask ``secret`` as ``label`` from now on wherever logs are masked (idempotent); its
    URL-quoted spelling too, since a URL in an error message carries it quoted."""
    if secret and len(secret) >= MIN_LENGTH:
        with _lock:
            for form in (secret, quote(secret, safe="")):
                _secrets.setdefault(form, label)


def known() -> list[tuple[str, str]]:
    """(secret, label) pairs, longest first: a secret that contains another is masked whole."""
    with _lock:
        return sorted(_secrets.items(), key=lambda item: -len(item[0]))


def mask(text: str) -> str:
    """``text`` with every remembered secret replaced by its label."""
    for secret, label in known():
        if secret in text:
            text = text.replace(secret, label)
    return text
