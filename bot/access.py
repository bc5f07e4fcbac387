"""Who may use the bot: one rule shared by messages, commands and approval buttons.

A group is a room with people the owner did not list, and with people who join later: being
in an allowed group is never enough. There only listed users act or approve, and what the
calendar holds is answered in private chats only (``bot.handlers``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

PRIVATE = "private"
NOT_LISTED = ("Only people listed in the bot's TELEGRAM_ALLOWED_USERS can use it in this group. "
              "Nothing was changed.")
NOBODY_IN_GROUP = ("Nobody can use the bot in this group: it is allowed, but no users are listed "
                   "(TELEGRAM_ALLOWED_USERS), and in a group only listed users can act. Nothing was changed.")


@dataclass(frozen=True)
class Access:
    """Allowlist check. Private chats need the user's id; groups need the chat's id and the user's.

    A private chat's id equals its user's id, so listing it in either list works. A group is
    ignored unless its chat id is listed; inside a listed group, listed users only, so a
    household group does not open the bot to every guest or to whoever joins later. A group
    listed without any users admits nobody (``NOBODY_IN_GROUP`` says so).
    """

    users: frozenset[int]
    chats: frozenset[int]

    def allows(self, chat_id: int, chat_type: str, user_id: int | None) -> bool:
        if user_id is None:
            return False
        if chat_type == PRIVATE:
            return user_id in self.users or chat_id in self.chats
        return chat_id in self.chats and user_id in self.users

    def refusal(self, chat_id: int, chat_type: str | None) -> str:
        """Why a refused update was refused, for the log and a refused tap's answer."""
        if chat_type != PRIVATE and chat_id in self.chats:
            return NOBODY_IN_GROUP if not self.users else NOT_LISTED
        return "not on the allowlist"

    def admits_raw(self, raw: Any) -> bool:
        """The same rule on an update as Telegram sent it (JSON, before anything parses it), so
        a stranger's update can be refused before its text is stored. Anything that is not a
        message or a button tap from an allowed chat and user is not admitted."""
        if not isinstance(raw, dict):
            return False
        for kind in ("message", "edited_message", "callback_query"):
            item = raw.get(kind)
            if not isinstance(item, dict):
                continue
            chat = (item.get("message") if kind == "callback_query" else item) or {}
            chat = chat.get("chat") if isinstance(chat, dict) else None
            user = item.get("from")
            if not isinstance(chat, dict) or not isinstance(user, dict):
                return False
            chat_id, chat_type, user_id = chat.get("id"), chat.get("type"), user.get("id")
            if not (isinstance(chat_id, int) and isinstance(chat_type, str) and isinstance(user_id, int)):
                return False
            return self.allows(chat_id, chat_type, user_id)
        return False
