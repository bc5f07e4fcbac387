"""Inline-button callback data: ``<prefix>:<single-use id>:<choice>``, well inside Telegram's 64 bytes."""

from __future__ import annotations

# What a tap that changes nothing is answered with, for every kind of button (approvals,
# reminders) and for a stranger's tap the gate refuses.
EXPIRED = "This button is no longer valid (already answered, expired, or from before a restart). Nothing was changed."
NOT_YOURS = "This button is not yours to use: only the person it was meant for can answer it. Nothing was changed."


def button_data(prefix: str, button_id: str, choice: str) -> str:
    return f"{prefix}:{button_id}:{choice}"


def split_button_data(data: str | None, prefix: str, choices: tuple[str, ...]) -> tuple[str, str] | None:
    """(id, choice) of data this kind of button carries; None for anything else (forged, foreign)."""
    if not isinstance(data, str):  # JSON lets a forged update put 5 or [1] here
        return None
    parts = data.split(":")
    if len(parts) != 3 or parts[0] != prefix or parts[2] not in choices:
        return None
    return parts[1], parts[2]
