"""Keeping the bot token and the remote API's key out of everything the process writes.

python-telegram-bot puts the token into every request URL, and some of its errors quote it
(``InvalidToken: The token `123:…` was rejected``). Under launchd, stderr is a file that is
kept. So before anything talks to the Bot API, ``install`` masks the token (and anything
shaped like one) in: every handler of the root logger (messages *and* tracebacks), the
process's stderr and stdout, and uncaught exceptions in the main thread and in threads.
``add_secret`` puts the API key (``--backend openai``) under the same masks, before the backend
is built: the backend scrubs it from its own errors, and this catches any other path. Every other
secret the process reads (the CalDAV password; an OAuth token) is masked too: its owner registers
it in ``agent.known_secrets`` when it reads it, and ``mask`` reads that registry on every call, so
a secret read after ``install`` (the calendar loads after the bot's logging is set up) is covered.
"""

from __future__ import annotations

import logging
import sys
import threading
import traceback
from typing import Any, TextIO

from agent import known_secrets
from bot.config import mask as mask_token

__all__ = ["MaskingFormatter", "MaskingStream", "add_secret", "install", "mask", "mask_handlers"]


def add_secret(secret: str | None, label: str = "<api key>") -> None:
    """Mask ``secret`` too, from now on, in everything ``install`` and ``mask_handlers`` cover.
    A value shorter than 8 characters is no key (masking it would garble the log)."""
    known_secrets.remember(secret, label)


def mask(text: str, token: str | None = None) -> str:
    """``text`` with every secret the process has read masked, then the token (``bot.config.mask``)."""
    return mask_token(known_secrets.mask(text), token)


class MaskingFormatter(logging.Formatter):
    """Formats with ``inner`` (messages, tracebacks, stack info), then masks the result."""

    def __init__(self, inner: logging.Formatter | None, token: str | None) -> None:
        super().__init__()
        self.inner = inner or logging.Formatter()
        self.token = token

    def format(self, record: logging.LogRecord) -> str:
        return mask(self.inner.format(record), self.token)


class MaskingStream:
    """A text stream that masks what is written through it (each write on its own)."""

    def __init__(self, stream: TextIO, token: str) -> None:
        self._stream = stream
        self._token = token

    def write(self, text: str) -> int:
        self._stream.write(mask(text, self._token))
        return len(text)

    def __getattr__(self, name: str) -> Any:  # flush, fileno, isatty, encoding, …
        return getattr(self._stream, name)


def mask_handlers(token: str, logger: logging.Logger | None = None) -> None:
    """Wrap the formatter of every handler on ``logger`` (the root logger by default); one
    wrapped already (e.g. by bot.log_file, shape-only) is told the token instead."""
    for handler in (logger or logging.getLogger()).handlers:
        if isinstance(handler.formatter, MaskingFormatter):
            handler.formatter.token = token
        else:
            handler.setFormatter(MaskingFormatter(handler.formatter, token))


def install(token: str) -> None:
    """Mask ``token`` on stderr/stdout, in uncaught exceptions and in the root logger's handlers.

    Call again after adding a log handler (``mask_handlers`` is idempotent).
    """
    if not isinstance(sys.stderr, MaskingStream):
        sys.stderr = MaskingStream(sys.stderr, token)  # type: ignore[assignment]
    if not isinstance(sys.stdout, MaskingStream):
        sys.stdout = MaskingStream(sys.stdout, token)  # type: ignore[assignment]

    def excepthook(kind: type[BaseException], value: BaseException, tb: Any) -> None:
        sys.stderr.write(mask("".join(traceback.format_exception(kind, value, tb)), token))

    def thread_excepthook(args: threading.ExceptHookArgs) -> None:
        text = "".join(traceback.format_exception(args.exc_type, args.exc_value, args.exc_traceback))
        name = args.thread.name if args.thread else "?"
        sys.stderr.write(mask(f"Exception in thread {name}:\n{text}", token))

    sys.excepthook = excepthook
    threading.excepthook = thread_excepthook
    mask_handlers(token)
