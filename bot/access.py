"""Who may use the bot: one rule shared by messages, commands and approval buttons."""

from __future__ import annotations

from dataclasses import dataclass

PRIVATE = "private"


@dataclass(frozen=True)
class Access:
    """Allowlist check. Private chats need the user's id; groups need the chat's id.

    A private chat's id equals its user's id, so listing it in either list works. A group is
    ignored unless its chat id is listed; inside a listed group, listed users only (when a
    user list is configured), so a household group does not open the bot to every guest.
    """

    users: frozenset[int]
    chats: frozenset[int]

    def allows(self, chat_id: int, chat_type: str, user_id: int | None) -> bool:
        if user_id is None:
            return False
        if chat_type == PRIVATE:
            return user_id in self.users or chat_id in self.chats
        if chat_id not in self.chats:
            return False
        return not self.users or user_id in self.users
