"""The Telegram frontend (python-telegram-bot v22, long polling)."""
